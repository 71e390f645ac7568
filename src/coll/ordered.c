/* Collectives whose every step is a request on am's channels (coll.h), for
 * a layer whose own messages they must follow: shoal_barrier's flags in
 * shared memory pass no message, so they order nothing (CRL tried: a rank
 * left it before the home's MsgDelete arrived), and shoal_broadcast needs
 * a root its receivers name.
 *
 * The barrier is a dissemination barrier (Hensgen, Finkel & Manber):
 * ceil(log2 n) rounds; in round k rank i sends i + 2^k a request and waits
 * for the one from i - 2^k.  A request runs after every earlier request of
 * its sender to the same rank (one channel, in order), which is the whole
 * ordering argument.  Round k's request always comes from the same rank,
 * so a flag per round holding the latest number seen is enough: a later
 * barrier's request implies its sender finished this one.
 *
 * The broadcast goes down coll's tree rooted at the sender, whose number
 * and root each message carries; a receiver learns its place in the tree
 * from the first message.  Messages of a number this rank has not reached
 * wait in coll's stash.  Layout: docs/WIRE.md §10.6. */
#include "am/am.h"
#include "am/hang.h"
#include "coll/coll.h"

#include <string.h>

enum {
    COLL_H_OBARRIER = AM_LAYER_BASE(AM_BLOCK_COLL) + 7, /* (number, round) */
    COLL_H_OBCAST,                                      /* (number, root) and the whole payload */
};
#define OB_ROUNDS 64u

static struct {
    uint64_t round_seen[OB_ROUNDS]; /* latest barrier number whose round-k request arrived */
    uint64_t epoch;                 /* the broadcast in progress, or the last one */
    int active;
    int got;                        /* the payload arrived (or this rank is the root) */
    int root;
    void *buf;
    size_t n, sent;                 /* sent: the root's length */
    struct coll_stash early;
} ob;

static void ob_flag(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    if (nargs != 2 || args[1] >= OB_ROUNDS)
        return;
    coll_check(shoal_token_source(tok), args[0], COLL_KIND_OBARRIER);
    if (ob.round_seen[args[1]] < args[0])
        ob.round_seen[args[1]] = args[0];
}

static void ob_take(int src, const uint64_t *args, const void *data, size_t len)
{
    (void)src;
    if (ob.got)
        util_fatal("the broadcast from any root #%llu: ranks %d and %d both sent it (rank %d is a root or has its "
                   "data); one rank calls the send, every other the receive",
                   (unsigned long long)ob.epoch, ob.root, (int)args[1], am_rank());
    ob.got = 1;
    ob.root = (int)args[1];
    ob.sent = len;
    if (len == ob.n && len)
        memcpy(ob.buf, data, len);
}

static void ob_data(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    int src = shoal_token_source(tok);
    if (nargs != 2 || args[1] >= (uint64_t)am_size())
        util_fatal("malformed broadcast message from rank %d", src);
    coll_check(src, args[0], COLL_KIND_OBCAST);
    coll_stash_route(&ob.early, ob.epoch, ob.active, src, args, nargs, buf, n, ob_take);
}

void coll_ordered_init(void)
{
    am_register_internal(COLL_H_OBARRIER, ob_flag);
    am_register_internal(COLL_H_OBCAST, ob_data);
}

void coll_ordered_fini(void)
{
    coll_stash_free(&ob.early);
    memset(&ob, 0, sizeof ob);
}

static int ob_entry(const char *call)
{
    if (am_rank() < 0)
        return SHOAL_ENOTINIT;
    return am_blocking_allowed(call);
}

int coll_barrier_ordered(void)
{
    int rc = ob_entry("coll_barrier_ordered");
    if (rc)
        return rc;
    uint64_t epoch = coll_begin(COLL_KIND_OBARRIER);
    int me = am_rank(), n = am_size();
    unsigned k = 0;
    for (int dist = 1; dist < n; dist <<= 1, k++) {
        int to = (me + dist) % n, from = (me + n - dist) % n;
        uint64_t args[2] = {epoch, k};
        if ((rc = am_request_internal(to, COLL_H_OBARRIER, 0, NULL, 0, 2, args)) != SHOAL_OK)
            util_fatal("ordered barrier #%llu: cannot reach rank %d: %s", (unsigned long long)epoch, to,
                       shoal_strerror(rc));
        struct util_backoff b;
        util_backoff_init(&b);
        hang_push("ordered barrier", from, epoch, NULL, NULL);
        while (ob.round_seen[k] < epoch) {
            am_progress_wait(&b, 0);
            coll_watch();
        }
        hang_pop();
    }
    coll_end();
    return SHOAL_OK;
}

/* Sends the payload to this rank's children in the tree rooted at root. */
static void ob_forward(uint64_t epoch, int root, const void *buf, size_t n)
{
    struct coll_tree t;
    if (coll_tree(&t, root, 1) != SHOAL_OK)
        util_fatal("out of memory for the broadcast tree of %d ranks", am_size());
    uint64_t args[2] = {epoch, (uint64_t)root};
    for (int i = 0; i < t.nchildren; i++) {
        size_t done = 0;
        int rc = am_request_large(t.children[i], COLL_H_OBCAST, SHOAL_MORE, buf, n, 2, args, &done);
        if (rc)
            util_fatal("broadcast #%llu: cannot send %zu bytes to rank %d: %s", (unsigned long long)epoch, n,
                       t.children[i], shoal_strerror(rc));
    }
    am_flush();
}

int coll_bcast_any(void *buf, size_t n, int root, int *from, size_t *sent)
{
    int rc = ob_entry(root >= 0 ? "the broadcast from any root (send)" : "the broadcast from any root (receive)");
    if (rc)
        return rc;
    if ((n && !buf) || root >= am_size())
        return SHOAL_EINVAL;
    if (root >= 0 && n > am_large_max())
        return SHOAL_ETOOBIG; /* before it takes a number: nothing happened */
    ob.epoch = coll_begin(COLL_KIND_OBCAST);
    ob.active = 1;
    ob.got = root >= 0;
    ob.root = root;
    ob.buf = buf;
    ob.n = ob.sent = n;
    coll_stash_take(&ob.early, ob.epoch, ob_take);
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("broadcast from any root", -1, ob.epoch, NULL, NULL);
    while (!ob.got) {
        am_progress_wait(&b, 0);
        coll_watch();
    }
    hang_pop();
    ob.active = 0;
    if (ob.sent != n) {
        *from = ob.root;
        *sent = ob.sent;
        coll_end();
        return SHOAL_EINVAL;
    }
    ob_forward(ob.epoch, ob.root, buf, n);
    coll_end();
    return SHOAL_OK;
}
