/* Actions driven by Cosmos predictions (SHOAL_COSMOS_ACT, issue 19 item 6;
 * docs/COSMOS.md "Actions", docs/CRL.md's tables).  The protocol engine
 * asks here whether to take an action at the few points where one is a
 * legal transition; the answers follow node->predict and count in
 * node->stats.act_*.  Feedback rides on the aux word of messages the
 * protocol sends anyway (DSM_ACT_BIT(kind)): a copy granted exclusive for
 * a read that leaves unwritten tags its ack, flush or release with
 * DSM_ACT_RMW's bit; a self-invalidation tags its flush with DSM_ACT_DSI's,
 * and the home's next grant to that rank carries DSM_ACT_DSI's bit when it
 * judged the self-invalidation wasted; a pushed copy that leaves unread
 * tags its ack or flush with DSM_ACT_PUSH's bit, one pushed exclusive that
 * leaves unwritten with DSM_ACT_XPUSH's too; a copy upgraded ahead that
 * leaves unwritten with DSM_ACT_UPGRADE's, and one whose own upgrade
 * request crossed the upgrade ahead with DSM_AUX_CROSSED. */
#ifndef SHOAL_DSM_ACT_H
#define SHOAL_DSM_ACT_H

#include "dsm/proto.h"

/* Home: answer who's MsgSharedReq with an exclusive copy (kind DSM_ACT_RMW
 * or DSM_ACT_MIGRATORY), because the home predicts who's upgrade next.
 * The caller has checked that an exclusive grant is legal now. */
int dsm_act_exclusive_read(struct dsm_node *node, struct dsm_region *r, uint32_t who, enum dsm_act_kind kind);

/* Remote: an operation on the copy ended; flush it now, because an
 * invalidation is predicted for it next and this was its last use? */
int dsm_act_self_invalidate(struct dsm_node *node, struct dsm_region *r);

/* Remote: a grant arrived; aux is the grant's; upgrade: it upgrades the
 * copy held (MsgModifyAck(Data)), whose uses go on counting. */
void dsm_act_granted(struct dsm_node *node, struct dsm_region *r, uint32_t aux, int upgrade);

/* Remote: an invalidation arrived for the current copy (in_op: during an
 * operation on it). */
void dsm_act_invalidated(struct dsm_region *r, int in_op);

/* Remote: a write starts on a copy that came exclusive for a read. */
void dsm_act_written(struct dsm_node *node, struct dsm_region *r);

/* Remote: the copy leaves (ack, flush or release); the aux word to send. */
uint32_t dsm_act_copy_leaves(struct dsm_node *node, struct dsm_region *r, int flush);

/* Home: an accepted ack, flush or release carried action tags. */
void dsm_act_home_note(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m);

/* Home: the aux word of a grant to who (a wasted self-invalidation's news). */
uint32_t dsm_act_grant_tag(struct dsm_region *r, uint32_t who);

/* Home: a request from who (a write, or not), or the home's own start
 * (who = the home), while a self-invalidation waits to be judged. */
void dsm_act_judge(struct dsm_node *node, struct dsm_region *r, uint32_t who, int write);

/* Home: push the data just written to who, which has no copy, because its
 * read request is predicted next (DSM_ACT_PUSH), and exclusive because its
 * upgrade is predicted after that read (DSM_ACT_XPUSH)?  0 no, or
 * DSM_PUSH_SHARED or _EXCLUSIVE.  The caller has checked that a read grant
 * to who is legal now, and with exclusive_ok an exclusive grant. */
int dsm_act_push(struct dsm_node *node, struct dsm_region *r, uint32_t who, int exclusive_ok);

/* Remote: an operation (write: a write) starts on a pushed copy not read
 * yet, or pushed exclusive and not written yet. */
void dsm_act_push_used(struct dsm_node *node, struct dsm_region *r, int write);

/* Home, push's timing: a write of the home's ended; a push went; a read
 * request came from a rank without a pushed copy. */
void dsm_act_push_wrote(struct dsm_region *r);
void dsm_act_push_sent(struct dsm_region *r);
void dsm_act_push_read_req(struct dsm_region *r);

/* Remote: a push, an exclusive push or an upgrade ahead (kind) is flushed
 * unread at once (D12, D13, D14); the flush's aux word.  counted: its
 * waste is counted already. */
uint32_t dsm_act_push_refused(struct dsm_node *node, enum dsm_act_kind kind, int counted);

/* Home: the pushed copy of entry e ends, by m (its ack or flush: its tag
 * says it was never read) or by its upgrade (m NULL: it was used). */
void dsm_act_push_judged(struct dsm_node *node, struct dsm_region *r, struct dsm_ptr *e, const struct dsm_msg *m);

/* Home, the upgrade ahead's timing (DSM_ACT_UPGRADE, D14): a read of the
 * home's ended; a write of the home's ended; a real upgrade request came
 * from the sole sharer (reading: during a read of the home's). */
void dsm_act_upgrade_read(struct dsm_region *r);
void dsm_act_upgrade_wrote(struct dsm_region *r);
void dsm_act_upgrade_asked(struct dsm_region *r, int reading);

/* Home: grant who, the sole sharer, its upgrade now, because it is
 * predicted next and this was the home's last read before it?  The caller
 * has checked that the grant is legal now. */
int dsm_act_upgrade(struct dsm_node *node, struct dsm_region *r, uint32_t who);

/* Remote: an upgrade ahead taken by the copy (crossed: it answers the
 * copy's own upgrade request, already sent); aux is its. */
void dsm_act_upgrade_taken(struct dsm_node *node, struct dsm_region *r, uint32_t aux, int crossed);

/* Home: r's upgrade ahead is judged by m (the copy's ack, flush or
 * release: its tags say unwritten or crossed), or by the crossing request
 * (m NULL). */
void dsm_act_upgrade_judged(struct dsm_node *node, struct dsm_region *r, const struct dsm_msg *m);

#endif
