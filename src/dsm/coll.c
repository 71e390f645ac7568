/* CRL's global operations (Table 3-2).  The barrier and the broadcast are
 * dsm messages, on the channels the protocol uses, so a barrier message
 * from rank a to rank b runs after every dsm message a sent b before it:
 * with two ranks, a rank leaves the barrier only once the other's earlier
 * messages (a MsgDelete, say) have run.  shoal_barrier's shared-memory
 * flags pass no message, so it orders nothing (tried: a rank left it
 * before the home's MsgDelete arrived), and shoal_broadcast needs a root
 * rgn_bcast_recv does not name.  Barrier: dissemination, ceil(log2 n)
 * rounds.  Broadcast: a binomial tree rooted at the sender (§4.7).  The
 * reductions are shoal_allreduce, which combines in a fixed order and
 * broadcasts the result, so every rank returns the same bits.  Waits run every handler,
 * so a rank in one keeps serving the protocol requests it is home for.
 * Barriers and broadcasts are numbered (every rank calls them in the same
 * order); a message that arrives early waits in a list. */
#include "dsm/dsm.h"
#include "shoal/crl.h"

#include <stdlib.h>
#include <string.h>

enum coll_kind { COLL_BARRIER, COLL_BCAST }; /* args[0] bits 0-7 (docs/CRL.md §7) */
#define COLL_ANY UINT32_MAX

void dsm_coll_arrived(uint32_t src, const uint64_t *args, const void *data, size_t len)
{
    if ((args[0] & 0xff) > COLL_BCAST)
        shoal_abort(1, "crl: collective message of unknown kind %u from rank %u", (unsigned)(args[0] & 0xff),
                    src);
    struct dsm_coll_msg *c = malloc(sizeof *c + len);
    if (!c)
        shoal_abort(1, "crl: out of memory for a %zu-byte collective message", len);
    c->kind = (uint32_t)(args[0] & 0xff);
    c->src = src;
    c->root = (uint32_t)(args[0] >> 8);
    c->seq = args[1];
    c->len = len;
    if (len)
        memcpy(c->data, data, len);
    c->next = dsm.coll_pending;
    dsm.coll_pending = c;
}

void dsm_coll_fini(void)
{
    while (dsm.coll_pending) {
        struct dsm_coll_msg *c = dsm.coll_pending;
        dsm.coll_pending = c->next;
        free(c);
    }
}

static void coll_send(uint32_t dst, enum coll_kind kind, uint32_t root, uint64_t seq, const void *data,
                      size_t len, unsigned flags)
{
    uint64_t args[DSM_WIRE_ARGS] = {(uint64_t)kind | (uint64_t)root << 8, seq, 0, 0};
    dsm_wire_send(dst, DSM_H_COLL, args, data, len, flags);
}

/* Waits for collective `seq`'s message of this kind from src (or anyone);
 * the caller frees it. */
static struct dsm_coll_msg *coll_wait(enum coll_kind kind, uint64_t seq, uint32_t src)
{
    struct util_backoff b;
    util_backoff_init(&b);
    for (;;) {
        for (struct dsm_coll_msg **p = &dsm.coll_pending; *p; p = &(*p)->next) {
            struct dsm_coll_msg *c = *p;
            if (c->kind == kind && c->seq == seq && (src == COLL_ANY || c->src == src)) {
                *p = c->next;
                return c;
            }
        }
        dsm_progress(&b);
    }
}

void dsm_barrier(void)
{
    uint32_t me = dsm.node.rank, n = dsm.node.nranks;
    uint64_t seq = ++dsm.coll_seq;
    for (uint32_t k = 1; k < n; k <<= 1) {
        coll_send((me + k) % n, COLL_BARRIER, 0, seq, NULL, 0, 0);
        free(coll_wait(COLL_BARRIER, seq, (me + n - k) % n));
    }
    /* our last round's message may still be queued: a rank that left
     * before sending it would hold the others back forever */
    struct util_backoff b;
    util_backoff_init(&b);
    while (dsm.out_head)
        dsm_progress(&b);
}

void rgn_barrier(void)
{
    dsm_check_init("rgn_barrier");
    dsm_barrier();
    dsm_observe_mark(&dsm.node, COSMOS_MARK_BARRIER);
}

/* Sends to this rank's children in the binomial tree rooted at root, over
 * the network in one batch. */
static void tree_forward(uint32_t root, uint64_t seq, const void *buf, size_t len)
{
    uint32_t n = dsm.node.nranks, rel = (dsm.node.rank + n - root) % n;
    uint32_t span = 1;
    while (span < n)
        span <<= 1;
    uint32_t lowest = rel ? (rel & (0u - rel)) : span;
    for (uint32_t m = lowest >> 1; m; m >>= 1)
        if (rel + m < n)
            coll_send((root + rel + m) % n, COLL_BCAST, root, seq, buf, len, SHOAL_MORE);
    am_flush();
}

void rgn_bcast_send(int nbytes, void *buf)
{
    dsm_check_init("rgn_bcast_send");
    if (nbytes < 0 || (nbytes && !buf))
        shoal_abort(1, "crl: rgn_bcast_send(%d, %p): bad size or buffer", nbytes, buf);
    tree_forward(dsm.node.rank, ++dsm.coll_seq, buf, (size_t)nbytes);
}

void rgn_bcast_recv(int nbytes, void *buf)
{
    dsm_check_init("rgn_bcast_recv");
    if (nbytes < 0 || (nbytes && !buf))
        shoal_abort(1, "crl: rgn_bcast_recv(%d, %p): bad size or buffer", nbytes, buf);
    uint64_t seq = ++dsm.coll_seq;
    struct dsm_coll_msg *c = coll_wait(COLL_BCAST, seq, COLL_ANY);
    if (c->len != (size_t)nbytes)
        shoal_abort(1, "crl: rgn_bcast_recv expects %d bytes, but rank %u broadcast %zu", nbytes, c->root,
                    c->len);
    memcpy(buf, c->data, c->len);
    tree_forward(c->root, seq, c->data, c->len);
    free(c);
}

static double reduce(enum shoal_rop op, double x, const char *call)
{
    dsm_check_init(call);
    double out;
    int rc = shoal_allreduce(&x, &out, 1, SHOAL_DOUBLE, op);
    if (rc != SHOAL_OK)
        shoal_abort(1, "crl: %s on rank %u: %s", call, dsm.node.rank, shoal_strerror(rc));
    return out;
}

double rgn_reduce_dadd(double x)
{
    return reduce(SHOAL_ROP_SUM, x, "rgn_reduce_dadd");
}

double rgn_reduce_dmin(double x)
{
    return reduce(SHOAL_ROP_MIN, x, "rgn_reduce_dmin");
}

double rgn_reduce_dmax(double x)
{
    return reduce(SHOAL_ROP_MAX, x, "rgn_reduce_dmax");
}
