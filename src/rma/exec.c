/* The executor: the owner's checks and the commands themselves, run by the
 * initiator on mapped memory or by the owner's progress engine.  Data moves
 * with plain memcpy: unlike a ring slot, no other core is reading the
 * destination as it fills, and the 1 KiB chunks of mem_copy measured slower
 * for puts of 8 KiB (52 vs 84 GB/s) and 1 MiB (43 vs 47 GB/s) here. */
#include "rma/rma.h"

#include <string.h>

/* Counts a refused access at the owner, wherever it was checked. */
static int refuse(int rank, int status)
{
    atomic_fetch_add_explicit(&rma.hdr[rank]->refused, 1, memory_order_relaxed);
    return status;
}

static int resolve(int rank, const struct rma_cmd *c, unsigned perm, uint64_t len, char **base,
                   uint64_t *size)
{
    int rc = rma_check(rank, c->id, c->key, perm, c->whole_off, len, base, size);
    return rc == SHOAL_OK || rc == RMA_NOT_HERE ? rc : refuse(rank, rc);
}

/* A second location in the same segment (flag, swap word, z data). */
static int second_range(int rank, uint64_t size, uint64_t off, uint64_t len)
{
    return off > size || len > size - off ? refuse(rank, SHOAL_ERANGE) : SHOAL_OK;
}

static int aligned8(int rank, const char *p)
{
    return ((uintptr_t)p & 7u) ? refuse(rank, SHOAL_EALIGN) : SHOAL_OK;
}

/* Lock stripes for commands that touch two locations atomically. */
static _Atomic uint32_t *stripe(int rank, uint32_t id, uint64_t off)
{
    struct rma_lock *locks = (struct rma_lock *)((char *)rma.hdr[rank] + RMA_LOCKS_OFFSET);
    uint64_t h = ((uint64_t)(id & (RMA_SLOTS - 1)) << 20 ^ off >> 3) * 0x9e3779b97f4a7c15ull;
    return &locks[h >> 58].word;
}

static void lock(_Atomic uint32_t *w)
{
    uint32_t free_ = 0;
    while (!atomic_compare_exchange_weak_explicit(w, &free_, 1, memory_order_acquire, memory_order_relaxed)) {
        free_ = 0;
        while (atomic_load_explicit(w, memory_order_relaxed))
            util_cpu_relax();
    }
}

static void unlock(_Atomic uint32_t *w)
{
    atomic_store_explicit(w, 0, memory_order_release);
}

uint64_t rma_atomic(enum shoal_aop op, enum shoal_atype type, uint64_t *p, uint64_t v)
{
    if (type == SHOAL_DOUBLE && op == SHOAL_AOP_ADD) {
        uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED), sum;
        do {
            double d, a;
            memcpy(&d, &old, 8);
            memcpy(&a, &v, 8);
            d += a;
            memcpy(&sum, &d, 8);
        } while (!__atomic_compare_exchange_n(p, &old, sum, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
        return old;
    }
    switch (op) {
    case SHOAL_AOP_ADD: return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); /* two's complement: int64 too */
    case SHOAL_AOP_AND: return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);
    case SHOAL_AOP_OR: return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);
    case SHOAL_AOP_XOR: return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);
    default: return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
    }
}

static int fetch_op(int rank, const struct rma_cmd *c, char *p, struct rma_result *res)
{
    enum shoal_aop op = (enum shoal_aop)c->a;
    enum shoal_atype type = (enum shoal_atype)c->b;
    if (op > SHOAL_AOP_SWAP || type > SHOAL_DOUBLE ||
        (type == SHOAL_DOUBLE && op != SHOAL_AOP_ADD && op != SHOAL_AOP_SWAP))
        return SHOAL_EINVAL;
    int rc = aligned8(rank, p);
    if (rc)
        return rc;
    const uint64_t *v = c->data;
    uint64_t *old = res->data;
    for (uint64_t i = 0; i < c->n; i++) {
        uint64_t o = rma_atomic(op, type, (uint64_t *)p + i, v[i]);
        if (old)
            old[i] = o;
    }
    return SHOAL_OK;
}

static int cas(int rank, const struct rma_cmd *c, char *base, uint64_t size, struct rma_result *res)
{
    uint64_t *cmp = (uint64_t *)(base + c->off), *swp = (uint64_t *)(base + c->b);
    int rc = second_range(rank, size, c->b, 8);
    if (!rc)
        rc = aligned8(rank, (char *)cmp);
    if (!rc)
        rc = aligned8(rank, (char *)swp);
    if (rc)
        return rc;
    struct shoal_cas_result r;
    if (cmp == swp) {
        uint64_t seen = c->a;
        r.swapped = __atomic_compare_exchange_n(cmp, &seen, c->c, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        r.observed = r.old = seen;
    } else {
        _Atomic uint32_t *l = stripe(rank, c->id, c->off);
        lock(l);
        r.observed = __atomic_load_n(cmp, __ATOMIC_SEQ_CST);
        r.swapped = r.observed == c->a;
        r.old = r.swapped ? __atomic_exchange_n(swp, c->c, __ATOMIC_SEQ_CST) : 0;
        unlock(l);
    }
    if (res->cas)
        *res->cas = r;
    return SHOAL_OK;
}

static int zbuffer(int rank, const struct rma_cmd *c, char *base, uint64_t size, struct rma_result *res)
{
    int64_t *ref = (int64_t *)(base + c->off);
    int rc = second_range(rank, size, c->b, c->n);
    if (!rc)
        rc = aligned8(rank, (char *)ref);
    if (rc)
        return rc;
    int64_t depth = (int64_t)c->a;
    _Atomic uint32_t *l = stripe(rank, c->id, c->off);
    lock(l);
    int written = __atomic_load_n(ref, __ATOMIC_SEQ_CST) > depth;
    if (written) {
        __atomic_store_n(ref, depth, __ATOMIC_SEQ_CST);
        memcpy(base + c->b, c->data, c->n);
    }
    unlock(l);
    if (res->written)
        *res->written = written;
    return SHOAL_OK;
}

static int zbuffer_packed(int rank, const struct rma_cmd *c, char *p)
{
    int rc = aligned8(rank, p);
    if (rc)
        return rc;
    const uint64_t *cells = c->data;
    for (uint64_t i = 0; i < c->n; i++) {
        uint64_t *w = (uint64_t *)p + i, cur = __atomic_load_n(w, __ATOMIC_RELAXED);
        while ((uint32_t)(cur >> 32) > (uint32_t)(cells[i] >> 32) &&
               !__atomic_compare_exchange_n(w, &cur, cells[i], 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        }
    }
    return SHOAL_OK;
}

static int put_flag(int rank, const struct rma_cmd *c, char *base, uint64_t size)
{
    uint64_t *flag = (uint64_t *)(base + c->a);
    int rc = second_range(rank, size, c->a, 8);
    if (!rc)
        rc = aligned8(rank, (char *)flag);
    if (rc)
        return rc;
    memcpy(base + c->off, c->data, c->n);
    if (c->off + c->n == c->whole_off + c->whole_n) /* the last part: all data is in */
        __atomic_store_n(flag, c->b, __ATOMIC_RELEASE); /* the data is visible first */
    return SHOAL_OK;
}

/* Permission and length in the segment that the whole command needs. */
static void needs(const struct rma_cmd *c, unsigned *perm, uint64_t *len)
{
    static const unsigned perms[RMA_KINDS] = {
        [RMA_PUT] = SHOAL_MEM_WRITE, [RMA_PUT_FLAG] = SHOAL_MEM_WRITE, [RMA_GET] = SHOAL_MEM_READ,
        [RMA_FETCH_OP] = SHOAL_MEM_ATOMIC, [RMA_CAS] = SHOAL_MEM_ATOMIC, [RMA_ZBUF] = SHOAL_MEM_WRITE,
        [RMA_ZBUF_PACKED] = SHOAL_MEM_WRITE, [RMA_FIFO] = SHOAL_MEM_QUEUE, [RMA_SIGNAL] = SHOAL_MEM_QUEUE};
    *perm = perms[c->kind];
    switch (c->kind) {
    case RMA_FETCH_OP: case RMA_ZBUF_PACKED: *len = c->whole_n * 8; break;
    case RMA_CAS: case RMA_ZBUF: *len = 8; break;
    case RMA_FIFO: case RMA_SIGNAL: *len = 0; break; /* the structure checks its own extent */
    default: *len = c->whole_n;
    }
}

int rma_execute(int rank, const struct rma_cmd *c, struct rma_result *res)
{
    if (c->kind >= RMA_FENCE)
        return SHOAL_EINVAL;
    if (!rma.hdr[rank])
        return RMA_NOT_HERE;
    unsigned perm;
    uint64_t len, size;
    char *base;
    needs(c, &perm, &len);
    int rc = resolve(rank, c, perm, len, &base, &size);
    if (rc)
        return rc;
    char *p = base + c->off;
    switch (c->kind) {
    case RMA_PUT: memcpy(p, c->data, c->n); return SHOAL_OK;
    case RMA_PUT_FLAG: return put_flag(rank, c, base, size);
    case RMA_GET: memcpy(res->data, p, c->n); return SHOAL_OK;
    case RMA_FETCH_OP: return fetch_op(rank, c, p, res);
    case RMA_CAS: return cas(rank, c, base, size, res);
    case RMA_ZBUF: return zbuffer(rank, c, base, size, res);
    case RMA_ZBUF_PACKED: return zbuffer_packed(rank, c, p);
    case RMA_FIFO:
        rc = rma_fifo_enqueue(base, size, c->off, c->src, c->data, c->n, (c->flags & SHOAL_FIFO_RETRY) != 0);
        break;
    default: /* signals run the owner's handler: only the owner delivers them */
        if (rank != rma.rank)
            return RMA_NOT_HERE;
        rc = rma_signal_deliver((shoal_mem_t)(c->id & (RMA_SLOTS - 1)), base, size, c->off, c->src, c->data,
                                c->n, c->b);
    }
    return rc == SHOAL_ENOSTRUCT ? refuse(rank, rc) : rc;
}
