/* The coherence-message observer: CRL's messages as the thesis's types,
 * the role and cause of each, and the trace sink (docs/COSMOS_TRACE.md). */
#include "dsm/observe.h"

#include <stdio.h>
#include <stdlib.h>

#include "shoal.h"
#include "util/util.h"

unsigned dsm_cosmos_type(enum dsm_msg_type t)
{
    static const unsigned char map[DSM_MSG_TYPE_COUNT] = {
        [DSM_MSG_RINVALIDATE] = COSMOS_INVAL_RO_REQ,
        [DSM_MSG_WINVALIDATE] = COSMOS_INVAL_RW_REQ,
        [DSM_MSG_SHARED_ACK_DATA] = COSMOS_GET_RO_RESP,
        [DSM_MSG_EXCLUSIVE_ACK_DATA] = COSMOS_GET_RW_RESP,
        [DSM_MSG_MODIFY_ACK] = COSMOS_UPGRADE_RESP,
        [DSM_MSG_MODIFY_ACK_DATA] = COSMOS_UPGRADE_RESP,
        [DSM_MSG_INVALIDATE_ACK] = COSMOS_INVAL_RO_RESP,
        [DSM_MSG_INVALIDATE_ACK_DATA] = COSMOS_INVAL_RW_RESP,
        [DSM_MSG_RELEASE] = COSMOS_DOWNGRADE_RESP,
        [DSM_MSG_SHARED_REQ] = COSMOS_GET_RO_REQ,
        [DSM_MSG_EXCLUSIVE_REQ] = COSMOS_GET_RW_REQ,
        [DSM_MSG_MODIFY_REQ] = COSMOS_UPGRADE_REQ,
        [DSM_MSG_FLUSH] = COSMOS_FLUSH,
        [DSM_MSG_FLUSH_DATA] = COSMOS_FLUSH,
    };
    return (unsigned)t < DSM_MSG_TYPE_COUNT ? map[t] : 0;
}

static unsigned cause_of_call(unsigned call)
{
    return call == DSM_CALL_START_READ ? COSMOS_CAUSE_START_READ
         : call == DSM_CALL_START_WRITE ? COSMOS_CAUSE_START_WRITE
                                        : COSMOS_CAUSE_OTHER;
}

/* The operation at this rank that waits for m: at a remote, the start a
 * grant answers; at a home, the start whose invalidations an ack answers
 * (other: they serve another rank's request).  Requests, and invalidations
 * at a remote, come from another rank's operation: none here. */
static unsigned cause_of(const struct dsm_region *r, const struct dsm_msg *m, int home)
{
    if (!r)
        return COSMOS_CAUSE_NONE;
    if (!home) {
        int grant = m->type >= DSM_MSG_SHARED_ACK_DATA && m->type <= DSM_MSG_MODIFY_ACK_DATA;
        return grant && r->waiting ? cause_of_call(r->calls & 0xff) : COSMOS_CAUSE_NONE;
    }
    if (r->state != DSM_HOME_IIP && r->state != DSM_HOME_IIP_SPECIAL)
        return COSMOS_CAUSE_NONE;
    switch (m->type) {
    case DSM_MSG_INVALIDATE_ACK:
    case DSM_MSG_INVALIDATE_ACK_DATA:
    case DSM_MSG_RELEASE:
    case DSM_MSG_FLUSH:
    case DSM_MSG_FLUSH_DATA:
        return r->cont == DSM_CONT_START_READ ? COSMOS_CAUSE_START_READ
             : r->cont == DSM_CONT_START_WRITE ? COSMOS_CAUSE_START_WRITE
                                               : COSMOS_CAUSE_OTHER;
    default:
        return COSMOS_CAUSE_NONE;
    }
}

static int is_home(const struct dsm_node *node, dsm_rid_t rid)
{
    return DSM_RID_HOME(rid) == node->rank;
}

/* The type of the message an action's message stands for (docs/COSMOS.md,
 * "What the predictor hears"): an exclusive grant for a read is the read's
 * grant (its upgrade's ack is assumed when the write comes, act.c), and
 * so is an exclusive push (xpush: the push's, D13), a self-invalidating
 * flush the invalidation's ack.  The acting side assumes
 * the message it made unnecessary; this is the other side's half, so that
 * neither side's stream changes when an action starts and what was learnt
 * before it still predicts (else Water --untuned relearnt each side's
 * pattern after each action began, for about 8 of its first 10 steps). */
static unsigned stand_in(const struct dsm_msg *m, unsigned type)
{
    if (m->type == DSM_MSG_EXCLUSIVE_ACK_DATA &&
        (m->aux & (DSM_ACT_BIT(DSM_ACT_RMW) | DSM_ACT_BIT(DSM_ACT_MIGRATORY) | DSM_ACT_BIT(DSM_ACT_XPUSH))))
        return COSMOS_GET_RO_RESP;
    if (m->aux & DSM_ACT_BIT(DSM_ACT_DSI) && (m->type == DSM_MSG_FLUSH || m->type == DSM_MSG_FLUSH_DATA))
        return m->type == DSM_MSG_FLUSH ? COSMOS_INVAL_RO_RESP : COSMOS_INVAL_RW_RESP;
    return type;
}

void dsm_observe_msg(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    struct dsm_observer *o = node->observer;
    unsigned type = dsm_cosmos_type(m->type);
    if (!type)
        return;
    if (m->aux)
        type = stand_in(m, type);
    int home = is_home(node, m->rid);
    struct cosmos_rec rec = {
        .block = m->rid,
        .sender = m->src,
        .role = home ? COSMOS_ROLE_HOME : COSMOS_ROLE_REMOTE,
        .type = (uint8_t)type,
        .proto = (uint8_t)m->type,
        .cause = (uint8_t)cause_of(r, m, home),
        .seq = o->seq++,
    };
    o->fn(o->ctx, &rec, r ? &r->cosmos : NULL);
}

void dsm_observe_leave_slow(struct dsm_node *node, struct dsm_region *r)
{
    struct dsm_observer *o = node->observer;
    if (o->leave)
        o->leave(o->ctx, r, is_home(node, r->rid));
}

void dsm_observe_mark_slow(struct dsm_node *node, unsigned kind)
{
    struct dsm_observer *o = node->observer;
    struct cosmos_rec rec = {
        .block = 0, .sender = node->rank, .role = COSMOS_ROLE_MARKER, .type = (uint8_t)kind,
        .seq = o->marks++,
    };
    o->fn(o->ctx, &rec, NULL);
}

/* ---- the glue's sink: trace file and online predictor ------------------------ */

/* With timing, 1 message in DSM_COSMOS_TIME_EVERY is timed: timing every one
 * added two clock reads to each message, more than the predictor costs.
 * The median is reported besides the mean.  A timed call of
 * DSM_COSMOS_HIST_NS or more that grew no table was interrupted (a
 * descheduled rank, an interrupt, the hypervisor): nothing else in a call
 * takes a microsecond (a few cold lines at most), but one such call among
 * the ~1000 timed adds its whole time slice to the mean.  The mean leaves
 * them out and is reported with them too. */
#define DSM_COSMOS_TIME_EVERY 16
#define DSM_COSMOS_HIST_NS 1024

struct dsm_cosmos {
    struct dsm_observer obs; /* first: node->observer points here */
    struct cosmos_trace_w *trace;
    struct cosmos_pred *pred[2]; /* by role: remote, home */
    struct cosmos_cfg pred_cfg;
    int timing;
    uint64_t ns, timed, clock_ns; /* time in the timed cosmos_observe calls, how many; a clock read pair's own cost */
    uint64_t interrupted, interrupted_ns; /* of those, the interrupted calls and their time (not in ns) */
    uint32_t ns_hist[DSM_COSMOS_HIST_NS]; /* the timed calls by ns, the last bucket the slower: their median */
};


/* One message into a side's predictor: into the region's own state while
 * the region is in the table (blk), else into the table, where that state
 * was parked when the region left. */
static void pred_observe(struct cosmos_pred *p, struct cosmos_blk *blk, uint64_t block, uint32_t sender,
                         unsigned type)
{
    if (blk)
        cosmos_observe_blk(p, blk, block, sender, type);
    else
        cosmos_observe(p, block, sender, type);
}

static void cosmos_sink(void *ctx, const struct cosmos_rec *rec, struct cosmos_blk *blk)
{
    struct dsm_cosmos *c = ctx;
    if (c->trace)
        cosmos_trace_put(c->trace, rec);
    if (!c->pred[0] || rec->role == COSMOS_ROLE_MARKER)
        return;
    if (!c->timing || rec->seq % DSM_COSMOS_TIME_EVERY) {
        pred_observe(c->pred[rec->role], blk, rec->block, rec->sender, rec->type);
        return;
    }
    struct cosmos_counts before, after;
    cosmos_counts(c->pred[rec->role], &before);
    uint64_t t0 = util_now_ns();
    pred_observe(c->pred[rec->role], blk, rec->block, rec->sender, rec->type);
    uint64_t d = util_now_ns() - t0;
    cosmos_counts(c->pred[rec->role], &after);
    if (d >= DSM_COSMOS_HIST_NS && after.grows == before.grows) {
        c->interrupted++;
        c->interrupted_ns += d;
    } else {
        c->ns += d;
    }
    c->ns_hist[d < DSM_COSMOS_HIST_NS ? d : DSM_COSMOS_HIST_NS - 1]++;
    c->timed++;
}

/* A region leaves: its predictor state moves to the table.  A table that
 * cannot grow loses the block's history, which then starts again. */
static void cosmos_leave(void *ctx, struct dsm_region *r, int home)
{
    struct dsm_cosmos *c = ctx;
    if (c->pred[0])
        (void)cosmos_blk_park(c->pred[home ? COSMOS_ROLE_HOME : COSMOS_ROLE_REMOTE], &r->cosmos, r->rid);
}

/* The median of n samples counted by ns in hist (the last bucket: slower). */
static unsigned hist_median(const uint32_t *hist, uint64_t n)
{
    uint64_t seen = 0;
    unsigned d = 0;
    while (d < DSM_COSMOS_HIST_NS - 1 && 2 * (seen + hist[d]) < n)
        seen += hist[d++];
    return d;
}

/* The median of many back-to-back clock read pairs: what the timing adds
 * to each message, subtracted from the cost reported.  Not the least: on
 * this kind of machine a pair takes 14 ns at least and 16 typically, and
 * taking off the least reported 2 ns of clock as predictor. */
static uint64_t clock_pair_ns(void)
{
    enum { PAIRS = 1001 };
    uint32_t hist[DSM_COSMOS_HIST_NS] = {0};
    for (int i = 0; i < PAIRS; i++) {
        uint64_t t0 = util_now_ns(), d = util_now_ns() - t0;
        hist[d < DSM_COSMOS_HIST_NS ? d : DSM_COSMOS_HIST_NS - 1]++;
    }
    return hist_median(hist, PAIRS);
}

static void cosmos_free(struct dsm_cosmos *c)
{
    for (int side = 0; side < 2; side++)
        cosmos_destroy(c->pred[side]);
    free(c);
}

int dsm_cosmos_start(struct dsm_node *node, const struct dsm_cosmos_cfg *cfg)
{
    struct dsm_cosmos *c = calloc(1, sizeof *c);
    if (!c)
        return SHOAL_ENOMEM;
    *c = (struct dsm_cosmos){.obs = {.fn = cosmos_sink, .leave = cosmos_leave, .ctx = c}, .pred_cfg = cfg->pred, .timing = cfg->timing};
    int rc = SHOAL_OK;
    for (int side = 0; cfg->predict && side < 2 && rc == SHOAL_OK; side++)
        rc = cosmos_create(&cfg->pred, &c->pred[side]);
    if (rc == SHOAL_OK && cfg->trace_dir)
        rc = cosmos_trace_open_write(cfg->trace_dir, cfg->job, (int)node->rank, (int)node->nranks, &c->trace);
    if (rc != SHOAL_OK) {
        cosmos_free(c);
        return rc;
    }
    if (c->timing && c->pred[0])
        c->clock_ns = clock_pair_ns();
    node->observer = &c->obs;
    return SHOAL_OK;
}

/* The median timed call, the clock pair's cost taken off. */
static double median_ns(const struct dsm_cosmos *c)
{
    unsigned d = hist_median(c->ns_hist, c->timed);
    return d > c->clock_ns ? (double)(d - c->clock_ns) : 0.0;
}

int dsm_cosmos_describe(const struct dsm_node *node, char *buf, size_t cap)
{
    const struct dsm_cosmos *c = (const struct dsm_cosmos *)node->observer;
    if (!c || c->obs.fn != cosmos_sink || !c->pred[0])
        return 0;
    struct cosmos_counts k[2];
    uint64_t msgs = 0;
    for (int side = 0; side < 2; side++) {
        cosmos_counts(c->pred[side], &k[side]);
        msgs += k[side].hits + k[side].misses + k[side].none;
    }
#define PCT(h, n) ((n) ? 100.0 * (double)(h) / (double)(n) : 0.0)
    uint64_t rn = k[0].hits + k[0].misses + k[0].none, hn = k[1].hits + k[1].misses + k[1].none;
    int n = snprintf(buf, cap,
                     "  cosmos (depth %u, filter %u%s): hits cache %llu of %llu (%.1f %%), home %llu of %llu "
                     "(%.1f %%), overall %.1f %%; no prediction %llu\n",
                     c->pred_cfg.depth, c->pred_cfg.filter, c->pred_cfg.sender_index ? ", sender index" : "",
                     (unsigned long long)k[0].hits, (unsigned long long)rn, PCT(k[0].hits, rn),
                     (unsigned long long)k[1].hits, (unsigned long long)hn, PCT(k[1].hits, hn),
                     PCT(k[0].hits + k[1].hits, msgs), (unsigned long long)(k[0].none + k[1].none));
#undef PCT
    uint64_t kept = c->timed - c->interrupted;
    double per = kept ? (double)c->ns / (double)kept - (double)c->clock_ns : 0.0;
    double all = c->timed ? (double)(c->ns + c->interrupted_ns) / (double)c->timed - (double)c->clock_ns : 0.0;
    size_t used = n < 0 ? 0 : (size_t)n;
    n = snprintf(buf + (used < cap ? used : cap), used < cap ? cap - used : 0,
                 "  cosmos: %.1f ns per message in the predictor (mean of %llu messages timed, less %llu interrupted "
                 "calls, with which %.1f ns; median %.0f ns; a clock read pair's %llu ns taken off), %zu bytes of "
                 "tables\n",
                 per > 0 ? per : 0.0, (unsigned long long)c->timed, (unsigned long long)c->interrupted,
                 all > 0 ? all : 0.0, median_ns(c), (unsigned long long)c->clock_ns,
                 cosmos_mem_bytes(c->pred[0]) + cosmos_mem_bytes(c->pred[1]));
    return (int)used + (n < 0 ? 0 : n);
}

int dsm_cosmos_stop(struct dsm_node *node)
{
    struct dsm_cosmos *c = (struct dsm_cosmos *)node->observer;
    if (!c || c->obs.fn != cosmos_sink)
        return SHOAL_OK;
    node->observer = NULL;
    int rc = c->trace ? cosmos_trace_close(c->trace) : SHOAL_OK;
    cosmos_free(c);
    return rc;
}

/* ---- the actions' queries ------------------------------------------------------- */

static struct cosmos_pred *side_pred(const struct dsm_node *node, int home)
{
    const struct dsm_cosmos *c = (const struct dsm_cosmos *)node->observer;
    return c && c->obs.fn == cosmos_sink ? c->pred[home ? COSMOS_ROLE_HOME : COSMOS_ROLE_REMOTE] : NULL;
}

/* rid's predictor state in its region at this side, NULL when the region
 * is absent (its state is in the table). */
static struct cosmos_blk *blk_of(const struct dsm_node *node, dsm_rid_t rid, int home)
{
    struct dsm_region *r = !home == !is_home(node, rid) ? dsm_lookup(node, rid) : NULL;
    return r ? &r->cosmos : NULL;
}

int dsm_cosmos_predict(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t *sender, unsigned *type)
{
    struct cosmos_pred *p = side_pred(node, home);
    if (!p)
        return 0;
    struct cosmos_blk *blk = blk_of(node, rid, home);
    return blk ? cosmos_predict_blk(p, blk, rid, sender, type) : cosmos_predict(p, rid, sender, type);
}

int dsm_cosmos_predict_after(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t after_sender,
                             unsigned after_type, uint32_t *sender, unsigned *type)
{
    struct cosmos_pred *p = side_pred(node, home);
    return p && cosmos_predict_after(p, blk_of(node, rid, home), rid, after_sender, after_type, sender, type);
}

void dsm_cosmos_assume(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t sender, unsigned type)
{
    struct cosmos_pred *p = side_pred(node, home);
    if (p)
        pred_observe(p, blk_of(node, rid, home), rid, sender, type);
}
