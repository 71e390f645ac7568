/* dsm protocol engine: CRL's fixed-home, directory-based invalidate protocol
 * (thesis Appendix A, Tables A-6..A-21, with the version numbers of §A.11)
 * over plain structs.  The engine never touches the network: it is fed
 * "user call" and "message arrived" events and hands every message it sends
 * to node->send.  src/dsm/crl.c wires it to active messages; the tests wire
 * it to a simulated network that reorders at will.  docs/CRL.md describes
 * the states, messages and every decision taken where the thesis is silent. */
#ifndef SHOAL_DSM_PROTO_H
#define SHOAL_DSM_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "cosmos/cosmos.h"

typedef uint64_t dsm_rid_t;

#define DSM_RID(home, seq) (((dsm_rid_t)(home) << 32) | (uint32_t)(seq))
#define DSM_RID_HOME(rid) ((uint32_t)((rid) >> 32))
#define DSM_RID_SEQ(rid) ((uint32_t)(rid))

enum dsm_state {
    /* home side (Table A-1) */
    DSM_HOME_EXCLUSIVE,
    DSM_HOME_EXCLUSIVE_RIP,
    DSM_HOME_EXCLUSIVE_WIP,
    DSM_HOME_SHARED,
    DSM_HOME_SHARED_RIP,
    DSM_HOME_IIP,
    DSM_HOME_IIP_SPECIAL,
    DSM_HOME_INVALID,
    /* remote side (Table A-2) */
    DSM_REMOTE_INVALID,
    DSM_REMOTE_INVALID_REQ,
    DSM_REMOTE_SHARED,
    DSM_REMOTE_SHARED_REQ,
    DSM_REMOTE_SHARED_RIP,
    DSM_REMOTE_MODIFIED,
    DSM_REMOTE_MODIFIED_RIP,
    DSM_REMOTE_MODIFIED_WIP,
    /* a mapping left over from a deleted region, out of the table; its
     * last rgn_unmap frees it (D10) */
    DSM_DELETED,
    DSM_STATE_COUNT
};

enum dsm_msg_type {
    /* home -> remote (Table A-4) */
    DSM_MSG_RINVALIDATE,
    DSM_MSG_WINVALIDATE,
    DSM_MSG_SHARED_ACK_DATA,
    DSM_MSG_EXCLUSIVE_ACK_DATA,
    DSM_MSG_MODIFY_ACK,
    DSM_MSG_MODIFY_ACK_DATA,
    /* remote -> home (Table A-5) */
    DSM_MSG_INVALIDATE_ACK,
    DSM_MSG_INVALIDATE_ACK_DATA,
    DSM_MSG_RELEASE,
    DSM_MSG_SHARED_REQ,
    DSM_MSG_EXCLUSIVE_REQ,
    DSM_MSG_MODIFY_REQ,
    DSM_MSG_FLUSH,
    DSM_MSG_FLUSH_DATA,
    /* mapping (§4.4): not among the 14 protocol messages */
    DSM_MSG_RGN_INFO_REQ,
    DSM_MSG_RGN_INFO_ACK,
    DSM_MSG_RGN_INFO_NACK, /* no such region at its home (aux: enum dsm_refusal) */
    /* deletion (D10): not among the 14 protocol messages either */
    DSM_MSG_DELETE_REQ,  /* remote -> home: rgn_delete called elsewhere */
    DSM_MSG_DELETE_ACK,  /* home -> that remote: the region is gone */
    DSM_MSG_DELETE_NACK, /* home -> that remote: refused (aux: enum dsm_refusal) */
    DSM_MSG_DELETE,      /* home -> every rank that may hold a copy: free it */
    DSM_MSG_TYPE_COUNT
};

enum dsm_call {
    DSM_CALL_NONE,
    DSM_CALL_MAP,
    DSM_CALL_UNMAP,
    DSM_CALL_START_READ,
    DSM_CALL_END_READ,
    DSM_CALL_START_WRITE,
    DSM_CALL_END_WRITE,
    DSM_CALL_FLUSH,
    DSM_CALL_DELETE,
    DSM_CALL_COUNT
};

/* What a start call tells its caller (the glue polls in between). */
enum dsm_start {
    DSM_STARTED, /* the operation is in progress */
    DSM_PENDING, /* a request or invalidation is out: poll until region->waiting is 0 */
    DSM_RETRY    /* another transaction holds the home (Iip): poll, then call again */
};

/* Why a home answers MsgRgnInfoNack or MsgDeleteNack. */
enum dsm_refusal {
    DSM_REFUSE_NONE,
    DSM_REFUSE_NEVER_CREATED, /* no region with that sequence number was created there */
    DSM_REFUSE_DELETED,       /* it was, and it has been deleted */
    DSM_REFUSE_IN_USE         /* delete: an operation or a request on it is in progress at the home */
};

/* Second phase of a two-phase home action (§A.4), run when the last
 * invalidation is acknowledged.  An enum, not a function pointer. */
enum dsm_cont {
    DSM_CONT_NONE,
    DSM_CONT_START_READ,        /* HomeInvalid CallStartRead */
    DSM_CONT_START_WRITE,       /* HomeShared / HomeInvalid CallStartWrite */
    DSM_CONT_SHARED_REQ,        /* HomeInvalid MsgSharedReq */
    DSM_CONT_EXCLUSIVE_REQ,     /* HomeShared / HomeInvalid MsgExclusiveReq */
    DSM_CONT_MODIFY_REQ_SHARED, /* HomeShared MsgModifyReq */
    DSM_CONT_MODIFY_REQ_INVALID /* HomeInvalid MsgModifyReq */
};

/* One message as the engine sees it.  data/len: region data, for the
 * data-carrying types; for RGN_INFO_ACK, aux is the region size. */
struct dsm_msg {
    enum dsm_msg_type type;
    uint32_t src, dst;
    dsm_rid_t rid;
    uint32_t version;
    uint32_t aux;
    uint32_t from; /* an upgrade ahead (D14): the version of the copy it upgrades; else 0 */
    const void *data;
    uint32_t len;
    int more; /* more messages follow at once: the transport may hold this one back to send them together */
};

/* A directory entry (§4.3.2): at most one per remote node (§A.11). */
struct dsm_ptr {
    uint32_t node;
    uint32_t version; /* of the copy granted to that node */
    uint8_t pushed;   /* the copy was pushed (DSM_PUSH_SHARED or _EXCLUSIVE): its fate not judged yet */
};

/* A request the home could not serve yet (§A.9). */
struct dsm_queued {
    struct dsm_queued *next;
    enum dsm_msg_type type;
    uint32_t src;
    uint32_t version; /* the request's: the copy an upgrade is about */
};

#define DSM_REGION_MAGIC 0x43524c52u /* "CRLR": tells a region from a stray pointer */

/* An action's standing on one region, which throttles it (dsm/act.c,
 * docs/COSMOS.md "Throttling"): credit is confirmations less weighted
 * wastes, from 0; at or below minus a margin the action is suspended
 * and credit counts down one more per failed retry (the back-off's level),
 * skip the chances still to let pass before the next retry. */
struct dsm_act_trust {
    int8_t credit;
    uint16_t skip;
};

/* A rank's self-invalidations (or pushes) out with no outcome known yet,
 * while its dsi (push) has no confirmation (dsm/act.c, docs/COSMOS.md
 * "Throttling": the cap on untried actions): out how many, declined the
 * chances refused since the last news, which write them off after an
 * epoch. */
struct dsm_act_untried {
    uint16_t out;
    uint16_t declined;
};

/* Metadata header, immediately before the region's data (§4.3.4), on a
 * cache line boundary.  The hit paths touch its first two lines: magic and
 * state in the first, read_cnt to calls in the second.  The online
 * predictor's state for the region (SHOAL_COSMOS; dsm/observe.c) fills the
 * rest of the first line, which every message's handler reads anyway, so
 * its update costs no cold line (docs/COSMOS.md, "The online predictor's
 * cost"). */
#define DSM_REGION_ALIGN 64
struct dsm_region {
    struct cosmos_blk cosmos;
    uint32_t magic;
    uint8_t state;    /* enum dsm_state */
    uint8_t rcvd_inv; /* remote: an invalidation waits for the operation's end */
    uint8_t waiting;  /* a start call waits for a grant or a continuation */
    uint8_t cont;     /* enum dsm_cont */
    uint32_t read_cnt;
    uint32_t map_cnt;
    dsm_rid_t rid;
    uint32_t size;
    uint32_t version; /* home: next version to grant; remote: version of this copy */
    uint32_t calls;   /* the last four calls on this region, newest in the low byte */
    int32_t urc_slot; /* index in the unmapped region cache, -1 when not there */
    uint8_t released; /* remote: this copy sent a MsgRelease, so its end carries data (D7) */
    uint8_t act;      /* enum dsm_region_act: bookkeeping of the Cosmos actions (dsm/act.c) */
    uint16_t uses;    /* remote, dsi: operations ended on this copy since its grant */
    uint16_t touches; /* remote, dsi: operations the last copy saw before it was needed elsewhere; 0 unknown */
    struct dsm_act_trust trust; /* remote: dsi's throttle; home: the exclusive-for-read actions' (dsm/act.c) */
    struct dsm_act_trust push_trust; /* home: producer push's throttle */
    struct dsm_act_trust xpush_trust; /* home: the exclusive push's */
    struct dsm_act_trust upgrade_trust; /* home: the upgrade ahead's */
    uint8_t pushed;     /* remote: this pushed copy is not read (DSM_PUSHED_UNREAD) or written (_UNWRITTEN) yet */
    uint8_t push_xskip; /* home: the last exclusive push came back unwritten: the next is not exclusive */
    /* home, push's timing (dsm/act.c): its writes since a remote last read
     * it (asked or pushed), and as many when the last push went; the write
     * after which remotes read, learnt (0: not yet) */
    uint16_t push_writes, push_writes_then, push_after;
    /* home, the upgrade ahead's timing (dsm/act.c): the home's reads since
     * its last write, and as many when the last real upgrade request came
     * (0: none yet); up_steady: the last two agreed */
    uint16_t up_reads, up_after;
    uint8_t up_steady;
    uint8_t up_state;  /* home: DSM_UP_*, about the rank up_to and the version up_from */
    uint32_t up_to;    /* rank of the last upgrade ahead */
    uint32_t up_from;  /* the version that upgrade ahead upgraded; remote: that of the one held */
    uint32_t up_held;  /* remote: an upgrade ahead (its version) held until the copy it upgrades comes; 0 none */
    struct dsm_region *hash_next; /* in state Deleted: the next mapping set aside */
    /* home only */
    uint32_t cont_node; /* requester the continuation serves */
    uint32_t num_acks;  /* invalidations not yet acknowledged */
    uint32_t dsi_from;  /* DSM_RACT_DSI_PENDING: rank + 1 of the last self-invalidation, DSM_DSI_DIRTY if it carried data */
    uint32_t ndir, dir_cap;
    struct dsm_ptr *dir;
    struct dsm_queued *queue_head, *queue_tail;
    /* The data; after it, at a home, a bit per rank that was sent a
     * MsgRgnInfoAck: who may hold a copy (D10). */
    _Alignas(16) unsigned char data[];
};

_Static_assert(offsetof(struct dsm_region, cont) < DSM_REGION_ALIGN,
               "the predictor's state and the protocol's state share the header's first line");

static inline struct dsm_region *dsm_region_of(void *data)
{
    return (struct dsm_region *)((unsigned char *)data - offsetof(struct dsm_region, data));
}

static inline int dsm_is_home_state(unsigned s)
{
    return s <= DSM_HOME_INVALID;
}

/* Actions driven by Cosmos predictions (SHOAL_COSMOS_ACT; dsm/act.c,
 * docs/COSMOS.md "Actions"): each a legal transition of the protocol, so a
 * misprediction costs messages, never correctness. */
enum dsm_act_kind {
    DSM_ACT_RMW,       /* home: a read answered exclusive when its requester's upgrade is predicted next */
    DSM_ACT_DSI,       /* remote: a copy flushed at its operation's end when an invalidation is predicted */
    DSM_ACT_MIGRATORY, /* home: after recalling a modified copy, the reader gets it exclusive (upgrade predicted) */
    DSM_ACT_PUSH,      /* home: after its write, the new data goes unasked to a reader whose read is predicted */
    DSM_ACT_XPUSH,     /* home: such a push goes exclusive when the reader's upgrade is predicted after its read */
    DSM_ACT_UPGRADE,   /* home: after its last read, a sole sharer's predicted upgrade is granted before it is asked */
    DSM_ACT_KINDS
};
#define DSM_ACT_BIT(k) (1u << (k))
#define DSM_ACT_PUSHES (DSM_ACT_BIT(DSM_ACT_PUSH) | DSM_ACT_BIT(DSM_ACT_XPUSH))
/* The standings an action keeps per rank (dsm/act.c): the exclusive reads',
 * dsi's, push's, xpush's and the upgrade ahead's. */
#define DSM_ACT_SIDES 5

/* dsm_ptr.pushed at a home: how the entry's copy was pushed. */
enum { DSM_PUSH_SHARED = 1, DSM_PUSH_EXCLUSIVE = 2 };
/* dsm_region.pushed at a remote: what a pushed copy has not had yet; a copy
 * upgraded ahead and not written yet; one whose own upgrade request crossed
 * the upgrade ahead, which took it as its answer (its next message to the
 * home says so, DSM_AUX_CROSSED). */
enum { DSM_PUSHED_UNREAD = 1, DSM_PUSHED_UNWRITTEN = 2, DSM_PUSHED_UPGRADED = 4, DSM_PUSHED_CROSSED = 8 };
/* In the aux word of a remote's ack, flush or release, beside the action
 * bits: the copy's upgrade request crossed its upgrade ahead (D14). */
#define DSM_AUX_CROSSED (1u << 16)
/* dsm_region.up_state at a home: the upgrade ahead out to up_to and not
 * judged yet (up_to's entry is the copy it upgraded, at its version), whose
 * crossing request (naming up_from) may still come; or the remote said its
 * request crossed and that request is still to come. */
enum { DSM_UP_NONE, DSM_UP_OUT, DSM_UP_STALE };

/* dsm_region.act: what an action left on a region.  At a remote: the copy
 * came exclusive for a read (by rmw or migratory) and is not written yet;
 * its last flush was a self-invalidation.  At a home: a self-invalidated
 * copy's fate is not judged yet, or was judged wasted and its rank is not
 * told yet; the next exclusive-for-read is declined (the last came back
 * unwritten). */
enum dsm_region_act {
    DSM_RACT_RMW_UNWRITTEN = 1,
    DSM_RACT_MIG_UNWRITTEN = 2,
    DSM_RACT_DSI_FLUSHED = 4,
    DSM_RACT_DSI_PENDING = 8,
    DSM_RACT_DSI_TELL = 16, /* tell dsi_from's rank, in its next grant, that its flush was wasted */
    DSM_RACT_XREAD_SKIP = 32,
    DSM_RACT_XREAD_OUT = 64,  /* home: the copy out went exclusive for a read; its fate not heard yet */
    DSM_RACT_DSI_STEADY = 128 /* remote: the last two real invalidations came after the same number of uses */
};
#define DSM_DSI_DIRTY 0x80000000u

/* Per-node counters (thesis Tables 6-6, B-10..B-13). */
struct dsm_stats {
    uint64_t calls[DSM_CALL_COUNT];       /* every call */
    uint64_t calls_remote[DSM_CALL_COUNT]; /* on regions homed elsewhere */
    uint64_t calls_miss[DSM_CALL_COUNT];  /* that needed communication */
    uint64_t calls_iip[DSM_CALL_COUNT];   /* starts that met a home in an Iip state */
    uint64_t sent[DSM_MSG_TYPE_COUNT];
    uint64_t received[DSM_MSG_TYPE_COUNT];
    uint64_t queued;       /* requests put on a home's blocked queue */
    uint64_t stale;        /* late messages dropped by their version (§A.11) */
    uint64_t early_inv;    /* invalidations that overtook their grant */
    uint64_t urc_evictions;
    uint64_t deleted_dropped; /* messages for deleted regions, dropped (D10) */
    /* the Cosmos actions (SHOAL_COSMOS_ACT), by enum dsm_act_kind */
    uint64_t act_taken[DSM_ACT_KINDS], act_confirmed[DSM_ACT_KINDS], act_wasted[DSM_ACT_KINDS];
    uint64_t act_throttled[DSM_ACT_KINDS]; /* predicted, but declined by the throttle */
};

struct dsm_node;
typedef void (*dsm_send_fn)(struct dsm_node *node, const struct dsm_msg *msg);
/* Misuse or protocol error: must not return. */
typedef void (*dsm_fail_fn)(struct dsm_node *node, const char *what);
/* The engine is about to free an unmapped region that was deleted: the
 * glue drops its own references to it (the unmapped region cache).  May
 * be NULL. */
typedef void (*dsm_forget_fn)(struct dsm_node *node, struct dsm_region *r);

#define DSM_TABLE_BITS 13u /* 8192 buckets, §4.4 */

struct dsm_observer; /* dsm/observe.h: sees every coherence message received */

/* The actions' view of a predictor: the next message predicted for rid at
 * this node's home (home != 0) or remote side, as a Cosmos <sender, type>;
 * *sender names the sender expected (the sender-indexed predictor needs
 * it).  1 when there is a prediction.  `assume` offers the predictor a
 * message an action made unnecessary, so that its history stays what it
 * would have been (it may be NULL). */
typedef int (*dsm_predict_fn)(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t *sender, unsigned *type);
typedef void (*dsm_assume_fn)(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t sender, unsigned type);
/* The prediction after <after_sender, after_type>, a message an action is
 * about to make unnecessary (xpush: the read its push answers), as if it
 * had come; nothing is learnt. */
typedef int (*dsm_predict_after_fn)(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t after_sender,
                                    unsigned after_type, uint32_t *sender, unsigned *type);

struct dsm_node {
    uint32_t rank, nranks;
    uint32_t next_seq; /* sequence number of the next region created here */
    dsm_send_fn send;
    dsm_fail_fn fail;
    dsm_forget_fn forget;
    void *ctx; /* the glue's or the simulator's */
    struct dsm_region **buckets; /* 1 << table_bits of them */
    uint32_t table_bits;
    struct dsm_region *deleted_mappings; /* state Deleted, until their last unmap */
    struct dsm_stats stats;
    /* the map miss or rgn_delete in progress: its home's answer lands here */
    dsm_rid_t ask_rid;
    int ask_reply;         /* 0 none yet, 1 RgnInfoAck or DeleteAck, -1 a Nack */
    uint32_t ask_refusal;  /* enum dsm_refusal, with a Nack */
    uint32_t map_size, map_version; /* from RgnInfoAck */
    struct dsm_observer *observer;  /* NULL unless a trace or a predictor watches */
    unsigned act;                   /* DSM_ACT_BIT()s enabled; 0: none */
    dsm_predict_fn predict;         /* with act: the predictions the actions follow */
    dsm_assume_fn assume;
    dsm_predict_after_fn predict_after; /* with xpush; NULL: no exclusive push */
    /* the throttle's standing of this rank's exclusive-for-read actions (as
     * a home), of its dsi (as a remote), of its pushes, exclusive pushes and
     * upgrades ahead (as a home), over its regions (dsm/act.c) */
    struct dsm_act_trust act_trust[DSM_ACT_SIDES];
    struct dsm_act_untried act_untried[DSM_ACT_SIDES]; /* the caps on untried dsi, push, xpush, upgrade, by act_trust's index (dsm/act.c) */
};

#define DSM_NO_RID UINT64_MAX

/* Records a user call in the counters and the region's call history. */
static inline void dsm_note_call(struct dsm_node *node, struct dsm_region *r, enum dsm_call c)
{
    r->calls = (r->calls << 8) | c;
    node->stats.calls[c]++;
    if (!dsm_is_home_state(r->state))
        node->stats.calls_remote[c]++;
}

/* Node set-up and tear-down (frees every region still in the table and
 * every mapping set aside by a delete). */
/* table_bits: DSM_TABLE_BITS for a rank; the simulator, whose nodes hold a
 * region or two and are set up once per explored state, passes fewer. */
int dsm_node_init(struct dsm_node *node, uint32_t rank, uint32_t nranks, dsm_send_fn send,
                  dsm_fail_fn fail, dsm_forget_fn forget, void *ctx, uint32_t table_bits);
void dsm_node_fini(struct dsm_node *node);

/* Region table (hash on rid, chained). */
struct dsm_region *dsm_lookup(const struct dsm_node *node, dsm_rid_t rid);
void dsm_table_insert(struct dsm_node *node, struct dsm_region *r);
void dsm_table_remove(struct dsm_node *node, struct dsm_region *r);

/* A new home region (HomeExclusive, zeroed data), in the table.  Sequence
 * numbers are never reused: the last one aborts (D10). */
struct dsm_region *dsm_create(struct dsm_node *node, uint32_t size);
/* A new remote copy (RemoteInvalid) from a RgnInfoAck, in the table. */
struct dsm_region *dsm_remote_copy(struct dsm_node *node, dsm_rid_t rid, uint32_t size, uint32_t version);
/* A map miss: asks rid's home for the region (MsgRgnInfoReq); the reply
 * sets node->ask_reply.  Then dsm_map_complete makes the copy, or returns
 * NULL when the home refused (node->ask_refusal says why). */
void dsm_map_request(struct dsm_node *node, dsm_rid_t rid);
struct dsm_region *dsm_map_complete(struct dsm_node *node);
/* rgn_delete (D10).  At rid's home the region is freed at once and every
 * rank that may hold a copy is sent MsgDelete; elsewhere the local copy is
 * freed and the home asked (MsgDeleteReq).  Either way the answer lands in
 * node->ask_reply (at once at the home); dsm_delete_complete then returns
 * DSM_REFUSE_NONE or why the home refused.  Deleting a region mapped on
 * this node calls node->fail; a mapping on another node (the home's too)
 * is taken out of the table in state Deleted, for the glue to free at its
 * last unmap. */
void dsm_delete(struct dsm_node *node, dsm_rid_t rid);
/* Why rid has no region here: a rid homed here below next_seq was deleted
 * (home regions leave the table only so, and sequence numbers are never
 * reused); any other was never created. */
enum dsm_refusal dsm_absence(const struct dsm_node *node, dsm_rid_t rid);
enum dsm_refusal dsm_delete_complete(struct dsm_node *node);
/* Frees a region (removed from the table first by the caller). */
void dsm_region_free(struct dsm_region *r);
/* Frees a mapping set aside by a delete (state Deleted), at its last unmap. */
void dsm_deleted_mapping_free(struct dsm_node *node, struct dsm_region *r);

/* User calls (Table A-3).  Misuse calls node->fail. */
enum dsm_start dsm_start_read(struct dsm_node *node, struct dsm_region *r);
enum dsm_start dsm_start_write(struct dsm_node *node, struct dsm_region *r);
void dsm_end_read(struct dsm_node *node, struct dsm_region *r);
void dsm_end_write(struct dsm_node *node, struct dsm_region *r);
void dsm_flush(struct dsm_node *node, struct dsm_region *r);

/* A message arrived for this node (any of the types above). */
void dsm_deliver(struct dsm_node *node, const struct dsm_msg *msg);

/* Names for messages and diagnostics. */
const char *dsm_state_name(unsigned s);
const char *dsm_msg_name(unsigned t);
const char *dsm_call_name(unsigned c);
/* What a start waiting on r waits for (one line into buf); returns the
 * rank it waits for: the home it asked, or at a home in HomeIip the first
 * rank whose invalidation is not acknowledged; -1 if none. */
int dsm_describe_wait(const struct dsm_region *r, char *buf, size_t cap);
/* "rank R: region H:S (state X, last calls a, b, c): what" into buf. */
void dsm_describe(const struct dsm_node *node, const struct dsm_region *r, const char *what, char *buf,
                  size_t cap);

#endif
