/* The CRL coherence protocol (thesis Appendix A) as a transport-independent
 * engine.  Each handler below is one row group of Tables A-6..A-21; the
 * version checks are §A.11's; decisions where the tables are silent are in
 * docs/CRL.md ("Protocol decisions") and referred to here as D1..D9. */
#include "dsm/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DSM_NOBODY UINT32_MAX

/* ---- names and diagnostics ---------------------------------------------- */

static const char *const state_names[DSM_STATE_COUNT] = {
    "HomeExclusive", "HomeExclusiveRip", "HomeExclusiveWip", "HomeShared",     "HomeSharedRip",
    "HomeIip",       "HomeIipSpecial",   "HomeInvalid",      "RemoteInvalid",  "RemoteInvalidReq",
    "RemoteShared",  "RemoteSharedReq",  "RemoteSharedRip",  "RemoteModified", "RemoteModifiedRip",
    "RemoteModifiedWip"};

static const char *const msg_names[DSM_MSG_TYPE_COUNT] = {
    "MsgRInvalidate",   "MsgWInvalidate",       "MsgSharedAckData", "MsgExclusiveAckData",
    "MsgModifyAck",     "MsgModifyAckData",     "MsgInvalidateAck", "MsgInvalidateAckData",
    "MsgRelease",       "MsgSharedReq",         "MsgExclusiveReq",  "MsgModifyReq",
    "MsgFlush",         "MsgFlushData",         "MsgRgnInfoReq",    "MsgRgnInfoAck",
    "MsgRgnInfoNack"};

static const char *const call_names[DSM_CALL_COUNT] = {
    "-", "rgn_map", "rgn_unmap", "rgn_start_read", "rgn_end_read", "rgn_start_write", "rgn_end_write",
    "rgn_flush"};

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

static inline uint32_t bucket_of(dsm_rid_t rid)
{
    return (uint32_t)((rid * 0x9E3779B97F4A7C15ull) >> 51); /* 13 bits: 8192 buckets */
}

struct dsm_region *dsm_lookup(const struct dsm_node *node, dsm_rid_t rid)
{
    struct dsm_region *r = node->buckets[bucket_of(rid)];
    while (r && r->rid != rid)
        r = r->hash_next;
    return r;
}

void dsm_table_insert(struct dsm_node *node, struct dsm_region *r)
{
    struct dsm_region **b = &node->buckets[bucket_of(r->rid)];
    r->hash_next = *b;
    *b = r;
}

void dsm_table_remove(struct dsm_node *node, struct dsm_region *r)
{
    struct dsm_region **p = &node->buckets[bucket_of(r->rid)];
    while (*p != r)
        p = &(*p)->hash_next;
    *p = r->hash_next;
}

int dsm_node_init(struct dsm_node *node, uint32_t rank, uint32_t nranks, dsm_send_fn send, dsm_fail_fn fail,
                  void *ctx)
{
    memset(node, 0, sizeof *node);
    node->rank = rank;
    node->nranks = nranks;
    node->send = send;
    node->fail = fail;
    node->ctx = ctx;
    node->map_rid = DSM_NO_RID;
    node->buckets = calloc(DSM_TABLE_BUCKETS, sizeof *node->buckets);
    return node->buckets ? 0 : -1;
}

void dsm_node_fini(struct dsm_node *node)
{
    for (uint32_t b = 0; node->buckets && b < DSM_TABLE_BUCKETS; b++) {
        struct dsm_region *r = node->buckets[b];
        while (r) {
            struct dsm_region *next = r->hash_next;
            dsm_region_free(r);
            r = next;
        }
    }
    free(node->buckets);
    node->buckets = NULL;
}

static struct dsm_region *region_alloc(struct dsm_node *node, dsm_rid_t rid, uint32_t size)
{
    /* packed as densely as malloc packs (16-byte aligned data), like the
     * null build's regions, so both builds lay data out alike */
    size_t bytes = sizeof(struct dsm_region) + (size_t)size;
    struct dsm_region *r = calloc(1, bytes);
    if (!r) {
        char what[96];
        snprintf(what, sizeof what, "out of memory for a region of %u bytes", size);
        dsm_fail(node, NULL, what);
        return NULL;
    }
    r->magic = DSM_REGION_MAGIC;
    r->rid = rid;
    r->size = size;
    r->urc_slot = -1;
    return r;
}

struct dsm_region *dsm_create(struct dsm_node *node, uint32_t size)
{
    struct dsm_region *r = region_alloc(node, DSM_RID(node->rank, node->next_seq), size);
    node->next_seq++;
    r->state = DSM_HOME_EXCLUSIVE;
    r->version = 1; /* 0 is never granted: a fresh copy's version is below every grant */
    dsm_table_insert(node, r);
    return r;
}

struct dsm_region *dsm_remote_copy(struct dsm_node *node, dsm_rid_t rid, uint32_t size, uint32_t version)
{
    struct dsm_region *r = region_alloc(node, rid, size);
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

/* ---- sending ---------------------------------------------------------------- */

static void emit(struct dsm_node *node, const struct dsm_region *r, enum dsm_msg_type type, uint32_t dst,
                 uint32_t version, int with_data)
{
    struct dsm_msg m = {.type = type, .src = node->rank, .dst = dst, .rid = r->rid, .version = version,
                        .data = with_data ? r->data : NULL, .len = with_data ? r->size : 0};
    node->stats.sent[type]++;
    node->send(node, &m);
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
    }
    e->version = version;
}

static void dir_delete(struct dsm_region *r, struct dsm_ptr *e)
{
    *e = r->dir[--r->ndir];
}

/* A copy for `who`: record the version in its entry, send it, then count
 * on (§A.11). */
static void grant(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type type, uint32_t who)
{
    uint32_t v = r->version++;
    dir_set(node, r, who, v);
    emit(node, r, type, who, v, type != DSM_MSG_MODIFY_ACK);
}

/* First phase of a two-phase action: invalidate every copy but `except`'s. */
static void begin_invalidate(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type inv, uint32_t except,
                             enum dsm_cont cont)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->ndir; i++)
        if (r->dir[i].node != except) {
            emit(node, r, inv, r->dir[i].node, r->dir[i].version, 0);
            n++;
        }
    r->num_acks = n;
    r->cont = (uint8_t)cont;
    r->cont_node = except;
    r->state = inv == DSM_MSG_RINVALIDATE ? DSM_HOME_IIP_SPECIAL : DSM_HOME_IIP;
}

static void queue_request(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type type, uint32_t src)
{
    struct dsm_queued *q = malloc(sizeof *q);
    if (!q) {
        dsm_fail(node, r, "out of memory for a blocked request");
        return;
    }
    *q = (struct dsm_queued){.next = NULL, .type = type, .src = src};
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
 * upgrade from HomeShared is the one request whose sender keeps its entry. */
static int home_try_request(struct dsm_node *node, struct dsm_region *r, enum dsm_msg_type type, uint32_t src)
{
    struct dsm_ptr *e = dir_find(r, src);
    if (e && !(type == DSM_MSG_MODIFY_REQ && r->state == DSM_HOME_SHARED))
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
    while (r->queue_head && home_try_request(node, r, r->queue_head->type, r->queue_head->src)) {
        struct dsm_queued *q = r->queue_head;
        r->queue_head = q->next;
        if (!r->queue_head)
            r->queue_tail = NULL;
        free(q);
    }
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
        grant(node, r, DSM_MSG_SHARED_ACK_DATA, who);
        r->state = DSM_HOME_SHARED;
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
        if (!home_try_request(node, r, m->type, m->src))
            queue_request(node, r, m->type, m->src);
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
    emit(node, r, type, DSM_RID_HOME(r->rid), r->version, with_data);
    r->released = 0;
    r->state = (uint8_t)next;
}

static void remote_invalidate(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    if (m->version < r->version) { /* late: for a copy already dropped (Fig. A-19) */
        node->stats.stale++;
        return;
    }
    int w = m->type == DSM_MSG_WINVALIDATE;
    if (m->version > r->version) { /* early: overtook its grant (Fig. A-20) */
        if (r->state != DSM_REMOTE_INVALID_REQ && r->state != DSM_REMOTE_SHARED_REQ)
            protocol_error(node, r, m);
        r->rcvd_inv = 1;
        node->stats.early_inv++;
        return;
    }
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
        emit(node, r, DSM_MSG_RELEASE, DSM_RID_HOME(r->rid), r->version, 1); /* §A.10 */
        r->released = 1;
        r->state = DSM_REMOTE_SHARED_RIP;
        return;
    case DSM_REMOTE_MODIFIED_WIP:
        r->rcvd_inv = 1;
        return;
    }
    protocol_error(node, r, m);
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
    r->version = m->version;
    r->released = 0; /* an upgrade: the home has answered after our release */
    if (m->type == DSM_MSG_SHARED_ACK_DATA) {
        r->read_cnt = 1;
        r->state = DSM_REMOTE_SHARED_RIP;
    } else
        r->state = DSM_REMOTE_MODIFIED_WIP;
    r->waiting = 0; /* an early invalidation stays in rcvd_inv for the operation's end */
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
    case DSM_MSG_MODIFY_ACK_DATA:
        remote_grant(node, r, m);
        return;
    default:
        protocol_error(node, r, m);
    }
}

/* ---- mapping --------------------------------------------------------------- */

static void rgn_info(struct dsm_node *node, const struct dsm_msg *m)
{
    struct dsm_region *r = DSM_RID_HOME(m->rid) == node->rank ? dsm_lookup(node, m->rid) : NULL;
    struct dsm_msg reply = {.type = r ? DSM_MSG_RGN_INFO_ACK : DSM_MSG_RGN_INFO_NACK, .src = node->rank,
                            .dst = m->src, .rid = m->rid};
    if (r) {
        /* A new copy starts one below the next grant: every late
         * invalidation for an earlier copy of it is then not newer. */
        reply.version = r->version - 1;
        reply.aux = r->size;
    }
    node->stats.sent[reply.type]++;
    node->send(node, &reply);
}

void dsm_map_request(struct dsm_node *node, dsm_rid_t rid)
{
    node->map_rid = rid;
    node->map_reply = 0;
    struct dsm_msg m = {.type = DSM_MSG_RGN_INFO_REQ, .src = node->rank, .dst = DSM_RID_HOME(rid), .rid = rid};
    node->stats.sent[m.type]++;
    node->send(node, &m);
}

struct dsm_region *dsm_map_complete(struct dsm_node *node)
{
    dsm_rid_t rid = node->map_rid;
    node->map_rid = DSM_NO_RID;
    if (node->map_reply < 0)
        return NULL;
    return dsm_remote_copy(node, rid, node->map_size, node->map_version);
}

void dsm_deliver(struct dsm_node *node, const struct dsm_msg *m)
{
    node->stats.received[m->type]++;
    switch (m->type) {
    case DSM_MSG_RGN_INFO_REQ:
        rgn_info(node, m);
        return;
    case DSM_MSG_RGN_INFO_ACK:
    case DSM_MSG_RGN_INFO_NACK:
        if (m->rid == node->map_rid) {
            node->map_reply = m->type == DSM_MSG_RGN_INFO_ACK ? 1 : -1;
            node->map_size = m->aux;
            node->map_version = m->version;
        }
        return;
    default:
        break;
    }
    struct dsm_region *r = dsm_lookup(node, m->rid);
    if (!r) {
        /* An invalidation for a copy the URC evicted (§A.8): the home
         * takes our flush as its ack.  Anything else is a bug. */
        if (m->type == DSM_MSG_RINVALIDATE || m->type == DSM_MSG_WINVALIDATE)
            return;
        char what[160];
        snprintf(what, sizeof what, "protocol error: %s from rank %u for region %u:%u, which is not here",
                 dsm_msg_name(m->type), m->src, DSM_RID_HOME(m->rid), DSM_RID_SEQ(m->rid));
        dsm_fail(node, NULL, what);
        return;
    }
    if (dsm_is_home_state(r->state))
        home_message(node, r, m);
    else
        remote_message(node, r, m);
}

/* ---- user calls -------------------------------------------------------------- */

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
    emit(node, r, type, DSM_RID_HOME(r->rid), r->version, 0);
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
        dsm_fail(node, r, "rgn_start_read while a write operation on this region is in progress on this rank");
        return DSM_RETRY;
    }
}

enum dsm_start dsm_start_write(struct dsm_node *node, struct dsm_region *r)
{
    note_start(node, r, DSM_CALL_START_WRITE);
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE:
        r->state = DSM_HOME_EXCLUSIVE_WIP;
        r->waiting = 0;
        return DSM_STARTED;
    case DSM_REMOTE_MODIFIED:
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
        dsm_fail(node, r,
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
        dsm_fail(node, r, "rgn_end_read without a read operation in progress on this region");
    }
}

void dsm_end_write(struct dsm_node *node, struct dsm_region *r)
{
    dsm_note_call(node, r, DSM_CALL_END_WRITE);
    switch (r->state) {
    case DSM_HOME_EXCLUSIVE_WIP:
        r->state = DSM_HOME_EXCLUSIVE;
        home_retry(node, r);
        return;
    case DSM_REMOTE_MODIFIED_WIP:
        remote_op_done(node, r, DSM_REMOTE_MODIFIED, 1);
        return;
    default:
        dsm_fail(node, r, "rgn_end_write without a write operation in progress on this region");
    }
}

void dsm_flush(struct dsm_node *node, struct dsm_region *r)
{
    dsm_note_call(node, r, DSM_CALL_FLUSH);
    if (r->state == DSM_REMOTE_SHARED || r->state == DSM_REMOTE_MODIFIED)
        drop_copy(node, r, 1, r->state == DSM_REMOTE_MODIFIED || r->released, DSM_REMOTE_INVALID);
    /* home copies and operations in progress: nothing (Tables A-6..A-21) */
}
