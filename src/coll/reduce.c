/* shoal_reduce and shoal_allreduce: element-wise sum, min, max (and the
 * bitwise operations on integers) of every rank's vector.
 *
 * Up the broadcast's spanning tree (coll_tree): on each host into its
 * source over shared memory, then across hosts into the root.  A rank
 * keeps each child's whole partial result apart and combines them with
 * its own in the children's fixed order once all have arrived, so the
 * result's bits depend only on the job's layout, never on arrival order
 * (a floating-point sum is not associative).  shoal_allreduce is a reduce
 * into rank 0 and a shoal_broadcast of the result: every rank returns the
 * same bits.  Partials travel in pieces, one packet each to another host.
 * Reductions are numbered like broadcasts; pieces of one this rank has not
 * reached are kept until it does.  Layout: docs/WIRE.md §10.5. */
#include "am/am.h"
#include "am/hang.h"
#include "coll/coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { COLL_H_REDUCE = AM_LAYER_BASE(AM_BLOCK_COLL) + 6 }; /* (epoch, offset, bytes, type | op << 8 | root << 32) */
enum { RD_NARGS = 4 };

struct rd_child {
    int rank;
    unsigned char *buf; /* its partial result */
    size_t got;         /* bytes of it held, in order */
    int arrived;        /* a piece came: an empty vector is sent as one, so every call checks its arguments */
};

static struct {
    uint64_t epoch; /* the reduction in progress, or the last one finished */
    int active;
    size_t bytes;
    uint64_t what; /* argument 3 as this rank's call makes it */
    struct rd_child child[COLL_MAX_CHILDREN];
    int nchildren;
    struct coll_stash early;
} rd;

static void rd_take(int src, const uint64_t *args, const void *data, size_t len)
{
    if (args[2] != rd.bytes || args[3] != rd.what)
        util_fatal("shoal_reduce #%llu: rank %d called it with %llu bytes, type %u, op %u, root %u, but rank %d "
                   "sent %llu bytes, type %u, op %u, root %u", (unsigned long long)rd.epoch, am_rank(),
                   (unsigned long long)rd.bytes, (unsigned)(rd.what & 0xff), (unsigned)(rd.what >> 8 & 0xff),
                   (unsigned)(rd.what >> 32), src, (unsigned long long)args[2], (unsigned)(args[3] & 0xff),
                   (unsigned)(args[3] >> 8 & 0xff), (unsigned)(args[3] >> 32));
    for (int i = 0; i < rd.nchildren; i++) {
        struct rd_child *c = &rd.child[i];
        if (c->rank != src)
            continue;
        if (args[1] != c->got || len > rd.bytes - c->got)
            break;
        if (len)
            memcpy(c->buf + c->got, data, len);
        c->got += len;
        c->arrived = 1;
        return;
    }
    am_stats()->dropped++; /* not from a child, or out of its order */
}

static void rd_piece(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    if (nargs != RD_NARGS)
        return;
    coll_check(shoal_token_source(tok), args[0], COLL_KIND_REDUCE);
    coll_stash_route(&rd.early, rd.epoch, rd.active, shoal_token_source(tok), args, nargs, buf, n, rd_take);
}

void coll_reduce_init(void)
{
    am_register_internal(COLL_H_REDUCE, rd_piece);
}

void coll_reduce_fini(void)
{
    coll_stash_free(&rd.early);
    for (int i = 0; i < COLL_MAX_CHILDREN; i++)
        free(rd.child[i].buf);
    memset(&rd, 0, sizeof rd);
}

/* acc[i] = acc[i] op in[i] for count elements. */
static void rd_combine(void *acc, const void *in, size_t count, enum shoal_atype type, enum shoal_rop op)
{
    for (size_t i = 0; i < count; i++) {
        if (type == SHOAL_DOUBLE) {
            double *a = (double *)acc + i, b = ((const double *)in)[i];
            *a = op == SHOAL_ROP_SUM ? *a + b : op == SHOAL_ROP_MIN ? (b < *a ? b : *a) : (b > *a ? b : *a);
            continue;
        }
        uint64_t *a = (uint64_t *)acc + i, b = ((const uint64_t *)in)[i];
        int64_t sa = (int64_t)*a, sb = (int64_t)b;
        int less = type == SHOAL_INT64 ? sb < sa : b < *a, more = type == SHOAL_INT64 ? sb > sa : b > *a;
        switch (op) {
        case SHOAL_ROP_SUM: *a += b; break; /* unsigned: wraps as two's complement for int64 */
        case SHOAL_ROP_MIN: *a = less ? b : *a; break;
        case SHOAL_ROP_MAX: *a = more ? b : *a; break;
        case SHOAL_ROP_AND: *a &= b; break;
        case SHOAL_ROP_OR: *a |= b; break;
        case SHOAL_ROP_XOR: *a ^= b; break;
        }
    }
}

static int rd_check(size_t count, enum shoal_atype type, enum shoal_rop op, int root, const char *call)
{
    if (am_rank() < 0)
        return SHOAL_ENOTINIT;
    if (root < 0 || root >= am_size())
        return SHOAL_ERANK;
    if ((unsigned)type > SHOAL_DOUBLE || (unsigned)op > SHOAL_ROP_XOR || count > SIZE_MAX / 8 / 2 ||
        (type == SHOAL_DOUBLE && op > SHOAL_ROP_MAX))
        return SHOAL_EINVAL;
    return am_blocking_allowed(call);
}

/* The reduction proper, into acc (count elements, this rank's contribution
 * on entry; the result at root on return). */
static int rd_describe(const struct hang_wait *w, char *buf, size_t n)
{
    snprintf(buf, n, "reduction epoch %llu: waits for the contribution of rank %d, a child in its tree",
             (unsigned long long)w->value, w->peer);
    return w->peer;
}

static int rd_run(void *acc, size_t count, enum shoal_atype type, enum shoal_rop op, int root)
{
    struct coll_tree t;
    int rc = coll_tree(&t, root, 1);
    if (rc)
        return rc;
    rd.epoch = coll_begin(COLL_KIND_REDUCE);
    rd.bytes = count * 8;
    rd.what = (uint64_t)type | (uint64_t)op << 8 | (uint64_t)root << 32;
    rd.nchildren = t.nchildren;
    for (int i = 0; i < rd.nchildren; i++) {
        unsigned char *b = realloc(rd.child[i].buf, rd.bytes ? rd.bytes : 1);
        if (!b)
            util_fatal("out of memory for a %zu-byte partial reduction", rd.bytes);
        rd.child[i] = (struct rd_child){.rank = t.children[i], .buf = b};
    }
    rd.active = 1;
    coll_stash_take(&rd.early, rd.epoch, rd_take);
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("shoal_reduce", -1, rd.epoch, NULL, rd_describe);
    for (int i = 0; i < rd.nchildren; i++) {
        hang_refine(rd.child[i].rank, rd.epoch);
        while (!rd.child[i].arrived || rd.child[i].got < rd.bytes) {
            am_progress_wait(&b, 0);
            coll_watch();
        }
        rd_combine(acc, rd.child[i].buf, count, type, op);
    }
    hang_pop();
    rd.active = 0;
    coll_end();
    if (t.parent < 0)
        return SHOAL_OK;
    size_t piece = coll_piece(t.parent, RD_NARGS), off = 0;
    do { /* at least one piece, empty for an empty vector; over the network they leave together */
        uint64_t args[RD_NARGS] = {rd.epoch, off, rd.bytes, rd.what};
        size_t len = rd.bytes - off < piece ? rd.bytes - off : piece;
        unsigned more = off + len < rd.bytes ? SHOAL_MORE : 0;
        rc = am_request_internal(t.parent, COLL_H_REDUCE, more, (const char *)acc + off, len, RD_NARGS, args);
        if (rc)
            util_fatal("shoal_reduce: cannot reach rank %d: %s", t.parent, shoal_strerror(rc));
        off += len;
    } while (off < rd.bytes);
    return SHOAL_OK;
}

/* in and out may be the same buffer. */
static int rd_reduce(const void *in, void *out, size_t count, enum shoal_atype type, enum shoal_rop op, int root)
{
    void *acc = malloc(count ? count * 8 : 1);
    if (!acc)
        return SHOAL_ENOMEM;
    if (count)
        memcpy(acc, in, count * 8);
    int rc = rd_run(acc, count, type, op, root);
    if (rc == SHOAL_OK && am_rank() == root && count)
        memcpy(out, acc, count * 8);
    if (rc == SHOAL_OK)
        am_stats()->reductions++;
    free(acc);
    return rc;
}

int shoal_reduce(const void *in, void *out, size_t count, enum shoal_atype type, enum shoal_rop op, int root)
{
    AM_GUARD();
    int rc = rd_check(count, type, op, root, "shoal_reduce");
    if (rc)
        return rc;
    if (count && (!in || (am_rank() == root && !out)))
        return SHOAL_EINVAL;
    return rd_reduce(in, out, count, type, op, root);
}

int shoal_allreduce(const void *in, void *out, size_t count, enum shoal_atype type, enum shoal_rop op)
{
    AM_GUARD();
    int rc = rd_check(count, type, op, 0, "shoal_allreduce");
    if (rc)
        return rc;
    if (count && (!in || !out))
        return SHOAL_EINVAL;
    rc = rd_reduce(in, out, count, type, op, 0);
    return rc ? rc : shoal_broadcast(out, count * 8, 0);
}
