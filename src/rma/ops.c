/* The one-sided commands: argument checks, the choice between running a
 * command here on mapped memory and sending it for the target's progress
 * engine to run (rma_issue, the one place that decides), and completion:
 * blocking, handles, colour counters (Matsumoto's MBCF thesis §4.2's elastic memory
 * barrier) and fire-and-forget with fence. */
#include "am/hang.h"
#include "rma/rma.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The request/reply argument layout; a reply that passes the target's
 * entry on for the initiator's cache (native.c) has RP_SEG_ARGS. */
enum { RQ_KIND, RQ_ID, RQ_KEY, RQ_OFF, RQ_N, RQ_COOKIE, RQ_A, RQ_B, RQ_C, RQ_OUT, RQ_ARGS };
enum { RP_STATUS, RP_COOKIE, RP_OUT, RP_OBSERVED, RP_OLD, RP_FLAG, RP_CHUNKS, RP_ARGS };
enum { RP_SEG_PERMS = RP_ARGS, RP_SEG_OFF, RP_SEG_SIZE, RP_SEG_ARGS };

#define RMA_MAX_OPS 1024u
#define RMA_NATIVE_MAX 64u /* native pieces in flight (the transport has fewer bounce buffers) */
#define OPT_MASK (SHOAL_STATUS_NONE | SHOAL_STATUS_FAILURES)

/* One piece of a native command, until the transport completes it. */
struct rma_native {
    struct tp_rma_req req; /* first: the completion callback gets it */
    struct rma_op *o;
    struct rma_cached *ce;
    int amo;
    uint64_t word, expected; /* an atomic's old word; compare-swap's expected value */
};

/* A command sent for its target to run, until its replies are in. */
struct rma_op {
    uint64_t serial;   /* 0: free */
    uint32_t pending;  /* chunks not yet answered (a reply answers RP_CHUNKS of them) */
    int32_t status;    /* first failure */
    unsigned color;
    unsigned opt;      /* a native fire-and-forget command's status option */
    uint32_t id;       /* the segment and key, for an entry the reply passes on */
    uint64_t key;
    shoal_handle_t *h;
    void *out;         /* get destination, fetch-op old values */
    uint64_t out_bytes;
    struct shoal_cas_result *cas;
    int *written;
};

static struct {
    struct rma_op ops[RMA_MAX_OPS];
    uint32_t free_ops[RMA_MAX_OPS];
    uint32_t nfree;
    uint32_t live;
    uint64_t serial;
    uint64_t issued[SHOAL_COLORS], completed[SHOAL_COLORS];
    int32_t color_err[SHOAL_COLORS];
    int32_t deferred_err;     /* first reported failure of a fire-and-forget command */
    unsigned char *unfenced;  /* [nranks]: fire-and-forget commands sent since the last fence */
    void *scratch;            /* reply data built by the target */
    size_t chunk;             /* payload bytes per message */
    size_t net_chunk;         /* ... to a rank over the network: what one packet carries both ways */
    int32_t *split_refused;   /* [nranks]: the refusal of the split command each rank is sending */
    uint32_t *unanswered;     /* [nranks]: chunks of the put each rank is sending that ran and await the reply */
    struct rma_native native[RMA_NATIVE_MAX];
    struct rma_native *native_free[RMA_NATIVE_MAX];
    uint32_t native_nfree;
    uint32_t native_live;     /* pieces the transport has not completed */
} ops;

/* ---- completion ------------------------------------------------------------ */

static void note_failure(int32_t *slot, int status)
{
    if (status && *slot == 0)
        *slot = status;
}

/* How a command's status reaches the caller once it is known. */
struct rma_done {
    unsigned flags;
    shoal_handle_t *h;
};

static unsigned color_of(unsigned flags)
{
    return (flags >> 8) & 0xfu;
}

/* Which failures a fire-and-forget command reports: any with
 * SHOAL_STATUS_FAILURES; only a refused access with SHOAL_STATUS_NONE (the
 * seed's violation message).  The same on both paths. */
static int reported(unsigned opt, int rc)
{
    return rc && (opt & SHOAL_STATUS_FAILURES || rma_is_refusal(rc));
}

static int finish(const struct rma_done *d, int status)
{
    unsigned c = color_of(d->flags);
    if (!d->h && !c && (d->flags & OPT_MASK) && !reported(d->flags & OPT_MASK, status))
        status = SHOAL_OK; /* not reported: as if the target had not replied */
    if (status)
        am_stats()->rma_failures++;
    if (c) {
        ops.completed[c]++;
        note_failure(&ops.color_err[c], status);
    }
    if (d->h) {
        d->h->status = status;
        return SHOAL_OK;
    }
    if (c)
        return SHOAL_OK;
    if (d->flags & OPT_MASK) {
        note_failure(&ops.deferred_err, status);
        return SHOAL_OK;
    }
    return status;
}

static void op_release(struct rma_op *o)
{
    o->serial = 0;
    ops.free_ops[ops.nfree++] = (uint32_t)(o - ops.ops);
    ops.live--;
}

static void op_complete(struct rma_op *o)
{
    struct rma_done d = {.flags = SHOAL_COLOR(o->color) | o->opt, .h = o->h};
    finish(&d, o->status);
    op_release(o);
}

/* The hang report of a wait for one-sided replies (the ops do not keep
 * their targets: the last messages sent name them). */
static int describe_rma_wait(const struct hang_wait *w, char *buf, size_t n)
{
    (void)w;
    snprintf(buf, n, "waits for the replies of one-sided operations (%u in flight from this rank)", ops.live);
    return -1;
}

static int wait_handle(shoal_handle_t *h)
{
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("shoal_wait", -1, 0, NULL, describe_rma_wait);
    while (h->status == SHOAL_PENDING)
        am_progress_wait(&b, 0);
    hang_pop();
    return h->status;
}

int shoal_test(shoal_handle_t *h)
{
    AM_GUARD();
    if (!h)
        return SHOAL_EINVAL;
    if (h->status == SHOAL_PENDING && !am_in_handler() && rma.rank >= 0)
        am_poll(0);
    return h->status == SHOAL_PENDING ? SHOAL_EAGAIN : h->status;
}

int shoal_wait(shoal_handle_t *h)
{
    AM_GUARD();
    if (!h)
        return SHOAL_EINVAL;
    if (h->status != SHOAL_PENDING)
        return h->status;
    int rc = rma.rank < 0 ? SHOAL_ENOTINIT : am_blocking_allowed("shoal_wait");
    return rc ? rc : wait_handle(h);
}

int shoal_color_counts(unsigned c, uint64_t *issued, uint64_t *completed)
{
    AM_GUARD();
    if (c == 0 || c >= SHOAL_COLORS)
        return SHOAL_EINVAL;
    if (issued)
        *issued = ops.issued[c];
    if (completed)
        *completed = ops.completed[c];
    return SHOAL_OK;
}

int shoal_color_wait(unsigned c)
{
    AM_GUARD();
    if (c == 0 || c >= SHOAL_COLORS)
        return SHOAL_EINVAL;
    int rc = rma.rank < 0 ? SHOAL_ENOTINIT : am_blocking_allowed("shoal_color_wait");
    if (rc)
        return rc;
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("shoal_color_wait", -1, 0, NULL, describe_rma_wait);
    while (ops.completed[c] != ops.issued[c])
        am_progress_wait(&b, 0);
    hang_pop();
    rc = ops.color_err[c];
    ops.color_err[c] = 0;
    return rc;
}

/* ---- the remote path --------------------------------------------------------- */

static struct rma_op *op_alloc(unsigned flags, struct rma_done *d)
{
    struct util_backoff b;
    util_backoff_init(&b);
    while (ops.nfree == 0) { /* bounded like a ring: wait for replies */
        if (flags & SHOAL_IMMEDIATE)
            return NULL;
        am_progress_wait(&b, 0);
    }
    struct rma_op *o = &ops.ops[ops.free_ops[--ops.nfree]];
    *o = (struct rma_op){.serial = ++ops.serial, .color = color_of(d->flags), .h = d->h};
    ops.live++;
    return o;
}

static uint64_t cookie_of(const struct rma_op *o)
{
    return (uint64_t)(o - ops.ops) | o->serial << 10;
}

/* Elements per message for the commands that split (put, get, fetch-op,
 * packed z-buffer): bytes for put/get, 8-byte elements otherwise. */
static uint64_t unit_of(enum rma_kind k)
{
    return k == RMA_FETCH_OP || k == RMA_ZBUF_PACKED ? 8 : 1;
}

static int splits(enum rma_kind k)
{
    return k == RMA_PUT || k == RMA_PUT_FLAG || k == RMA_GET || k == RMA_FETCH_OP || k == RMA_ZBUF_PACKED;
}

/* The commands a provider may run natively: an entry passed on with their
 * replies is what lets the initiator check them itself. */
static int native_kind_of(enum rma_kind k)
{
    return k == RMA_PUT || k == RMA_GET || k == RMA_FETCH_OP || k == RMA_CAS;
}

/* One message of a command.  Only the first may fail (SHOAL_EAGAIN under
 * SHOAL_IMMEDIATE); later ones wait rather than leave a command half sent. */
static int send_one(int target, const struct rma_cmd *c, uint64_t cookie, uint64_t out_off, const void *data,
                    size_t bytes, unsigned flags)
{
    uint64_t args[RQ_ARGS] = {
        [RQ_KIND] = (uint64_t)c->kind | (uint64_t)(c->flags & (OPT_MASK | SHOAL_FIFO_RETRY)) << 8,
        [RQ_ID] = c->id, [RQ_KEY] = c->key, [RQ_OFF] = c->off, [RQ_N] = c->n, [RQ_COOKIE] = cookie,
        [RQ_A] = c->a, [RQ_B] = c->b, [RQ_C] = splits(c->kind) ? c->whole_n : c->c, [RQ_OUT] = out_off};
    int rc = am_request_internal(target, RMA_H_REQ, flags & (SHOAL_IMMEDIATE | SHOAL_MORE), data, bytes, RQ_ARGS,
                                 args);
    if (rc && rc != SHOAL_EAGAIN)
        util_fatal("sending a one-sided command to rank %d failed: %s", target, shoal_strerror(rc));
    return rc;
}

/* Bytes of request payload a command carries. */
static size_t payload_of(const struct rma_cmd *c)
{
    switch (c->kind) {
    case RMA_GET: case RMA_CAS: case RMA_FENCE: return 0;
    case RMA_FETCH_OP: case RMA_ZBUF_PACKED: return (size_t)c->n * 8;
    default: return (size_t)c->n;
    }
}

static int remote_issue(int target, const struct rma_cmd *c, const struct rma_result *res, struct rma_done *d)
{
    if (am_in_handler())
        return am_rule_violation("a one-sided command to memory the target must serve");
    int ff = !d->h && !color_of(d->flags) && (d->flags & OPT_MASK);
    struct rma_op *o = NULL;
    if (!ff) {
        if (!(o = op_alloc(d->flags, d)))
            return SHOAL_EAGAIN;
        o->out = res->data;
        o->out_bytes = c->kind == RMA_GET ? c->n : c->kind == RMA_FETCH_OP ? c->n * 8 : 0;
        o->cas = res->cas;
        o->written = res->written;
        o->id = c->id;
        o->key = c->key;
    } else
        ops.unfenced[target] = 1;
    uint64_t cookie = o ? cookie_of(o) : 0;
    uint64_t unit = unit_of(c->kind), per = (am_is_remote(target) ? ops.net_chunk : ops.chunk) / unit;
    if (per == 0 || (!splits(c->kind) && payload_of(c) > ops.chunk)) {
        if (o)
            op_release(o);
        return SHOAL_ETOOBIG; /* the medium limit (ring size, SHOAL_SHM_MEDIUM_MAX) is below this message */
    }
    uint64_t chunks = splits(c->kind) && c->n > per ? (c->n + per - 1) / per : 1;
    if (o)
        o->pending = (uint32_t)chunks;
    for (uint64_t i = 0; i < chunks; i++) {
        struct rma_cmd part = *c;
        uint64_t first = i * per;
        if (chunks > 1) {
            part.n = c->n - first < per ? c->n - first : per;
            part.off = c->off + first * unit;
        }
        const char *data = c->data ? (const char *)c->data + first * unit : NULL;
        /* all parts but the last with SHOAL_MORE: they leave together */
        unsigned flags = (i ? d->flags & SHOAL_MORE : d->flags) | (i + 1 < chunks ? SHOAL_MORE : 0);
        if (send_one(target, &part, cookie, first * unit, data, payload_of(&part), flags) != SHOAL_OK) {
            if (o)
                op_release(o); /* nothing was sent */
            return SHOAL_EAGAIN;
        }
    }
    if (color_of(d->flags))
        ops.issued[color_of(d->flags)]++;
    return SHOAL_OK;
}

/* Whether the target replies: always when the initiator waits for it,
 * else for the failures the status option reports. */
static int wants_reply(unsigned opt, uint64_t cookie, int rc)
{
    return cookie || reported(opt, rc);
}

/* A request that no sender of this library builds: dropped and counted.
 * A command someone waits for is told, so nothing hangs on it. */
static void drop_request(shoal_token_t tok, uint64_t cookie)
{
    am_stats()->dropped++;
    int src = shoal_token_source(tok);
    uint64_t r[RP_ARGS] = {[RP_STATUS] = (uint64_t)(int64_t)SHOAL_EINVAL, [RP_COOKIE] = cookie,
                           [RP_CHUNKS] = 1 + (src >= 0 ? ops.unanswered[src] : 0)};
    if (src >= 0)
        ops.unanswered[src] = 0;
    if (cookie)
        am_reply_internal(tok, RMA_H_REP, NULL, 0, RP_ARGS, r);
}

/* The command a request carries, with the whole extent of a split one
 * (whole start = this part's offset - its place in the command); 0 when the
 * request is malformed. */
static int parse_request(const uint64_t *a, unsigned nargs, void *buf, size_t nbytes, int src, struct rma_cmd *c)
{
    if (nargs != RQ_ARGS || (a[RQ_KIND] & 0xff) > RMA_FENCE)
        return 0;
    *c = (struct rma_cmd){.kind = (enum rma_kind)(a[RQ_KIND] & 0xff), .flags = (unsigned)(a[RQ_KIND] >> 8),
                          .src = src, .id = (uint32_t)a[RQ_ID], .key = a[RQ_KEY], .off = a[RQ_OFF],
                          .n = a[RQ_N], .data = buf, .a = a[RQ_A], .b = a[RQ_B], .c = a[RQ_C]};
    uint64_t out = a[RQ_OUT], unit = unit_of(c->kind);
    c->whole_off = c->off;
    c->whole_n = c->n;
    if (c->kind == RMA_FENCE)
        return 1;
    if (splits(c->kind)) {
        c->whole_off = c->off - out;
        c->whole_n = c->c;
        if (c->whole_n > UINT64_MAX / unit || out > c->off || out % unit || c->n > ops.chunk / unit ||
            c->n > c->whole_n || out / unit > c->whole_n - c->n)
            return 0;
    } else if (out)
        return 0;
    return payload_of(c) == nbytes;
}

static void on_request(shoal_token_t tok, void *buf, size_t nbytes, const uint64_t *a, unsigned nargs)
{
    int src = shoal_token_source(tok);
    uint64_t cookie = nargs == RQ_ARGS ? a[RQ_COOKIE] : 0;
    struct rma_cmd c;
    if (!parse_request(a, nargs, buf, nbytes, src, &c))
        return drop_request(tok, cookie);
    struct shoal_cas_result cas = {0};
    int written = 0;
    struct rma_result res = {.data = ops.scratch, .cas = &cas, .written = &written};
    size_t out_bytes = c.kind == RMA_GET ? c.n : c.kind == RMA_FETCH_OP ? c.n * 8 : 0;
    int rc = SHOAL_OK, first = c.off == c.whole_off;
    if (splits(c.kind) && !first && ops.split_refused[src]) {
        rc = ops.split_refused[src]; /* the rest of a refused command: no effect, counted once */
        if (!cookie)
            return; /* fire and forget: its refusal was reported once already */
    } else if (c.kind != RMA_FENCE) {
        rc = rma_execute(rma.rank, &c, &res);
        am_stats()->rma_executed++;
    }
    if (splits(c.kind))
        ops.split_refused[src] = rma_is_refusal(rc) ? rc : 0;
    if (!wants_reply(c.flags & OPT_MASK, cookie, rc))
        return;
    /* A put's chunks that succeed are answered together, by the reply to
     * its last chunk or to a refused one: the chunks of one command arrive
     * back to back and run in order, and a streaming sender would
     * otherwise read one reply per 64 KB packet. */
    uint64_t chunks = 1;
    if (c.kind == RMA_PUT || c.kind == RMA_PUT_FLAG) {
        if (rc == SHOAL_OK && c.off + c.n != c.whole_off + c.whole_n) {
            ops.unanswered[src]++;
            return;
        }
        chunks += ops.unanswered[src];
        ops.unanswered[src] = 0;
    }
    uint64_t r[RP_SEG_ARGS] = {[RP_STATUS] = (uint64_t)(int64_t)rc, [RP_COOKIE] = cookie, [RP_OUT] = a[RQ_OUT],
                               [RP_OBSERVED] = cas.observed, [RP_OLD] = cas.old,
                               [RP_FLAG] = (uint64_t)(cas.swapped | written), [RP_CHUNKS] = chunks};
    unsigned nr = rc == SHOAL_OK && cookie && native_kind_of(c.kind) && rma_native_offer(src, c.id, &r[RP_ARGS])
                      ? RP_SEG_ARGS : RP_ARGS;
    int sent = am_reply_internal(tok, RMA_H_REP, ops.scratch, rc ? 0 : out_bytes, nr, r);
    if (sent)
        util_fatal("replying to rank %d's one-sided command failed: %s", src, shoal_strerror(sent));
}

static void on_reply(shoal_token_t tok, void *buf, size_t nbytes, const uint64_t *a, unsigned nargs)
{
    if (nargs != RP_ARGS && nargs != RP_SEG_ARGS) {
        am_stats()->dropped++;
        return;
    }
    int status = (int)(int64_t)a[RP_STATUS];
    uint64_t cookie = a[RP_COOKIE];
    if (cookie == 0) { /* a fire-and-forget command failed */
        am_stats()->rma_failures++;
        note_failure(&ops.deferred_err, status);
        return;
    }
    struct rma_op *o = &ops.ops[cookie & (RMA_MAX_OPS - 1)];
    uint64_t chunks = a[RP_CHUNKS];
    if (o->serial != cookie >> 10 || chunks == 0 || chunks > o->pending ||
        (nbytes && a[RP_OUT] + nbytes > o->out_bytes)) {
        am_stats()->dropped++; /* names no command in flight, or its results overflow */
        return;
    }
    if (nbytes && o->out)
        memcpy((char *)o->out + a[RP_OUT], buf, nbytes);
    if (o->cas)
        *o->cas = (struct shoal_cas_result){.observed = a[RP_OBSERVED], .old = a[RP_OLD],
                                            .swapped = (int32_t)a[RP_FLAG]};
    if (o->written)
        *o->written = (int)a[RP_FLAG];
    if (nargs == RP_SEG_ARGS && status == SHOAL_OK)
        rma_native_fill(shoal_token_source(tok), o->id, o->key, &a[RP_ARGS]);
    note_failure(&o->status, status);
    o->pending -= (uint32_t)chunks;
    if (o->pending == 0)
        op_complete(o);
}

/* ---- native commands -------------------------------------------------------- */

/* Whether the provider runs c exactly as the target's executor would, and
 * the permission and extent the owner's check needs. */
static int native_fits(const struct rma_cmd *c, int atomics, unsigned *perm, uint64_t *len)
{
    *len = c->kind == RMA_PUT || c->kind == RMA_GET ? c->n : 8;
    switch (c->kind) {
    case RMA_PUT: *perm = SHOAL_MEM_WRITE; return c->n != 0;
    case RMA_GET: *perm = SHOAL_MEM_READ; return c->n != 0;
    case RMA_FETCH_OP: /* one 64-bit integer add: two's complement, so signed or not */
        *perm = SHOAL_MEM_ATOMIC;
        return atomics && c->n == 1 && c->a == SHOAL_AOP_ADD && c->b != SHOAL_DOUBLE;
    case RMA_CAS: /* the provider compares and swaps one word */
        *perm = SHOAL_MEM_ATOMIC;
        return atomics && c->b == c->off;
    default: return 0;
    }
}

/* A piece's completion, inside the transport's poll. */
static void native_done(struct tp_rma_req *req)
{
    struct rma_native *n = (struct rma_native *)(void *)req;
    struct rma_op *o = n->o;
    n->ce->inflight--;
    if (n->amo && req->status == SHOAL_OK && o->cas)
        *o->cas = (struct shoal_cas_result){.observed = n->word, .old = n->word,
                                            .swapped = n->word == n->expected};
    else if (n->amo && req->status == SHOAL_OK && o->out)
        memcpy(o->out, &n->word, 8);
    note_failure(&o->status, req->status);
    ops.native_free[ops.native_nfree++] = n;
    ops.native_live--;
    if (--o->pending == 0)
        op_complete(o);
}

/* Waits that only read replies and completions: no request handler (a
 * revoke) runs between a command's check and its last piece. */
static struct rma_native *native_take(struct rma_op *o, struct rma_cached *ce, const struct rma_cmd *c)
{
    struct util_backoff b;
    util_backoff_init(&b);
    while (ops.native_nfree == 0)
        am_progress_wait(&b, 1);
    struct rma_native *n = ops.native_free[--ops.native_nfree];
    ops.native_live++;
    *n = (struct rma_native){.req = {.status = SHOAL_PENDING, .done = native_done}, .o = o, .ce = ce,
                             .amo = c->kind == RMA_FETCH_OP || c->kind == RMA_CAS, .expected = c->a};
    ce->inflight++;
    return n;
}

/* Posts one piece, waiting while the transport has no room. */
static void native_post(const struct tp_rma_ops *t, int target, uint32_t region, const struct rma_cmd *c,
                        struct rma_cached *ce, struct rma_op *o, uint64_t at, uint64_t len)
{
    struct rma_native *n = native_take(o, ce, c);
    uint64_t where = ce->offset + c->off + at;
    struct util_backoff b;
    util_backoff_init(&b);
    int rc;
    for (;;) {
        switch (c->kind) {
        case RMA_PUT: rc = t->put(target, region, where, (const char *)c->data + at, len, &n->req); break;
        case RMA_GET: rc = t->get(target, region, where, (char *)o->out + at, len, &n->req); break;
        case RMA_FETCH_OP:
            rc = t->amo(target, region, where, TP_AMO_FETCH_ADD, *(const uint64_t *)c->data, 0, &n->word, &n->req);
            break;
        default: rc = t->amo(target, region, where, TP_AMO_CSWAP, c->c, c->a, &n->word, &n->req);
        }
        if (rc != SHOAL_EAGAIN)
            break;
        am_progress_wait(&b, 1);
    }
    if (rc) { /* refused before it left (it cannot be, inside the checked extent): completes with that */
        n->req.status = rc;
        native_done(&n->req);
    }
}

/* Issues c on the provider's one-sided commands when the target's entry
 * is cached here, after the owner's check done here; RMA_NOT_HERE when the
 * target must execute it.  A put completes on the reply to a message sent
 * after its writes (the endpoint orders it after them: the data is at the
 * target when the reply comes); a get and an atomic on their completions. */
static int native_issue(int target, const struct rma_cmd *c, const struct rma_result *res, struct rma_done *d)
{
    int atomics;
    uint32_t region;
    unsigned perm;
    uint64_t len;
    const struct tp_rma_ops *t = (d->flags & SHOAL_IMMEDIATE) || am_in_handler() ? NULL
                                 : rma_native_ops(target, &atomics, &region);
    if (!t || !native_fits(c, atomics, &perm, &len))
        return RMA_NOT_HERE;
    /* A revoke that has arrived runs before the check: a command issued
     * after its segment's destroy returned then goes to the target, which
     * refuses it as before.  (op_alloc may run handlers too.) */
    am_poll(0);
    struct rma_op *o = op_alloc(d->flags, d);
    struct rma_cached *ce;
    int rc = rma_native_check(target, c->id, c->key, perm, c->off, len, &ce);
    if (rc) {
        op_release(o);
        if (rc == RMA_NOT_HERE)
            return rc;
        if (color_of(d->flags))
            ops.issued[color_of(d->flags)]++;
        finish(d, rc); /* the refusal the target would have replied */
        return SHOAL_OK;
    }
    o->opt = d->flags & OPT_MASK;
    o->out = res->data;
    o->cas = res->cas;
    uint64_t per = t->max_bytes(), pieces = c->kind == RMA_PUT || c->kind == RMA_GET ? (c->n + per - 1) / per : 1;
    o->pending = (uint32_t)pieces + (c->kind == RMA_PUT);
    if (color_of(d->flags))
        ops.issued[color_of(d->flags)]++;
    for (uint64_t i = 0; i < pieces; i++)
        native_post(t, target, region, c, ce, o, i * per, len - i * per < per ? len - i * per : per);
    if (c->kind == RMA_PUT) {
        struct rma_cmd done = {.kind = RMA_FENCE};
        send_one(target, &done, cookie_of(o), 0, NULL, 0, 0);
    }
    struct shoal_stats *st = am_stats();
    *(c->kind == RMA_PUT ? &st->rma_native_puts : c->kind == RMA_GET ? &st->rma_native_gets
                                                                      : &st->rma_native_atomics) += 1;
    return SHOAL_OK;
}

/* Waits (at most 2 s: a peer that closed first may never complete) until
 * no native piece is in flight, so no completion reaches freed state. */
static void native_drain(void)
{
    uint64_t until = util_now_ns() + 2000000000ull;
    while (ops.native_live && util_now_ns() < until)
        am_poll(1);
}

/* ---- issuing ---------------------------------------------------------------- */

/* The one place that decides where a command runs.  Signals always go to
 * the owner (its handler runs there); everything else runs here when the
 * target's memory is mapped here, else the target's progress engine runs it. */
static int rma_issue(int target, struct rma_cmd *c, struct rma_result *res, unsigned flags, shoal_handle_t *h)
{
    struct rma_done d = {.flags = flags, .h = h};
    shoal_handle_t local;
    int blocking = !h && !color_of(flags) && !(flags & OPT_MASK);
    c->src = rma.rank;
    c->flags = flags;
    if (h)
        h->status = SHOAL_PENDING;
    if (rma.direct && c->kind != RMA_SIGNAL) {
        int rc = rma_execute(target, c, res);
        rma_quiescent_tick();
        if (rc != RMA_NOT_HERE) {
            am_stats()->rma_direct++;
            if (color_of(flags))
                ops.issued[color_of(flags)]++;
            return finish(&d, rc);
        }
    }
    if (blocking) {
        int rc = am_blocking_allowed("a blocking one-sided command to memory the target must serve");
        if (rc)
            return rc;
        local.status = SHOAL_PENDING;
        d.h = &local;
    }
    int rc = native_issue(target, c, res, &d);
    if (rc == RMA_NOT_HERE) {
        rc = remote_issue(target, c, res, &d);
        am_stats()->rma_remote += rc == SHOAL_OK;
    }
    if (rc) {
        if (h)
            h->status = rc;
        return rc;
    }
    return blocking ? wait_handle(&local) : SHOAL_OK;
}

/* Checks shared by every command; the target checks the rest. */
static int check_common(shoal_rmem_t m, unsigned flags, shoal_handle_t *h, unsigned allowed)
{
    if (rma.rank < 0)
        return SHOAL_ENOTINIT;
    if (m.rank < 0 || m.rank >= rma.nranks)
        return SHOAL_ERANK;
    if (flags & ~(SHOAL_IMMEDIATE | SHOAL_MORE | OPT_MASK | 0xf00u | allowed))
        return SHOAL_EINVAL;
    unsigned opt = flags & OPT_MASK;
    if (opt == OPT_MASK || (opt && (h || color_of(flags))))
        return SHOAL_EINVAL; /* a status option is for commands nobody waits on */
    return SHOAL_OK;
}

static struct rma_cmd cmd_for(enum rma_kind k, shoal_rmem_t m, uint64_t off, uint64_t n, const void *data)
{
    return (struct rma_cmd){.kind = k, .id = m.id, .key = m.key, .off = off, .n = n, .whole_off = off,
                            .whole_n = n, .data = data};
}

/* Every command's entry: the common checks, a source for the bytes it
 * carries, the command's own argument checks (args_rc, made by the caller
 * from its arguments alone), then rma_issue. */
static int submit(shoal_rmem_t m, struct rma_cmd *c, struct rma_result *res, unsigned flags, shoal_handle_t *h,
                  unsigned allowed, int args_rc)
{
    int rc = check_common(m, flags, h, allowed);
    if (!rc && payload_of(c) && !c->data)
        rc = SHOAL_EINVAL;
    if (!rc && (flags & OPT_MASK) && ((res->data && c->n) || res->cas || res->written))
        rc = SHOAL_EINVAL; /* fire and forget: results would have nowhere to go */
    if (!rc)
        rc = args_rc;
    return rc ? rc : rma_issue(m.rank, c, res, flags, h);
}

static int max_struct_data(size_t n)
{
    return n > RMA_MAX_STRUCT_DATA ? SHOAL_ETOOBIG : SHOAL_OK;
}

static int aligned_offset(size_t off)
{
    return off & 7u ? SHOAL_EALIGN : SHOAL_OK;
}

/* The small put and get and the one-element fetch-op on mapped memory,
 * blocking or coloured, which
 * latency- and rate-bound code issues most: the same check, no command
 * record (a direct command completes in its call, so a colour's issued and
 * completed counts move together).  Anything else, a refusal included,
 * takes the general path (which counts it). */
#define FAST_MAX 64u
#define FAST_FLAGS 0xf00u /* the colour */
static inline __attribute__((always_inline)) char *fast_direct(shoal_rmem_t m, size_t off, size_t n, unsigned flags,
                                                               const shoal_handle_t *h, unsigned perm)
{
    char *base;
    uint64_t size;
    if ((flags & ~FAST_FLAGS) | (uintptr_t)h || n > FAST_MAX || !rma.direct || (unsigned)m.rank >= (unsigned)rma.nranks ||
        !rma.hdr[m.rank] || rma_check(m.rank, m.id, m.key, perm, off, n, &base, &size) != SHOAL_OK)
        return NULL;
    return base + off;
}

static inline __attribute__((always_inline)) void fast_done(unsigned flags)
{
    unsigned c = color_of(flags);
    if (c) {
        ops.issued[c]++;
        ops.completed[c]++;
    }
    rma_quiescent_tick();
    am_stats()->rma_direct++;
}

static inline __attribute__((always_inline)) void fast_copy(void *dst, const void *src, size_t n, unsigned flags)
{
    if (n == 8)
        memcpy(dst, src, 8); /* one load and one store, no call */
    else
        memcpy(dst, src, n);
    fast_done(flags);
}

int shoal_put(shoal_rmem_t dst, size_t off, const void *src, size_t n, unsigned flags, shoal_handle_t *h)
{
    AM_GUARD();
    char *p = fast_direct(dst, off, n, flags, h, SHOAL_MEM_WRITE);
    if (UTIL_LIKELY(p && src)) {
        fast_copy(p, src, n, flags);
        return SHOAL_OK;
    }
    struct rma_cmd c = cmd_for(RMA_PUT, dst, off, n, src);
    struct rma_result res = {0};
    return submit(dst, &c, &res, flags, h, 0, SHOAL_OK);
}

int shoal_put_flag(shoal_rmem_t dst, size_t off, const void *src, size_t n, size_t flag_off, uint64_t flag_value,
                   unsigned flags, shoal_handle_t *h)
{
    AM_GUARD();
    struct rma_cmd c = cmd_for(RMA_PUT_FLAG, dst, off, n, src);
    c.a = flag_off;
    c.b = flag_value;
    struct rma_result res = {0};
    return submit(dst, &c, &res, flags, h, 0, SHOAL_OK);
}

int shoal_get(void *dst, shoal_rmem_t src, size_t off, size_t n, unsigned flags, shoal_handle_t *h)
{
    AM_GUARD();
    char *p = fast_direct(src, off, n, flags, h, SHOAL_MEM_READ);
    if (UTIL_LIKELY(p && dst)) {
        fast_copy(dst, p, n, flags);
        return SHOAL_OK;
    }
    struct rma_cmd c = cmd_for(RMA_GET, src, off, n, NULL);
    struct rma_result res = {.data = dst};
    return submit(src, &c, &res, flags, h, 0, n && !dst ? SHOAL_EINVAL : SHOAL_OK);
}

int shoal_fetch_op(shoal_rmem_t m, size_t off, enum shoal_aop op, enum shoal_atype type, const void *operands,
                   void *old, size_t count, unsigned flags, shoal_handle_t *h)
{
    AM_GUARD();
    int rc = SHOAL_OK;
    if ((unsigned)op > SHOAL_AOP_SWAP || (unsigned)type > SHOAL_DOUBLE || (count && !operands) ||
        (type == SHOAL_DOUBLE && op != SHOAL_AOP_ADD && op != SHOAL_AOP_SWAP))
        rc = SHOAL_EINVAL;
    else if (count > SIZE_MAX / 8)
        rc = SHOAL_ETOOBIG;
    else
        rc = aligned_offset(off);
    char *p = !rc && count == 1 ? fast_direct(m, off, 8, flags, h, SHOAL_MEM_ATOMIC) : NULL;
    if (p && !((uintptr_t)p & 7u)) { /* one element: the fast path, as put's */
        uint64_t v, o;
        memcpy(&v, operands, 8);
        o = rma_atomic(op, type, (uint64_t *)p, v);
        if (old)
            memcpy(old, &o, 8);
        fast_done(flags);
        return SHOAL_OK;
    }
    struct rma_cmd c = cmd_for(RMA_FETCH_OP, m, off, count, operands);
    c.a = (uint64_t)op;
    c.b = (uint64_t)type;
    struct rma_result res = {.data = old};
    return submit(m, &c, &res, flags, h, 0, rc);
}

int shoal_fetch_add64(shoal_rmem_t m, size_t off, int64_t add, int64_t *old)
{
    AM_GUARD();
    char *p = fast_direct(m, off, 8, 0, NULL, SHOAL_MEM_ATOMIC);
    if (UTIL_LIKELY(p && !((uintptr_t)p & 7u))) {
        int64_t o = __atomic_fetch_add((int64_t *)p, add, __ATOMIC_SEQ_CST);
        if (old)
            *old = o;
        fast_done(0);
        return SHOAL_OK;
    }
    return shoal_fetch_op(m, off, SHOAL_AOP_ADD, SHOAL_INT64, &add, old, 1, 0, NULL);
}

int shoal_cas(shoal_rmem_t m, size_t cmp_off, uint64_t expected, size_t swap_off, uint64_t desired,
              struct shoal_cas_result *res, unsigned flags, shoal_handle_t *h)
{
    AM_GUARD();
    struct rma_cmd c = cmd_for(RMA_CAS, m, cmp_off, 0, NULL);
    c.a = expected;
    c.b = swap_off;
    c.c = desired;
    struct rma_result r = {.cas = res};
    return submit(m, &c, &r, flags, h, 0, aligned_offset(cmp_off | swap_off));
}

int shoal_zbuffer(shoal_rmem_t m, size_t ref_off, int64_t depth, size_t data_off, const void *data, size_t n,
                  int *written, unsigned flags, shoal_handle_t *h)
{
    AM_GUARD();
    struct rma_cmd c = cmd_for(RMA_ZBUF, m, ref_off, n, data);
    c.a = (uint64_t)depth;
    c.b = data_off;
    struct rma_result r = {.written = written};
    return submit(m, &c, &r, flags, h, 0, max_struct_data(n) ?: aligned_offset(ref_off));
}

int shoal_zbuffer_packed(shoal_rmem_t m, size_t off, const uint64_t *cells, size_t count, unsigned flags,
                         shoal_handle_t *h)
{
    AM_GUARD();
    struct rma_cmd c = cmd_for(RMA_ZBUF_PACKED, m, off, count, cells);
    struct rma_result res = {0};
    int rc = count && !cells ? SHOAL_EINVAL : count > SIZE_MAX / 8 ? SHOAL_ETOOBIG : aligned_offset(off);
    return submit(m, &c, &res, flags, h, 0, rc);
}

int shoal_fifo_enqueue(shoal_rmem_t m, size_t off, const void *data, size_t n, unsigned flags, shoal_handle_t *h)
{
    AM_GUARD();
    struct rma_cmd c = cmd_for(RMA_FIFO, m, off, n, data);
    struct rma_result res = {0};
    return submit(m, &c, &res, flags, h, SHOAL_FIFO_RETRY, max_struct_data(n));
}

int shoal_signal(shoal_rmem_t m, size_t off, const void *data, size_t n, size_t offset, unsigned flags,
                 shoal_handle_t *h)
{
    AM_GUARD();
    struct rma_cmd c = cmd_for(RMA_SIGNAL, m, off, n, data);
    c.b = offset;
    struct rma_result res = {0};
    return submit(m, &c, &res, flags, h, 0, max_struct_data(n));
}

int shoal_fence(void)
{
    AM_GUARD();
    if (rma.rank < 0)
        return SHOAL_ENOTINIT;
    int rc = am_blocking_allowed("shoal_fence");
    if (rc)
        return rc;
    /* A fence command runs after every earlier command to its target (one
     * ordered channel per pair), so its reply means they are all done. */
    for (int r = 0; r < rma.nranks; r++) {
        if (!ops.unfenced[r])
            continue;
        ops.unfenced[r] = 0;
        struct rma_cmd c = {.kind = RMA_FENCE};
        struct rma_result res = {0};
        struct rma_done d = {.flags = 0, .h = NULL}; /* counted in ops.live only */
        if ((rc = remote_issue(r, &c, &res, &d)) != SHOAL_OK)
            return rc;
    }
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("shoal_fence", -1, 0, NULL, describe_rma_wait);
    while (ops.live)
        am_progress_wait(&b, 0);
    hang_pop();
    atomic_thread_fence(memory_order_seq_cst);
    rc = ops.deferred_err;
    ops.deferred_err = 0;
    return rc;
}

void rma_ops_init(void)
{
    memset(&ops, 0, sizeof ops);
    for (uint32_t i = 0; i < RMA_MAX_OPS; i++)
        ops.free_ops[i] = RMA_MAX_OPS - 1 - i;
    ops.nfree = RMA_MAX_OPS;
    for (uint32_t i = 0; i < RMA_NATIVE_MAX; i++)
        ops.native_free[i] = &ops.native[i];
    ops.native_nfree = RMA_NATIVE_MAX;
    ops.chunk = am_max_medium() >= 64 ? am_max_medium() / 64 * 64 : am_max_medium() / 8 * 8;
    if (am_has_transport()) {
        size_t rq = am_net_medium_in_one(RQ_ARGS), rp = am_net_medium_in_one(RP_SEG_ARGS);
        ops.net_chunk = (rq < rp ? rq : rp) / 64 * 64;
    }
    ops.scratch = malloc(ops.chunk ? ops.chunk : 1);
    ops.unfenced = calloc((size_t)rma.nranks, 1);
    ops.split_refused = calloc((size_t)rma.nranks, sizeof *ops.split_refused);
    ops.unanswered = calloc((size_t)rma.nranks, sizeof *ops.unanswered);
    if (!ops.scratch || !ops.unfenced || !ops.split_refused || !ops.unanswered)
        util_fatal("out of memory for the one-sided command tables");
    am_register_internal(RMA_H_REQ, on_request);
    am_register_internal(RMA_H_REP, on_reply);
    am_set_poll_counter(&rma.hdr[rma.rank]->quiescent);
}

void rma_ops_fini(void)
{
    native_drain();
    am_set_poll_counter(NULL);
    free(ops.scratch);
    free(ops.unfenced);
    free(ops.split_refused);
    free(ops.unanswered);
    memset(&ops, 0, sizeof ops);
}
