/* Dissemination barrier on shared-memory flags (Hensgen, Finkel & Manber):
 * ceil(log2 N) rounds; in round k rank r raises a flag in rank r+2^k's
 * inbox and waits for its own, raised by r-2^k.  Flags hold the barrier's
 * epoch, so they never need resetting and a fast rank's next barrier cannot
 * be confused with this one.  Handlers run while waiting.  A peer on
 * another host (or any peer, with SHOAL_NET_LOCAL=1) gets its flag as a
 * message whose handler raises the same flag in a local table. */
#include "am/am.h"
#include "coll/coll.h"

enum { COLL_H_BARRIER = AM_INTERNAL_BASE + 2 };

static void coll_barrier_flag(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)tok, (void)buf, (void)n;
    if (nargs == 2 && args[1] < SHM_BARRIER_ROUNDS && am.net_barrier && am.net_barrier[args[1]] < args[0])
        am.net_barrier[args[1]] = args[0];
}

void coll_init(void)
{
    am_register_internal(COLL_H_BARRIER, coll_barrier_flag);
}

static void coll_raise(int peer, unsigned round, uint64_t epoch)
{
    if (!am_is_remote(peer)) {
        atomic_store_explicit(&shm_barrier_flag(am.shm, peer, round)->epoch, epoch, memory_order_release);
        return;
    }
    uint64_t args[2] = {epoch, round};
    int rc = am_request_internal(peer, COLL_H_BARRIER, 0, NULL, 0, 2, args);
    if (rc)
        util_fatal("barrier: cannot reach rank %d: %s", peer, shoal_strerror(rc));
}

static int coll_raised(unsigned round, uint64_t epoch)
{
    struct shm_barrier_flag *in = shm_barrier_flag(am.shm, am.rank, round);
    return atomic_load_explicit(&in->epoch, memory_order_acquire) >= epoch ||
           (am.net_barrier && am.net_barrier[round] >= epoch);
}

int shoal_barrier(void)
{
    if (am.rank < 0)
        return SHOAL_ENOTINIT;
    int rc = am_blocking_allowed("shoal_barrier");
    if (rc)
        return rc;
    uint64_t epoch = ++am.barrier_epoch;
    unsigned round = 0;
    for (int dist = 1; dist < am.nranks; dist <<= 1, round++) {
        coll_raise((am.rank + dist) % am.nranks, round, epoch);
        struct util_backoff b;
        util_backoff_init(&b);
        while (!coll_raised(round, epoch))
            am_progress_wait(&b, 0);
    }
    am.stats.barriers++;
    return SHOAL_OK;
}
