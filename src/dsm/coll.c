/* CRL's global operations (Table 3-2) over dsm messages, so that protocol
 * requests keep being served (and the outbox drained) while a rank waits
 * in one: a rank in the barrier may be the home another rank's read miss
 * needs.  Barrier: dissemination, ceil(log2 n) rounds.  Broadcast: a
 * binomial tree rooted at the sender (§4.7).  Reductions: a binomial tree
 * into rank 0, whose result goes back down the broadcast tree, so every
 * rank returns the same bits.  Collectives are numbered (every rank calls
 * them in the same order); one that arrives early waits in a list. */
#include "dsm/dsm.h"
#include "shoal/crl.h"

#include <stdlib.h>
#include <string.h>

enum coll_kind { COLL_BARRIER, COLL_BCAST, COLL_REDUCE, COLL_RESULT };
#define COLL_ANY UINT32_MAX

void dsm_coll_arrived(uint32_t src, const uint64_t *args, const void *data, size_t len)
{
    struct dsm_coll_msg *c = malloc(sizeof *c + len);
    if (!c)
        shoal_abort(1, "crl: out of memory for a %zu-byte collective message", len);
    c->kind = (uint32_t)(args[0] & 0xff);
    c->root = (uint32_t)(args[0] >> 8);
    c->src = src;
    c->seq = args[1];
    c->value = args[2];
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

static void coll_send(uint32_t dst, enum coll_kind kind, uint32_t root, uint64_t seq, uint64_t value,
                      const void *data, size_t len)
{
    uint64_t args[DSM_WIRE_ARGS] = {(uint64_t)kind | (uint64_t)root << 8, seq, value, 0};
    dsm_wire_send(dst, DSM_H_COLL, args, data, len);
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
        coll_send((me + k) % n, COLL_BARRIER, 0, seq, k, NULL, 0);
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
}

/* Sends to this rank's children in the binomial tree rooted at root. */
static void tree_forward(enum coll_kind kind, uint32_t root, uint64_t seq, const void *buf, size_t len)
{
    uint32_t n = dsm.node.nranks, rel = (dsm.node.rank + n - root) % n;
    uint32_t span = 1;
    while (span < n)
        span <<= 1;
    uint32_t lowest = rel ? (rel & (0u - rel)) : span;
    for (uint32_t m = lowest >> 1; m; m >>= 1)
        if (rel + m < n)
            coll_send((root + rel + m) % n, kind, root, seq, 0, buf, len);
}

void rgn_bcast_send(int nbytes, void *buf)
{
    dsm_check_init("rgn_bcast_send");
    if (nbytes < 0 || (nbytes && !buf))
        shoal_abort(1, "crl: rgn_bcast_send(%d, %p): bad size or buffer", nbytes, buf);
    tree_forward(COLL_BCAST, dsm.node.rank, ++dsm.coll_seq, buf, (size_t)nbytes);
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
    tree_forward(COLL_BCAST, c->root, seq, c->data, c->len);
    free(c);
}

enum reduce_op { REDUCE_ADD, REDUCE_MIN, REDUCE_MAX };

static double combine(enum reduce_op op, double a, double b)
{
    switch (op) {
    case REDUCE_ADD:
        return a + b;
    case REDUCE_MIN:
        return b < a ? b : a;
    default:
        return b > a ? b : a;
    }
}

static uint64_t bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double double_of(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static double reduce(enum reduce_op op, double x, const char *call)
{
    dsm_check_init(call);
    uint32_t me = dsm.node.rank, n = dsm.node.nranks;
    uint64_t seq = ++dsm.coll_seq;
    double acc = x;
    for (uint32_t mask = 1; mask < n; mask <<= 1) {
        if (me & mask) {
            coll_send(me - mask, COLL_REDUCE, 0, seq, bits_of(acc), NULL, 0);
            break;
        }
        if (me + mask < n) {
            struct dsm_coll_msg *c = coll_wait(COLL_REDUCE, seq, me + mask);
            acc = combine(op, acc, double_of(c->value));
            free(c);
        }
    }
    if (me != 0) {
        struct dsm_coll_msg *c = coll_wait(COLL_RESULT, seq, COLL_ANY);
        memcpy(&acc, c->data, sizeof acc);
        free(c);
    }
    tree_forward(COLL_RESULT, 0, seq, &acc, sizeof acc);
    return acc;
}

double rgn_reduce_dadd(double x)
{
    return reduce(REDUCE_ADD, x, "rgn_reduce_dadd");
}

double rgn_reduce_dmin(double x)
{
    return reduce(REDUCE_MIN, x, "rgn_reduce_dmin");
}

double rgn_reduce_dmax(double x)
{
    return reduce(REDUCE_MAX, x, "rgn_reduce_dmax");
}
