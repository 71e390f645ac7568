/* The region calls of shoal/crl.h (Table 3-1): argument checks, mapping
 * through the region table, the unmapped region cache (§4.5), waits that
 * keep the protocol running, and the counters of SHOAL_CRL_STATS. */
#include "am/hang.h"
#include "boot/boot.h"
#include "dsm/dsm.h"
#include "shoal/crl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- misuse ---------------------------------------------------------------- */

static void node_fail(struct dsm_node *node, const char *what)
{
    (void)node;
    shoal_abort(1, "crl: %s", what);
}

static _Noreturn void misuse(const struct dsm_region *r, const char *what)
{
    char buf[512];
    dsm_describe(&dsm.node, r, what, buf, sizeof buf);
    shoal_abort(1, "crl: %s", buf);
}

static _Noreturn void bad_pointer(void *rgn, const struct dsm_region *r, const char *call)
{
    char what[160];
    if (!rgn || r->magic != DSM_REGION_MAGIC) {
        snprintf(what, sizeof what, "%s(%p): not a pointer returned by rgn_map", call, rgn);
        misuse(NULL, what);
    }
    snprintf(what, sizeof what, "%s on a pointer whose region is no longer mapped here", call);
    misuse(r, what);
}

/* The region behind a pointer from rgn_map, checked (one load, one test). */
static inline struct dsm_region *region_arg(void *rgn, const char *call)
{
    if (UTIL_UNLIKELY(!rgn))
        bad_pointer(rgn, NULL, call);
    struct dsm_region *r = dsm_region_of(rgn);
    if (UTIL_UNLIKELY(r->magic != DSM_REGION_MAGIC || r->map_cnt == 0))
        bad_pointer(rgn, r, call);
    return r;
}

static _Noreturn void bad_rid(rid_t rid, const char *call, const char *why)
{
    shoal_abort(1, "crl: rank %u: %s(%u:%u): %s", dsm.node.rank, call, DSM_RID_HOME(rid), DSM_RID_SEQ(rid), why);
}

/* ---- timing (SHOAL_CRL_STATS=1 only) ----------------------------------------- */

static inline uint64_t time_begin(void)
{
    return UTIL_UNLIKELY(dsm.timing) ? util_now_ns() : 0;
}

static inline void time_end(uint64_t *acc, uint64_t t0)
{
    if (UTIL_UNLIKELY(dsm.timing))
        *acc += util_now_ns() - t0;
}

/* ---- unmapped region cache -------------------------------------------------- */

/* Drops a cached remote copy: the home learns of it (and gets dirty data) by the
 * flush; later invalidations find nothing and are ignored (§A.8). */
static void evict(struct dsm_region *r)
{
    dsm_flush(&dsm.node, r);
    dsm_table_remove(&dsm.node, r);
    dsm_region_free(r);
    dsm.node.stats.urc_evictions++;
}

static void urc_remove(struct dsm_region *r)
{
    struct dsm_region *last = dsm.urc[--dsm.urc_count];
    dsm.urc[r->urc_slot] = last;
    last->urc_slot = r->urc_slot;
    r->urc_slot = -1;
}

/* The engine frees a deleted region: an unmapped remote copy is always in
 * the cache, a home region never. */
static void forget(struct dsm_node *node, struct dsm_region *r)
{
    (void)node;
    if (r->urc_slot >= 0)
        urc_remove(r);
}

/* Inserts r, evicting round-robin when full (§4.5).  Occupied slots stay
 * contiguous from 0, so removal is a move of the last entry. */
static void urc_insert(struct dsm_region *r)
{
    if (dsm.urc_size == 0) {
        evict(r);
        return;
    }
    if (dsm.urc_count == dsm.urc_size) {
        if (dsm.urc_scan >= dsm.urc_count)
            dsm.urc_scan = 0;
        struct dsm_region *victim = dsm.urc[dsm.urc_scan++];
        urc_remove(victim);
        evict(victim);
    }
    r->urc_slot = (int32_t)dsm.urc_count;
    dsm.urc[dsm.urc_count++] = r;
}

/* ---- mapping -------------------------------------------------------------------- */

static const char *refusal_text(rid_t rid, enum dsm_refusal why)
{
    switch (why) {
    case DSM_REFUSE_DELETED:
        return "the region was already deleted";
    case DSM_REFUSE_IN_USE:
        return "the region is in use at its home (an operation or a request on it is in progress there)";
    default:
        return DSM_RID_HOME(rid) == dsm.node.rank ? "no region with this sequence number was created here"
                                                  : "its home has no such region";
    }
}

/* Polls until rid's home has answered a map miss or a rgn_delete. */
static void wait_for_home(const char *call, rid_t rid)
{
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push(call, (int)DSM_RID_HOME(rid), 0, NULL, NULL);
    while (!dsm.node.ask_reply)
        dsm_progress(&b);
    hang_pop();
}

/* A rank asks one home one question at a time (the node's ask slot): at
 * SHOAL_THREAD_MULTIPLE a thread waits out another's question first. */
static void wait_ask_free(const char *call)
{
    if (dsm.node.ask_rid == DSM_NO_RID)
        return;
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push(call, (int)DSM_RID_HOME(dsm.node.ask_rid), 0, NULL, NULL);
    while (dsm.node.ask_rid != DSM_NO_RID)
        dsm_progress(&b);
    hang_pop();
}

static struct dsm_region *map_miss(rid_t rid)
{
    uint32_t home = DSM_RID_HOME(rid);
    if (home == dsm.node.rank) /* a home region leaves the table only when deleted */
        bad_rid(rid, "rgn_map", refusal_text(rid, dsm_absence(&dsm.node, rid)));
    if (home >= dsm.node.nranks)
        bad_rid(rid, "rgn_map", "its home rank is outside the job");
    dsm_map_request(&dsm.node, rid);
    wait_for_home("rgn_map", rid);
    struct dsm_region *r = dsm_map_complete(&dsm.node);
    if (!r)
        bad_rid(rid, "rgn_map", refusal_text(rid, (enum dsm_refusal)dsm.node.ask_refusal));
    dsm.node.stats.calls_miss[DSM_CALL_MAP]++;
    return r;
}

void *rgn_map(rid_t rid)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    dsm_check_init("rgn_map");
    struct dsm_region *r = dsm_lookup(&dsm.node, rid);
    if (UTIL_UNLIKELY(!r)) {
        wait_ask_free("rgn_map");
        r = dsm_lookup(&dsm.node, rid); /* the other thread's question may have been this one */
    }
    if (UTIL_UNLIKELY(!r))
        r = map_miss(rid);
    else if (r->urc_slot >= 0)
        urc_remove(r);
    r->map_cnt++;
    dsm_note_call(&dsm.node, r, DSM_CALL_MAP);
    time_end(&dsm.ns_map, t0);
    return r->data;
}

static int op_in_progress(unsigned state)
{
    switch (state) {
    case DSM_HOME_EXCLUSIVE_RIP:
    case DSM_HOME_EXCLUSIVE_WIP:
    case DSM_HOME_SHARED_RIP:
    case DSM_REMOTE_SHARED_RIP:
    case DSM_REMOTE_MODIFIED_RIP:
    case DSM_REMOTE_MODIFIED_WIP:
        return 1;
    default:
        return 0;
    }
}

void rgn_unmap(void *rgn)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    struct dsm_region *r = region_arg(rgn, "rgn_unmap");
    dsm_note_call(&dsm.node, r, DSM_CALL_UNMAP);
    if (--r->map_cnt == 0) {
        if (op_in_progress(r->state))
            misuse(r, "the last rgn_unmap of a region with an operation in progress on this rank");
        if (r->state == DSM_DELETED) /* rgn_delete took it out of the table already (D10) */
            dsm_deleted_mapping_free(&dsm.node, r);
        else if (!dsm_is_home_state(r->state)) /* home copies stay in the table until deleted (§4.4) */
            urc_insert(r);
        dsm_flush_outbox();
    }
    time_end(&dsm.ns_map, t0);
}

rid_t rgn_rid(void *rgn)
{
    AM_GUARD();
    return region_arg(rgn, "rgn_rid")->rid;
}

unsigned rgn_size(void *rgn)
{
    AM_GUARD();
    return region_arg(rgn, "rgn_size")->size;
}

/* ---- creation -------------------------------------------------------------------- */

rid_t rgn_create(unsigned size)
{
    AM_GUARD();
    dsm_check_init("rgn_create");
    return dsm_create(&dsm.node, size)->rid;
}

/* docs/CRL.md D10: freed at the home and at every rank holding a copy;
 * from elsewhere, one round trip to the home so that every rgn_map that
 * follows this call, on any rank, finds the region gone. */
void rgn_delete(rid_t rid)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    dsm_check_init("rgn_delete");
    if (DSM_RID_HOME(rid) >= dsm.node.nranks)
        bad_rid(rid, "rgn_delete", "its home rank is outside the job");
    wait_ask_free("rgn_delete");
    dsm_delete(&dsm.node, rid);
    wait_for_home("rgn_delete", rid);
    enum dsm_refusal why = dsm_delete_complete(&dsm.node);
    if (why != DSM_REFUSE_NONE)
        bad_rid(rid, "rgn_delete", refusal_text(rid, why));
    dsm_flush_outbox();
    time_end(&dsm.ns_map, t0);
}

/* ---- operations ------------------------------------------------------------------- */

/* Handlers run only when this rank polls, and hits send nothing: a home
 * looping over its own regions would never serve the others' requests.
 * So every DSM_POLL_EVERY-th start polls (a fraction of a ns per call). */
#define DSM_POLL_EVERY 64u
static inline void poll_now_and_then(void)
{
    if (UTIL_UNLIKELY(++dsm.starts_since_poll >= DSM_POLL_EVERY)) {
        dsm.starts_since_poll = 0;
        dsm_flush_outbox();
        am_poll(0);
    }
}

typedef enum dsm_start (*start_fn)(struct dsm_node *, struct dsm_region *);

/* A start that could not complete at once: poll (serving everyone else's
 * requests) until the grant or continuation arrives, or until a
 * conflicting transaction at our home ends and the start can retry. */
static int crl_describe_wait(const struct hang_wait *w, char *buf, size_t n)
{
    return dsm_describe_wait(w->obj, buf, n);
}

static void wait_started(const char *call, struct dsm_region *r, enum dsm_start s, start_fn start)
{
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push(call, -1, 0, r, crl_describe_wait);
    while (s == DSM_RETRY) {
        dsm_progress(&b);
        s = start(&dsm.node, r);
    }
    if (s == DSM_PENDING)
        while (r->waiting)
            dsm_progress(&b);
    hang_pop();
}

void rgn_start_read(void *rgn)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    struct dsm_region *r = region_arg(rgn, "rgn_start_read");
    poll_now_and_then();
    enum dsm_start s = dsm_start_read(&dsm.node, r);
    if (UTIL_UNLIKELY(s != DSM_STARTED))
        wait_started("rgn_start_read", r, s, dsm_start_read);
    time_end(&dsm.ns_ops, t0);
}

void rgn_start_write(void *rgn)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    struct dsm_region *r = region_arg(rgn, "rgn_start_write");
    poll_now_and_then();
    enum dsm_start s = dsm_start_write(&dsm.node, r);
    if (UTIL_UNLIKELY(s != DSM_STARTED))
        wait_started("rgn_start_write", r, s, dsm_start_write);
    time_end(&dsm.ns_ops, t0);
}

void rgn_end_read(void *rgn)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    dsm_end_read(&dsm.node, region_arg(rgn, "rgn_end_read"));
    dsm_flush_outbox();
    time_end(&dsm.ns_ops, t0);
}

void rgn_end_write(void *rgn)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    dsm_end_write(&dsm.node, region_arg(rgn, "rgn_end_write"));
    dsm_flush_outbox();
    time_end(&dsm.ns_ops, t0);
}

void rgn_flush(void *rgn)
{
    AM_GUARD();
    uint64_t t0 = time_begin();
    dsm_flush(&dsm.node, region_arg(rgn, "rgn_flush"));
    dsm_flush_outbox();
    time_end(&dsm.ns_ops, t0);
}

/* ---- statistics (thesis Tables B-10..B-14) --------------------------------------- */

static void print_stats(void)
{
    const struct dsm_stats *st = &dsm.node.stats;
    static const enum dsm_call rows[] = {DSM_CALL_MAP,      DSM_CALL_UNMAP,       DSM_CALL_START_READ,
                                         DSM_CALL_END_READ, DSM_CALL_START_WRITE, DSM_CALL_END_WRITE,
                                         DSM_CALL_FLUSH,    DSM_CALL_DELETE};
    char buf[6144];
    size_t n = 0;
#define OUT(...) (n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, __VA_ARGS__))
    OUT("crl stats, rank %u of %u\n  %-16s %12s %12s %12s %12s\n", dsm.node.rank, dsm.node.nranks, "call event",
        "count", "(remote)", "(miss)", "(iip)");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        OUT("  %-16s %12llu %12llu %12llu %12llu\n", dsm_call_name(rows[i]), (unsigned long long)st->calls[rows[i]],
            (unsigned long long)st->calls_remote[rows[i]], (unsigned long long)st->calls_miss[rows[i]],
            (unsigned long long)st->calls_iip[rows[i]]);
    OUT("  %-21s %12s %12s\n", "message", "sent", "received");
    uint64_t sent = 0, received = 0;
    for (unsigned t = 0; t < DSM_MSG_TYPE_COUNT; t++) {
        OUT("  %-21s %12llu %12llu\n", dsm_msg_name(t), (unsigned long long)st->sent[t],
            (unsigned long long)st->received[t]);
        if (t < DSM_MSG_RGN_INFO_REQ) {
            sent += st->sent[t];
            received += st->received[t];
        }
    }
    OUT("  %-21s %12llu %12llu\n", "total protocol msgs", (unsigned long long)sent, (unsigned long long)received);
    uint64_t ops = st->calls[DSM_CALL_START_READ] + st->calls[DSM_CALL_START_WRITE];
    uint64_t op_miss = st->calls_miss[DSM_CALL_START_READ] + st->calls_miss[DSM_CALL_START_WRITE];
    uint64_t maps = st->calls[DSM_CALL_MAP], map_miss = st->calls_miss[DSM_CALL_MAP];
    OUT("  map count %llu, map miss rate %.1f %%, operation count %llu, operation miss rate %.1f %%, "
        "msg count %llu (Table 6-6)\n",
        (unsigned long long)maps, maps ? 100.0 * (double)map_miss / (double)maps : 0.0, (unsigned long long)ops,
        ops ? 100.0 * (double)op_miss / (double)ops : 0.0,
        (unsigned long long)(sent + received + st->sent[DSM_MSG_RGN_INFO_REQ] + st->received[DSM_MSG_RGN_INFO_REQ] +
                             st->sent[DSM_MSG_RGN_INFO_ACK] + st->received[DSM_MSG_RGN_INFO_ACK]));
    OUT("  queued %llu, stale dropped %llu, early invalidations %llu, URC evictions %llu, "
        "dropped for deleted regions %llu\n",
        (unsigned long long)st->queued, (unsigned long long)st->stale, (unsigned long long)st->early_inv,
        (unsigned long long)st->urc_evictions, (unsigned long long)st->deleted_dropped);
    double total = (double)(util_now_ns() - dsm.t_start) * 1e-6;
    double t_ops = (double)dsm.ns_ops * 1e-6, t_map = (double)dsm.ns_map * 1e-6;
    OUT("  time (ms): operations %.3f, mapping %.3f, user %.3f, total %.3f\n", t_ops, t_map, total - t_ops - t_map,
        total);
    for (unsigned k = 0; k < DSM_ACT_KINDS; k++)
        if (dsm.node.act & DSM_ACT_BIT(k))
            OUT("  cosmos action %s: taken %llu, confirmed %llu, wasted %llu, throttled %llu\n",
                util_cosmos_act_names[k], (unsigned long long)st->act_taken[k],
                (unsigned long long)st->act_confirmed[k], (unsigned long long)st->act_wasted[k],
                (unsigned long long)st->act_throttled[k]);
    n += (size_t)dsm_cosmos_describe(&dsm.node, buf + (n < sizeof buf ? n : sizeof buf),
                                     n < sizeof buf ? sizeof buf - n : 0);
#undef OUT
    fputs(buf, stdout);
    fflush(stdout);
}

/* ---- init and exit ------------------------------------------------------------------ */

/* SHOAL_COSMOS_TRACE=DIR: this rank's coherence messages to its trace
 * file; SHOAL_COSMOS=1: the predictor on them, in-line. */
static void cosmos_begin(void)
{
    const char *dir = util_config_str(CFG_COSMOS_TRACE);
    struct dsm_cosmos_cfg cfg = {
        .trace_dir = dir[0] ? dir : NULL,
        .job = boot_job_id(),
        .predict = util_config_int(CFG_COSMOS) == 1,
        .pred = {.depth = (unsigned)util_config_int(CFG_COSMOS_DEPTH),
                 .filter = (unsigned)util_config_int(CFG_COSMOS_FILTER),
                 .sender_index = util_config_int(CFG_COSMOS_SENDER_INDEX) == 1},
        .timing = dsm.timing,
    };
    int act = util_cosmos_act_mask(util_config_str(CFG_COSMOS_ACT)); /* valid: shoal_init checked it */
    cfg.predict |= act > 0; /* the actions follow the in-line predictor */
    if (!cfg.trace_dir && !cfg.predict)
        return;
    int rc = dsm_cosmos_start(&dsm.node, &cfg);
    if (rc != SHOAL_OK && cfg.trace_dir)
        shoal_abort(1, "crl: rank %u: SHOAL_COSMOS_TRACE=%s: cannot write this rank's trace there (%s)",
                    dsm.node.rank, dir, shoal_strerror(rc));
    if (rc != SHOAL_OK)
        shoal_abort(1, "crl: rank %u: SHOAL_COSMOS=1: cannot make the predictor (%s)", dsm.node.rank,
                    shoal_strerror(rc));
    if (act > 0) {
        dsm.node.act = (unsigned)act;
        dsm.node.predict = dsm_cosmos_predict;
        dsm.node.assume = dsm_cosmos_assume;
        dsm.node.predict_after = dsm_cosmos_predict_after;
    }
}

void crl_init(void)
{
    AM_GUARD();
    if (dsm.initialized)
        shoal_abort(1, "crl: crl_init called twice");
    int started = 0;
    if (shoal_rank() < 0) {
        int rc = shoal_init(NULL, NULL);
        if (rc != SHOAL_OK) {
            fprintf(stderr, "crl: shoal_init failed: %s\n", shoal_strerror(rc));
            exit(1);
        }
        started = 1;
    }
    memset(&dsm, 0, sizeof dsm);
    dsm.started_shoal = started;
    if (dsm_node_init(&dsm.node, (uint32_t)shoal_rank(), (uint32_t)shoal_size(), dsm_wire_send_msg, node_fail,
                      forget, NULL, DSM_TABLE_BITS))
        shoal_abort(1, "crl: out of memory for the region table");
    dsm.urc_size = (uint32_t)util_config_int(CFG_CRL_URC_SIZE);
    dsm.urc = calloc(dsm.urc_size ? dsm.urc_size : 1, sizeof *dsm.urc);
    if (!dsm.urc)
        shoal_abort(1, "crl: out of memory for the unmapped region cache");
    dsm.timing = util_config_int(CFG_CRL_STATS) == 1;
    cosmos_begin();
    dsm_wire_init();
    dsm.initialized = 1;
    /* no rank sends a dsm message before every rank has its handlers */
    int rc = shoal_barrier();
    if (rc != SHOAL_OK)
        shoal_abort(1, "crl: crl_init's barrier failed: %s", shoal_strerror(rc));
    dsm.t_start = util_now_ns();
}

void crl_exit(void)
{
    AM_GUARD();
    dsm_check_init("crl_exit");
    dsm_barrier(); /* no rank is in an operation any more */
    if (dsm.timing)
        for (uint32_t r = 0; r < dsm.node.nranks; r++) { /* in rank order */
            if (r == dsm.node.rank)
                print_stats();
            dsm_barrier();
        }
    dsm.closed = 1;
    dsm_wire_fini();
    dsm_cosmos_stop(&dsm.node); /* a failed trace write was logged naming the file */
    dsm_node_fini(&dsm.node);
    free(dsm.urc);
    dsm.urc = NULL;
    dsm.initialized = 0;
    if (dsm.started_shoal)
        shoal_finalize();
}

unsigned crl_self_addr(void)
{
    return dsm.node.rank;
}

unsigned crl_num_nodes(void)
{
    return dsm.node.nranks;
}
