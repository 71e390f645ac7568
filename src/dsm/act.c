/* The Cosmos actions (act.h): when to take each, and how each is judged
 * confirmed (the message it predicted would have come) or wasted. */
#include "dsm/act.h"

#include "cosmos/trace.h"
#include "util/util.h"

_Static_assert(UTIL_COSMOS_ACTS == DSM_ACT_KINDS, "util_cosmos_act_names names every enum dsm_act_kind");

#define XREAD_UNWRITTEN (DSM_RACT_RMW_UNWRITTEN | DSM_RACT_MIG_UNWRITTEN)

/* The throttle (docs/COSMOS.md "Throttling"): an action stops on a region
 * once its wastes there outweigh its confirmations by TRUST_MARGIN, and
 * retries after TRUST_SKIP chances, twice as many after each retry that is
 * wasted too, up to TRUST_LEVELS doublings.  A waste weighs what it costs
 * in messages against what a confirmation saves: a self-invalidation saves
 * one (its flush replaces an invalidation and its ack) and a waste costs
 * three (the flush, the re-request, the grant); an exclusive copy for a
 * read saves an upgrade and its ack, and a waste costs a recall and its
 * ack. */
#define TRUST_MARGIN 2
#define TRUST_CAP 8
#define TRUST_SKIP 2
#define TRUST_LEVELS 10
#define WASTE_DSI 3
#define WASTE_XREAD 1
/* a confirmed push saves a read's request and grant for one push; a wasted
 * one costs the push and, at the next write, an invalidation and its ack.
 * An exclusive push (xpush) has its own standing at the same weights:
 * unread, push's; read and never written, an exclusive read's (the recall
 * it costs against the upgrade it saves, WASTE_XREAD).  Its own, not
 * push's: Water --fine's owner reads its molecule between the push and
 * the reader's read, which recalls an exclusive copy unread but leaves a
 * shared one, so on push's standing the exclusive pushes' wastes
 * suspended the shared pushes (none taken), which on their own are read
 * every time (2278 of 2278 at 2 ranks, 20 steps). */
#define WASTE_PUSH 3
/* an upgrade ahead (D14) saves the upgrade's request; one that comes too
 * early is recalled by the home's next read (MsgRInvalidate, MsgRelease)
 * and its rank then asks for the upgrade after all: three more.  One that
 * crosses its rank's own request saves nothing and costs nothing (it is
 * that request's answer): weighed as an exclusive read's waste, so that
 * late ones alone wear its standing down slowly. */
#define WASTE_UPGRADE 3

/* May the action fire at this chance?  1 also for a suspended action's
 * retry; its result then decides the next back-off. */
static int trust_allows(struct dsm_act_trust *t)
{
    if (t->credit > -TRUST_MARGIN || t->skip == 0)
        return 1;
    t->skip--;
    return 0;
}

/* A suspended action's wait before its next retry, which doubles with each
 * wasted retry.  Set when a waste suspends it, and again when it fires: a
 * suspended one's retry is spent, and the next waits as many chances again
 * whenever the retry's outcome comes.  A retry's
 * outcome may come a period later (a push is judged at the next write),
 * and until then every chance was a retry: Water --untuned at 4 ranks
 * pushed 190 times with none confirmed (the other ranks' force additions
 * recall the pushed copies before their readers read). */
static void trust_backoff(struct dsm_act_trust *t)
{
    if (t->credit <= -TRUST_MARGIN)
        t->skip = (uint16_t)(TRUST_SKIP << (-TRUST_MARGIN - t->credit));
}

/* The cap on untried actions: while a rank's dsi (push) has no
 * confirmation to its credit, at most UNTRIED_CAP self-invalidations
 * (pushes) of regions without one of their own are out with no outcome
 * known (tuned Water's first dsi at each rank flushed all 64 copies before
 * any was judged; Water --untuned at 4 ranks pushed 160-190 copies, none
 * read, before the first push was judged at its home's next write).  Only
 * dsi, the pushes and the upgrade ahead need it: a waste of any costs
 * three times what a confirmation saves, while an exclusive read's costs
 * what it saves, so an untried batch of those can lose no more than it
 * can win.  Each outcome
 * frees a place.  A dsi outcome comes only when the rank is granted the
 * region again, which may be never, so after UNTRIED_EPOCH chances
 * declined by the cap with no news (no outcome, no firing) the outstanding
 * ones are written off. */
#define UNTRIED_CAP 4
#define UNTRIED_EPOCH 256

static int untried_allows(struct dsm_act_untried *u)
{
    if (u->out >= UNTRIED_CAP && ++u->declined < UNTRIED_EPOCH)
        return 0;
    if (u->out >= UNTRIED_CAP) /* the epoch is over */
        u->out = 0;
    u->out++;
    u->declined = 0;
    return 1;
}

enum { SIDE_HOME, SIDE_REMOTE, SIDE_PUSH, SIDE_XPUSH, SIDE_UPGRADE, SIDES }; /* node->act_trust[] */
_Static_assert(SIDES == DSM_ACT_SIDES, "a standing per side");

/* The region's own standing for the actions of a side. */
static struct dsm_act_trust *trust_of(struct dsm_region *r, int side)
{
    return side == SIDE_PUSH      ? &r->push_trust
         : side == SIDE_XPUSH     ? &r->xpush_trust
         : side == SIDE_UPGRADE ? &r->upgrade_trust
                                  : &r->trust;
}

/* A region with confirmations to its credit decides alone; one without is
 * judged by its own wastes and then by its rank's record on all regions
 * (Barnes-Hut wastes most regions' exclusive reads once, so no region's
 * record alone would stop them), and for dsi and push, while that record
 * has no confirmation, by the cap on untried actions.  Not even a dsi
 * whose last-use count two real invalidations agreed on is spared: tuned
 * Water's owner reading its molecule between a remote's copy and its force
 * addition, or not, by the order of the ranks, gave all 64 copies a
 * steady count of one use, and all 64 flushes were wasted. */
static int act_allowed(struct dsm_node *node, struct dsm_region *r, int side)
{
    struct dsm_act_trust *t = trust_of(r, side), *rank = &node->act_trust[side];
    if (t->credit > 0)
        return 1;
    if (!trust_allows(t) || !trust_allows(rank))
        return 0;
    if (side != SIDE_HOME && rank->credit <= 0 && !untried_allows(&node->act_untried[side]))
        return 0;
    trust_backoff(t);
    trust_backoff(rank);
    return 1;
}

static void trust_confirmed(struct dsm_act_trust *t)
{
    t->credit = (int8_t)(t->credit <= -TRUST_MARGIN ? 1 - TRUST_MARGIN
                                                    : (t->credit < TRUST_CAP ? t->credit + 1 : TRUST_CAP));
}

static void trust_wasted(struct dsm_act_trust *t, int weight)
{
    if (t->credit > -TRUST_MARGIN) /* suspended now if the waste outweighs the margin left */
        t->credit = (int8_t)(t->credit - weight > -TRUST_MARGIN ? t->credit - weight : -TRUST_MARGIN);
    else if (t->credit > -TRUST_MARGIN - TRUST_LEVELS) /* a retry wasted: back off further */
        t->credit--;
    trust_backoff(t);
}

/* Is <sender, one of the types> the next message predicted for r at this
 * side?  sender is also the one named to a sender-indexed predictor. */
static int predicted(struct dsm_node *node, const struct dsm_region *r, int home, uint32_t sender, unsigned t1,
                     unsigned t2, unsigned *type)
{
    uint32_t s = sender;
    return node->predict(node, r->rid, home, &s, type) && s == sender && (*type == t1 || *type == t2);
}

/* A predicted action at its chance: taken (1), or declined by the
 * standing of its side (counted throttled).  home: the home's side acts.
 * Taken, it makes the predicted message unnecessary: the predictor is told
 * it came, so the pattern that led to the action stays learnt (else the
 * action's own effect would unteach it every other time). */
static int fire(struct dsm_node *node, struct dsm_region *r, int side, enum dsm_act_kind kind, int home,
                uint32_t sender, unsigned type)
{
    if (!act_allowed(node, r, side)) {
        node->stats.act_throttled[kind]++;
        return 0;
    }
    node->stats.act_taken[kind]++;
    if (node->assume)
        node->assume(node, r->rid, home, sender, type);
    return 1;
}

/* An action's outcome on r, into its and its rank's standing: confirmed
 * (waste 0), or wasted at that weight. */
static void judged(struct dsm_node *node, struct dsm_region *r, int side, int waste)
{
    if (side != SIDE_HOME) { /* news: a place in the cap frees, the epoch restarts */
        struct dsm_act_untried *u = &node->act_untried[side];
        u->out = (uint16_t)(u->out - (u->out > 0));
        u->declined = 0;
    }
    /* the rank's record is of the actions its regions' own records did not
     * decide (act_allowed): Barnes-Hut's pushes to regions with credit were
     * confirmed often enough to lift a suspended rank at once, and each such
     * lift let pushes to regions without credit (its wastes) go on */
    struct dsm_act_trust *t = trust_of(r, side), *rank = t->credit > 0 ? NULL : &node->act_trust[side];
    if (!waste) {
        trust_confirmed(t);
        if (rank)
            trust_confirmed(rank);
    } else {
        trust_wasted(t, waste);
        if (rank)
            trust_wasted(rank, waste);
    }
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
    if (!fire(node, r, SIDE_HOME, kind, 1, who, type))
        return 0;
    r->act |= DSM_RACT_XREAD_OUT;
    return 1;
}

/* Timing (§6.3.2): the prediction says an invalidation comes next, not
 * when.  A copy used several times before it is needed elsewhere would
 * miss again after each early flush, so the flush waits for the last use,
 * counted as the last copy's (Lai and Falsafi's last touch): `touches` is
 * learnt from the real invalidations, and trusted once two in a row came
 * after the same count (a flush at that count would have been confirmed);
 * before the first one, the prediction alone decides.  After a flush the
 * home reports wasted, none until two real ones agree again. */
int dsm_act_self_invalidate(struct dsm_node *node, struct dsm_region *r)
{
    unsigned type;
    uint32_t home = DSM_RID_HOME(r->rid);
    if (!(node->act & DSM_ACT_BIT(DSM_ACT_DSI)))
        return 0;
    if (r->uses < UINT16_MAX)
        r->uses++;
    /* a copy granted (pushed, upgraded ahead) exclusive for a read waits for the write its home predicted */
    if ((r->act & XREAD_UNWRITTEN) || (r->pushed & (DSM_PUSHED_UNWRITTEN | DSM_PUSHED_UPGRADED)) ||
        r->uses < r->touches ||
        (r->touches && !(r->act & DSM_RACT_DSI_STEADY)) ||
        !predicted(node, r, 0, home, COSMOS_INVAL_RO_REQ, COSMOS_INVAL_RW_REQ, &type))
        return 0;
    if (!fire(node, r, SIDE_REMOTE, DSM_ACT_DSI, 0, home, type))
        return 0;
    r->act |= DSM_RACT_DSI_FLUSHED;
    return 1;
}

void dsm_act_invalidated(struct dsm_region *r, int in_op)
{
    uint16_t touches = (uint16_t)(r->uses + (in_op && r->uses < UINT16_MAX));
    r->act = (uint8_t)(touches == r->touches ? r->act | DSM_RACT_DSI_STEADY : r->act & ~DSM_RACT_DSI_STEADY);
    r->touches = touches;
}

void dsm_act_granted(struct dsm_node *node, struct dsm_region *r, uint32_t aux, int upgrade)
{
    /* our last flush was wasted: no more until real invalidations say how
     * many uses a copy gets (one more each time took Barnes-Hut's nodes,
     * read hundreds of times a step, hundreds of wasted flushes).  No news
     * in the grant after one means the home judged it confirmed (it judges
     * a flush at its rank's next request at the latest), or dropped it for
     * a later one of another rank's. */
    if (aux & DSM_ACT_BIT(DSM_ACT_DSI)) {
        r->touches = UINT16_MAX;
        r->act &= (uint8_t)~DSM_RACT_DSI_STEADY;
        judged(node, r, SIDE_REMOTE, WASTE_DSI);
    } else if (r->act & DSM_RACT_DSI_FLUSHED) {
        judged(node, r, SIDE_REMOTE, 0);
    }
    r->act &= (uint8_t)~DSM_RACT_DSI_FLUSHED;
    /* the home heard the crossed copy's release before it granted again (D14) */
    r->pushed &= (uint8_t)~DSM_PUSHED_CROSSED;
    /* uses count from the data's arrival: a read then a write is two uses
     * whether the write upgraded the copy or rmw granted it exclusive, so
     * the last-use count learnt before rmw began still holds after */
    if (!upgrade)
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
    if (node->assume) /* and acknowledged: the remote's half of what the predictor hears */
        node->assume(node, r->rid, 0, DSM_RID_HOME(r->rid), COSMOS_UPGRADE_RESP);
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
    /* pushed and never read (exclusive: or never written): wasted */
    if (r->pushed & (DSM_PUSHED_UNREAD | DSM_PUSHED_UNWRITTEN)) {
        node->stats.act_wasted[r->pushed & DSM_PUSHED_UNWRITTEN ? DSM_ACT_XPUSH : DSM_ACT_PUSH]++;
        aux |= (r->pushed & DSM_PUSHED_UNREAD ? DSM_ACT_BIT(DSM_ACT_PUSH) : 0) |
               (r->pushed & DSM_PUSHED_UNWRITTEN ? DSM_ACT_BIT(DSM_ACT_XPUSH) : 0);
    }
    if (r->pushed & DSM_PUSHED_UPGRADED) { /* upgraded ahead and never written */
        node->stats.act_wasted[DSM_ACT_UPGRADE]++;
        aux |= DSM_ACT_BIT(DSM_ACT_UPGRADE);
    }
    /* the crossed mark stays until the next grant: after a release the
     * copy's end may overtake the release (D7), and must say so too (D14) */
    if (r->pushed & DSM_PUSHED_CROSSED)
        aux |= DSM_AUX_CROSSED;
    r->pushed &= DSM_PUSHED_CROSSED;
    return aux;
}

/* xpush: is who's upgrade the message predicted after the read its push
 * answers?  The read is never heard once pushed, so the home asks what
 * would follow it (the stand-ins keep that pattern learnt: the push's read
 * and upgrade are assumed, the remote's exclusive copy heard as the read's
 * grant).  After one came back unwritten the answer is no once, as rmw's
 * skip: the real stream is heard and unlearns a wrong upgrade. */
static int xpush_predicted(struct dsm_node *node, struct dsm_region *r, uint32_t who)
{
    uint32_t s = who;
    unsigned type;
    if (r->push_xskip) {
        r->push_xskip = 0;
        return 0;
    }
    return node->predict_after && node->predict_after(node, r->rid, 1, who, COSMOS_GET_RO_REQ, &s, &type) &&
           s == who && type == COSMOS_UPGRADE_REQ;
}

/* Timing, as for dsi: the prediction says a read comes next, not after
 * which of the home's writes.  A home that writes a region several times
 * before the others read it (Water's owner: its correction, then the next
 * step's prediction) would push after each and have the pushed copy
 * invalidated by the next write, so the push waits for the write after
 * which the last real read request came (push_after); a push invalidated
 * unread moves that one write later. */
int dsm_act_push(struct dsm_node *node, struct dsm_region *r, uint32_t who, int exclusive_ok)
{
    unsigned type;
    if ((r->push_after && r->push_writes != r->push_after) ||
        !predicted(node, r, 1, who, COSMOS_GET_RO_REQ, COSMOS_GET_RO_REQ, &type))
        return 0;
    if (exclusive_ok && (node->act & DSM_ACT_BIT(DSM_ACT_XPUSH)) && xpush_predicted(node, r, who) &&
        fire(node, r, SIDE_XPUSH, DSM_ACT_XPUSH, 1, who, type)) {
        if (node->assume) /* the upgrade after the read, made unnecessary too */
            node->assume(node, r->rid, 1, who, COSMOS_UPGRADE_REQ);
        return DSM_PUSH_EXCLUSIVE;
    }
    /* declined exclusive, it may still go shared */
    if (!(node->act & DSM_ACT_BIT(DSM_ACT_PUSH)) || !fire(node, r, SIDE_PUSH, DSM_ACT_PUSH, 1, who, type))
        return 0;
    return DSM_PUSH_SHARED;
}

void dsm_act_push_used(struct dsm_node *node, struct dsm_region *r, int write)
{
    if ((r->pushed & DSM_PUSHED_UNREAD) && !(r->pushed & DSM_PUSHED_UNWRITTEN))
        node->stats.act_confirmed[DSM_ACT_PUSH]++;
    /* an exclusive push read: the write its home predicted is still to come */
    r->pushed &= (uint8_t)~DSM_PUSHED_UNREAD;
    if (!write || !(r->pushed & (DSM_PUSHED_UNWRITTEN | DSM_PUSHED_UPGRADED)))
        return;
    /* the upgrade it predicted would have been sent now */
    node->stats.act_confirmed[r->pushed & DSM_PUSHED_UNWRITTEN ? DSM_ACT_XPUSH : DSM_ACT_UPGRADE]++;
    /* and acknowledged: the remote's half of what the predictor hears */
    if ((r->pushed & DSM_PUSHED_UNWRITTEN) && node->assume)
        node->assume(node, r->rid, 0, DSM_RID_HOME(r->rid), COSMOS_UPGRADE_RESP);
    r->pushed &= (uint8_t)~(DSM_PUSHED_UNWRITTEN | DSM_PUSHED_UPGRADED);
}

uint32_t dsm_act_push_refused(struct dsm_node *node, enum dsm_act_kind kind, int counted)
{
    node->stats.act_wasted[kind] += !counted;
    return kind == DSM_ACT_UPGRADE ? DSM_ACT_BIT(DSM_ACT_UPGRADE)
         : DSM_ACT_BIT(DSM_ACT_PUSH) | (kind == DSM_ACT_XPUSH ? DSM_ACT_BIT(DSM_ACT_XPUSH) : 0);
}

/* A pushed copy invalidated unread: the push came a write too early; the
 * writes before it count again towards the next. */
static void push_too_early(struct dsm_region *r)
{
    r->push_after = (uint16_t)(r->push_writes_then + 1);
    r->push_writes = (uint16_t)(r->push_writes + r->push_writes_then);
}

void dsm_act_push_judged(struct dsm_node *node, struct dsm_region *r, struct dsm_ptr *e, const struct dsm_msg *m)
{
    int unread = m && (m->aux & DSM_ACT_BIT(DSM_ACT_PUSH)), x = e->pushed == DSM_PUSH_EXCLUSIVE;
    /* read but never written: the upgrade was mispredicted, not the read */
    int unwritten = !unread && x && m && (m->aux & DSM_ACT_BIT(DSM_ACT_XPUSH));
    e->pushed = 0;
    judged(node, r, x ? SIDE_XPUSH : SIDE_PUSH, unread ? WASTE_PUSH : unwritten ? WASTE_XREAD : 0);
    /* an exclusive copy is recalled by the home's reads too: that says
     * nothing of the write after which readers read */
    if (unread && !x && (m->type == DSM_MSG_INVALIDATE_ACK || m->type == DSM_MSG_INVALIDATE_ACK_DATA))
        push_too_early(r);
    if (unwritten) /* as rmw's: the next push is not exclusive, and the predictor hears the real stream once */
        r->push_xskip = 1;
}

void dsm_act_push_wrote(struct dsm_region *r)
{
    if (r->push_writes < UINT16_MAX)
        r->push_writes++;
}

void dsm_act_push_sent(struct dsm_region *r)
{
    r->push_writes_then = r->push_writes;
    r->push_writes = 0;
}

/* A request with no write since the last one or the last push says
 * nothing of the write after which readers read (a copy pushed exclusive
 * and recalled by the home's own read is asked for again so). */
void dsm_act_push_read_req(struct dsm_region *r)
{
    if (!r->push_writes)
        return;
    r->push_after = r->push_writes;
    r->push_writes = 0;
}

void dsm_act_home_note(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    if (r->act & DSM_RACT_XREAD_OUT) { /* the exclusive-for-read copy's news: written or not */
        r->act &= (uint8_t)~DSM_RACT_XREAD_OUT;
        judged(node, r, SIDE_HOME, m->aux & DSM_ACT_BIT(DSM_ACT_RMW) ? WASTE_XREAD : 0);
    }
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

/* The upgrade ahead (D14).  Timing, as for dsi and push: the prediction
 * says the sharer's upgrade comes next, not after which of the home's own
 * reads, and one granted before the home's last read is recalled by it.
 * So the home counts its reads since its last write and remembers how many
 * it had done (the one under way counted) when the last real upgrade
 * request came; once two in a row agree it grants at that read's end
 * (Water --fine's owner reads its molecule in every pair it computes, then
 * the reader adds its forces).  Before the first real request the
 * prediction alone decides; a recall sets the count aside until two agree
 * again. */
void dsm_act_upgrade_read(struct dsm_region *r)
{
    if (r->up_reads < UINT16_MAX - 1)
        r->up_reads++;
}

void dsm_act_upgrade_wrote(struct dsm_region *r)
{
    r->up_reads = 0;
}

void dsm_act_upgrade_asked(struct dsm_region *r, int reading)
{
    uint16_t after = (uint16_t)(r->up_reads + reading + 1); /* 0 is "none yet" */
    r->up_steady = after == r->up_after;
    r->up_after = after;
}

int dsm_act_upgrade(struct dsm_node *node, struct dsm_region *r, uint32_t who)
{
    unsigned type;
    if (r->up_after && (!r->up_steady || r->up_reads + 1 != r->up_after))
        return 0;
    if (!predicted(node, r, 1, who, COSMOS_UPGRADE_REQ, COSMOS_UPGRADE_REQ, &type))
        return 0;
    return fire(node, r, SIDE_UPGRADE, DSM_ACT_UPGRADE, 1, who, type);
}

void dsm_act_upgrade_taken(struct dsm_node *node, struct dsm_region *r, uint32_t aux, int crossed)
{
    dsm_act_granted(node, r, aux, 1);
    if (crossed) /* it answered a request already sent: it saved nothing */
        node->stats.act_wasted[DSM_ACT_UPGRADE]++;
    r->pushed |= crossed ? DSM_PUSHED_CROSSED : DSM_PUSHED_UPGRADED;
}

void dsm_act_upgrade_judged(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m)
{
    int waste = !m || (m->aux & DSM_AUX_CROSSED)             ? WASTE_XREAD
              : (m->aux & DSM_ACT_BIT(DSM_ACT_UPGRADE)) ? WASTE_UPGRADE
                                                             : 0;
    judged(node, r, SIDE_UPGRADE, waste);
    if (waste == WASTE_UPGRADE) /* too early: the count is not trusted until two real requests agree */
        r->up_steady = 0;
}
