/* The Cosmos actions (act.h): when to take each, and how each is judged
 * confirmed (the message it predicted would have come) or wasted. */
#include "dsm/act.h"

#include "cosmos/trace.h"
#include "util/util.h"

_Static_assert(UTIL_COSMOS_ACTS == DSM_ACT_KINDS, "util_cosmos_act_names names every enum dsm_act_kind");

#define XREAD_UNWRITTEN (DSM_RACT_RMW_UNWRITTEN | DSM_RACT_MIG_UNWRITTEN)

/* Is <sender, one of the types> the next message predicted for r at this
 * side?  sender is also the one named to a sender-indexed predictor. */
static int predicted(struct dsm_node *node, const struct dsm_region *r, int home, uint32_t sender, unsigned t1,
                     unsigned t2, unsigned *type)
{
    uint32_t s = sender;
    return node->predict(node, r->rid, home, &s, type) && s == sender && (*type == t1 || *type == t2);
}

/* The action makes the predicted message unnecessary: the predictor is
 * told it came, so the pattern that led to the action stays learnt (else
 * the action's own effect would unteach it every other time). */
static void taken(struct dsm_node *node, const struct dsm_region *r, enum dsm_act_kind kind, int home,
                  uint32_t sender, unsigned type)
{
    node->stats.act_taken[kind]++;
    if (node->assume)
        node->assume(node, r->rid, home, sender, type);
}

int dsm_act_exclusive_read(struct dsm_node *node, struct dsm_region *r, uint32_t who, enum dsm_act_kind kind)
{
    unsigned type;
    if (!(node->act & DSM_ACT_BIT(kind)))
        return 0;
    if (r->act & DSM_RACT_XREAD_SKIP) { /* the last one came back unwritten: hear the stream once */
        r->act &= (uint8_t)~DSM_RACT_XREAD_SKIP;
        return 0;
    }
    if (!predicted(node, r, 1, who, COSMOS_UPGRADE_REQ, COSMOS_UPGRADE_REQ, &type))
        return 0;
    taken(node, r, kind, 1, who, type);
    return 1;
}

/* Timing (§6.3.2): the prediction says an invalidation comes next, not
 * when.  A copy used several times before it is needed elsewhere would
 * miss again after each early flush, so the flush waits for the last use,
 * counted as the last copy's (Lai and Falsafi's last touch): `touches` is
 * learnt from the real invalidations; after a flush the home reports
 * wasted, none until the next real one. */
int dsm_act_self_invalidate(struct dsm_node *node, struct dsm_region *r)
{
    unsigned type;
    uint32_t home = DSM_RID_HOME(r->rid);
    if (!(node->act & DSM_ACT_BIT(DSM_ACT_DSI)))
        return 0;
    if (r->uses < UINT16_MAX)
        r->uses++;
    /* a copy granted exclusive for a read waits for the write its home predicted */
    if ((r->act & XREAD_UNWRITTEN) || r->uses < r->touches ||
        !predicted(node, r, 0, home, COSMOS_INVAL_RO_REQ, COSMOS_INVAL_RW_REQ, &type))
        return 0;
    taken(node, r, DSM_ACT_DSI, 0, home, type);
    r->act |= DSM_RACT_DSI_FLUSHED;
    return 1;
}

void dsm_act_invalidated(struct dsm_region *r, int in_op)
{
    r->touches = (uint16_t)(r->uses + (in_op && r->uses < UINT16_MAX));
}

void dsm_act_granted(struct dsm_region *r, uint32_t aux)
{
    r->act &= (uint8_t)~DSM_RACT_DSI_FLUSHED;
    /* our last flush was wasted: no more until a real invalidation says how
     * many uses a copy gets (one more each time took Barnes-Hut's nodes,
     * read hundreds of times a step, hundreds of wasted flushes) */
    if (aux & DSM_ACT_BIT(DSM_ACT_DSI))
        r->touches = UINT16_MAX;
    r->uses = 0;
    if (aux & DSM_ACT_BIT(DSM_ACT_RMW))
        r->act |= DSM_RACT_RMW_UNWRITTEN;
    else if (aux & DSM_ACT_BIT(DSM_ACT_MIGRATORY))
        r->act |= DSM_RACT_MIG_UNWRITTEN;
}

static enum dsm_act_kind xread_kind(const struct dsm_region *r)
{
    return r->act & DSM_RACT_RMW_UNWRITTEN ? DSM_ACT_RMW : DSM_ACT_MIGRATORY;
}

void dsm_act_written(struct dsm_node *node, struct dsm_region *r)
{
    node->stats.act_confirmed[xread_kind(r)]++; /* the upgrade it predicted would have been sent now */
    r->act &= (uint8_t)~XREAD_UNWRITTEN;
}

uint32_t dsm_act_copy_leaves(struct dsm_node *node, struct dsm_region *r, int flush)
{
    uint32_t aux = 0;
    if (r->act & XREAD_UNWRITTEN) {
        node->stats.act_wasted[xread_kind(r)]++;
        r->act &= (uint8_t)~XREAD_UNWRITTEN;
        aux |= DSM_ACT_BIT(DSM_ACT_RMW);
    }
    if (flush && (r->act & DSM_RACT_DSI_FLUSHED))
        aux |= DSM_ACT_BIT(DSM_ACT_DSI);
    return aux;
}

void dsm_act_home_note(struct dsm_region *r, const struct dsm_msg *m)
{
    if (m->aux & DSM_ACT_BIT(DSM_ACT_RMW))
        r->act |= DSM_RACT_XREAD_SKIP;
    if (m->aux & DSM_ACT_BIT(DSM_ACT_DSI)) { /* one judged at a time: an older one is dropped */
        r->act = (uint8_t)((r->act & ~DSM_RACT_DSI_TELL) | DSM_RACT_DSI_PENDING);
        r->dsi_from = (m->src + 1) | (m->type == DSM_MSG_FLUSH_DATA ? DSM_DSI_DIRTY : 0);
    }
}

/* A self-invalidated copy's fate, at the next request or home start that
 * would have concerned it: its own rank asking again first wasted it; a
 * write elsewhere (or any use of a dirty copy) would have invalidated it,
 * so the invalidation it predicted would have come.  A read of a clean
 * copy elsewhere decides nothing yet. */
void dsm_act_judge(struct dsm_node *node, struct dsm_region *r, uint32_t who, int write)
{
    uint32_t from = (r->dsi_from & ~DSM_DSI_DIRTY) - 1;
    if (who == from) {
        node->stats.act_wasted[DSM_ACT_DSI]++;
        r->act |= DSM_RACT_DSI_TELL; /* in the grant this request is about to get */
        r->act &= (uint8_t)~DSM_RACT_DSI_PENDING;
        return;
    }
    if (!write && !(r->dsi_from & DSM_DSI_DIRTY))
        return;
    node->stats.act_confirmed[DSM_ACT_DSI]++;
    r->act &= (uint8_t)~DSM_RACT_DSI_PENDING;
    r->dsi_from = 0;
}

uint32_t dsm_act_grant_tag(struct dsm_region *r, uint32_t who)
{
    if (!(r->act & DSM_RACT_DSI_TELL) || who != (r->dsi_from & ~DSM_DSI_DIRTY) - 1)
        return 0;
    r->act &= (uint8_t)~DSM_RACT_DSI_TELL;
    r->dsi_from = 0;
    return DSM_ACT_BIT(DSM_ACT_DSI);
}
