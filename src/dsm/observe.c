/* The coherence-message observer: CRL's messages as the thesis's types,
 * the role and cause of each, and the trace sink (docs/COSMOS_TRACE.md). */
#include "dsm/observe.h"

#include <stdlib.h>

#include "shoal.h"

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

void dsm_observe_msg(struct dsm_node *node, const struct dsm_region *r, const struct dsm_msg *m)
{
    struct dsm_observer *o = node->observer;
    unsigned type = dsm_cosmos_type(m->type);
    if (!type)
        return;
    int home = DSM_RID_HOME(m->rid) == node->rank;
    struct cosmos_rec rec = {
        .block = m->rid,
        .sender = m->src,
        .role = home ? COSMOS_ROLE_HOME : COSMOS_ROLE_REMOTE,
        .type = (uint8_t)type,
        .proto = (uint8_t)m->type,
        .cause = (uint8_t)cause_of(r, m, home),
        .seq = o->seq++,
    };
    o->fn(o->ctx, &rec);
}

void dsm_observe_mark_slow(struct dsm_node *node, unsigned kind)
{
    struct dsm_observer *o = node->observer;
    struct cosmos_rec rec = {
        .block = 0, .sender = node->rank, .role = COSMOS_ROLE_MARKER, .type = (uint8_t)kind,
        .seq = o->marks++,
    };
    o->fn(o->ctx, &rec);
}

/* ---- the trace sink ---------------------------------------------------------- */

static void to_trace(void *ctx, const struct cosmos_rec *rec)
{
    cosmos_trace_put(ctx, rec);
}

int dsm_observe_trace_start(struct dsm_node *node, const char *dir, uint64_t job)
{
    struct cosmos_trace_w *w;
    int rc = cosmos_trace_open_write(dir, job, (int)node->rank, (int)node->nranks, &w);
    if (rc != SHOAL_OK)
        return rc;
    struct dsm_observer *o = calloc(1, sizeof *o);
    if (!o) {
        cosmos_trace_close(w);
        return SHOAL_ENOMEM;
    }
    *o = (struct dsm_observer){.fn = to_trace, .ctx = w};
    node->observer = o;
    return SHOAL_OK;
}

int dsm_observe_trace_stop(struct dsm_node *node)
{
    struct dsm_observer *o = node->observer;
    if (!o || o->fn != to_trace)
        return SHOAL_OK;
    node->observer = NULL;
    int rc = cosmos_trace_close(o->ctx);
    free(o);
    return rc;
}
