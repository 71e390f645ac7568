/* Dissemination barrier on shared-memory flags (Hensgen, Finkel & Manber):
 * ceil(log2 N) rounds; in round k rank r raises a flag in rank r+2^k's
 * inbox and waits for its own, raised by r-2^k.  Flags hold the barrier's
 * epoch, so they never need resetting and a fast rank's next barrier cannot
 * be confused with this one.  Handlers run while waiting. */
#include "am/am.h"

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
        struct shm_barrier_flag *out = shm_barrier_flag(am.shm, (am.rank + dist) % am.nranks, round);
        struct shm_barrier_flag *in = shm_barrier_flag(am.shm, am.rank, round);
        atomic_store_explicit(&out->epoch, epoch, memory_order_release);
        struct util_backoff b;
        util_backoff_init(&b);
        while (atomic_load_explicit(&in->epoch, memory_order_acquire) < epoch)
            am_progress_wait(&b, 0);
    }
    am.stats.barriers++;
    return SHOAL_OK;
}
