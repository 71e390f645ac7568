/* shoal_broadcast: the root's n bytes reach every rank's buffer.
 *
 * Hierarchical, as the barrier: across hosts among the host sources (the
 * root, and the leader of every other host), then on each host from its
 * source to the host's other ranks over shared memory.  Both phases are
 * binomial trees of internal medium requests, pipelined: a rank forwards
 * each piece to its children as soon as it holds it, so a large payload
 * streams down the tree.  Pieces are the largest medium that travels in
 * one packet to a child on another host, the medium limit to a local one.
 *
 * Where a broadcast is one packet on the network (coll_use_broadcast: eth,
 * or udp with a subnet broadcast address), the job spans three hosts or
 * more and the payload fits in BC_NATIVE_PACKETS of them, the root instead sends each chunk once as a
 * broadcast packet, which every host source takes (Ciaccio's GAMMA thesis §6),
 * keeps a copy and returns.  Those packets may be lost: a source still
 * missing chunks BC_NACK_NS after it began waiting asks the root (a
 * reliable NACK with the bitmap of what it lacks), and the root's handler
 * answers with the first missing chunk as a reliable reply, from its copy;
 * the source asks again until it holds everything.  Each source then
 * acknowledges, and the root frees its copy once every source has; its
 * next broadcast with packets waits for that first.
 *
 * Broadcasts are numbered (every rank calls them in the same order).
 * Pieces of a broadcast this rank has not reached are kept until it does;
 * packets of finished ones (late broadcast duplicates) are dropped.  A
 * piece whose length or root disagrees with the caller's is a program
 * error that would lose data: the job ends naming both ranks.  Layout:
 * docs/WIRE.md §10.4. */
#include "am/am.h"
#include "am/hang.h"
#include "coll/coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    COLL_H_BCAST = AM_LAYER_BASE(AM_BLOCK_COLL) + 4, /* a piece: (epoch, offset, total, root | flags, chunk) */
    COLL_H_BCAST_ACK,                    /* to the root: (epoch, chunks missing); none missing: complete */
};
enum { BC_NARGS = 5 };
enum bc_flags { /* argument 3, above the root */
    BC_VIA_BROADCAST = 1, /* sent as a broadcast packet */
    BC_RESENT = 2,        /* the root's answer to a NACK: a chunk */
    BC_NOT_YET = 4,       /* the root's answer to a NACK: it has not started that broadcast */
};
#define BC_NATIVE_PACKETS 8u /* the largest payload sent as broadcast packets, in packets */
#define BC_NACK_NS 2000000ull

static struct {
    uint64_t epoch;     /* the broadcast in progress, or the last one finished */
    int active;         /* inside shoal_broadcast(epoch) */
    unsigned char *buf;
    size_t n;
    int root;
    int taker;          /* this rank takes the broadcast packets: a host source, not the root */
    size_t chunk;       /* with broadcast packets: bytes per packet (0: trees only) */
    uint64_t have_bits; /* taker: chunks held */
    size_t have;        /* bytes held from the start of the buffer */
    int arrived;        /* a piece came (or this is the root): even an empty broadcast ends with one */
    int asking;         /* taker: a NACK is unanswered */
    uint64_t ask_at;    /* taker: when to ask for what is missing */
    struct {            /* root: the copy of its last broadcast sent as packets */
        unsigned char *data;
        uint64_t epoch;
        size_t n, chunk;
        int acks, sources;
    } kept;
    struct coll_stash early; /* pieces of broadcasts this rank has not reached */
} bc;

static void bc_fail(const char *what, int src, uint64_t theirs, uint64_t mine)
{
    util_fatal("shoal_broadcast #%llu: rank %d called it with %s %llu, but rank %d sent %llu",
               (unsigned long long)bc.epoch, am_rank(), what, (unsigned long long)mine, src,
               (unsigned long long)theirs);
}

/* Chunks [0, k) all held: the prefix a taker may forward. */
static size_t bc_prefix(void)
{
    uint64_t k = 0;
    while (k < 64 && (bc.have_bits >> k & 1))
        k++;
    size_t end = k * bc.chunk;
    return end < bc.n ? end : bc.n;
}

/* A piece of the broadcast in progress. */
static void bc_take(int src, const uint64_t *args, const void *data, size_t len)
{
    uint64_t off = args[1], total = args[2], root = args[3] & 0xffffffffu;
    unsigned flags = (unsigned)(args[3] >> 32);
    if (flags & (BC_RESENT | BC_NOT_YET)) { /* an answer to a NACK: ask again at once, or later */
        bc.asking = 0;
        bc.ask_at = util_now_ns() + (flags & BC_NOT_YET ? BC_NACK_NS : 0);
        if (flags & BC_NOT_YET)
            return;
    }
    if (total != bc.n)
        bc_fail("a length of", src, total, bc.n);
    if (root != (uint64_t)bc.root)
        bc_fail("root", src, root, (uint64_t)bc.root);
    if ((flags & BC_VIA_BROADCAST) && !bc.taker)
        return; /* this host's source forwards it here */
    if (off > bc.n || len > bc.n - off) {
        am_stats()->dropped++;
        return;
    }
    bc.arrived = 1;
    if (!bc.taker) { /* from the one tree parent, in order */
        if (len)
            memcpy(bc.buf + off, data, len);
        bc.have = off + len;
        return;
    }
    uint64_t k = args[4] ? off / args[4] : 64;
    if (args[4] != bc.chunk || k >= 64 || (bc.have_bits >> k & 1))
        return; /* a duplicate (a broadcast packet and its resend) */
    memcpy(bc.buf + off, data, len);
    bc.have_bits |= 1ull << k;
    bc.have = bc_prefix();
}

static void bc_piece(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    if (nargs != BC_NARGS)
        return;
    int nlocal;
    if ((args[3] >> 32 & BC_VIA_BROADCAST) && am_local_ranks(&nlocal)[0] != am_rank())
        return; /* only a host's leader takes broadcast packets; its tree brings them here */
    coll_check(shoal_token_source(tok), args[0], COLL_KIND_BCAST);
    coll_stash_route(&bc.early, bc.epoch, bc.active, shoal_token_source(tok), args, nargs, buf, n, bc_take);
}

/* A source's ACK (no chunk missing) or NACK, at the root. */
static void bc_ack(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    if (nargs != 2)
        return;
    coll_check(shoal_token_source(tok), args[0], COLL_KIND_BCAST);
    int have = bc.kept.data && args[0] == bc.kept.epoch;
    if (!args[1]) {
        if (have && ++bc.kept.acks == bc.kept.sources) {
            free(bc.kept.data);
            bc.kept.data = NULL;
        }
        return;
    }
    /* the first chunk missing; or, for a broadcast not started here yet, none */
    unsigned k = (unsigned)__builtin_ctzll(args[1]);
    size_t off = have ? k * bc.kept.chunk : 0;
    if (have && off >= bc.kept.n)
        return;
    size_t len = !have ? 0 : bc.kept.n - off < bc.kept.chunk ? bc.kept.n - off : bc.kept.chunk;
    uint64_t a[BC_NARGS] = {args[0], off, have ? bc.kept.n : 0,
                            (uint64_t)am_rank() | (uint64_t)(have ? BC_RESENT : BC_NOT_YET) << 32,
                            have ? bc.kept.chunk : 0};
    if (am_reply_internal(tok, COLL_H_BCAST, have ? bc.kept.data + off : NULL, len, BC_NARGS, a) == SHOAL_OK &&
        have)
        am_stats()->bcast_resent++;
}

void coll_bcast_init(void)
{
    am_register_internal(COLL_H_BCAST, bc_piece);
    am_register_internal(COLL_H_BCAST_ACK, bc_ack);
}

void coll_bcast_fini(void)
{
    coll_stash_free(&bc.early);
    free(bc.kept.data);
    memset(&bc, 0, sizeof bc);
}

/* ---- who sends to whom -------------------------------------------------- */

struct bc_child {
    int rank;
    size_t piece; /* bytes per message to it */
    size_t sent;
    int started;  /* a piece went: an empty broadcast sends one, so every call checks its arguments */
};

struct bc_plan {
    int native;   /* the sources get broadcast packets */
    size_t chunk; /* bytes per broadcast packet */
    struct coll_tree tree;
    struct bc_child child[COLL_MAX_CHILDREN];
};

static int bc_plan(struct bc_plan *p, int root, size_t n)
{
    memset(p, 0, sizeof *p);
    /* between two hosts the tree is one message, which a broadcast packet
     * and its acknowledgement can only make slower */
    int hosts;
    coll_leaders(&hosts);
    p->native = coll_use_broadcast() && hosts > 2 && n > 0;
    if (p->native) {
        p->chunk = am_net_medium_in_one(BC_NARGS);
        p->native = n <= BC_NATIVE_PACKETS * p->chunk;
    }
    int rc = coll_tree(&p->tree, root, !p->native);
    for (int i = 0; i < p->tree.nchildren; i++)
        p->child[i] = (struct bc_child){.rank = p->tree.children[i],
                                        .piece = coll_piece(p->tree.children[i], BC_NARGS)};
    return rc;
}

/* ---- moving the bytes ---------------------------------------------------- */

/* A tree piece is sent with SHOAL_MORE: its caller flushes. */
static void bc_send(int dest, size_t off, size_t len, unsigned flags, size_t chunk)
{
    uint64_t args[BC_NARGS] = {bc.epoch, off, bc.n, (uint64_t)bc.root | (uint64_t)flags << 32, chunk};
    const unsigned char *at = len ? bc.buf + off : NULL; /* an empty broadcast's buf may be NULL */
    int rc = flags & BC_VIA_BROADCAST ? am_bcast_internal(COLL_H_BCAST, BC_NARGS, args, at, len)
                                      : am_request_internal(dest, COLL_H_BCAST, SHOAL_MORE, at, len, BC_NARGS, args);
    if (rc)
        util_fatal("shoal_broadcast: cannot reach rank %d: %s", dest, shoal_strerror(rc));
}

/* Sends each child what this rank holds and the child lacks; 1 when every
 * child has everything.  Over the network the pieces for all children
 * leave together, in one system call where they fit. */
static int bc_forward(struct bc_plan *p)
{
    int done = 1, sent = 0;
    for (int i = 0; i < p->tree.nchildren; i++) {
        struct bc_child *c = &p->child[i];
        while (bc.arrived && (c->sent < bc.have || !c->started)) {
            size_t len = bc.have - c->sent < c->piece ? bc.have - c->sent : c->piece;
            bc_send(c->rank, c->sent, len, 0, 0);
            c->sent += len;
            c->started = 1;
            sent = 1;
        }
        done &= c->started && c->sent == bc.n;
    }
    if (sent)
        am_flush();
    return done;
}

static void bc_send_ack(uint64_t missing)
{
    uint64_t args[2] = {bc.epoch, missing};
    int rc = am_request_internal(bc.root, COLL_H_BCAST_ACK, 0, NULL, 0, 2, args);
    if (rc)
        util_fatal("shoal_broadcast: cannot reach root rank %d: %s", bc.root, shoal_strerror(rc));
}

/* Root with broadcast packets: keeps a copy for the sources that miss a
 * packet (after the previous copy's sources have all acknowledged), sends
 * each chunk once to every host. */
static void bc_send_packets(const struct bc_plan *p)
{
    struct util_backoff b;
    util_backoff_init(&b);
    while (bc.kept.data)
        am_progress_wait(&b, 0);
    if (!(bc.kept.data = malloc(bc.n)))
        util_fatal("out of memory for a copy of a %zu-byte broadcast", bc.n);
    memcpy(bc.kept.data, bc.buf, bc.n);
    bc.kept.epoch = bc.epoch;
    bc.kept.n = bc.n;
    bc.kept.chunk = bc.chunk;
    bc.kept.acks = 0;
    bc.kept.sources = p->tree.nsources - 1;
    for (size_t off = 0; off < bc.n; off += bc.chunk)
        bc_send(-1, off, bc.n - off < bc.chunk ? bc.n - off : bc.chunk, BC_VIA_BROADCAST, bc.chunk);
    am_stats()->bcast_packets += (bc.n + bc.chunk - 1) / bc.chunk;
}

/* A source that takes broadcast packets: acknowledges once complete, and
 * until then asks for what is missing, BC_NACK_NS after it began waiting
 * and again as each answer comes. */
static void bc_taker_step(int *acked)
{
    if (bc.have == bc.n) {
        if (!*acked)
            bc_send_ack(0);
        *acked = 1;
        return;
    }
    if (bc.asking || util_now_ns() < bc.ask_at)
        return;
    size_t nchunks = (bc.n + bc.chunk - 1) / bc.chunk;
    uint64_t all = nchunks == 64 ? ~0ull : (1ull << nchunks) - 1;
    bc.asking = 1;
    bc_send_ack(all & ~bc.have_bits);
}

static void bc_run(struct bc_plan *p)
{
    if (p->native) {
        bc.chunk = p->chunk;
        bc.taker = p->tree.source && am_rank() != bc.root;
        bc.ask_at = util_now_ns() + BC_NACK_NS;
    }
    if (am_rank() == bc.root) {
        bc.have = bc.n;
        bc.arrived = 1;
        if (p->native)
            bc_send_packets(p);
    }
    coll_stash_take(&bc.early, bc.epoch, bc_take);
    int acked = !bc.taker;
    struct util_backoff b;
    util_backoff_init(&b);
    for (;;) {
        if (bc.taker)
            bc_taker_step(&acked);
        if (bc_forward(p) && bc.arrived && bc.have == bc.n && acked)
            break;
        am_progress_wait(&b, 0);
        coll_watch();
    }
}

/* The hang report of a broadcast: the tree parent it takes the data from
 * (or, fed by broadcast packets, the root). */
static int bc_describe(const struct hang_wait *w, char *buf, size_t n)
{
    snprintf(buf, n, "broadcast epoch %llu from root %d: has %zu of %zu bytes, waits for rank %d",
             (unsigned long long)w->value, bc.root, bc.have, bc.n, w->peer);
    return w->peer;
}

int shoal_broadcast(void *buf, size_t n, int root)
{
    AM_GUARD();
    if (am_rank() < 0)
        return SHOAL_ENOTINIT;
    if (root < 0 || root >= am_size())
        return SHOAL_ERANK;
    if (!buf && n)
        return SHOAL_EINVAL;
    int rc = am_blocking_allowed("shoal_broadcast");
    if (rc)
        return rc;
    struct bc_plan p;
    if ((rc = bc_plan(&p, root, n)) != SHOAL_OK)
        return rc;
    bc.epoch = coll_begin(COLL_KIND_BCAST);
    bc.active = 1;
    bc.buf = buf;
    bc.n = n;
    bc.root = root;
    bc.taker = 0;
    bc.chunk = 0;
    bc.have_bits = 0;
    bc.have = 0;
    bc.arrived = 0;
    bc.asking = 0;
    if (p.native)
        coll_listen(1);
    hang_push("shoal_broadcast", p.tree.parent >= 0 ? p.tree.parent : root, bc.epoch, NULL, bc_describe);
    bc_run(&p);
    hang_pop();
    if (p.native)
        coll_listen(0);
    bc.active = 0;
    coll_end();
    am_stats()->broadcasts++;
    return SHOAL_OK;
}
