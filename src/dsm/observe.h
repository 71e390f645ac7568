/* The coherence-message observer (issue 19): every coherence message the
 * protocol engine receives, at either side, becomes a Cosmos record
 * <block, role, sender, type, proto, cause> offered to a sink (the trace
 * file of SHOAL_COSMOS_TRACE, or a test's).  docs/CRL.md §8.1 maps CRL's
 * messages to the thesis's types.  Off (node->observer NULL), the engine
 * pays one predictable branch per delivered message. */
#ifndef SHOAL_DSM_OBSERVE_H
#define SHOAL_DSM_OBSERVE_H

#include "cosmos/trace.h"
#include "dsm/proto.h"

typedef void (*dsm_observe_fn)(void *ctx, const struct cosmos_rec *rec);

struct dsm_observer {
    dsm_observe_fn fn;
    void *ctx;
    uint64_t seq;   /* coherence messages received so far */
    uint64_t marks; /* markers written so far */
};

/* The thesis's type of a CRL message; 0 for mapping and deletion
 * messages, which are not coherence messages. */
unsigned dsm_cosmos_type(enum dsm_msg_type t);

/* From dsm_deliver: m arrived for region r (NULL when absent here). */
void dsm_observe_msg(struct dsm_node *node, const struct dsm_region *r, const struct dsm_msg *m);

/* A marker record (enum cosmos_marker) at this point of the rank's stream. */
void dsm_observe_mark_slow(struct dsm_node *node, unsigned kind);
static inline void dsm_observe_mark(struct dsm_node *node, unsigned kind)
{
    if (__builtin_expect(node->observer != NULL, 0))
        dsm_observe_mark_slow(node, kind);
}

/* SHOAL_COSMOS_TRACE=DIR: node's records go to DIR's trace file for this
 * rank of job `job`.  Returns the cosmos_trace_open_write code. */
int dsm_observe_trace_start(struct dsm_node *node, const char *dir, uint64_t job);
/* Closes the trace (if any) and detaches the observer. */
int dsm_observe_trace_stop(struct dsm_node *node);

#endif
