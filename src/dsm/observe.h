/* The coherence-message observer (issue 19): every coherence message the
 * protocol engine receives, at either side, becomes a Cosmos record
 * <block, role, sender, type, proto, cause> offered to a sink (the trace
 * file of SHOAL_COSMOS_TRACE and the online predictor of SHOAL_COSMOS, or a
 * test's).  docs/CRL.md §8.1 maps CRL's
 * messages to the thesis's types.  Off (node->observer NULL), the engine
 * pays one predictable branch per delivered message. */
#ifndef SHOAL_DSM_OBSERVE_H
#define SHOAL_DSM_OBSERVE_H

#include "cosmos/cosmos.h"
#include "cosmos/trace.h"
#include "dsm/proto.h"

#include <stddef.h>

/* blk: the region's predictor state (NULL for markers and for messages
 * whose region is absent here). */
typedef void (*dsm_observe_fn)(void *ctx, const struct cosmos_rec *rec, struct cosmos_blk *blk);
/* Region r leaves this rank's table (its state must be kept elsewhere). */
typedef void (*dsm_leave_fn)(void *ctx, struct dsm_region *r, int home);

struct dsm_observer {
    dsm_observe_fn fn;
    dsm_leave_fn leave; /* may be NULL */
    void *ctx;
    uint64_t seq;   /* coherence messages received so far */
    uint64_t marks; /* markers written so far */
};

/* The thesis's type of a CRL message; 0 for mapping and deletion
 * messages, which are not coherence messages. */
unsigned dsm_cosmos_type(enum dsm_msg_type t);

/* From dsm_deliver: m arrived for region r (NULL when absent here). */
void dsm_observe_msg(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m);

/* From dsm_table_remove: r leaves the table, with its predictor state. */
void dsm_observe_leave_slow(struct dsm_node *node, struct dsm_region *r);
static inline void dsm_observe_leave(struct dsm_node *node, struct dsm_region *r)
{
    if (__builtin_expect(node->observer != NULL, 0))
        dsm_observe_leave_slow(node, r);
}

/* A marker record (enum cosmos_marker) at this point of the rank's stream. */
void dsm_observe_mark_slow(struct dsm_node *node, unsigned kind);
static inline void dsm_observe_mark(struct dsm_node *node, unsigned kind)
{
    if (__builtin_expect(node->observer != NULL, 0))
        dsm_observe_mark_slow(node, kind);
}

/* What crl_init attaches (SHOAL_COSMOS_TRACE, SHOAL_COSMOS): a trace file,
 * an online predictor per side, or both. */
struct dsm_cosmos_cfg {
    const char *trace_dir; /* NULL: no trace */
    uint64_t job;          /* names the trace file */
    int predict;           /* run the predictor in-line */
    struct cosmos_cfg pred;
    int timing;            /* time each prediction (SHOAL_CRL_STATS=1) */
};
/* SHOAL_OK, or the code of the trace or predictor that could not be made
 * (nothing is attached then). */
int dsm_cosmos_start(struct dsm_node *node, const struct dsm_cosmos_cfg *cfg);
/* The online predictor's accuracy and cost into buf (nothing when it is
 * off); returns the bytes written, as snprintf. */
int dsm_cosmos_describe(const struct dsm_node *node, char *buf, size_t cap);
/* The actions' queries (dsm/act.h; node->predict and node->assume): the
 * online predictor's next message for rid at one side, and a message an
 * action made unnecessary offered to it as if it had come. */
int dsm_cosmos_predict(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t *sender, unsigned *type);
void dsm_cosmos_assume(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t sender, unsigned type);
/* The next message predicted after one that has not come (dsm_predict_after_fn). */
int dsm_cosmos_predict_after(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t after_sender,
                             unsigned after_type, uint32_t *sender, unsigned *type);
/* Closes the trace, frees the predictors, detaches; the trace's close code. */
int dsm_cosmos_stop(struct dsm_node *node);

#endif
