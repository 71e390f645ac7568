/* The CRL coherence protocol (thesis Appendix A) as a transport-independent
 * engine.  Each handler below is one row group of Tables A-6..A-21; the
 * version checks are §A.11's; decisions where the tables are silent are in
 * docs/CRL.md ("Protocol decisions") and referred to here as D1..D9. */
#include "dsm/proto.h"
#include "dsm/act.h"
#include "dsm/observe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DSM_NOBODY UINT32_MAX

/* ---- names and diagnostics ---------------------------------------------- */

static const char *const state_names[DSM_STATE_COUNT] = {
    "HomeExclusive", "HomeExclusiveRip", "HomeExclusiveWip", "HomeShared",     "HomeSharedRip",
    "HomeIip",       "HomeIipSpecial",   "HomeInvalid",      "RemoteInvalid",  "RemoteInvalidReq",
    "RemoteShared",  "RemoteSharedReq",  "RemoteSharedRip",  "RemoteModified", "RemoteModifiedRip",
    "RemoteModifiedWip", "Deleted"};

static const char *const msg_names[DSM_MSG_TYPE_COUNT] = {
    "MsgRInvalidate",   "MsgWInvalidate",       "MsgSharedAckData", "MsgExclusiveAckData",
    "MsgModifyAck",     "MsgModifyAckData",     "MsgInvalidateAck", "MsgInvalidateAckData",
    "MsgRelease",       "MsgSharedReq",         "MsgExclusiveReq",  "MsgModifyReq",
    "MsgFlush",         "MsgFlushData",         "MsgRgnInfoReq",    "MsgRgnInfoAck",
    "MsgRgnInfoNack",   "MsgDeleteReq",         "MsgDeleteAck",     "MsgDeleteNack",
    "MsgDelete"};

static const char *const call_names[DSM_CALL_COUNT] = {
    "-", "rgn_map", "rgn_unmap", "rgn_start_read", "rgn_end_read", "rgn_start_write", "rgn_end_write",
    "rgn_flush", "rgn_delete"};

const char *dsm_state_name(unsigned s)
{
    return s < DSM_STATE_COUNT ? state_names[s] : "?";
}

const char *dsm_msg_name(unsigned t)
{
    return t < DSM_MSG_TYPE_COUNT ? msg_names[t] : "?";
}

const char *dsm_call_name(unsigned c)
{
    return c < DSM_CALL_COUNT ? call_names[c] : "?";
}

/* A home in HomeIip: the directory holds the copies not yet acknowledged
 * (D1), besides the requester the continuation serves. */
static int describe_iip(const struct dsm_region *r, char *buf, size_t cap)
{
    int first = -1;
    int m = snprintf(buf, cap, "expects %u MsgInvalidateAck(Data)%s from the ranks holding copies:", r->num_acks,
                     r->state == DSM_HOME_IIP_SPECIAL ? " or MsgRelease" : "");
    size_t k = m > 0 ? (size_t)m : 0;
    for (uint32_t i = 0; i < r->ndir && k < cap; i++) {
        if (r->dir[i].node == r->cont_node)
            continue;
        first = first < 0 ? (int)r->dir[i].node : first;
        m = snprintf(buf + k, cap - k, " %u", r->dir[i].node);
        k += m > 0 ? (size_t)m : 0;
    }
    return first;
}

/* The grant a remote copy in a *Req state waits for, by the start asking. */
static const char *expected_grant(const struct dsm_region *r)
{
    if (r->state == DSM_REMOTE_SHARED_REQ)
        return "MsgModifyAck(Data)";
    return (r->calls & 0xff) == DSM_CALL_START_READ ? msg_names[DSM_MSG_SHARED_ACK_DATA]
                                                     : msg_names[DSM_MSG_EXCLUSIVE_ACK_DATA];
}

int dsm_describe_wait(const struct dsm_region *r, char *buf, size_t cap)
{
    uint32_t home = DSM_RID_HOME(r->rid);
    int m = snprintf(buf, cap, "region %u:%u in state %s, ", home, DSM_RID_SEQ(r->rid), dsm_state_name(r->state));
    size_t k = m > 0 && (size_t)m < cap ? (size_t)m : cap;
    switch (r->state) {
    case DSM_HOME_IIP:
    case DSM_HOME_IIP_SPECIAL:
        return describe_iip(r, buf + k, cap - k);
    case DSM_REMOTE_INVALID_REQ:
    case DSM_REMOTE_SHARED_REQ:
        snprintf(buf + k, cap - k, "expects %s from its home, rank %u", expected_grant(r), home);
        return (int)home;
    default:
        snprintf(buf + k, cap - k, "waits for its home, rank %u, to answer", home);
        return (int)home;
    }
}

void dsm_describe(const struct dsm_node *node, const struct dsm_region *r, const char *what, char *buf,
                  size_t cap)
{
    if (!r) {
        snprintf(buf, cap, "rank %u: %s", node->rank, what);
        return;
    }
    unsigned c = r->calls;
    snprintf(buf, cap, "rank %u: region %u:%u (%s; calls on it, oldest first: %s, %s, %s, %s): %s", node->rank,
             DSM_RID_HOME(r->rid), DSM_RID_SEQ(r->rid), dsm_state_name(r->state), dsm_call_name(c >> 24),
             dsm_call_name((c >> 16) & 0xff), dsm_call_name((c >> 8) & 0xff), dsm_call_name(c & 0xff), what);
}

static void dsm_fail(struct dsm_node *node, const struct dsm_region *r, const char *what)
{
    char buf[512];
    dsm_describe(node, r, what, buf, sizeof buf);
    node->fail(node, buf);
}

static void protocol_error(struct dsm_node *node, const struct dsm_region *r, const struct dsm_msg *m)
{
    char what[160];
    snprintf(what, sizeof what, "protocol error: unexpected %s from rank %u (version %u, copy version %u)",
             dsm_msg_name(m->type), m->src, m->version, r->version);
    dsm_fail(node, r, what);
}

/* ---- region table --------------------------------------------------------- */

static inline uint32_t bucket_of(const struct dsm_node *node, dsm_rid_t rid)
{
    return (uint32_t)((rid * 0x9E3779B97F4A7C15ull) >> (64 - node->table_bits));
}

struct dsm_region *dsm_lookup(const struct dsm_node *node, dsm_rid_t rid)
{
    struct dsm_region *r = node->buckets[bucket_of(node, rid)];
    while (r && r->rid != rid)
        r = r->hash_next;
    return r;
}

void dsm_table_insert(struct dsm_node *node, struct dsm_region *r)
{
    struct dsm_region **b = &node->buckets[bucket_of(node, r->rid)];
    r->hash_next = *b;
    *b = r;
}

void dsm_table_remove(struct dsm_node *node, struct dsm_region *r)
{
    dsm_observe_leave(node, r);
    struct dsm_region **p = &node->buckets[bucket_of(node, r->rid)];
    while (*p != r)
        p = &(*p)->hash_next;
    *p = r->hash_next;
}

int dsm_node_init(struct dsm_node *node, uint32_t rank, uint32_t nranks, dsm_send_fn send, dsm_fail_fn fail,
                  dsm_forget_fn forget, void *ctx, uint32_t table_bits)
{
    memset(node, 0, sizeof *node);
    node->rank = rank;
    node->nranks = nranks;
    node->send = send;
    node->fail = fail;
    node->forget = forget;
    node->ctx = ctx;
    node->ask_rid = DSM_NO_RID;
    node->table_bits = table_bits;
    node->buckets = calloc((size_t)1 << table_bits, sizeof *node->buckets);
    return node->buckets ? 0 : -1;
}

void dsm_node_fini(struct dsm_node *node)
{
    for (uint32_t b = 0; node->buckets && b < (1u << node->table_bits); b++) {
        struct dsm_region *r = node->buckets[b];
        while (r) {
            struct dsm_region *next = r->hash_next;
            dsm_region_free(r);
            r = next;
        }
    }
    free(node->buckets);
    node->buckets = NULL;
    while (node->deleted_mappings)
        dsm_deleted_mapping_free(node, node->deleted_mappings);
}

/* A home region's set of ranks that may hold a copy, after its data. */
static uint64_t *holders_of(struct dsm_region *r)
{
    return (uint64_t *)(r->data + (((size_t)r->size + 7) & ~(size_t)7));
}

/* `tail`: bytes after the data (the home's holder set). */
static struct dsm_region *region_alloc(struct dsm_node *node, dsm_rid_t rid, uint32_t size, size_t tail)
{
    /* on a line: the header's first line holds the predictor's state and
     * the protocol's (proto.h) */
    size_t bytes = sizeof(struct dsm_region) + (tail ? ((size_t)size + 7) & ~(size_t)7 : size) + tail;
    bytes = (bytes + DSM_REGION_ALIGN - 1) & ~(size_t)(DSM_REGION_ALIGN - 1);
    struct dsm_region *r = aligned_alloc(DSM_REGION_ALIGN, bytes);
    if (!r) {
        char what[96];
        snprintf(what, sizeof what, "out of memory for a region of %u bytes", size);
        dsm_fail(node, NULL, what);
        return NULL;
    }
    memset(r, 0, bytes);
    r->magic = DSM_REGION_MAGIC;
    r->rid = rid;
    r->size = size;
    r->urc_slot = -1;
    return r;
}

struct dsm_region *dsm_create(struct dsm_node *node, uint32_t size)
{
    /* next_seq must stay above every sequence number handed out: that is
     * how the home tells a deleted rid from one never created (D10) */
    if (node->next_seq == UINT32_MAX) {
        dsm_fail(node, NULL, "rgn_create: out of region sequence numbers (they are never reused)");
        return NULL;
    }
    struct dsm_region *r = region_alloc(node, DSM_RID(node->rank, node->next_seq), size,
                                        (node->nranks + 63) / 64 * sizeof(uint64_t));
    node->next_seq++;
    r->state = DSM_HOME_EXCLUSIVE;
    r->version = 1; /* 0 is never granted: a fresh copy's version is below every grant */
    dsm_table_insert(node, r);
    return r;
}

struct dsm_region *dsm_remote_copy(struct dsm_node *node, dsm_rid_t rid, uint32_t size, uint32_t version)
{
    struct dsm_region *r = region_alloc(node, rid, size, 0);
    r->state = DSM_REMOTE_INVALID;
    r->version = version;
    dsm_table_insert(node, r);
    return r;
}

void dsm_region_free(struct dsm_region *r)
{
    while (r->queue_head) {
        struct dsm_queued *q = r->queue_head;
        r->queue_head = q->next;
        free(q);
    }
    free(r->dir);
    r->magic = 0;
    free(r);
}

void dsm_deleted_mapping_free(struct dsm_node *node, struct dsm_region *r)
{
    struct dsm_region **p = &node->deleted_mappings;
    while (*p != r)
        p = &(*p)->hash_next;
    *p = r->hash_next;
    dsm_region_free(r);
}

/* ---- sending ---------------------------------------------------------------- */

static void send_msg(struct dsm_node *node, const struct dsm_msg *m)
{
    node->stats.sent[m->type]++;
    node->send(node, m);
}

/* aux: the actions' tags (dsm/act.h), 0 without them. */
static void emit_aux(struct dsm_node *node, const struct dsm_region *r, enum dsm_msg_type type, uint32_t dst,
                     uint32_t version, int with_data, int more, uint32_t aux)
{
    struct dsm_msg m = {.type = type, .src = node->rank, .dst = dst, .rid = r->rid, .version = version,
                        .aux = aux, .data = with_data ? r->data : NULL, .len = with_data ? r->size : 0,
                        .more = more};
    send_msg(node, &m);
}

static void emit(struct dsm_node *node, const struct dsm_region *r, enum dsm_msg_type type, uint32_t dst,
                 uint32_t version, int with_data, int more)
{
    emit_aux(node, r, type, dst, version, with_data, more, 0);
}

static void take_data(struct dsm_region *r, const struct dsm_msg *m)
{
    if (m->len)
        memcpy(r->data, m->data, m->len < r->size ? m->len : r->size);
}

/* ---- home side: directory and blocked queue ------------------------------ */

static struct dsm_ptr *dir_find(struct dsm_region *r, uint32_t node)
{
    for (uint32_t i = 0; i < r->ndir; i++)
        if (r->dir[i].node == node)
            return &r->dir[i];
    return NULL;
}

/* Inserts node's entry, or updates it (an upgrade keeps its entry: D2). */
static void dir_set(struct dsm_node *node, struct dsm_region *r, uint32_t who, uint32_t version)
{
    struct dsm_ptr *e = dir_find(r, who);
    if (!e) {
        if (r->ndir == r->dir_cap) {
            uint32_t cap = r->dir_cap ? 2 * r->dir_cap : 4;
            struct dsm_ptr *d = realloc(r->dir, cap * sizeof *d);
            if (!d) {
                dsm_fail(node, r, "out of memory for a directory entry");
                return;
            }
            r->dir = d;
            r->dir_cap = cap;
        }
        e = &r->dir[r->ndir++];
        e->node = who;
    } else if (e->pushed) /* an upgrade of a pushed copy: it was used */
        dsm_act_push_judged(node, r, e, NULL);
    e->version = version;
    e->pushed = 0;
}

static void dir_delete(struct dsm_region *r, struct dsm_ptr *e)
{
    *e = r->dir[--r->ndir];
}

/* A copy for `who`: record the version in its entry, send it, then count
 * on (§A.11). */
static void grant_aux(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type type, uint32_t who,
                      uint32_t aux)
{
    uint32_t v = r->version++;
    dir_set(node, r, who, v);
    emit_aux(node, r, type, who, v, type != DSM_MSG_MODIFY_ACK, 0, aux);
}

static void grant(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type type, uint32_t who)
{
    grant_aux(node, r, type, who, r->act ? dsm_act_grant_tag(r, who) : 0);
}

/* A read answered with an exclusive copy (DSM_ACT_RMW, DSM_ACT_MIGRATORY):
 * legal where no other copy exists, as for a MsgExclusiveReq (D11). */
static int grant_exclusive_read(struct dsm_node *node, struct dsm_region *r, uint32_t who, enum dsm_act_kind kind)
{
    if (!node->act || r->ndir || !dsm_act_exclusive_read(node, r, who, kind))
        return 0;
    grant_aux(node, r, DSM_MSG_EXCLUSIVE_ACK_DATA, who, DSM_ACT_BIT(kind) | dsm_act_grant_tag(r, who));
    r->state = DSM_HOME_INVALID;
    return 1;
}

/* First phase of a two-phase action: invalidate every copy but `except`'s,
 * all marked as one burst. */
static void begin_invalidate(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type inv, uint32_t except,
                             enum dsm_cont cont)
{
    uint32_t n = 0, targets = r->ndir - (dir_find(r, except) != NULL); /* one entry per node */
    for (uint32_t i = 0; i < r->ndir; i++)
        if (r->dir[i].node != except) {
            n++;
            emit(node, r, inv, r->dir[i].node, r->dir[i].version, 0, n < targets);
        }
    r->num_acks = n;
    r->cont = (uint8_t)cont;
    r->cont_node = except;
    r->state = inv == DSM_MSG_RINVALIDATE ? DSM_HOME_IIP_SPECIAL : DSM_HOME_IIP;
}

static void queue_request(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type type, uint32_t src,
                          uint32_t version)
{
    struct dsm_queued *q = malloc(sizeof *q);
    if (!q) {
        dsm_fail(node, r, "out of memory for a blocked request");
        return;
    }
    *q = (struct dsm_queued){.next = NULL, .type = type, .src = src, .version = version};
    if (r->queue_tail)
        r->queue_tail->next = q;
    else
        r->queue_head = q;
    r->queue_tail = q;
    node->stats.queued++;
}

/* Serves a request now, or returns 0 when it must wait (Tables A-6..A-13
 * "queue message").  A request from a node that still has an entry waits
 * for that entry's late acknowledgement or flush (§A.11, Fig. A-22); an
 * upgrade from HomeShared is the one request whose sender keeps its entry,
 * unless the entry is a push the upgrade was not sent from (`version`: the
 * request's): one sent before the push came waits for its flush (D12). */
static int home_try_request(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type type, uint32_t src,
                            uint32_t version)
{
    struct dsm_ptr *e = dir_find(r, src);
    if (e && !(type == DSM_MSG_MODIFY_REQ && r->state == DSM_HOME_SHARED &&
               (!e->pushed || e->version == version)))
        return 0;
    int shared = type == DSM_MSG_SHARED_REQ;
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE:
        grant(node, r, shared ? DSM_MSG_SHARED_ACK_DATA : DSM_MSG_EXCLUSIVE_ACK_DATA, src);
        r->state = shared ? DSM_HOME_SHARED : DSM_HOME_INVALID;
        return 1;
    case DSM_HOME_EXCLUSIVE_RIP:
    case DSM_HOME_SHARED_RIP:
        if (!shared)
            return 0;
        grant(node, r, DSM_MSG_SHARED_ACK_DATA, src);
        r->state = DSM_HOME_SHARED_RIP;
        return 1;
    case DSM_HOME_SHARED:
        if (shared)
            grant(node, r, DSM_MSG_SHARED_ACK_DATA, src);
        else if (e && r->ndir == 1) { /* the upgrader is the only sharer */
            grant(node, r, DSM_MSG_MODIFY_ACK, src);
            r->state = DSM_HOME_INVALID;
        } else /* an upgrade whose copy is gone is an exclusive request (D2) */
            begin_invalidate(node, r, DSM_MSG_WINVALIDATE, src,
                             e ? DSM_CONT_MODIFY_REQ_SHARED : DSM_CONT_EXCLUSIVE_REQ);
        return 1;
    case DSM_HOME_INVALID:
        if (shared)
            begin_invalidate(node, r, DSM_MSG_RINVALIDATE, src, DSM_CONT_SHARED_REQ);
        else
            begin_invalidate(node, r, DSM_MSG_WINVALIDATE, src,
                             type == DSM_MSG_MODIFY_REQ ? DSM_CONT_MODIFY_REQ_INVALID : DSM_CONT_EXCLUSIVE_REQ);
        return 1;
    default: /* HomeExclusiveWip, HomeIip, HomeIipSpecial */
        return 0;
    }
}

/* "Retry queued messages" (§A.9), after every change that may unblock one:
 * from the head until the head must wait again (D4). */
static void home_retry(struct dsm_node *node, struct dsm_region *r)
{
    while (r->queue_head &&
           home_try_request(node, r, r->queue_head->type, r->queue_head->src, r->queue_head->version)) {
        struct dsm_queued *q = r->queue_head;
        r->queue_head = q->next;
        if (!r->queue_head)
            r->queue_tail = NULL;
        free(q);
    }
}

/* Producer push (DSM_ACT_PUSH, docs/CRL.md D12): after the home's write,
 * the new data goes as a read grant, unasked, to each rank that may hold a
 * copy, has none and whose read request is predicted.  At the home it is
 * the grant a MsgSharedReq from that rank would get now, so it is legal
 * where that one would be served at once: HomeExclusive or HomeShared, to
 * a rank without an entry.  Exclusive (DSM_ACT_XPUSH, D13) it is the grant
 * a MsgExclusiveReq would get at once: in HomeExclusive with no copy out
 * and nothing queued, and no push follows it. */
static void home_push(struct dsm_node *node, struct dsm_region *r)
{
    const uint64_t *holders = holders_of(r);
    int sent = 0;
    if (r->state != DSM_HOME_EXCLUSIVE && r->state != DSM_HOME_SHARED)
        return;
    for (uint32_t who = 0; who < node->nranks && r->state != DSM_HOME_INVALID; who++) {
        if (who == node->rank || !(holders[who / 64] >> (who % 64) & 1) || dir_find(r, who))
            continue;
        int how = dsm_act_push(node, r, who, r->state == DSM_HOME_EXCLUSIVE && !r->ndir && !r->queue_head);
        if (!how)
            continue;
        int x = how == DSM_PUSH_EXCLUSIVE;
        grant_aux(node, r, x ? DSM_MSG_EXCLUSIVE_ACK_DATA : DSM_MSG_SHARED_ACK_DATA, who,
                  DSM_ACT_BIT(x ? DSM_ACT_XPUSH : DSM_ACT_PUSH) | dsm_act_grant_tag(r, who));
        dir_find(r, who)->pushed = (uint8_t)how;
        r->state = x ? DSM_HOME_INVALID : DSM_HOME_SHARED;
        sent = 1;
    }
    if (sent)
        dsm_act_push_sent(r);
}

/* The upgrade ahead (DSM_ACT_UPGRADE, docs/CRL.md D14): at the end of the
 * home's read, the sole sharer's upgrade goes unasked when the home
 * predicts it next.  At the home it is the MsgModifyAck that sharer's
 * MsgModifyReq would get at once: HomeShared, the sharer the only entry,
 * nothing queued.  Its entry takes the new version (a push's mark stays,
 * judged apart); the region remembers the sharer and the version it
 * upgraded, which names the sharer's own request if one crossed it
 * (home_upgrade_asked), until the copy's own word judges it; one at a
 * time. */
static void home_upgrade(struct dsm_node *node, struct dsm_region *r)
{
    dsm_act_upgrade_read(r);
    if (r->state != DSM_HOME_SHARED || r->ndir != 1 || r->queue_head || r->up_state != DSM_UP_NONE)
        return;
    struct dsm_ptr *e = &r->dir[0];
    if (!dsm_act_upgrade(node, r, e->node))
        return;
    r->up_state = DSM_UP_OUT;
    r->up_to = e->node;
    r->up_from = e->version;
    e->version = r->version++;
    struct dsm_msg m = {.type = DSM_MSG_MODIFY_ACK, .src = node->rank, .dst = e->node, .rid = r->rid,
                        .version = e->version, .aux = DSM_ACT_BIT(DSM_ACT_UPGRADE), .from = r->up_from};
    send_msg(node, &m);
    r->state = DSM_HOME_INVALID;
}

/* A MsgModifyReq with the upgrade ahead on: the one its sharer sent from
 * the copy the upgrade ahead upgraded crossed it, and its rank took the
 * upgrade ahead as the answer: dropped (1), and judged if its copy has not
 * said so first.  Otherwise, when it is the upgrade of the sole sharer's
 * copy, the timing learns how many reads the home had done (0). */
static int home_upgrade_asked(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    if (r->up_state != DSM_UP_NONE && r->up_to == m->src && m->version == r->up_from) {
        if (r->up_state == DSM_UP_OUT)
            dsm_act_upgrade_judged(node, r, NULL);
        r->up_state = DSM_UP_NONE;
        node->stats.stale++;
        return 1;
    }
    struct dsm_ptr *e = dir_find(r, m->src);
    if (e && e->version == m->version && r->ndir == 1 &&
        (r->state == DSM_HOME_SHARED || r->state == DSM_HOME_SHARED_RIP))
        dsm_act_upgrade_asked(r, r->state == DSM_HOME_SHARED_RIP);
    return 0;
}

/* Second phase (§A.4); `released` is HomeIipSpecial's argument: the owner
 * answered with MsgRelease and keeps a shared copy. */
static void home_continue(struct dsm_node *node, struct dsm_region *r, int released)
{
    enum dsm_cont c = (enum dsm_cont)r->cont;
    uint32_t who = r->cont_node;
    r->cont = DSM_CONT_NONE;
    switch (c) {
    case DSM_CONT_START_READ:
        r->state = released ? DSM_HOME_SHARED_RIP : DSM_HOME_EXCLUSIVE_RIP;
        r->read_cnt = 1;
        r->waiting = 0;
        break;
    case DSM_CONT_START_WRITE:
        r->state = DSM_HOME_EXCLUSIVE_WIP;
        r->waiting = 0;
        break;
    case DSM_CONT_SHARED_REQ:
        if (released || !grant_exclusive_read(node, r, who, DSM_ACT_MIGRATORY)) {
            grant(node, r, DSM_MSG_SHARED_ACK_DATA, who);
            r->state = DSM_HOME_SHARED;
        }
        break;
    case DSM_CONT_EXCLUSIVE_REQ:
        grant(node, r, DSM_MSG_EXCLUSIVE_ACK_DATA, who);
        r->state = DSM_HOME_INVALID;
        break;
    case DSM_CONT_MODIFY_REQ_SHARED:
        grant(node, r, dir_find(r, who) ? DSM_MSG_MODIFY_ACK : DSM_MSG_MODIFY_ACK_DATA, who);
        r->state = DSM_HOME_INVALID;
        break;
    case DSM_CONT_MODIFY_REQ_INVALID:
        grant(node, r, DSM_MSG_MODIFY_ACK_DATA, who);
        r->state = DSM_HOME_INVALID;
        break;
    case DSM_CONT_NONE:
        dsm_fail(node, r, "protocol error: continuation without a pending action");
        return;
    }
    home_retry(node, r);
}

static void ack_arrived(struct dsm_node *node, struct dsm_region *r)
{
    if (r->state == DSM_HOME_IIP_SPECIAL || --r->num_acks == 0)
        home_continue(node, r, 0);
}

/* MsgInvalidateAck(Data), MsgFlush(Data), MsgRelease.  Each names the copy
 * by its version; one that does not match the sender's entry is late
 * (§A.11) and dropped. */
static void home_ack(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    struct dsm_ptr *e = dir_find(r, m->src);
    if (!e || e->version != m->version) {
        node->stats.stale++;
        return;
    }
    if (m->aux || (r->act & DSM_RACT_XREAD_OUT))
        dsm_act_home_note(node, r, m);
    if (r->up_state == DSM_UP_OUT && r->up_to == m->src) { /* the copy upgraded ahead speaks: did it cross? */
        dsm_act_upgrade_judged(node, r, m);
        r->up_state = m->aux & DSM_AUX_CROSSED ? DSM_UP_STALE : DSM_UP_NONE;
    }
    if (e->pushed)
        dsm_act_push_judged(node, r, e, m);
    int iip = r->state == DSM_HOME_IIP || r->state == DSM_HOME_IIP_SPECIAL;
    switch (m->type) {
    case DSM_MSG_RELEASE: /* acted on only in HomeIipSpecial (Fig. A-21) */
        if (r->state != DSM_HOME_IIP_SPECIAL) {
            node->stats.stale++;
            return;
        }
        take_data(r, m);
        home_continue(node, r, 1);
        return;
    case DSM_MSG_INVALIDATE_ACK:
    case DSM_MSG_INVALIDATE_ACK_DATA:
        if (!iip)
            break;
        take_data(r, m);
        dir_delete(r, e); /* D1: an acknowledged copy leaves the directory */
        ack_arrived(node, r);
        return;
    default: /* MsgFlush, MsgFlushData */
        take_data(r, m);
        dir_delete(r, e);
        if (iip) { /* a flush crossing our invalidation is its ack (§A.8) */
            ack_arrived(node, r);
            return;
        }
        if (r->state == DSM_HOME_INVALID)
            r->state = DSM_HOME_EXCLUSIVE;
        else if (r->ndir == 0)
            r->state = r->state == DSM_HOME_SHARED_RIP ? DSM_HOME_EXCLUSIVE_RIP : DSM_HOME_EXCLUSIVE;
        home_retry(node, r); /* D4: a deleted entry may unblock a request */
        return;
    }
    protocol_error(node, r, m);
}

static void home_message(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    switch (m->type) {
    case DSM_MSG_SHARED_REQ:
    case DSM_MSG_EXCLUSIVE_REQ:
    case DSM_MSG_MODIFY_REQ:
        if (m->type == DSM_MSG_MODIFY_REQ && (node->act & DSM_ACT_BIT(DSM_ACT_UPGRADE)) &&
            home_upgrade_asked(node, r, m))
            return;
        if (r->act & DSM_RACT_DSI_PENDING)
            dsm_act_judge(node, r, m->src, m->type != DSM_MSG_SHARED_REQ);
        if (m->type == DSM_MSG_SHARED_REQ && (node->act & DSM_ACT_PUSHES)) {
            struct dsm_ptr *e = dir_find(r, m->src);
            if (!e || !e->pushed) /* not one that crossed a push */
                dsm_act_push_read_req(r);
        }
        /* Origin's read-modify-write: an idle block goes exclusive to a reader predicted to upgrade */
        if (m->type == DSM_MSG_SHARED_REQ && r->state == DSM_HOME_EXCLUSIVE && !r->queue_head &&
            grant_exclusive_read(node, r, m->src, DSM_ACT_RMW))
            return;
        if (!home_try_request(node, r, m->type, m->src, m->version))
            queue_request(node, r, m->type, m->src, m->version);
        return;
    case DSM_MSG_INVALIDATE_ACK:
    case DSM_MSG_INVALIDATE_ACK_DATA:
    case DSM_MSG_RELEASE:
    case DSM_MSG_FLUSH:
    case DSM_MSG_FLUSH_DATA:
        home_ack(node, r, m);
        return;
    default:
        protocol_error(node, r, m);
    }
}

/* ---- remote side ------------------------------------------------------------ */

/* Ends this copy: an invalidation ack or a flush, with the data when the
 * copy is dirty or has sent a MsgRelease.  A flush may overtake that
 * release (Fig. A-21), which the home then drops: the data must ride on the
 * flush or ack too (D7). */
static void drop_copy(struct dsm_node *node, struct dsm_region *r, int flush, int with_data, enum dsm_state next)
{
    enum dsm_msg_type type = flush ? (with_data ? DSM_MSG_FLUSH_DATA : DSM_MSG_FLUSH)
                                   : (with_data ? DSM_MSG_INVALIDATE_ACK_DATA : DSM_MSG_INVALIDATE_ACK);
    uint32_t aux = r->act || r->pushed ? dsm_act_copy_leaves(node, r, flush) : 0;
    emit_aux(node, r, type, DSM_RID_HOME(r->rid), r->version, with_data, 0, aux);
    r->released = 0;
    r->state = (uint8_t)next;
}

/* A shared copy takes an upgrade ahead (D14): idle or being read it
 * becomes the modified copy (RemoteModified, RemoteModifiedRip) that the
 * home's HomeInvalid entry describes; waiting for its own upgrade
 * (crossed), it takes it as that request's answer, and the home drops the
 * request. */
static void take_upgrade(struct dsm_node *node, struct dsm_region *r, uint32_t version, uint32_t aux, int crossed)
{
    dsm_act_upgrade_taken(node, r, aux, crossed);
    r->version = version;
    r->released = 0; /* the home has heard our release: it was in HomeShared */
    r->state = r->state == DSM_REMOTE_SHARED       ? DSM_REMOTE_MODIFIED
             : r->state == DSM_REMOTE_SHARED_RIP ? DSM_REMOTE_MODIFIED_RIP
                                                   : DSM_REMOTE_MODIFIED_WIP;
    if (crossed)
        r->waiting = 0;
}

static void remote_invalidate(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    if (m->version < r->version) { /* late: for a copy already dropped (Fig. A-19) */
        node->stats.stale++;
        return;
    }
    int w = m->type == DSM_MSG_WINVALIDATE;
    if (m->version > r->version && (r->state == DSM_REMOTE_SHARED || r->state == DSM_REMOTE_SHARED_RIP) &&
        (node->act & DSM_ACT_BIT(DSM_ACT_UPGRADE)))
        /* overtook an upgrade ahead of this copy (D14): taken now, the
         * invalidation is the upgraded copy's, and the upgrade ahead is
         * stale when it comes */
        take_upgrade(node, r, m->version, 0, 0);
    if (m->version > r->version) { /* early: overtook its grant (Fig. A-20) */
        node->stats.early_inv++;
        if (r->state == DSM_REMOTE_INVALID && (node->act & (DSM_ACT_PUSHES | DSM_ACT_BIT(DSM_ACT_UPGRADE)))) {
            /* overtook a push or an upgrade ahead (D12, D13, D14): that, not
             * newer now, is flushed when it comes, which the home counts as
             * the ack */
            r->version = m->version;
            return;
        }
        if (r->state != DSM_REMOTE_INVALID_REQ && r->state != DSM_REMOTE_SHARED_REQ)
            protocol_error(node, r, m);
        r->rcvd_inv = 1;
        return;
    }
    if (node->act && r->state != DSM_REMOTE_INVALID && r->state != DSM_REMOTE_INVALID_REQ)
        dsm_act_invalidated(r, r->state == DSM_REMOTE_SHARED_RIP || r->state >= DSM_REMOTE_MODIFIED_RIP);
    switch (r->state) {
    case DSM_REMOTE_INVALID:
    case DSM_REMOTE_INVALID_REQ: /* crossed our flush or ack; the home counts that (§A.8) */
        return;
    case DSM_REMOTE_SHARED:
        if (!w)
            break;
        drop_copy(node, r, 0, r->released, DSM_REMOTE_INVALID);
        return;
    case DSM_REMOTE_SHARED_REQ:
        drop_copy(node, r, 0, r->released, DSM_REMOTE_INVALID_REQ);
        return;
    case DSM_REMOTE_SHARED_RIP:
        if (!w)
            break;
        r->rcvd_inv = 1;
        return;
    case DSM_REMOTE_MODIFIED:
        drop_copy(node, r, 0, 1, DSM_REMOTE_INVALID);
        return;
    case DSM_REMOTE_MODIFIED_RIP:
        if (w) {
            r->rcvd_inv = 1;
            return;
        }
        emit_aux(node, r, DSM_MSG_RELEASE, DSM_RID_HOME(r->rid), r->version, 1, 0,
                 r->act || r->pushed ? dsm_act_copy_leaves(node, r, 0) : 0); /* §A.10 */
        r->released = 1;
        r->state = DSM_REMOTE_SHARED_RIP;
        return;
    case DSM_REMOTE_MODIFIED_WIP:
        r->rcvd_inv = 1;
        return;
    }
    protocol_error(node, r, m);
}

/* A push (D12): taken as a shared copy into RemoteInvalid when newer than
 * the copy there, an exclusive push (D13) as an idle modified copy
 * (RemoteModifiedRip's idle counterpart: a read of it hits and the write
 * after it too).  An upgrade ahead (D14) is taken by a shared copy it is
 * newer than (take_upgrade); a valid copy at its version or newer has had
 * it (an invalidation that overtook it made the copy take it).  Otherwise
 * each is flushed at once, unread, so that the home drops the entry that
 * blocks this rank's own request (one crossed the push, or followed a
 * flush that crossed the upgrade ahead) or counts the flush as the ack of
 * the invalidation that overtook it.  Only one push, grant or upgrade
 * ahead is ever out to a rank, so the early invalidation a request's wait
 * noted was this one's. */
static void send_about(struct dsm_node *node, enum dsm_msg_type type, uint32_t dst, dsm_rid_t rid,
                       uint32_t version, uint32_t aux);

/* Flushes a push or upgrade ahead (kind) unread.  The copy's version
 * becomes its: a later invalidation of it is then not taken as early. */
static void refuse_push(struct dsm_node *node, struct dsm_region *r, uint32_t home, dsm_rid_t rid, uint32_t version,
                        enum dsm_act_kind kind)
{
    /* an upgrade ahead that an overtaking invalidation made its copy take
     * (take_upgrade) was counted when that copy left */
    int counted = kind == DSM_ACT_UPGRADE && r && r->version >= version;
    if (r && version > r->version) {
        r->version = version;
        r->rcvd_inv = 0;
    }
    /* a map in progress: the copy it makes starts at the push's version,
     * so the invalidation the home may send for it is not taken as early */
    if (!r && node->ask_rid == rid && version > node->map_version)
        node->map_version = version;
    send_about(node, DSM_MSG_FLUSH, home, rid, version, dsm_act_push_refused(node, kind, counted));
}

/* The copy an upgrade ahead was held for came (taken: it takes the upgrade
 * now) or was refused (the upgrade ahead is too). */
static void held_upgrade(struct dsm_node *node, struct dsm_region *r, int taken)
{
    uint32_t v = r->up_held;
    r->up_held = 0;
    if (!taken) {
        refuse_push(node, r, DSM_RID_HOME(r->rid), r->rid, v, DSM_ACT_UPGRADE);
        return;
    }
    if (r->version != r->up_from || (r->state != DSM_REMOTE_SHARED && r->state != DSM_REMOTE_SHARED_RIP)) {
        dsm_fail(node, r, "protocol error: an upgrade ahead was held for a copy that came otherwise");
        return;
    }
    take_upgrade(node, r, v, 0, 0);
}

/* An upgrade ahead (D14): a shared copy of the version it upgrades takes
 * it (take_upgrade); a valid copy at its version or newer has had it (an
 * invalidation that overtook it made the copy take it); a copy older than
 * the one it upgrades waits for that one, a grant or a push overtaken, and
 * holds it until then (only one is out to a rank); with no copy it is
 * refused. */
static void remote_upgraded(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    int valid = r && r->state >= DSM_REMOTE_SHARED && r->state <= DSM_REMOTE_MODIFIED_WIP;
    if (valid && m->version <= r->version) {
        node->stats.stale++;
    } else if (valid && r->version == m->from && r->state < DSM_REMOTE_MODIFIED) {
        take_upgrade(node, r, m->version, m->aux, r->state == DSM_REMOTE_SHARED_REQ);
    } else if (valid || (r && r->version < m->from && r->up_held)) {
        protocol_error(node, r, m);
    } else if (r && r->version < m->from) {
        r->up_held = m->version;
        r->up_from = m->from;
    } else
        refuse_push(node, r, m->src, m->rid, m->version, DSM_ACT_UPGRADE);
}

static void remote_pushed(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    int x = m->type == DSM_MSG_EXCLUSIVE_ACK_DATA;
    if (m->type == DSM_MSG_MODIFY_ACK) {
        remote_upgraded(node, r, m);
        return;
    }
    if (r && r->state == DSM_REMOTE_INVALID && m->version > r->version) {
        take_data(r, m);
        dsm_act_granted(node, r, m->aux, 0);
        r->version = m->version;
        r->state = x ? DSM_REMOTE_MODIFIED : DSM_REMOTE_SHARED;
        r->pushed = DSM_PUSHED_UNREAD | (x ? DSM_PUSHED_UNWRITTEN : 0);
        if (r->up_held)
            held_upgrade(node, r, 1);
        return;
    }
    /* a rank with a valid copy has an entry and gets no push: one newer than
     * the copy cannot be */
    if (r && r->state != DSM_REMOTE_INVALID && r->state != DSM_REMOTE_INVALID_REQ && m->version > r->version) {
        protocol_error(node, r, m);
        return;
    }
    /* flushed unread, also when older than a valid copy: an upgrade ahead of
     * the pushed copy overtook it and was flushed, the home's entry went, and
     * it granted again (D14) */
    refuse_push(node, r, m->src, m->rid, m->version, x ? DSM_ACT_XPUSH : DSM_ACT_PUSH);
    if (r && r->up_held && m->version == r->up_from) /* the copy it was held for */
        held_upgrade(node, r, 0);
}

/* A grant no request asked for: a push (D12), an exclusive push (D13) or
 * an upgrade ahead (D14). */
static int is_push(const struct dsm_msg *m)
{
    return m->type == DSM_MSG_SHARED_ACK_DATA     ? (m->aux & DSM_ACT_BIT(DSM_ACT_PUSH)) != 0
         : m->type == DSM_MSG_EXCLUSIVE_ACK_DATA ? (m->aux & DSM_ACT_BIT(DSM_ACT_XPUSH)) != 0
         : m->type == DSM_MSG_MODIFY_ACK         ? (m->aux & DSM_ACT_BIT(DSM_ACT_UPGRADE)) != 0
                                                  : 0;
}

static void remote_grant(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    int upgrade = m->type == DSM_MSG_MODIFY_ACK || m->type == DSM_MSG_MODIFY_ACK_DATA;
    if (!(r->state == DSM_REMOTE_INVALID_REQ && m->type != DSM_MSG_MODIFY_ACK) &&
        !(r->state == DSM_REMOTE_SHARED_REQ && upgrade)) {
        protocol_error(node, r, m);
        return;
    }
    take_data(r, m);
    if (node->act)
        dsm_act_granted(node, r, m->aux, upgrade);
    r->version = m->version;
    r->released = 0; /* an upgrade: the home has answered after our release */
    /* a read may be answered exclusive (D11): the copy is modified, being read */
    int read = m->type == DSM_MSG_SHARED_ACK_DATA ||
               (m->type == DSM_MSG_EXCLUSIVE_ACK_DATA && (r->calls & 0xff) == DSM_CALL_START_READ);
    if (read && m->type == DSM_MSG_EXCLUSIVE_ACK_DATA) {
        r->read_cnt = 1;
        r->state = DSM_REMOTE_MODIFIED_RIP;
    } else if (read) {
        r->read_cnt = 1;
        r->state = DSM_REMOTE_SHARED_RIP;
    } else
        r->state = DSM_REMOTE_MODIFIED_WIP;
    r->waiting = 0; /* an early invalidation stays in rcvd_inv for the operation's end */
    if (r->up_held)
        held_upgrade(node, r, 1);
}

static void remote_message(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    switch (m->type) {
    case DSM_MSG_RINVALIDATE:
    case DSM_MSG_WINVALIDATE:
        remote_invalidate(node, r, m);
        return;
    case DSM_MSG_SHARED_ACK_DATA:
    case DSM_MSG_EXCLUSIVE_ACK_DATA:
    case DSM_MSG_MODIFY_ACK:
        if (is_push(m)) {
            remote_pushed(node, r, m);
            return;
        }
        /* fall through */
    case DSM_MSG_MODIFY_ACK_DATA:
        remote_grant(node, r, m);
        return;
    default:
        protocol_error(node, r, m);
    }
}

/* ---- mapping and deletion ----------------------------------------------------- */

/* A message that names its region by rid alone (mapping and deletion). */
static void send_about(struct dsm_node *node, enum dsm_msg_type type, uint32_t dst, dsm_rid_t rid,
                       uint32_t version, uint32_t aux)
{
    struct dsm_msg m = {.type = type, .src = node->rank, .dst = dst, .rid = rid, .version = version, .aux = aux};
    send_msg(node, &m);
}

enum dsm_refusal dsm_absence(const struct dsm_node *node, dsm_rid_t rid)
{
    return DSM_RID_HOME(rid) == node->rank && DSM_RID_SEQ(rid) < node->next_seq ? DSM_REFUSE_DELETED
                                                                                : DSM_REFUSE_NEVER_CREATED;
}

static void holder_add(struct dsm_region *r, uint32_t who)
{
    holders_of(r)[who / 64] |= 1ull << (who % 64);
}

static void rgn_info(struct dsm_node *node, const struct dsm_msg *m)
{
    struct dsm_region *r = DSM_RID_HOME(m->rid) == node->rank ? dsm_lookup(node, m->rid) : NULL;
    if (!r) {
        send_about(node, DSM_MSG_RGN_INFO_NACK, m->src, m->rid, 0, dsm_absence(node, m->rid));
        return;
    }
    holder_add(r, m->src);
    /* A new copy starts one below the next grant: every late invalidation
     * for an earlier copy of it is then not newer. */
    send_about(node, DSM_MSG_RGN_INFO_ACK, m->src, m->rid, r->version - 1, r->size);
}

static void ask_home(struct dsm_node *node, enum dsm_msg_type type, dsm_rid_t rid)
{
    node->ask_rid = rid;
    node->ask_reply = 0;
    node->map_version = 0;
    send_about(node, type, DSM_RID_HOME(rid), rid, 0, 0);
}

static void answered(struct dsm_node *node, enum dsm_refusal why)
{
    node->ask_reply = why == DSM_REFUSE_NONE ? 1 : -1;
    node->ask_refusal = why;
}

void dsm_map_request(struct dsm_node *node, dsm_rid_t rid)
{
    ask_home(node, DSM_MSG_RGN_INFO_REQ, rid);
}

struct dsm_region *dsm_map_complete(struct dsm_node *node)
{
    dsm_rid_t rid = node->ask_rid;
    node->ask_rid = DSM_NO_RID;
    if (node->ask_reply < 0)
        return NULL;
    return dsm_remote_copy(node, rid, node->map_size, node->map_version);
}

/* A deleted region leaves the table.  A mapping left on this rank keeps
 * the memory, in state Deleted, until its last rgn_unmap frees it (D10). */
static void region_gone(struct dsm_node *node, struct dsm_region *r)
{
    dsm_table_remove(node, r);
    if (r->map_cnt) {
        r->state = DSM_DELETED;
        r->hash_next = node->deleted_mappings;
        node->deleted_mappings = r;
        return;
    }
    if (node->forget)
        node->forget(node, r);
    dsm_region_free(r);
}

/* An operation on the region in progress here, a start waiting, or (at
 * the home) another rank's request or invalidation under way: deleting it
 * now breaks rgn_delete's rule. */
static int region_busy(const struct dsm_region *r)
{
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE:
    case DSM_HOME_SHARED:
    case DSM_HOME_INVALID:
        return r->queue_head != NULL;
    case DSM_REMOTE_INVALID:
    case DSM_REMOTE_SHARED:
    case DSM_REMOTE_MODIFIED:
        return 0;
    default:
        return 1;
    }
}

/* Deletes a home region and tells every rank that may hold a copy, but
 * `except` (the one that asked, whose copy is gone already).  Nothing
 * answers: a copy's late flush or ack finds no region and is dropped. */
static void home_delete(struct dsm_node *node, struct dsm_region *r, uint32_t except)
{
    const uint64_t *holders = holders_of(r);
    for (uint32_t who = 0; who < node->nranks; who++)
        if (who != except && (holders[who / 64] >> (who % 64) & 1))
            send_about(node, DSM_MSG_DELETE, who, r->rid, 0, 0);
    region_gone(node, r);
}

static void delete_req(struct dsm_node *node, const struct dsm_msg *m)
{
    struct dsm_region *r = DSM_RID_HOME(m->rid) == node->rank ? dsm_lookup(node, m->rid) : NULL;
    enum dsm_refusal why = !r ? dsm_absence(node, m->rid) : region_busy(r) ? DSM_REFUSE_IN_USE : DSM_REFUSE_NONE;
    if (why == DSM_REFUSE_NONE)
        home_delete(node, r, m->src);
    send_about(node, why == DSM_REFUSE_NONE ? DSM_MSG_DELETE_ACK : DSM_MSG_DELETE_NACK, m->src, m->rid, 0, why);
}

/* MsgDelete: this rank's copy goes (unless the URC evicted it already). */
static void copy_deleted(struct dsm_node *node, const struct dsm_msg *m)
{
    struct dsm_region *r = dsm_lookup(node, m->rid);
    if (!r) {
        node->stats.deleted_dropped++;
        return;
    }
    if (region_busy(r)) {
        char what[112];
        snprintf(what, sizeof what, "rank %u deleted this region while an operation on it is in progress here",
                 m->src);
        dsm_fail(node, r, what);
        return;
    }
    region_gone(node, r);
}

void dsm_delete(struct dsm_node *node, dsm_rid_t rid)
{
    int here = DSM_RID_HOME(rid) == node->rank;
    struct dsm_region *r = dsm_lookup(node, rid);
    node->stats.calls[DSM_CALL_DELETE]++;
    if (!here) {
        node->stats.calls_remote[DSM_CALL_DELETE]++;
        node->stats.calls_miss[DSM_CALL_DELETE]++;
    }
    if (r) {
        r->calls = (r->calls << 8) | DSM_CALL_DELETE;
        if (r->map_cnt) {
            dsm_fail(node, r, "rgn_delete of a region mapped on this rank");
            return;
        }
    }
    if (!here) {
        if (r) /* no flush: the data dies with the region */
            region_gone(node, r);
        ask_home(node, DSM_MSG_DELETE_REQ, rid);
        return;
    }
    node->ask_rid = rid;
    if (!r)
        answered(node, dsm_absence(node, rid));
    else if (region_busy(r))
        answered(node, DSM_REFUSE_IN_USE);
    else {
        home_delete(node, r, DSM_NOBODY);
        answered(node, DSM_REFUSE_NONE);
    }
}

enum dsm_refusal dsm_delete_complete(struct dsm_node *node)
{
    node->ask_rid = DSM_NO_RID;
    return (enum dsm_refusal)node->ask_refusal;
}

/* A message for a region not in the table. */
static void absent(struct dsm_node *node, const struct dsm_msg *m)
{
    /* An invalidation for a copy the URC evicted (§A.8): the home takes our
     * flush as its ack. */
    if (m->type == DSM_MSG_RINVALIDATE || m->type == DSM_MSG_WINVALIDATE)
        return;
    /* a push to a copy the URC evicted or a delete freed (D12, D13, D14) */
    if (is_push(m)) {
        remote_pushed(node, NULL, m);
        return;
    }
    if (dsm_absence(node, m->rid) == DSM_REFUSE_DELETED) { /* late, for a deleted region (D10) */
        node->stats.deleted_dropped++;
        /* a request means the sender uses a deleted region: MsgDelete makes
         * it fail (the copy is mapped) instead of waiting for ever.  An
         * upgrade request that crossed an upgrade ahead (D14) may come after
         * a legal delete too: its sender's copy is idle or gone, and the
         * MsgDelete is dropped or frees it, as the delete's own would */
        if (m->type == DSM_MSG_SHARED_REQ || m->type == DSM_MSG_EXCLUSIVE_REQ || m->type == DSM_MSG_MODIFY_REQ)
            send_about(node, DSM_MSG_DELETE, m->src, m->rid, 0, 0);
        return;
    }
    char what[160];
    snprintf(what, sizeof what, "protocol error: %s from rank %u for region %u:%u, which is not here",
             dsm_msg_name(m->type), m->src, DSM_RID_HOME(m->rid), DSM_RID_SEQ(m->rid));
    dsm_fail(node, NULL, what);
}

void dsm_deliver(struct dsm_node *node, const struct dsm_msg *m)
{
    node->stats.received[m->type]++;
    switch (m->type) {
    case DSM_MSG_RGN_INFO_REQ:
        rgn_info(node, m);
        return;
    case DSM_MSG_DELETE_REQ:
        delete_req(node, m);
        return;
    case DSM_MSG_RGN_INFO_ACK:
    case DSM_MSG_RGN_INFO_NACK:
    case DSM_MSG_DELETE_ACK:
    case DSM_MSG_DELETE_NACK:
        if (m->rid == node->ask_rid) {
            int ack = m->type == DSM_MSG_RGN_INFO_ACK || m->type == DSM_MSG_DELETE_ACK;
            answered(node, ack ? DSM_REFUSE_NONE : (enum dsm_refusal)m->aux);
            if (m->type == DSM_MSG_RGN_INFO_ACK) {
                node->map_size = m->aux;
                if (m->version > node->map_version) /* a push may have come first (D12) */
                    node->map_version = m->version;
            }
        }
        return;
    case DSM_MSG_DELETE:
        copy_deleted(node, m);
        return;
    default:
        break;
    }
    struct dsm_region *r = dsm_lookup(node, m->rid);
    if (__builtin_expect(node->observer != NULL, 0)) /* before the handler changes r */
        dsm_observe_msg(node, r, m);
    if (!r)
        absent(node, m);
    else if (dsm_is_home_state(r->state))
        home_message(node, r, m);
    else
        remote_message(node, r, m);
}

/* ---- user calls -------------------------------------------------------------- */

/* A call the region's state does not allow, told apart for a mapping left
 * over from a deleted region (D10). */
static void bad_call(struct dsm_node *node, struct dsm_region *r, const char *what)
{
    char buf[160];
    if (r->state == DSM_DELETED) {
        snprintf(buf, sizeof buf,
                 "%s on a region deleted since it was mapped (only rgn_unmap, rgn_rid and rgn_size remain)",
                 dsm_call_name(r->calls & 0xff));
        what = buf;
    }
    dsm_fail(node, r, what);
}

static enum dsm_start home_wait_iip(struct dsm_node *node, struct dsm_region *r, enum dsm_call c)
{
    if (!r->waiting) { /* count each start once, not every retry */
        node->stats.calls_iip[c]++;
        r->waiting = 1;
    }
    return DSM_RETRY;
}

static enum dsm_start pending(struct dsm_node *node, struct dsm_region *r, enum dsm_call c)
{
    node->stats.calls_miss[c]++;
    r->waiting = 1;
    return DSM_PENDING;
}

static enum dsm_start request(struct dsm_node *node, struct dsm_region *r, enum dsm_call c,
                              enum dsm_msg_type type, enum dsm_state next)
{
    emit(node, r, type, DSM_RID_HOME(r->rid), r->version, 0, 0);
    r->state = (uint8_t)next;
    return pending(node, r, c);
}

/* A retried start (after DSM_RETRY) is the same call: record it once. */
static inline void note_start(struct dsm_node *node, struct dsm_region *r, enum dsm_call c)
{
    if (r->waiting && (r->calls & 0xff) == c)
        return;
    dsm_note_call(node, r, c);
}

enum dsm_start dsm_start_read(struct dsm_node *node, struct dsm_region *r)
{
    note_start(node, r, DSM_CALL_START_READ);
    if (__builtin_expect(r->act & DSM_RACT_DSI_PENDING, 0))
        dsm_act_judge(node, r, node->rank, 0);
    if (__builtin_expect(r->pushed, 0))
        dsm_act_push_used(node, r, 0);
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE:
    case DSM_HOME_SHARED:
    case DSM_REMOTE_SHARED:
    case DSM_REMOTE_MODIFIED:
        r->read_cnt = 1;
        r->state = r->state == DSM_HOME_EXCLUSIVE ? DSM_HOME_EXCLUSIVE_RIP
                 : r->state == DSM_HOME_SHARED   ? DSM_HOME_SHARED_RIP
                 : r->state == DSM_REMOTE_SHARED ? DSM_REMOTE_SHARED_RIP
                                                 : DSM_REMOTE_MODIFIED_RIP;
        r->waiting = 0;
        return DSM_STARTED;
    case DSM_HOME_EXCLUSIVE_RIP:
    case DSM_HOME_SHARED_RIP:
    case DSM_REMOTE_SHARED_RIP:
    case DSM_REMOTE_MODIFIED_RIP:
        r->read_cnt++;
        return DSM_STARTED;
    case DSM_HOME_IIP:
    case DSM_HOME_IIP_SPECIAL:
        return home_wait_iip(node, r, DSM_CALL_START_READ);
    case DSM_HOME_INVALID:
        begin_invalidate(node, r, DSM_MSG_RINVALIDATE, DSM_NOBODY, DSM_CONT_START_READ);
        return pending(node, r, DSM_CALL_START_READ);
    case DSM_REMOTE_INVALID:
        return request(node, r, DSM_CALL_START_READ, DSM_MSG_SHARED_REQ, DSM_REMOTE_INVALID_REQ);
    default: /* a write in progress here; or a start inside a start */
        bad_call(node, r, "rgn_start_read while a write operation on this region is in progress on this rank");
        return DSM_RETRY;
    }
}

enum dsm_start dsm_start_write(struct dsm_node *node, struct dsm_region *r)
{
    note_start(node, r, DSM_CALL_START_WRITE);
    if (__builtin_expect(r->act & DSM_RACT_DSI_PENDING, 0))
        dsm_act_judge(node, r, node->rank, 1);
    if (__builtin_expect(r->pushed, 0))
        dsm_act_push_used(node, r, 1);
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE:
        r->state = DSM_HOME_EXCLUSIVE_WIP;
        r->waiting = 0;
        return DSM_STARTED;
    case DSM_REMOTE_MODIFIED:
        if (r->act & (DSM_RACT_RMW_UNWRITTEN | DSM_RACT_MIG_UNWRITTEN))
            dsm_act_written(node, r);
        r->state = DSM_REMOTE_MODIFIED_WIP;
        return DSM_STARTED;
    case DSM_HOME_IIP:
    case DSM_HOME_IIP_SPECIAL:
        return home_wait_iip(node, r, DSM_CALL_START_WRITE);
    case DSM_HOME_SHARED:
    case DSM_HOME_INVALID:
        begin_invalidate(node, r, DSM_MSG_WINVALIDATE, DSM_NOBODY, DSM_CONT_START_WRITE);
        return pending(node, r, DSM_CALL_START_WRITE);
    case DSM_REMOTE_INVALID:
        return request(node, r, DSM_CALL_START_WRITE, DSM_MSG_EXCLUSIVE_REQ, DSM_REMOTE_INVALID_REQ);
    case DSM_REMOTE_SHARED:
        return request(node, r, DSM_CALL_START_WRITE, DSM_MSG_MODIFY_REQ, DSM_REMOTE_SHARED_REQ);
    default: /* Rip or Wip here: no upgrade inside an operation (§A.2) */
        bad_call(node, r,
                 "rgn_start_write while a read or write operation on this region is in progress on this rank");
        return DSM_RETRY;
    }
}

/* The end of a remote operation: honour an invalidation that arrived during
 * it (§A.9), or keep the copy. */
static void remote_op_done(struct dsm_node *node, struct dsm_region *r, enum dsm_state keep, int dirty)
{
    if (!r->rcvd_inv) {
        r->state = (uint8_t)keep;
        /* dynamic self-invalidation: rgn_flush's transition, taken early */
        if (node->act && dsm_act_self_invalidate(node, r))
            drop_copy(node, r, 1, dirty || r->released, DSM_REMOTE_INVALID);
        return;
    }
    r->rcvd_inv = 0;
    drop_copy(node, r, 0, dirty || r->released, DSM_REMOTE_INVALID);
}

void dsm_end_read(struct dsm_node *node, struct dsm_region *r)
{
    dsm_note_call(node, r, DSM_CALL_END_READ);
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE_RIP:
    case DSM_HOME_SHARED_RIP:
        if (--r->read_cnt)
            return;
        r->state = r->state == DSM_HOME_EXCLUSIVE_RIP ? DSM_HOME_EXCLUSIVE : DSM_HOME_SHARED;
        home_retry(node, r);
        if (node->act & DSM_ACT_BIT(DSM_ACT_UPGRADE))
            home_upgrade(node, r);
        return;
    case DSM_REMOTE_SHARED_RIP:
        if (--r->read_cnt == 0)
            remote_op_done(node, r, DSM_REMOTE_SHARED, 0);
        return;
    case DSM_REMOTE_MODIFIED_RIP:
        if (--r->read_cnt == 0)
            remote_op_done(node, r, DSM_REMOTE_MODIFIED, 1);
        return;
    default:
        bad_call(node, r, "rgn_end_read without a read operation in progress on this region");
    }
}

void dsm_end_write(struct dsm_node *node, struct dsm_region *r)
{
    dsm_note_call(node, r, DSM_CALL_END_WRITE);
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE_WIP:
        r->state = DSM_HOME_EXCLUSIVE;
        home_retry(node, r);
        if (node->act & DSM_ACT_BIT(DSM_ACT_UPGRADE))
            dsm_act_upgrade_wrote(r);
        if (node->act & DSM_ACT_PUSHES) {
            dsm_act_push_wrote(r);
            home_push(node, r);
        }
        return;
    case DSM_REMOTE_MODIFIED_WIP:
        remote_op_done(node, r, DSM_REMOTE_MODIFIED, 1);
        return;
    default:
        bad_call(node, r, "rgn_end_write without a write operation in progress on this region");
    }
}

void dsm_flush(struct dsm_node *node, struct dsm_region *r)
{
    dsm_note_call(node, r, DSM_CALL_FLUSH);
    if (r->up_held) /* the copy it waits for will be refused (and at a URC eviction find none) */
        held_upgrade(node, r, 0);
    if (r->state == DSM_REMOTE_SHARED || r->state == DSM_REMOTE_MODIFIED)
        drop_copy(node, r, 1, r->state == DSM_REMOTE_MODIFIED || r->released, DSM_REMOTE_INVALID);
    /* home copies and operations in progress: nothing (Tables A-6..A-21) */
}
