/* The dsm protocol engine on a simulated network (sim.h).
 *   transitions  every row of Tables A-6..A-21 from a hand-built state
 *   reorder      the four reorderings of §A.11 and the flush/invalidation
 *                crossing of §A.8, forced
 *   explore_*    bounded exhaustive exploration of every interleaving of
 *                small scripts (states pruned by hash), checking single
 *                writer, readers see the last write, no lost invalidation,
 *                no deadlock
 *   delete       rgn_delete (D10): copies freed everywhere, late messages
 *                dropped, refusals and misuse, sequence numbers not reused
 *   explore_delete_*  the exploration with a delete as the last use
 *   random       random schedules of longer scripts on 4 nodes
 *   actions      each Cosmos action forced, confirmed and mispredicted
 * Usage: test_proto <test> [actions]: the explorers and random with the
 * Cosmos actions on (sim_act: taken wherever legal) */
#include "sim.h"
#include "dsm/act.h"
#include "dsm/observe.h"
#include "util/util.h"
#include "../common/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- transitions: every row of Tables A-6..A-21 ------------------------- */

enum { EV_START_READ = 100, EV_END_READ, EV_START_WRITE, EV_END_WRITE, EV_FLUSH };
enum { CHK_CNT = 1, CHK_RINV = 2, CHK_QUEUED = 4, CHK_DIR = 8, CHK_DATA = 16 };

/* One row: a region at node 0 (home states) or node 1 (remote states)
 * built directly in `from`, one event, and what must follow.  dir is a
 * bit set of directory entries (node 1 at version 1, node 2 at version 2);
 * request continuations serve node 2. */
struct row {
    const char *table;
    enum dsm_state from;
    unsigned cnt, dir, acks, rinv, released;
    enum dsm_cont cont;
    int ev;
    unsigned src, version;
    enum dsm_state to;
    enum dsm_start ret;
    const char *sent; /* "MsgType>dst,..." in send order */
    unsigned check, cnt_after, rinv_after, dir_after;
};

#define HE DSM_HOME_EXCLUSIVE
#define HER DSM_HOME_EXCLUSIVE_RIP
#define HEW DSM_HOME_EXCLUSIVE_WIP
#define HS DSM_HOME_SHARED
#define HSR DSM_HOME_SHARED_RIP
#define HIIP DSM_HOME_IIP
#define HIIPS DSM_HOME_IIP_SPECIAL
#define HI DSM_HOME_INVALID
#define RI DSM_REMOTE_INVALID
#define RIQ DSM_REMOTE_INVALID_REQ
#define RS DSM_REMOTE_SHARED
#define RSQ DSM_REMOTE_SHARED_REQ
#define RSR DSM_REMOTE_SHARED_RIP
#define RM DSM_REMOTE_MODIFIED
#define RMR DSM_REMOTE_MODIFIED_RIP
#define RMW DSM_REMOTE_MODIFIED_WIP
#define M(t) DSM_MSG_##t
#define QUEUED .check = CHK_QUEUED

static const struct row rows[] = {
    /* A-6 HomeExclusive */
    {"A-6", HE, .ev = EV_START_READ, .to = HER, .sent = "", .check = CHK_CNT, .cnt_after = 1},
    {"A-6", HE, .ev = EV_START_WRITE, .to = HEW, .sent = ""},
    {"A-6", HE, .ev = EV_FLUSH, .to = HE, .sent = ""},
    {"A-6", HE, .ev = M(SHARED_REQ), .src = 1, .to = HS, .sent = "MsgSharedAckData>1", .check = CHK_DIR, .dir_after = 2},
    {"A-6", HE, .ev = M(EXCLUSIVE_REQ), .src = 1, .to = HI, .sent = "MsgExclusiveAckData>1", .check = CHK_DIR, .dir_after = 2},
    {"A-6", HE, .ev = M(MODIFY_REQ), .src = 1, .to = HI, .sent = "MsgExclusiveAckData>1"},
    {"A-6", HE, .ev = M(RELEASE), .src = 1, .version = 1, .to = HE, .sent = ""},
    /* A-7 HomeExclusiveRip */
    {"A-7", HER, .cnt = 1, .ev = EV_START_READ, .to = HER, .sent = "", .check = CHK_CNT, .cnt_after = 2},
    {"A-7", HER, .cnt = 2, .ev = EV_END_READ, .to = HER, .sent = "", .check = CHK_CNT, .cnt_after = 1},
    {"A-7", HER, .cnt = 1, .ev = EV_END_READ, .to = HE, .sent = ""},
    {"A-7", HER, .cnt = 1, .ev = EV_FLUSH, .to = HER, .sent = ""},
    {"A-7", HER, .cnt = 1, .ev = M(SHARED_REQ), .src = 1, .to = HSR, .sent = "MsgSharedAckData>1"},
    {"A-7", HER, .cnt = 1, .ev = M(EXCLUSIVE_REQ), .src = 1, .to = HER, .sent = "", QUEUED},
    {"A-7", HER, .cnt = 1, .ev = M(MODIFY_REQ), .src = 1, .to = HER, .sent = "", QUEUED},
    {"A-7", HER, .cnt = 1, .ev = M(RELEASE), .src = 1, .version = 1, .to = HER, .sent = ""},
    /* A-8 HomeExclusiveWip */
    {"A-8", HEW, .ev = EV_END_WRITE, .to = HE, .sent = ""},
    {"A-8", HEW, .ev = EV_FLUSH, .to = HEW, .sent = ""},
    {"A-8", HEW, .ev = M(SHARED_REQ), .src = 1, .to = HEW, .sent = "", QUEUED},
    {"A-8", HEW, .ev = M(EXCLUSIVE_REQ), .src = 1, .to = HEW, .sent = "", QUEUED},
    {"A-8", HEW, .ev = M(MODIFY_REQ), .src = 1, .to = HEW, .sent = "", QUEUED},
    {"A-8", HEW, .ev = M(RELEASE), .src = 1, .version = 1, .to = HEW, .sent = ""},
    /* A-9 HomeShared */
    {"A-9", HS, .dir = 2, .ev = EV_START_READ, .to = HSR, .sent = ""},
    {"A-9", HS, .dir = 6, .ev = EV_START_WRITE, .to = HIIP, .ret = DSM_PENDING, .sent = "MsgWInvalidate>1,MsgWInvalidate>2"},
    {"A-9", HS, .dir = 2, .ev = EV_FLUSH, .to = HS, .sent = ""},
    {"A-9", HS, .dir = 2, .ev = M(SHARED_REQ), .src = 2, .to = HS, .sent = "MsgSharedAckData>2", .check = CHK_DIR, .dir_after = 6},
    {"A-9", HS, .dir = 2, .ev = M(EXCLUSIVE_REQ), .src = 2, .to = HIIP, .sent = "MsgWInvalidate>1"},
    {"A-9", HS, .dir = 2, .ev = M(MODIFY_REQ), .src = 1, .to = HI, .sent = "MsgModifyAck>1"},
    {"A-9", HS, .dir = 6, .ev = M(MODIFY_REQ), .src = 2, .to = HIIP, .sent = "MsgWInvalidate>1"},
    {"A-9", HS, .dir = 2, .ev = M(MODIFY_REQ), .src = 2, .to = HIIP, .sent = "MsgWInvalidate>1"}, /* D2 */
    {"A-9", HS, .dir = 2, .ev = M(FLUSH), .src = 1, .version = 1, .to = HE, .sent = "", .check = CHK_DIR, .dir_after = 0},
    {"A-9", HS, .dir = 6, .ev = M(FLUSH), .src = 1, .version = 1, .to = HS, .sent = "", .check = CHK_DIR, .dir_after = 4},
    {"A-9", HS, .dir = 2, .ev = M(RELEASE), .src = 1, .version = 1, .to = HS, .sent = ""},
    /* A-9 continuations, reached through HomeIip's last acknowledgement */
    {"A-9c", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_START_WRITE, .ev = M(INVALIDATE_ACK), .src = 1, .version = 1, .to = HEW, .sent = "", .check = CHK_DIR, .dir_after = 0},
    {"A-9c", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(INVALIDATE_ACK), .src = 1, .version = 1, .to = HI, .sent = "MsgExclusiveAckData>2", .check = CHK_DIR, .dir_after = 4},
    {"A-9c", HIIP, .dir = 6, .acks = 1, .cont = DSM_CONT_MODIFY_REQ_SHARED, .ev = M(INVALIDATE_ACK), .src = 1, .version = 1, .to = HI, .sent = "MsgModifyAck>2", .check = CHK_DIR, .dir_after = 4},
    {"A-9c", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_MODIFY_REQ_SHARED, .ev = M(INVALIDATE_ACK), .src = 1, .version = 1, .to = HI, .sent = "MsgModifyAckData>2"},
    /* A-10 HomeSharedRip */
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = EV_START_READ, .to = HSR, .sent = "", .check = CHK_CNT, .cnt_after = 2},
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = EV_END_READ, .to = HS, .sent = ""},
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = EV_FLUSH, .to = HSR, .sent = ""},
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = M(SHARED_REQ), .src = 2, .to = HSR, .sent = "MsgSharedAckData>2"},
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = M(FLUSH), .src = 1, .version = 1, .to = HER, .sent = ""},
    {"A-10", HSR, .cnt = 1, .dir = 6, .ev = M(FLUSH), .src = 1, .version = 1, .to = HSR, .sent = ""},
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = M(EXCLUSIVE_REQ), .src = 2, .to = HSR, .sent = "", QUEUED},
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = M(MODIFY_REQ), .src = 1, .to = HSR, .sent = "", QUEUED},
    {"A-10", HSR, .cnt = 1, .dir = 2, .ev = M(RELEASE), .src = 1, .version = 1, .to = HSR, .sent = ""},
    /* A-11 HomeIip */
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = EV_START_READ, .to = HIIP, .ret = DSM_RETRY, .sent = ""},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = EV_START_WRITE, .to = HIIP, .ret = DSM_RETRY, .sent = ""},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = EV_FLUSH, .to = HIIP, .sent = ""},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(INVALIDATE_ACK_DATA), .src = 1, .version = 1, .to = HI, .sent = "MsgExclusiveAckData>2", .check = CHK_DATA},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(FLUSH), .src = 1, .version = 1, .to = HI, .sent = "MsgExclusiveAckData>2"},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(FLUSH_DATA), .src = 1, .version = 1, .to = HI, .sent = "MsgExclusiveAckData>2", .check = CHK_DATA},
    {"A-11", HIIP, .dir = 6, .acks = 2, .cont = DSM_CONT_START_WRITE, .ev = M(INVALIDATE_ACK), .src = 1, .version = 1, .to = HIIP, .sent = "", .check = CHK_DIR, .dir_after = 4},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(SHARED_REQ), .src = 2, .to = HIIP, .sent = "", QUEUED},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(EXCLUSIVE_REQ), .src = 2, .to = HIIP, .sent = "", QUEUED},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(MODIFY_REQ), .src = 2, .to = HIIP, .sent = "", QUEUED},
    {"A-11", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_EXCLUSIVE_REQ, .ev = M(RELEASE), .src = 1, .version = 1, .to = HIIP, .sent = ""},
    /* A-12 HomeIipSpecial */
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = EV_START_READ, .to = HIIPS, .ret = DSM_RETRY, .sent = ""},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = EV_START_WRITE, .to = HIIPS, .ret = DSM_RETRY, .sent = ""},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = EV_FLUSH, .to = HIIPS, .sent = ""},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = M(INVALIDATE_ACK_DATA), .src = 1, .version = 1, .to = HS, .sent = "MsgSharedAckData>2", .check = CHK_DIR | CHK_DATA, .dir_after = 4},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = M(FLUSH_DATA), .src = 1, .version = 1, .to = HS, .sent = "MsgSharedAckData>2", .check = CHK_DIR | CHK_DATA, .dir_after = 4},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = M(RELEASE), .src = 1, .version = 1, .to = HS, .sent = "MsgSharedAckData>2", .check = CHK_DIR | CHK_DATA, .dir_after = 6},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = M(RELEASE), .src = 1, .version = 0, .to = HIIPS, .sent = ""}, /* §A.11 */
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = M(EXCLUSIVE_REQ), .src = 2, .to = HIIPS, .sent = "", QUEUED},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = M(SHARED_REQ), .src = 2, .to = HIIPS, .sent = "", QUEUED},
    {"A-12", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_SHARED_REQ, .ev = M(MODIFY_REQ), .src = 2, .to = HIIPS, .sent = "", QUEUED},
    /* A-13 HomeInvalid and its continuations */
    {"A-13", HI, .dir = 2, .ev = EV_START_READ, .to = HIIPS, .ret = DSM_PENDING, .sent = "MsgRInvalidate>1"},
    {"A-13c", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_START_READ, .ev = M(RELEASE), .src = 1, .version = 1, .to = HSR, .sent = "", .check = CHK_CNT | CHK_DATA, .cnt_after = 1},
    {"A-13c", HIIPS, .dir = 2, .acks = 1, .cont = DSM_CONT_START_READ, .ev = M(INVALIDATE_ACK_DATA), .src = 1, .version = 1, .to = HER, .sent = "", .check = CHK_CNT | CHK_DATA, .cnt_after = 1},
    {"A-13", HI, .dir = 2, .ev = EV_START_WRITE, .to = HIIP, .ret = DSM_PENDING, .sent = "MsgWInvalidate>1"},
    {"A-13", HI, .dir = 2, .ev = EV_FLUSH, .to = HI, .sent = ""},
    {"A-13", HI, .dir = 2, .ev = M(SHARED_REQ), .src = 2, .to = HIIPS, .sent = "MsgRInvalidate>1"},
    {"A-13", HI, .dir = 2, .ev = M(EXCLUSIVE_REQ), .src = 2, .to = HIIP, .sent = "MsgWInvalidate>1"},
    {"A-13", HI, .dir = 2, .ev = M(MODIFY_REQ), .src = 2, .to = HIIP, .sent = "MsgWInvalidate>1"},
    {"A-13c", HIIP, .dir = 2, .acks = 1, .cont = DSM_CONT_MODIFY_REQ_INVALID, .ev = M(INVALIDATE_ACK_DATA), .src = 1, .version = 1, .to = HI, .sent = "MsgModifyAckData>2", .check = CHK_DATA},
    {"A-13", HI, .dir = 2, .ev = M(FLUSH), .src = 1, .version = 1, .to = HE, .sent = ""},
    {"A-13", HI, .dir = 2, .ev = M(FLUSH_DATA), .src = 1, .version = 1, .to = HE, .sent = "", .check = CHK_DATA},
    {"A-13", HI, .dir = 2, .ev = M(RELEASE), .src = 1, .version = 1, .to = HI, .sent = ""},
    /* A-14 RemoteInvalid */
    {"A-14", RI, .ev = EV_START_READ, .to = RIQ, .ret = DSM_PENDING, .sent = "MsgSharedReq>0"},
    {"A-14", RI, .ev = EV_START_WRITE, .to = RIQ, .ret = DSM_PENDING, .sent = "MsgExclusiveReq>0"},
    {"A-14", RI, .ev = EV_FLUSH, .to = RI, .sent = ""},
    {"A-14", RI, .ev = M(RINVALIDATE), .version = 1, .to = RI, .sent = ""},
    {"A-14", RI, .ev = M(WINVALIDATE), .version = 1, .to = RI, .sent = ""},
    /* A-15 RemoteInvalidReq */
    {"A-15", RIQ, .ev = M(SHARED_ACK_DATA), .version = 2, .to = RSR, .sent = "", .check = CHK_CNT | CHK_DATA, .cnt_after = 1},
    {"A-15", RIQ, .ev = M(EXCLUSIVE_ACK_DATA), .version = 2, .to = RMW, .sent = "", .check = CHK_DATA},
    {"A-15", RIQ, .ev = M(MODIFY_ACK_DATA), .version = 2, .to = RMW, .sent = "", .check = CHK_DATA},
    {"A-15", RIQ, .ev = M(RINVALIDATE), .version = 1, .to = RIQ, .sent = "", .check = CHK_RINV, .rinv_after = 0},
    {"A-15", RIQ, .ev = M(WINVALIDATE), .version = 1, .to = RIQ, .sent = "", .check = CHK_RINV, .rinv_after = 0},
    {"A-15", RIQ, .ev = M(WINVALIDATE), .version = 2, .to = RIQ, .sent = "", .check = CHK_RINV, .rinv_after = 1}, /* early */
    {"A-15", RIQ, .rinv = 1, .ev = M(EXCLUSIVE_ACK_DATA), .version = 2, .to = RMW, .sent = "", .check = CHK_RINV | CHK_DATA, .rinv_after = 1},
    /* A-16 RemoteShared */
    {"A-16", RS, .ev = EV_START_READ, .to = RSR, .sent = "", .check = CHK_CNT, .cnt_after = 1},
    {"A-16", RS, .ev = EV_START_WRITE, .to = RSQ, .ret = DSM_PENDING, .sent = "MsgModifyReq>0"},
    {"A-16", RS, .ev = EV_FLUSH, .to = RI, .sent = "MsgFlush>0"},
    {"A-16", RS, .released = 1, .ev = EV_FLUSH, .to = RI, .sent = "MsgFlushData>0"}, /* D7 */
    {"A-16", RS, .ev = M(WINVALIDATE), .version = 1, .to = RI, .sent = "MsgInvalidateAck>0"},
    {"A-16", RS, .ev = M(WINVALIDATE), .version = 0, .to = RS, .sent = ""}, /* late */
    /* A-17 RemoteSharedReq */
    {"A-17", RSQ, .ev = M(WINVALIDATE), .version = 1, .to = RIQ, .sent = "MsgInvalidateAck>0"},
    {"A-17", RSQ, .ev = M(RINVALIDATE), .version = 1, .to = RIQ, .sent = "MsgInvalidateAck>0"},
    {"A-17", RSQ, .ev = M(MODIFY_ACK), .version = 2, .to = RMW, .sent = ""},
    {"A-17", RSQ, .ev = M(MODIFY_ACK_DATA), .version = 2, .to = RMW, .sent = "", .check = CHK_DATA},
    {"A-17", RSQ, .ev = M(WINVALIDATE), .version = 2, .to = RSQ, .sent = "", .check = CHK_RINV, .rinv_after = 1}, /* early */
    /* A-18 RemoteSharedRip */
    {"A-18", RSR, .cnt = 1, .ev = EV_START_READ, .to = RSR, .sent = "", .check = CHK_CNT, .cnt_after = 2},
    {"A-18", RSR, .cnt = 2, .ev = EV_END_READ, .to = RSR, .sent = "", .check = CHK_CNT, .cnt_after = 1},
    {"A-18", RSR, .cnt = 1, .ev = EV_END_READ, .to = RS, .sent = ""},
    {"A-18", RSR, .cnt = 1, .rinv = 1, .ev = EV_END_READ, .to = RI, .sent = "MsgInvalidateAck>0", .check = CHK_RINV, .rinv_after = 0},
    {"A-18", RSR, .cnt = 1, .rinv = 1, .released = 1, .ev = EV_END_READ, .to = RI, .sent = "MsgInvalidateAckData>0"}, /* D7 */
    {"A-18", RSR, .cnt = 1, .ev = EV_FLUSH, .to = RSR, .sent = ""},
    {"A-18", RSR, .cnt = 1, .ev = M(WINVALIDATE), .version = 1, .to = RSR, .sent = "", .check = CHK_RINV, .rinv_after = 1},
    /* A-19 RemoteModified */
    {"A-19", RM, .ev = EV_START_READ, .to = RMR, .sent = "", .check = CHK_CNT, .cnt_after = 1},
    {"A-19", RM, .ev = EV_START_WRITE, .to = RMW, .sent = ""},
    {"A-19", RM, .ev = EV_FLUSH, .to = RI, .sent = "MsgFlushData>0"},
    {"A-19", RM, .ev = M(RINVALIDATE), .version = 1, .to = RI, .sent = "MsgInvalidateAckData>0"},
    {"A-19", RM, .ev = M(WINVALIDATE), .version = 1, .to = RI, .sent = "MsgInvalidateAckData>0"},
    /* A-20 RemoteModifiedRip */
    {"A-20", RMR, .cnt = 1, .ev = EV_START_READ, .to = RMR, .sent = "", .check = CHK_CNT, .cnt_after = 2},
    {"A-20", RMR, .cnt = 1, .ev = EV_END_READ, .to = RM, .sent = ""},
    {"A-20", RMR, .cnt = 1, .rinv = 1, .ev = EV_END_READ, .to = RI, .sent = "MsgInvalidateAckData>0"},
    {"A-20", RMR, .cnt = 1, .ev = EV_FLUSH, .to = RMR, .sent = ""},
    {"A-20", RMR, .cnt = 1, .ev = M(RINVALIDATE), .version = 1, .to = RSR, .sent = "MsgRelease>0"},
    {"A-20", RMR, .cnt = 1, .ev = M(WINVALIDATE), .version = 1, .to = RMR, .sent = "", .check = CHK_RINV, .rinv_after = 1},
    /* A-21 RemoteModifiedWip */
    {"A-21", RMW, .ev = EV_END_WRITE, .to = RM, .sent = ""},
    {"A-21", RMW, .rinv = 1, .ev = EV_END_WRITE, .to = RI, .sent = "MsgInvalidateAckData>0"},
    {"A-21", RMW, .ev = EV_FLUSH, .to = RMW, .sent = ""},
    {"A-21", RMW, .ev = M(RINVALIDATE), .version = 1, .to = RMW, .sent = "", .check = CHK_RINV, .rinv_after = 1},
    {"A-21", RMW, .ev = M(WINVALIDATE), .version = 1, .to = RMW, .sent = "", .check = CHK_RINV, .rinv_after = 1},
};

static int carries_data(int type)
{
    return type == M(SHARED_ACK_DATA) || type == M(EXCLUSIVE_ACK_DATA) || type == M(MODIFY_ACK_DATA) ||
           type == M(INVALIDATE_ACK_DATA) || type == M(RELEASE) || type == M(FLUSH_DATA);
}

static const char *event_name(int ev)
{
    switch (ev) {
    case EV_START_READ: return "rgn_start_read";
    case EV_END_READ: return "rgn_end_read";
    case EV_START_WRITE: return "rgn_start_write";
    case EV_END_WRITE: return "rgn_end_write";
    case EV_FLUSH: return "rgn_flush";
    default: return dsm_msg_name((unsigned)ev);
    }
}

static struct dsm_region *build_row(struct sim *s, const struct row *w)
{
    sim_init(s, 3, 1, 0);
    unsigned at = dsm_is_home_state(w->from) ? 0 : 1;
    struct dsm_region *r = at == 0 ? sim_region(s, 0, 0) : dsm_remote_copy(&s->nodes[1], s->rids[0], SIM_DATA, 1);
    r->state = (uint8_t)w->from;
    r->read_cnt = w->cnt;
    r->rcvd_inv = (uint8_t)w->rinv;
    r->released = (uint8_t)w->released;
    r->map_cnt = 1;
    r->waiting = w->from == RIQ || w->from == RSQ || w->cont == DSM_CONT_START_READ || w->cont == DSM_CONT_START_WRITE;
    r->cont = (uint8_t)w->cont;
    r->cont_node = w->cont == DSM_CONT_START_READ || w->cont == DSM_CONT_START_WRITE ? UINT32_MAX : 2;
    r->num_acks = w->acks;
    if (at == 0) {
        r->version = 3;
        r->dir = calloc(2, sizeof *r->dir);
        CHECK(r->dir, "out of memory");
        r->dir_cap = 2;
        for (uint32_t n = 1; n <= 2; n++)
            if (w->dir & (1u << n))
                r->dir[r->ndir++] = (struct dsm_ptr){.node = n, .version = n};
    }
    return r;
}

static void check_row(struct sim *s, const struct row *w, unsigned idx)
{
    struct dsm_region *r = build_row(s, w);
    unsigned at = dsm_is_home_state(w->from) ? 0 : 1;
    struct dsm_node *node = &s->nodes[at];
    enum dsm_start ret = DSM_STARTED;
    uint64_t payload = 42;
    switch (w->ev) {
    case EV_START_READ: ret = dsm_start_read(node, r); break;
    case EV_START_WRITE: ret = dsm_start_write(node, r); break;
    case EV_END_READ: dsm_end_read(node, r); break;
    case EV_END_WRITE: dsm_end_write(node, r); break;
    case EV_FLUSH: dsm_flush(node, r); break;
    default: {
        struct dsm_msg m = {.type = (enum dsm_msg_type)w->ev, .src = w->src, .dst = at, .rid = r->rid,
                            .version = w->version, .data = carries_data(w->ev) ? &payload : NULL,
                            .len = carries_data(w->ev) ? SIM_DATA : 0};
        dsm_deliver(node, &m);
    }
    }
    char sent[256] = "";
    for (unsigned i = 0; i < s->nflight; i++) {
        size_t n = strlen(sent);
        snprintf(sent + n, sizeof sent - n, "%s%s>%u", i ? "," : "", dsm_msg_name(s->flight[i].m.type), s->flight[i].m.dst);
    }
    const char *ev = event_name(w->ev);
    CHECK(r->state == w->to, "row %u (Table %s, %s + %s): state %s, expected %s", idx, w->table,
          dsm_state_name(w->from), ev, dsm_state_name(r->state), dsm_state_name(w->to));
    CHECK(!strcmp(sent, w->sent), "row %u (Table %s, %s + %s): sent \"%s\", expected \"%s\"", idx, w->table,
          dsm_state_name(w->from), ev, sent, w->sent);
    if (w->ev == EV_START_READ || w->ev == EV_START_WRITE)
        CHECK(ret == w->ret, "row %u (Table %s): start returned %d, expected %d", idx, w->table, ret, w->ret);
    if (w->check & CHK_CNT)
        CHECK(r->read_cnt == w->cnt_after, "row %u (Table %s): read_cnt %u", idx, w->table, r->read_cnt);
    if (w->check & CHK_RINV)
        CHECK(r->rcvd_inv == w->rinv_after, "row %u (Table %s): rcvd_inv %u", idx, w->table, r->rcvd_inv);
    CHECK(((w->check & CHK_QUEUED) != 0) == (r->queue_head != NULL), "row %u (Table %s): queue %s", idx, w->table,
          r->queue_head ? "holds a request" : "empty");
    if (w->check & CHK_DIR) {
        unsigned dir = 0;
        for (uint32_t i = 0; i < r->ndir; i++)
            dir |= 1u << r->dir[i].node;
        CHECK(dir == w->dir_after, "row %u (Table %s): directory %#x, expected %#x", idx, w->table, dir, w->dir_after);
    }
    if (carries_data(w->ev)) /* taken exactly when the row says so */
        CHECK((memcmp(r->data, &payload, sizeof payload) == 0) == ((w->check & CHK_DATA) != 0),
              "row %u (Table %s): region data %s", idx, w->table, (w->check & CHK_DATA) ? "not taken" : "taken");
    sim_fini(s);
}

static void transitions(void)
{
    struct sim s;
    s.on_fail = NULL;
    for (unsigned i = 0; i < sizeof rows / sizeof rows[0]; i++)
        check_row(&s, &rows[i], i);
    printf("transitions: %zu rows of Tables A-6..A-21 checked\n", sizeof rows / sizeof rows[0]);
}

/* ---- exhaustive exploration (stateless replay, pruned by state hash) ----- */

#define MAX_DEPTH 256

struct config {
    unsigned nnodes, nregions;
    int fifo;
    struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS];
    unsigned len[SIM_MAX_NODES];
};

struct explorer {
    const struct config *cfg;
    unsigned choices[MAX_DEPTH];
    uint64_t *seen;
    size_t seen_cap, seen_count;
    uint64_t states, finals, max_depth;
    uint64_t acts; /* states reached after an action was taken */
};

static int seen_insert(struct explorer *x, uint64_t h)
{
    if (2 * (x->seen_count + 1) > x->seen_cap) {
        size_t cap = x->seen_cap ? 2 * x->seen_cap : 1 << 16;
        uint64_t *t = calloc(cap, sizeof *t), *old = x->seen;
        CHECK(t, "out of memory");
        size_t oc = x->seen_cap;
        x->seen = t;
        x->seen_cap = cap;
        x->seen_count = 0;
        for (size_t i = 0; i < oc; i++)
            if (old[i])
                seen_insert(x, old[i]);
        free(old);
    }
    h |= 1; /* 0 marks an empty slot */
    for (size_t i = h & (x->seen_cap - 1);; i = (i + 1) & (x->seen_cap - 1)) {
        if (x->seen[i] == h)
            return 0;
        if (!x->seen[i]) {
            x->seen[i] = h;
            x->seen_count++;
            return 1;
        }
    }
}

static void sim_setup(struct sim *s, const struct config *c)
{
    sim_init(s, c->nnodes, c->nregions, c->fifo);
    for (unsigned n = 0; n < c->nnodes; n++) {
        memcpy(s->script[n], c->script[n], sizeof s->script[n]);
        s->script_len[n] = c->len[n];
        s->phase[n] = c->len[n] ? SIM_IDLE : SIM_DONE;
    }
}

static const char *act_name(const struct sim *s, unsigned act, char *buf, size_t cap)
{
    if (act >= SIM_ACT_NODE) {
        unsigned n = act - SIM_ACT_NODE;
        static const char *ph[] = {"start", "map done", "grant seen", "retry", "end", "answered", "done"};
        static const char *op[] = {"read", "write", "flush", "evict", "delete"};
        const struct sim_step *st = &s->script[n][s->pc[n]];
        snprintf(buf, cap, "node %u: %s %s of region %u", n, ph[s->phase[n]], op[st->op], st->region);
    } else {
        const struct dsm_msg *m = &s->flight[act].m;
        snprintf(buf, cap, "deliver %s %u->%u region %u:%u v%u", dsm_msg_name(m->type), m->src, m->dst,
                 DSM_RID_HOME(m->rid), DSM_RID_SEQ(m->rid), m->version);
    }
    return buf;
}

/* Replays choices[0..depth) on a fresh simulation; verbose prints them. */
static void replay(struct sim *s, const struct config *c, const unsigned *choices, unsigned depth, int verbose)
{
    sim_setup(s, c);
    unsigned acts[SIM_MAX_FLIGHT + SIM_MAX_NODES];
    char buf[160];
    for (unsigned i = 0; i < depth; i++) {
        unsigned n = sim_enabled(s, acts, sizeof acts / sizeof acts[0]);
        CHECK(choices[i] < n, "replay diverged at step %u", i);
        if (verbose)
            fprintf(stderr, "  %3u. %s\n", i, act_name(s, acts[choices[i]], buf, sizeof buf));
        sim_do(s, acts[choices[i]]);
        sim_check_step(s);
    }
}

static void report_failure(struct explorer *x, unsigned depth, const char *why)
{
    fprintf(stderr, "FAILED: %s\nschedule:\n", why);
    struct sim s;
    jmp_buf jb;
    s.on_fail = &jb;
    if (!setjmp(jb))
        replay(&s, x->cfg, x->choices, depth, 1);
    exit(1);
}

static uint64_t actions_taken(const struct sim *s)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < s->nnodes; i++)
        for (unsigned k = 0; k < DSM_ACT_KINDS; k++)
            n += s->nodes[i].stats.act_taken[k];
    return n;
}

static void explore(struct explorer *x, unsigned depth)
{
    CHECK(depth < MAX_DEPTH, "schedule longer than %d steps", MAX_DEPTH);
    struct sim s;
    jmp_buf jb;
    s.on_fail = &jb;
    if (setjmp(jb))
        report_failure(x, depth, s.why);
    replay(&s, x->cfg, x->choices, depth, 0);
    unsigned acts[SIM_MAX_FLIGHT + SIM_MAX_NODES];
    unsigned n = sim_enabled(&s, acts, sizeof acts / sizeof acts[0]);
    int fresh = seen_insert(x, sim_hash(&s));
    if (fresh && n == 0) {
        if (!sim_all_done(&s))
            sim_fail(&s, "deadlock: nothing in flight and no node can move");
        sim_check_quiescent(&s);
        x->finals++;
    }
    x->acts += fresh && actions_taken(&s) > 0;
    sim_fini(&s);
    if (!fresh)
        return;
    x->states++;
    if (depth > x->max_depth)
        x->max_depth = depth;
    for (unsigned i = 0; i < n; i++) {
        x->choices[depth] = i;
        explore(x, depth + 1);
    }
}

static void run_explorer(const char *name, const struct config *c)
{
    struct explorer x = {.cfg = c};
    double t0 = test_now();
    explore(&x, 0);
    printf("%s: %llu states (%llu after an action), %llu final states, longest schedule %llu steps, %.1f s\n",
           name, (unsigned long long)x.states, (unsigned long long)x.acts, (unsigned long long)x.finals,
           (unsigned long long)x.max_depth, test_now() - t0);
    CHECK(x.finals > 0, "no schedule completed");
    CHECK(!sim_act || x.acts > 0, "the actions asked for were never taken");
    free(x.seen);
}

#define R(k) {SIM_READ, k}
#define W(k) {SIM_WRITE, k}
#define F(k) {SIM_FLUSH, k}
#define E(k) {SIM_EVICT, k}
#define D(k) {SIM_DELETE, k}

/* 3 nodes, one region at node 0, in-order channels (shm), with an
 * eviction and a flush. */
static void explore_fifo(void)
{
    struct config c = {.nnodes = 3, .nregions = 1, .fifo = 1,
                       .script = {{W(0), R(0), W(0)}, {R(0), E(0), W(0), R(0)}, {W(0), F(0), R(0), W(0)}},
                       .len = {3, 4, 4}};
    run_explorer("explore_fifo", &c);
}

/* Any delivery order: the §A.11 cases arise by themselves; evictions and
 * flushes add the §A.8 crossings and re-mapping. */
static void explore_reorder(void)
{
    struct config c = {.nnodes = 3, .nregions = 1, .fifo = 0,
                       .script = {{R(0), W(0), R(0)}, {W(0), R(0), E(0), W(0)}, {R(0), F(0), W(0), R(0)}},
                       .len = {3, 4, 4}};
    run_explorer("explore_reorder", &c);
}

/* Two regions homed at different nodes, operations on both. */
static void explore_two_regions(void)
{
    struct config c = {.nnodes = 3, .nregions = 2, .fifo = 0,
                       .script = {{W(1), R(0), R(1)}, {R(0), W(0), W(1)}, {W(0), R(1), E(0)}},
                       .len = {3, 3, 3}};
    run_explorer("explore_two_regions", &c);
}

/* Deletion at the home while copies in every state (and their flushes,
 * acks and late releases) are about. */
static void explore_delete_home(void)
{
    struct config c = {.nnodes = 3, .nregions = 1, .fifo = 0,
                       .script = {{R(0), W(0), D(0)}, {W(0), R(0), E(0)}, {R(0), W(0), F(0)}},
                       .len = {3, 3, 3}};
    run_explorer("explore_delete_home", &c);
}

/* Deletion by a rank that holds a modified copy, in order and in any order. */
static void explore_delete_remote(void)
{
    struct config c = {.nnodes = 3, .nregions = 1, .fifo = 0,
                       .script = {{R(0), W(0)}, {W(0), R(0), D(0)}, {R(0), E(0), W(0)}},
                       .len = {2, 3, 3}};
    run_explorer("explore_delete_remote", &c);
    c.fifo = 1;
    run_explorer("explore_delete_remote_fifo", &c);
}

/* One region deleted while the other stays in use. */
static void explore_delete_two_regions(void)
{
    struct config c = {.nnodes = 3, .nregions = 2, .fifo = 0,
                       .script = {{W(1), R(0), R(1)}, {R(0), W(1), D(0)}, {W(0), R(1), W(1)}},
                       .len = {3, 3, 3}};
    run_explorer("explore_delete_two_regions", &c);
}

/* ---- the reorderings of §A.11 and the crossing of §A.8, forced --------- */

/* Runs what is left in order, then checks the end state. */
static void finish(struct sim *s)
{
    unsigned acts[SIM_MAX_FLIGHT + SIM_MAX_NODES];
    while (sim_enabled(s, acts, sizeof acts / sizeof acts[0]) > 0) {
        sim_do(s, acts[0]);
        sim_check_step(s);
    }
    CHECK(sim_all_done(s), "scripts did not finish");
    sim_check_quiescent(s);
    sim_fini(s);
}

static void scenario(struct sim *s, const struct sim_step (*script)[SIM_MAX_OPS], const unsigned *len)
{
    struct config c = {.nnodes = 3, .nregions = 1, .fifo = 0};
    memcpy(c.script, script, sizeof c.script);
    memcpy(c.len, len, sizeof c.len);
    s->on_fail = NULL;
    sim_setup(s, &c);
}

/* Node n maps region 0 and starts its first operation (a request). */
static void map_and_request(struct sim *s, unsigned n, enum dsm_msg_type req)
{
    sim_step(s, n);
    sim_arrive(s, DSM_MSG_RGN_INFO_REQ, n, 0);
    sim_arrive(s, DSM_MSG_RGN_INFO_ACK, 0, n);
    sim_step(s, n);
    CHECK(sim_find_flight(s, req, n, 0) >= 0, "node %u sent no %s", n, dsm_msg_name(req));
}

static uint64_t home_value(struct sim *s)
{
    return sim_value(sim_region(s, 0, 0));
}

/* Fig. A-19: an invalidation delayed past the copy's flush and a new copy. */
static void late_invalidation(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{W(0)}, {R(0), F(0), R(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){1, 3});
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1);
    sim_step(&s, 1); /* read */
    sim_step(&s, 1); /* end: RemoteShared */
    sim_step(&s, 1); /* flush: MsgFlush in flight */
    sim_step(&s, 0); /* home write: MsgWInvalidate for the flushed copy */
    sim_arrive(&s, DSM_MSG_FLUSH, 1, 0); /* the flush counts as its ack */
    sim_step(&s, 0);
    sim_step(&s, 0); /* write done */
    sim_step(&s, 1); /* a new read */
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1);
    sim_step(&s, 1);
    struct dsm_region *r = sim_region(&s, 1, 0);
    CHECK(r->state == DSM_REMOTE_SHARED_RIP && r->version == 2, "node 1: %s v%u", dsm_state_name(r->state), r->version);
    sim_arrive(&s, DSM_MSG_WINVALIDATE, 0, 1); /* late: version 1 < 2 */
    CHECK(r->state == DSM_REMOTE_SHARED_RIP && !r->rcvd_inv && s.nflight == 0, "late invalidation acted on");
    CHECK(s.nodes[1].stats.stale == 1, "late invalidation not counted");
    finish(&s);
}

/* Fig. A-20: an invalidation that overtakes the grant it follows. */
static void early_invalidation(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{R(0)}, {W(0)}, {R(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){0, 1, 1});
    map_and_request(&s, 1, DSM_MSG_EXCLUSIVE_REQ);
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_REQ, 1, 0); /* grant in flight */
    map_and_request(&s, 2, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 2, 0); /* home invalidates node 1's new copy */
    sim_arrive(&s, DSM_MSG_RINVALIDATE, 0, 1);
    struct dsm_region *r = sim_region(&s, 1, 0);
    CHECK(r->state == DSM_REMOTE_INVALID_REQ && r->rcvd_inv && s.nodes[1].stats.early_inv == 1,
          "early invalidation not deferred");
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1);
    CHECK(r->state == DSM_REMOTE_MODIFIED_WIP && r->rcvd_inv, "grant after an early invalidation: %s",
          dsm_state_name(r->state));
    sim_step(&s, 1);
    sim_step(&s, 1); /* end write: the deferred invalidation is honoured */
    CHECK(r->state == DSM_REMOTE_INVALID && sim_find_flight(&s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0) >= 0,
          "deferred invalidation not honoured at the end of the write");
    finish(&s); /* node 2 must read node 1's write */
}

/* Fig. A-21: a MsgRelease overtaken by the same copy's flush. */
static void late_release(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{R(0)}, {W(0), R(0), F(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){1, 3});
    map_and_request(&s, 1, DSM_MSG_EXCLUSIVE_REQ);
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1);
    sim_step(&s, 1);
    sim_step(&s, 1); /* wrote 1: RemoteModified */
    sim_step(&s, 1); /* start read: RemoteModifiedRip */
    sim_step(&s, 0); /* home read: MsgRInvalidate */
    sim_arrive(&s, DSM_MSG_RINVALIDATE, 0, 1); /* MsgRelease with the data, RemoteSharedRip */
    sim_step(&s, 1); /* end read */
    sim_step(&s, 1); /* flush: after a release it carries the data (D7) */
    sim_arrive(&s, DSM_MSG_FLUSH_DATA, 1, 0);
    struct dsm_region *home = sim_region(&s, 0, 0);
    CHECK(home->state == DSM_HOME_EXCLUSIVE_RIP && home_value(&s) == 1, "home after the flush: %s holding %llu",
          dsm_state_name(home->state), (unsigned long long)home_value(&s));
    sim_arrive(&s, DSM_MSG_RELEASE, 1, 0); /* late: dropped */
    CHECK(home->state == DSM_HOME_EXCLUSIVE_RIP && s.nodes[0].stats.stale == 1 && s.nflight == 0,
          "late release acted on");
    finish(&s);
}

/* Fig. A-22: a request that overtakes its sender's last ack or flush
 * waits on the blocked queue until that arrives (one entry per node). */
static void late_ack(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{R(0)}, {R(0), F(0), R(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){0, 3});
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1);
    sim_step(&s, 1);
    sim_step(&s, 1);
    sim_step(&s, 1); /* flush in flight */
    sim_step(&s, 1); /* a new read: MsgSharedReq in flight behind it */
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    struct dsm_region *home = sim_region(&s, 0, 0);
    CHECK(home->queue_head && s.nodes[0].stats.queued == 1 && s.nflight == 1, "request not queued behind the flush");
    sim_arrive(&s, DSM_MSG_FLUSH, 1, 0);
    CHECK(!home->queue_head && sim_find_flight(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1) >= 0,
          "queued request not served after the flush");
    finish(&s);
}

/* §A.8: an invalidation that crosses the flush of a copy the URC evicted. */
static void crossing_eviction(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{W(0)}, {R(0), E(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){1, 2});
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1);
    sim_step(&s, 1);
    sim_step(&s, 1);
    sim_step(&s, 1); /* evicted: flushed, removed, freed */
    CHECK(!sim_region(&s, 1, 0), "evicted copy still in the table");
    sim_step(&s, 0); /* home write: MsgWInvalidate to the evicted copy */
    sim_arrive(&s, DSM_MSG_WINVALIDATE, 0, 1);
    CHECK(s.nflight == 1, "an invalidation for an evicted copy was answered");
    sim_arrive(&s, DSM_MSG_FLUSH, 1, 0);
    CHECK(sim_region(&s, 0, 0)->state == DSM_HOME_EXCLUSIVE_WIP, "the flush did not count as the ack");
    finish(&s);
}

/* ---- deletion (D10), forced -------------------------------------------------- */

/* Node n reads region 0 from a fresh map: map, request, grant, end. */
static void read_copy(struct sim *s, unsigned n)
{
    map_and_request(s, n, DSM_MSG_SHARED_REQ);
    sim_arrive(s, DSM_MSG_SHARED_REQ, n, 0);
    sim_arrive(s, DSM_MSG_SHARED_ACK_DATA, 0, n);
    sim_step(s, n);
    sim_step(s, n);
}

/* The home deletes while one copy is cached and another was evicted, its
 * flush still on the way: MsgDelete to both, the second and the flush are
 * dropped and counted. */
static void delete_at_home(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{D(0)}, {R(0)}, {R(0), E(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){1, 1, 2});
    read_copy(&s, 1);
    read_copy(&s, 2);
    sim_step(&s, 2); /* evicted: MsgFlush in flight */
    sim_step(&s, 0);
    CHECK(!sim_region(&s, 0, 0) && s.deleted[0], "the home still has the region");
    CHECK(sim_find_flight(&s, DSM_MSG_DELETE, 0, 1) >= 0 && sim_find_flight(&s, DSM_MSG_DELETE, 0, 2) >= 0 &&
              s.nflight == 3,
          "MsgDelete not sent to both ranks that mapped the region");
    sim_arrive(&s, DSM_MSG_DELETE, 0, 1);
    CHECK(!sim_region(&s, 1, 0), "node 1's cached copy survived MsgDelete");
    sim_arrive(&s, DSM_MSG_DELETE, 0, 2);
    CHECK(s.nodes[2].stats.deleted_dropped == 1, "MsgDelete for an evicted copy not counted");
    sim_arrive(&s, DSM_MSG_FLUSH, 2, 0);
    CHECK(s.nodes[0].stats.deleted_dropped == 1, "a late flush for a deleted region not counted");
    finish(&s);
}

/* A rank with the modified copy deletes: its copy goes without a flush, the
 * home frees the region, tells the other holder and answers the deleter. */
static void delete_from_remote(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{R(0)}, {W(0), D(0)}, {R(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){0, 2, 1});
    read_copy(&s, 2);
    map_and_request(&s, 1, DSM_MSG_EXCLUSIVE_REQ);
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_WINVALIDATE, 0, 2);
    sim_arrive(&s, DSM_MSG_INVALIDATE_ACK, 2, 0);
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1);
    sim_step(&s, 1);
    sim_step(&s, 1); /* wrote: RemoteModified */
    sim_step(&s, 1); /* delete */
    CHECK(!sim_region(&s, 1, 0) && s.phase[1] == SIM_DELETING && s.nflight == 1 &&
              sim_find_flight(&s, DSM_MSG_DELETE_REQ, 1, 0) >= 0,
          "the deleter kept its copy or sent more than MsgDeleteReq");
    sim_arrive(&s, DSM_MSG_DELETE_REQ, 1, 0);
    CHECK(!sim_region(&s, 0, 0) && sim_find_flight(&s, DSM_MSG_DELETE_ACK, 0, 1) >= 0 &&
              sim_find_flight(&s, DSM_MSG_DELETE, 0, 2) >= 0 && sim_find_flight(&s, DSM_MSG_DELETE, 0, 1) < 0,
          "the home did not delete, answer node 1 and tell node 2 (only)");
    finish(&s);
}

/* Runs one engine call that must fail with a message containing `want`. */
#define EXPECT_FAIL(s, call, want)                                                                          \
    do {                                                                                                    \
        jmp_buf jb_;                                                                                        \
        (s)->on_fail = &jb_;                                                                                \
        if (!setjmp(jb_)) {                                                                                 \
            call;                                                                                           \
            CHECK(0, "%s did not fail", #call);                                                             \
        }                                                                                                   \
        (s)->on_fail = NULL;                                                                                \
        CHECK(strstr((s)->why, want), "%s failed with \"%s\", not \"%s\"", #call, (s)->why, want);         \
    } while (0)

/* Delivers the single message in flight. */
static void deliver_only(struct sim *s)
{
    CHECK(s->nflight == 1, "%u messages in flight, expected 1", s->nflight);
    sim_deliver_index(s, 0);
}

static enum dsm_refusal delete_answer(struct sim *s, unsigned n, dsm_rid_t rid)
{
    dsm_delete(&s->nodes[n], rid);
    if (!s->nodes[n].ask_reply) { /* the request, then the answer (MsgDeletes may go out too) */
        deliver_only(s);
        int i = sim_find_flight(s, DSM_MSG_DELETE_ACK, DSM_RID_HOME(rid), n);
        if (i < 0)
            i = sim_find_flight(s, DSM_MSG_DELETE_NACK, DSM_RID_HOME(rid), n);
        CHECK(i >= 0, "no answer to node %u's MsgDeleteReq in flight", n);
        sim_deliver_index(s, (unsigned)i);
    }
    CHECK(s->nodes[n].ask_reply, "no answer to node %u's delete", n);
    return dsm_delete_complete(&s->nodes[n]);
}

/* What the home refuses, and what counts as misuse. */
static void delete_refusals(void)
{
    struct sim s;
    const struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS] = {{R(0)}, {R(0)}};
    scenario(&s, script, (unsigned[SIM_MAX_NODES]){0, 1});
    dsm_rid_t rid = s.rids[0], never = DSM_RID(0, 99);
    struct dsm_region *home = sim_region(&s, 0, 0);
    home->map_cnt = 1;
    EXPECT_FAIL(&s, dsm_delete(&s.nodes[0], rid),
                "region 0:0 (HomeExclusive; calls on it, oldest first: -, -, -, rgn_delete): rgn_delete of a region "
                "mapped on this rank");
    home->map_cnt = 0;
    CHECK(delete_answer(&s, 1, never) == DSM_REFUSE_NEVER_CREATED, "delete of a rid never created, from elsewhere");
    CHECK(delete_answer(&s, 0, never) == DSM_REFUSE_NEVER_CREATED, "delete of a rid never created, at home");
    /* node 1 is reading when the home deletes: it fails on MsgDelete */
    sim_step(&s, 1);
    sim_arrive(&s, DSM_MSG_RGN_INFO_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_RGN_INFO_ACK, 0, 1);
    sim_step(&s, 1); /* MsgSharedReq */
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    sim_arrive(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1);
    sim_step(&s, 1); /* reading */
    CHECK(delete_answer(&s, 0, rid) == DSM_REFUSE_NONE && s.nflight == 1, "delete at home");
    EXPECT_FAIL(&s, deliver_only(&s),
                "region 0:0 (RemoteSharedRip; calls on it, oldest first: -, -, -, rgn_start_read): rank 0 deleted "
                "this region while an operation on it is in progress here");
    /* the copy is still there (the job would have ended): its end and a
     * new start send a request, which the home answers with MsgDelete */
    struct dsm_region *r = sim_region(&s, 1, 0);
    dsm_end_read(&s.nodes[1], r);
    dsm_flush(&s.nodes[1], r); /* MsgFlush: dropped at the home */
    deliver_only(&s);
    CHECK(s.nodes[0].stats.deleted_dropped == 1, "late flush not dropped");
    CHECK(dsm_start_write(&s.nodes[1], r) == DSM_PENDING, "start write");
    deliver_only(&s); /* MsgExclusiveReq for a deleted region */
    CHECK(s.nodes[0].stats.deleted_dropped == 2 && sim_find_flight(&s, DSM_MSG_DELETE, 0, 1) == 0,
          "a request for a deleted region not answered with MsgDelete");
    EXPECT_FAIL(&s, deliver_only(&s), "rank 0 deleted this region while an operation on it is in progress here");
    r->map_cnt = 0;
    dsm_table_remove(&s.nodes[1], r);
    dsm_region_free(r);
    /* twice, and a map of the deleted rid, from either side */
    CHECK(delete_answer(&s, 0, rid) == DSM_REFUSE_DELETED, "second delete at home");
    CHECK(delete_answer(&s, 1, rid) == DSM_REFUSE_DELETED, "second delete from elsewhere");
    dsm_map_request(&s.nodes[1], rid);
    deliver_only(&s);
    deliver_only(&s);
    CHECK(!dsm_map_complete(&s.nodes[1]) && s.nodes[1].ask_refusal == DSM_REFUSE_DELETED, "map of a deleted rid");
    CHECK(dsm_absence(&s.nodes[0], rid) == DSM_REFUSE_DELETED &&
              dsm_absence(&s.nodes[0], never) == DSM_REFUSE_NEVER_CREATED &&
              dsm_absence(&s.nodes[1], rid) == DSM_REFUSE_NEVER_CREATED,
          "dsm_absence");

    /* a second region: a read in progress at its home refuses a delete */
    home = dsm_create(&s.nodes[0], 8);
    dsm_rid_t rid2 = home->rid;
    CHECK(dsm_start_read(&s.nodes[0], home) == DSM_STARTED, "home read");
    CHECK(delete_answer(&s, 1, rid2) == DSM_REFUSE_IN_USE && dsm_lookup(&s.nodes[0], rid2),
          "delete during a home read");
    dsm_end_read(&s.nodes[0], home);
    /* mapped, idle, at the home and at node 1 when node 2 deletes it: both
     * mappings leave the table in state Deleted, for their unmap to free */
    dsm_map_request(&s.nodes[1], rid2);
    deliver_only(&s);
    deliver_only(&s);
    r = dsm_map_complete(&s.nodes[1]);
    home->map_cnt = r->map_cnt = 1;
    CHECK(delete_answer(&s, 2, rid2) == DSM_REFUSE_NONE && !dsm_lookup(&s.nodes[0], rid2) &&
              home->state == DSM_DELETED,
          "the home's mapping was not set aside");
    deliver_only(&s); /* MsgDelete to node 1 */
    CHECK(!dsm_lookup(&s.nodes[1], rid2) && r->state == DSM_DELETED, "node 1's mapping was not set aside");
    EXPECT_FAIL(&s, dsm_start_read(&s.nodes[1], r),
                "rgn_start_read on a region deleted since it was mapped (only rgn_unmap, rgn_rid and rgn_size remain)");
    dsm_deleted_mapping_free(&s.nodes[0], home); /* node 1's goes with sim_fini */

    /* sequence numbers are never reused: the last one refuses */
    s.nodes[0].next_seq = UINT32_MAX - 1;
    CHECK(DSM_RID_SEQ(dsm_create(&s.nodes[0], 8)->rid) == UINT32_MAX - 1, "the last sequence number");
    EXPECT_FAIL(&s, dsm_create(&s.nodes[0], 8), "rank 0: rgn_create: out of region sequence numbers");
    sim_fini(&s);
}

static void deletion(void)
{
    delete_at_home();
    delete_from_remote();
    delete_refusals();
    printf("delete: at the home with a cached and an evicted copy, from a remote modified copy, refusals, misuse, "
           "mappings set aside, sequence numbers\n");
}

static void reorder(void)
{
    late_invalidation();
    early_invalidation();
    late_release();
    late_ack();
    crossing_eviction();
    printf("reorder: late and early invalidation, late release, late ack, flush/invalidation crossing\n");
}

/* A longer search than CTest's (minutes), run by hand: 4 steps on every
 * node, any delivery order. */
static void explore_big(void)
{
    struct config c = {.nnodes = 3, .nregions = 1, .fifo = 0,
                       .script = {{W(0), R(0), E(0), W(0)}, {R(0), W(0), F(0), R(0)}, {W(0), R(0), W(0), R(0)}},
                       .len = {4, 4, 4}};
    run_explorer("explore_big", &c);
}

/* ---- the Cosmos actions, forced (docs/COSMOS.md, Actions) -------------------- */

static void act_scenario(struct sim *s, enum dsm_act_kind kind, const struct sim_step (*script)[SIM_MAX_OPS],
                         const unsigned *len)
{
    sim_act = DSM_ACT_BIT(kind);
    scenario(s, script, len);
}

/* Node n's grant arrives and its operation runs to its end. */
static void granted_op(struct sim *s, unsigned n, enum dsm_msg_type grant)
{
    sim_arrive(s, grant, 0, n);
    sim_step(s, n); /* grant seen */
    sim_step(s, n); /* end */
}

/* rmw: an idle block's reader gets it exclusive; its write then hits. */
static void act_rmw(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_RMW, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0)}, {R(0), W(0)}},
                 (unsigned[SIM_MAX_NODES]){0, 2});
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    CHECK(sim_find_flight(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1) >= 0, "rmw: the read was not answered exclusive");
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1);
    sim_step(&s, 1);
    struct dsm_region *r = sim_region(&s, 1, 0);
    CHECK(r->state == DSM_REMOTE_MODIFIED_RIP, "rmw: node 1 reads in %s", dsm_state_name(r->state));
    sim_step(&s, 1); /* end read */
    sim_step(&s, 1); /* start write: a hit */
    CHECK(r->state == DSM_REMOTE_MODIFIED_WIP && s.nflight == 0, "rmw: the write after the read was not a hit");
    CHECK(s.nodes[0].stats.act_taken[DSM_ACT_RMW] == 1 && s.nodes[1].stats.act_confirmed[DSM_ACT_RMW] == 1,
          "rmw: taken %llu, confirmed %llu", (unsigned long long)s.nodes[0].stats.act_taken[DSM_ACT_RMW],
          (unsigned long long)s.nodes[1].stats.act_confirmed[DSM_ACT_RMW]);
    finish(&s);
}

/* rmw mispredicted: the exclusive copy is recalled unwritten, which the
 * ack says; the home then declines the next one. */
static void act_rmw_wasted(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_RMW, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0)}, {R(0)}, {R(0)}},
                 (unsigned[SIM_MAX_NODES]){0, 1, 1});
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    granted_op(&s, 1, DSM_MSG_EXCLUSIVE_ACK_DATA);
    map_and_request(&s, 2, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 2, 0);
    sim_arrive(&s, DSM_MSG_RINVALIDATE, 0, 1);
    int i = sim_find_flight(&s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0);
    CHECK(i >= 0 && s.flight[i].m.aux == DSM_ACT_BIT(DSM_ACT_RMW), "rmw: the unwritten copy's ack is not tagged");
    CHECK(s.nodes[1].stats.act_wasted[DSM_ACT_RMW] == 1, "rmw: the unwritten copy is not counted wasted");
    sim_arrive(&s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0);
    CHECK(sim_region(&s, 0, 0)->act & DSM_RACT_XREAD_SKIP, "rmw: the home does not decline the next one");
    finish(&s);
}

/* migratory: after recalling node 1's modified copy for node 2's read, the
 * home grants it exclusive; node 2's write then hits. */
static void act_migratory(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_MIGRATORY, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0)}, {W(0)}, {R(0), W(0)}},
                 (unsigned[SIM_MAX_NODES]){0, 1, 2});
    map_and_request(&s, 1, DSM_MSG_EXCLUSIVE_REQ);
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_REQ, 1, 0);
    granted_op(&s, 1, DSM_MSG_EXCLUSIVE_ACK_DATA);
    map_and_request(&s, 2, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 2, 0);
    sim_arrive(&s, DSM_MSG_RINVALIDATE, 0, 1);
    sim_arrive(&s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0);
    CHECK(sim_find_flight(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 2) >= 0, "migratory: the read was not answered exclusive");
    granted_op(&s, 2, DSM_MSG_EXCLUSIVE_ACK_DATA);
    sim_step(&s, 2); /* start write: a hit */
    CHECK(sim_region(&s, 2, 0)->state == DSM_REMOTE_MODIFIED_WIP && s.nflight == 0,
          "migratory: the write after the read was not a hit");
    CHECK(s.nodes[0].stats.act_taken[DSM_ACT_MIGRATORY] == 1 && s.nodes[2].stats.act_confirmed[DSM_ACT_MIGRATORY] == 1,
          "migratory: not counted taken and confirmed");
    finish(&s);
}

/* dsi: the reader flushes at its read's end; the home's write then needs
 * no invalidation (confirmed).  A second node's re-read of its own flushed
 * copy first is counted wasted, and that node declines its next one. */
static void act_dsi(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_DSI, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{W(0)}, {R(0)}, {R(0), R(0)}},
                 (unsigned[SIM_MAX_NODES]){1, 1, 2});
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    granted_op(&s, 1, DSM_MSG_SHARED_ACK_DATA);
    int i = sim_find_flight(&s, DSM_MSG_FLUSH, 1, 0);
    CHECK(i >= 0 && s.flight[i].m.aux == DSM_ACT_BIT(DSM_ACT_DSI) && s.nodes[1].stats.act_taken[DSM_ACT_DSI] == 1,
          "dsi: no tagged flush at the read's end");
    sim_arrive(&s, DSM_MSG_FLUSH, 1, 0);
    sim_step(&s, 0); /* the home's write: no copy left to invalidate */
    CHECK(s.nflight == 0 && sim_region(&s, 0, 0)->state == DSM_HOME_EXCLUSIVE_WIP, "dsi: the home's write missed");
    CHECK(s.nodes[0].stats.act_confirmed[DSM_ACT_DSI] == 1, "dsi: the home's write did not confirm it");
    sim_step(&s, 0); /* end write */
    map_and_request(&s, 2, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 2, 0);
    granted_op(&s, 2, DSM_MSG_SHARED_ACK_DATA);
    sim_arrive(&s, DSM_MSG_FLUSH, 2, 0);
    sim_step(&s, 2); /* its own read again, first */
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 2, 0);
    CHECK(s.nodes[0].stats.act_wasted[DSM_ACT_DSI] == 1, "dsi: the re-read did not count it wasted");
    granted_op(&s, 2, DSM_MSG_SHARED_ACK_DATA);
    CHECK(s.nflight == 0 && sim_region(&s, 2, 0)->state == DSM_REMOTE_SHARED,
          "dsi: node 2 self-invalidated again after a wasted one");
    finish(&s);
}

/* What each side's predictor hears (docs/COSMOS.md, "What the predictor
 * hears"): the types of the messages a node received, or was offered as
 * if received, in order. */
struct heard {
    unsigned type[8], n;
};
static struct heard heard[2];

static void hear(unsigned node, unsigned type)
{
    struct heard *h = &heard[node];
    if (h->n < sizeof h->type / sizeof h->type[0])
        h->type[h->n++] = type;
}

static void heard_msg(void *ctx, const struct cosmos_rec *rec, struct cosmos_blk *blk)
{
    (void)blk;
    hear((unsigned)(uintptr_t)ctx, rec->type);
}

static void heard_assumed(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t sender, unsigned type)
{
    (void)rid, (void)home, (void)sender;
    hear(node->rank, type);
}

static int heard_is(unsigned node, const unsigned *want, unsigned n)
{
    return heard[node].n == n && memcmp(heard[node].type, want, n * sizeof *want) == 0;
}

/* Nodes 0 and 1 record what their predictors hear (heard[]), offered and
 * assumed, through obs. */
static void listen_both(struct sim *s, struct dsm_observer obs[2])
{
    memset(heard, 0, sizeof heard);
    for (unsigned n = 0; n < 2; n++) {
        obs[n] = (struct dsm_observer){.fn = heard_msg, .ctx = (void *)(uintptr_t)n};
        s->nodes[n].observer = &obs[n];
        s->nodes[n].assume = heard_assumed;
    }
}

/* rmw and dsi on one read-modify-write: both sides hear the stream they
 * would without actions (the home its reader's upgrade and the ack of its
 * invalidation, the remote the read's grant, the upgrade's ack and the
 * invalidation), whichever side acted, so that a pattern learnt before the
 * actions began still predicts them. */
static void act_heard(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_RMW) | DSM_ACT_BIT(DSM_ACT_DSI);
    scenario(&s, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{W(0)}, {R(0), W(0)}},
             (unsigned[SIM_MAX_NODES]){1, 2});
    struct dsm_observer obs[2];
    listen_both(&s, obs);
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    granted_op(&s, 1, DSM_MSG_EXCLUSIVE_ACK_DATA);
    sim_step(&s, 1); /* the write: a hit */
    sim_step(&s, 1); /* its end: the self-invalidation */
    sim_arrive(&s, DSM_MSG_FLUSH_DATA, 1, 0);
    static const unsigned home[] = {COSMOS_GET_RO_REQ, COSMOS_UPGRADE_REQ, COSMOS_INVAL_RW_RESP};
    static const unsigned remote[] = {COSMOS_GET_RO_RESP, COSMOS_UPGRADE_RESP, COSMOS_INVAL_RW_REQ};
    CHECK(heard_is(0, home, 3) && heard_is(1, remote, 3),
          "heard: the home %u types (%u %u %u), the remote %u (%u %u %u); expected %u %u %u and %u %u %u",
          heard[0].n, heard[0].type[0], heard[0].type[1], heard[0].type[2], heard[1].n, heard[1].type[0],
          heard[1].type[1], heard[1].type[2], home[0], home[1], home[2], remote[0], remote[1], remote[2]);
    for (unsigned n = 0; n < 2; n++)
        s.nodes[n].observer = NULL;
    finish(&s);
}

/* Node 1 reads, then the home writes (invalidating node 1's copy) and its
 * write's end pushes the new data to node 1, whose read is predicted
 * (with xpush on, exclusive: its upgrade is predicted after the read). */
static void push_after_write(struct sim *s)
{
    int x = !(sim_act & DSM_ACT_BIT(DSM_ACT_PUSH));
    enum dsm_msg_type type = x ? DSM_MSG_EXCLUSIVE_ACK_DATA : DSM_MSG_SHARED_ACK_DATA;
    enum dsm_act_kind kind = x ? DSM_ACT_XPUSH : DSM_ACT_PUSH;
    map_and_request(s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(s, DSM_MSG_SHARED_REQ, 1, 0);
    granted_op(s, 1, DSM_MSG_SHARED_ACK_DATA);
    sim_step(s, 0); /* start write */
    sim_arrive(s, DSM_MSG_WINVALIDATE, 0, 1);
    sim_arrive(s, DSM_MSG_INVALIDATE_ACK, 1, 0);
    sim_step(s, 0); /* the write starts */
    sim_step(s, 0); /* end write: the push */
    int i = sim_find_flight(s, type, 0, 1);
    CHECK(i >= 0 && s->flight[i].m.aux == DSM_ACT_BIT(kind) && s->nodes[0].stats.act_taken[kind] == 1,
          "%s: no tagged push at the home's write's end", util_cosmos_act_names[kind]);
}

/* push: node 1's next read hits the pushed copy (confirmed, and the home
 * judges it so when the copy leaves). */
static void act_push(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_PUSH, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{W(0)}, {R(0), R(0)}},
                 (unsigned[SIM_MAX_NODES]){1, 2});
    push_after_write(&s);
    sim_arrive(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1);
    sim_step(&s, 1); /* start read: a hit */
    struct dsm_region *r = sim_region(&s, 1, 0);
    CHECK(r->state == DSM_REMOTE_SHARED_RIP && s.nflight == 0 && sim_value(r) == 1,
          "push: node 1's read after the push was not a hit on the new data");
    CHECK(s.nodes[1].stats.act_confirmed[DSM_ACT_PUSH] == 1, "push: the read did not confirm it");
    sim_step(&s, 1); /* end read */
    dsm_flush(&s.nodes[1], r);
    sim_arrive(&s, DSM_MSG_FLUSH, 1, 0);
    CHECK(s.nodes[0].act_trust[2].credit == 1, "push: the home did not judge the read copy confirmed");
    finish(&s);
}

/* A push of action `act` (grant: its message; aux: the tags its unread
 * flush carries) crossing the reader's own request: the home queues the
 * request behind the pushed entry; the reader flushes the push unread,
 * which frees the request, and the home judges the push wasted; the
 * reader's read is then granted the new data.  Returns the home's standing
 * of that action right after the flush. */
static int push_crossed_by_request(enum dsm_act_kind act, unsigned grant, uint32_t aux, unsigned trust,
                                   const char *name)
{
    struct sim s;
    act_scenario(&s, act, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{W(0)}, {R(0), R(0)}},
                 (unsigned[SIM_MAX_NODES]){1, 2});
    push_after_write(&s);
    sim_step(&s, 1); /* start read: the request crosses the push */
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    CHECK(s.nodes[0].stats.queued == 1, "%s: the crossing request was not queued behind the pushed entry", name);
    sim_arrive(&s, grant, 0, 1);
    int i = sim_find_flight(&s, DSM_MSG_FLUSH, 1, 0);
    CHECK(i >= 0 && s.flight[i].m.aux == aux && s.nodes[1].stats.act_wasted[act] == 1,
          "%s: the crossing push was not flushed unread", name);
    sim_arrive(&s, DSM_MSG_FLUSH, 1, 0);
    int credit = s.nodes[0].act_trust[trust].credit;
    granted_op(&s, 1, DSM_MSG_SHARED_ACK_DATA);
    CHECK(sim_value(sim_region(&s, 1, 0)) == 1, "%s: node 1 read an old value", name);
    finish(&s);
    return credit;
}

static void act_push_crossed(void)
{
    int credit = push_crossed_by_request(DSM_ACT_PUSH, DSM_MSG_SHARED_ACK_DATA, DSM_ACT_BIT(DSM_ACT_PUSH), 2, "push");
    CHECK(credit < 0, "push: the home did not judge the crossed push wasted (credit %d)", credit);
}

/* push's timing (act.c's rule alone, as in act_dsi_steady): a home that
 * writes twice before its reader asks pushes after the second write only;
 * when the reader then asks after one write the push moves there, a push
 * invalidated unread moves it one write later again, and a request after
 * no write does not move it. */
static void act_push_timing(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_PUSH);
    sim_init(&s, 2, 1, 0);
    struct dsm_node *nd = &s.nodes[0];
    struct dsm_region *r = sim_region(&s, 0, 0);
    dsm_act_push_wrote(r);
    dsm_act_push_wrote(r);
    dsm_act_push_read_req(r); /* a real request after two writes */
    unsigned fired = 0;
    for (unsigned step = 0; step < 3; step++)
        for (unsigned w = 0; w < 2; w++) {
            dsm_act_push_wrote(r);
            if (dsm_act_push(nd, r, 1, 0)) {
                fired |= 1u << (step * 2 + w);
                dsm_act_push_sent(r);
            }
        }
    CHECK(fired == 0x2a, "push: fired after writes %#x, expected after every second (0x2a)", fired);
    dsm_act_push_wrote(r);
    dsm_act_push_read_req(r); /* the reader asks after one write now */
    dsm_act_push_wrote(r);
    CHECK(dsm_act_push(nd, r, 1, 0), "push: did not follow the request after one write");
    dsm_act_push_sent(r);
    struct dsm_ptr e = {.node = 1, .pushed = 1};
    struct dsm_msg m = {.type = DSM_MSG_INVALIDATE_ACK, .src = 1, .aux = DSM_ACT_BIT(DSM_ACT_PUSH)};
    dsm_act_push_judged(nd, r, &e, &m); /* invalidated unread at the next write's start */
    CHECK(r->push_after == 2 && r->push_writes == 1,
          "push: a push invalidated unread left push_after %u, push_writes %u (expected 2, 1)", r->push_after,
          r->push_writes);
    /* a push, then another reader's request with no write between (tuned
     * Water at 4 ranks; or an exclusive push's recalled copy asked again):
     * it says nothing of the write after which readers read */
    dsm_act_push_sent(r);
    dsm_act_push_read_req(r);
    CHECK(r->push_after == 2, "push: a request after no write since the push moved push_after to %u", r->push_after);
    sim_fini(&s);
}

/* xpush (D13): the push goes exclusive, the home to HomeInvalid with node
 * 1's entry marked; node 1 takes it as an idle modified copy, its read and
 * then its write hit with nothing in flight (confirmed at the write), and
 * the home judges it confirmed when the written copy comes back.  Both
 * sides hear what they would without the action: the home the read and
 * the upgrade (assumed), the remote the read's grant (the exclusive push's
 * stand-in) and the upgrade's ack (assumed at the write). */
static void act_xpush(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_XPUSH, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{W(0)}, {R(0), R(0), W(0)}},
                 (unsigned[SIM_MAX_NODES]){1, 3});
    struct dsm_observer obs[2];
    listen_both(&s, obs);
    push_after_write(&s);
    struct dsm_region *h = sim_region(&s, 0, 0);
    CHECK(h->state == DSM_HOME_INVALID && h->ndir == 1 && h->dir[0].pushed == DSM_PUSH_EXCLUSIVE,
          "xpush: the home is in state %u with %u entries, not HomeInvalid with node 1's exclusive push", h->state,
          h->ndir);
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1);
    struct dsm_region *r = sim_region(&s, 1, 0);
    CHECK(r->state == DSM_REMOTE_MODIFIED && r->pushed == (DSM_PUSHED_UNREAD | DSM_PUSHED_UNWRITTEN),
          "xpush: node 1 took the push into state %u (pushed %u), not an idle modified copy", r->state, r->pushed);
    sim_step(&s, 1); /* start read: a hit */
    CHECK(r->state == DSM_REMOTE_MODIFIED_RIP && s.nflight == 0 && sim_value(r) == 1,
          "xpush: node 1's read after the push was not a hit on the new data");
    sim_step(&s, 1); /* end read: not self-invalidated, not judged yet */
    CHECK(s.nodes[1].stats.act_confirmed[DSM_ACT_XPUSH] == 0 && r->pushed == DSM_PUSHED_UNWRITTEN,
          "xpush: confirmed by a read alone");
    sim_step(&s, 1); /* start write: a hit */
    CHECK(r->state == DSM_REMOTE_MODIFIED_WIP && s.nflight == 0 && s.nodes[1].stats.act_confirmed[DSM_ACT_XPUSH] == 1,
          "xpush: node 1's write was not a confirmed hit");
    sim_step(&s, 1); /* end write */
    dsm_flush(&s.nodes[1], r);
    int i = sim_find_flight(&s, DSM_MSG_FLUSH_DATA, 1, 0);
    CHECK(i >= 0 && s.flight[i].m.aux == 0, "xpush: the written copy's flush is tagged or missing");
    sim_arrive(&s, DSM_MSG_FLUSH_DATA, 1, 0);
    CHECK(s.nodes[0].act_trust[3].credit == 1 && h->state == DSM_HOME_EXCLUSIVE && home_value(&s) == 2,
          "xpush: the home did not judge the written copy confirmed, or lost its data");
    static const unsigned home[] = {COSMOS_GET_RO_REQ, COSMOS_INVAL_RO_RESP, COSMOS_GET_RO_REQ, COSMOS_UPGRADE_REQ,
                                    COSMOS_FLUSH};
    static const unsigned remote[] = {COSMOS_GET_RO_RESP, COSMOS_INVAL_RW_REQ, COSMOS_GET_RO_RESP,
                                      COSMOS_UPGRADE_RESP};
    CHECK(heard_is(0, home, 5) && heard_is(1, remote, 4),
          "xpush heard: the home %u types (%u %u %u %u %u), the remote %u (%u %u %u %u)", heard[0].n,
          heard[0].type[0], heard[0].type[1], heard[0].type[2], heard[0].type[3], heard[0].type[4], heard[1].n,
          heard[1].type[0], heard[1].type[1], heard[1].type[2], heard[1].type[3]);
    for (unsigned n = 0; n < 2; n++)
        s.nodes[n].observer = NULL;
    finish(&s);
}

/* xpush crossed: by the reader's own request (queued behind the pushed
 * entry; the push is flushed unread with both tags, the home judges it
 * push's waste, back in HomeExclusive, and grants the request), and by the
 * home's own read's recall overtaking it (the remote raises its version,
 * flushes the push when it comes, and the home takes that flush as the
 * recall's ack). */
static void act_xpush_crossed(void)
{
    int credit = push_crossed_by_request(DSM_ACT_XPUSH, DSM_MSG_EXCLUSIVE_ACK_DATA,
                                         DSM_ACT_BIT(DSM_ACT_PUSH) | DSM_ACT_BIT(DSM_ACT_XPUSH), 3, "xpush");
    CHECK(credit == -2, "xpush: the crossed push was not judged push's waste (credit %d)", credit);

    struct sim s;
    act_scenario(&s, DSM_ACT_XPUSH, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{W(0), R(0)}, {R(0)}},
                 (unsigned[SIM_MAX_NODES]){2, 1});
    push_after_write(&s);
    sim_step(&s, 0); /* the home's read: recalls the pushed copy */
    sim_arrive(&s, DSM_MSG_RINVALIDATE, 0, 1); /* overtakes the push */
    struct dsm_region *r = sim_region(&s, 1, 0);
    CHECK(r->state == DSM_REMOTE_INVALID && s.nflight == 1, "xpush: the overtaking recall was answered");
    sim_arrive(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1);
    CHECK(r->state == DSM_REMOTE_INVALID && sim_find_flight(&s, DSM_MSG_FLUSH, 1, 0) >= 0,
          "xpush: the overtaken push was taken, not flushed");
    sim_arrive(&s, DSM_MSG_FLUSH, 1, 0);
    struct dsm_region *h = sim_region(&s, 0, 0);
    CHECK(h->state == DSM_HOME_EXCLUSIVE_RIP && h->ndir == 0, "xpush: the flush did not answer the recall (state %u)",
          h->state);
    finish(&s);
}

/* xpush's outcomes on its own standing (act.c's rule alone): read but
 * never written weighs an exclusive read's waste (1) and makes the next
 * push shared, which the one after does not repeat; unread weighs push's
 * (3), and leaves push's standing alone: declined exclusive, the push goes
 * shared; exclusive pushes have a cap on untried ones as pushes do. */
static void act_xpush_judged(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_PUSH) | DSM_ACT_BIT(DSM_ACT_XPUSH);
    sim_init(&s, 2, 2, 0);
    struct dsm_node *nd = &s.nodes[0];
    struct dsm_region *a = sim_region(&s, 0, 0), *b = dsm_create(nd, SIM_DATA);
    struct dsm_ptr e = {.node = 1, .pushed = DSM_PUSH_EXCLUSIVE};
    struct dsm_msg m = {.type = DSM_MSG_INVALIDATE_ACK_DATA, .src = 1, .aux = DSM_ACT_BIT(DSM_ACT_XPUSH)};
    dsm_act_push_judged(nd, a, &e, &m); /* read, never written */
    CHECK(a->xpush_trust.credit == -1 && a->push_xskip, "xpush: read-unwritten weighed %d, skip %u (expected -1, 1)",
          a->xpush_trust.credit, a->push_xskip);
    int first = dsm_act_push(nd, a, 1, 1), second = dsm_act_push(nd, a, 1, 1);
    CHECK(first == DSM_PUSH_SHARED && second == DSM_PUSH_EXCLUSIVE,
          "xpush: after an unwritten one pushed %d then %d (expected shared, then exclusive)", first, second);
    CHECK(dsm_act_push(nd, a, 1, 0) == DSM_PUSH_SHARED, "xpush: exclusive where the caller said it is not legal");
    e.pushed = DSM_PUSH_EXCLUSIVE;
    m = (struct dsm_msg){
        .type = DSM_MSG_FLUSH, .src = 1, .aux = DSM_ACT_BIT(DSM_ACT_PUSH) | DSM_ACT_BIT(DSM_ACT_XPUSH)};
    dsm_act_push_judged(nd, b, &e, &m); /* never read */
    CHECK(b->xpush_trust.credit == -2 && !b->push_xskip, "xpush: unread weighed %d, skip %u (expected -2, 0)",
          b->xpush_trust.credit, b->push_xskip);
    CHECK(dsm_act_push(nd, b, 1, 1) == DSM_PUSH_SHARED && b->push_trust.credit == 0 &&
              nd->stats.act_throttled[DSM_ACT_XPUSH] == 1,
          "xpush: a suspended exclusive push did not go shared, or its wastes touched push's standing (%d)",
          b->push_trust.credit);
    sim_fini(&s);
    sim_act = DSM_ACT_BIT(DSM_ACT_XPUSH);
    sim_init(&s, 2, 0, 0);
    unsigned fired = 0;
    for (unsigned k = 0; k < 32; k++)
        fired += dsm_act_push(&s.nodes[0], dsm_create(&s.nodes[0], SIM_DATA), 1, 1) == DSM_PUSH_EXCLUSIVE;
    CHECK(fired == 4 && s.nodes[0].stats.act_throttled[DSM_ACT_XPUSH] == 28,
          "xpush: %u of 32 untried exclusive pushes, not 4", fired);
    sim_fini(&s);
}

/* The throttle (docs/COSMOS.md "Throttling"), on the home's exclusive
 * reads: wasted every time, the action stops after TRUST_MARGIN's worth
 * and then retries less and less often; once a retry is confirmed it fires
 * again, and a region with confirmations to its credit fires whatever its
 * rank's record. */
static unsigned xread_chances(struct sim *s, struct dsm_region *r, unsigned chances, int written)
{
    struct dsm_msg m = {.src = 1, .aux = written ? 0 : DSM_ACT_BIT(DSM_ACT_RMW)};
    unsigned taken = 0;
    for (unsigned i = 0; i < chances; i++)
        if (dsm_act_exclusive_read(&s->nodes[0], r, 1, DSM_ACT_RMW)) {
            taken++;
            dsm_act_home_note(&s->nodes[0], r, &m); /* the copy comes back */
        }
    return taken;
}

static void act_throttle(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_RMW);
    sim_init(&s, 2, 2, 0);
    struct dsm_region *a = sim_region(&s, 0, 0), *b = dsm_create(&s.nodes[0], SIM_DATA);
    const struct dsm_stats *st = &s.nodes[0].stats;
    unsigned n = xread_chances(&s, a, 200, 0);
    /* two wastes, then retries after 2, 4, .. 128 chances (each declined
     * chance after a waste is also XREAD_SKIP's): 8 in 200 */
    CHECK(n >= 4 && n <= 10 && st->act_throttled[DSM_ACT_RMW] >= 180,
          "throttle: always wasted, taken %u of 200, throttled %llu", n,
          (unsigned long long)st->act_throttled[DSM_ACT_RMW]);
    CHECK(xread_chances(&s, b, 10, 1) <= 1, "throttle: a new region fired while its rank's record is bad");
    /* a retry confirmed: firing again, as long as it is confirmed */
    unsigned before = (unsigned)st->act_taken[DSM_ACT_RMW];
    while (st->act_taken[DSM_ACT_RMW] == before)
        xread_chances(&s, a, 1, 1);
    CHECK(xread_chances(&s, a, 20, 1) == 20, "throttle: a confirmed retry did not resume the action");
    /* the rank's record goes bad: one waste on each of many new regions */
    n = 0;
    for (unsigned k = 0; k < 16; k++)
        n += xread_chances(&s, dsm_create(&s.nodes[0], SIM_DATA), 1, 0);
    CHECK(n < 16 && xread_chances(&s, a, 1, 1) == 1,
          "throttle: %u of 16 new regions wasted, or a region with confirmations stopped for its rank's record", n);
    sim_fini(&s);
}

/* The rank's record is of the actions its regions' own records did not
 * decide: confirmations on a region with credit do not lift a suspended
 * rank (Barnes-Hut's pushes: each such lift let pushes to regions without
 * credit go on), and an always-wasted action backs off up to 2048 chances
 * between retries (Barnes-Hut --fine's dsi retried every 128 of its 36k
 * chances, each retry wasted). */
static void act_throttle_rank(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_RMW);
    sim_init(&s, 2, 2, 0);
    struct dsm_region *good = sim_region(&s, 0, 0);
    CHECK(xread_chances(&s, good, 8, 1) == 8 && good->trust.credit == 8, "throttle: a good region did not build credit");
    unsigned wasted = 0;
    for (unsigned k = 0; k < 8; k++) /* new regions, each wasted once: the rank is suspended */
        wasted += xread_chances(&s, dsm_create(&s.nodes[0], SIM_DATA), 1, 0);
    CHECK(s.nodes[0].act_trust[0].credit <= -2, "throttle: %u wasted new regions did not suspend the rank", wasted);
    CHECK(xread_chances(&s, good, 20, 1) == 20, "throttle: a region with credit stopped for its rank's record");
    CHECK(s.nodes[0].act_trust[0].credit <= -2 && xread_chances(&s, dsm_create(&s.nodes[0], SIM_DATA), 1, 0) == 0,
          "throttle: confirmations on a region with credit lifted the suspended rank (credit %d)",
          s.nodes[0].act_trust[0].credit);
    struct dsm_region *bad = dsm_create(&s.nodes[0], SIM_DATA);
    unsigned n = xread_chances(&s, bad, 8000, 0);
    CHECK(n <= 14, "throttle: an always-wasted region fired %u times in 8000 chances (back-off up to 2048)", n);
    sim_fini(&s);
}

/* A suspended action's retry is spent when it fires: with its outcome not
 * known yet (a push's comes at the next write), the next retry still
 * waits its chances, instead of every chance until then firing. */
static void act_retry_late(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_RMW);
    sim_init(&s, 2, 2, 0);
    struct dsm_region *r = sim_region(&s, 0, 0);
    r->trust = (struct dsm_act_trust){.credit = -2, .skip = 2}; /* suspended at the first level */
    uint32_t fired = 0;
    for (unsigned k = 0; k < 12; k++)
        fired |= (uint32_t)dsm_act_exclusive_read(&s.nodes[0], r, 1, DSM_ACT_RMW) << k;
    CHECK(fired == 0x924, "retry: fired at chances %#x with no outcome, not every third (0x924)", fired);
    sim_fini(&s);
}

/* dsi's last-use count is trusted once two real invalidations agree on it:
 * before the first one the prediction alone decides; after a waste, two
 * are needed again, and then the throttle lets 2 chances pass at the
 * region and 2 at its rank before it retries. */
static void act_dsi_steady(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_DSI);
    sim_init(&s, 2, 2, 0);
    struct dsm_node *nd = &s.nodes[1];
    struct dsm_region *r = sim_region(&s, 1, 1); /* act.c's rule alone: the copy's protocol state is proto.c's */
    CHECK(dsm_act_self_invalidate(nd, r), "dsi: a copy never invalidated was not flushed at its first use");
    dsm_act_granted(nd, r, DSM_ACT_BIT(DSM_ACT_DSI), 0); /* judged wasted */
    uint32_t fired = 0;
    for (unsigned copy = 0; copy < 7; copy++) {
        for (unsigned use = 0; use < 3; use++)
            fired |= (uint32_t)dsm_act_self_invalidate(nd, r) << (copy * 4 + use);
        if (!(fired >> copy * 4 & 7))
            dsm_act_invalidated(r, 0); /* a real one after three uses */
        dsm_act_granted(nd, r, 0, 0);
    }
    /* copy 0: the count unknown after the waste; 1: learnt, not yet steady;
     * 2-5: steady, throttled; 6: the retry, at the third use */
    CHECK(fired == 1u << (6 * 4 + 2) && nd->stats.act_throttled[DSM_ACT_DSI] == 4,
          "dsi: flushes at (copy * 4 + use) bits %#x, throttled %llu; expected copy 6's third use, 4", fired,
          (unsigned long long)nd->stats.act_throttled[DSM_ACT_DSI]);
    sim_fini(&s);
}

/* An upgrade keeps the copy's uses counting: a read then a write is two
 * uses whether the write upgraded the copy or rmw granted it exclusive, so
 * the last-use count learnt before rmw began holds after. */
static void act_dsi_upgrade_uses(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_DSI);
    sim_init(&s, 2, 2, 0);
    struct dsm_node *nd = &s.nodes[1];
    struct dsm_region *r = sim_region(&s, 1, 1); /* act.c's rule alone, as in act_dsi_steady */
    r->touches = 5; /* a count learnt and steady, so that neither use flushes */
    r->act |= DSM_RACT_DSI_STEADY;
    dsm_act_granted(nd, r, 0, 0); /* the read's grant */
    (void)dsm_act_self_invalidate(nd, r);
    dsm_act_granted(nd, r, 0, 1); /* the write's upgrade */
    (void)dsm_act_self_invalidate(nd, r);
    dsm_act_invalidated(r, 0);
    CHECK(r->touches == 2, "dsi: a read and an upgraded write counted %u uses, not 2", r->touches);
    sim_fini(&s);
}

/* The cap on untried actions (docs/COSMOS.md "Throttling"): a rank with no
 * confirmation yet flushes (pushes) at most 4 copies whose outcomes are
 * unknown (its exclusive reads are not capped); an
 * outcome frees a place, a confirmation lifts the cap, and when the
 * outcomes never come (the copies never asked for again) 256 declined
 * chances write them off. */
static unsigned dsi_chances(struct sim *s, struct dsm_region **rs, unsigned n)
{
    unsigned fired = 0;
    for (unsigned k = 0; k < n; k++)
        fired += (unsigned)dsm_act_self_invalidate(&s->nodes[1], rs[k]);
    return fired;
}

static void act_untried_cap(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_DSI);
    sim_init(&s, 2, 2, 0);
    struct dsm_node *nd = &s.nodes[1];
    struct dsm_region *rs[64];
    for (unsigned k = 0; k < 64; k++)
        rs[k] = dsm_create(nd, SIM_DATA); /* act.c's rule alone, as in act_dsi_steady */
    unsigned fired = dsi_chances(&s, rs, 64);
    CHECK(fired == 4 && nd->stats.act_throttled[DSM_ACT_DSI] == 60,
          "untried cap: %u of 64 untried copies flushed, not 4", fired);
    /* the outcomes never come (the copies never asked for again): the
     * 256th chance declined with no news writes them off */
    unsigned declined = 60;
    while (!dsm_act_self_invalidate(nd, rs[4 + declined % 60]))
        CHECK(++declined < 300, "untried cap: still blocked after %u chances with no outcome", declined);
    CHECK(declined == 255, "untried cap: written off at declined chance %u, not 256", declined + 1);
    CHECK(dsi_chances(&s, rs + 8, 56) == 3, "untried cap: not 4 untried flushes after the write-off");
    dsm_act_granted(nd, rs[0], DSM_ACT_BIT(DSM_ACT_DSI), 0); /* one wasted: one place free */
    /* the waste also suspended the rank (weight 3): 2 chances pass, then the retry */
    CHECK(dsi_chances(&s, rs + 8, 56) == 1, "untried cap: a wasted outcome did not free exactly one place");
    /* confirmations that bring the rank's standing above 0 (the waste
     * suspended it at -2) lift the cap */
    for (unsigned k = 1; k <= 3; k++)
        dsm_act_granted(nd, rs[k], 0, 0);
    CHECK(nd->act_trust[1].credit > 0 && dsi_chances(&s, rs + 8, 32) == 32,
          "untried cap: still capped after the rank's actions were confirmed");
    sim_fini(&s);
    /* pushes are capped the same way, apart from dsi's places */
    sim_act = DSM_ACT_BIT(DSM_ACT_PUSH) | DSM_ACT_BIT(DSM_ACT_DSI);
    sim_init(&s, 2, 2, 0);
    fired = 0;
    for (unsigned k = 0; k < 32; k++)
        fired += (unsigned)dsm_act_push(&s.nodes[0], dsm_create(&s.nodes[0], SIM_DATA), 1, 0);
    CHECK(fired == 4 && s.nodes[0].stats.act_throttled[DSM_ACT_PUSH] == 28 &&
              dsm_act_self_invalidate(&s.nodes[0], dsm_create(&s.nodes[0], SIM_DATA)),
          "untried cap: %u of 32 untried pushes, not 4, or dsi capped by them", fired);
    sim_fini(&s);
    /* exclusive reads are not capped: a waste costs what a confirmation saves */
    sim_act = DSM_ACT_BIT(DSM_ACT_RMW);
    sim_init(&s, 2, 2, 0);
    fired = 0;
    for (unsigned k = 0; k < 32; k++)
        fired += (unsigned)dsm_act_exclusive_read(&s.nodes[0], dsm_create(&s.nodes[0], SIM_DATA), 1, DSM_ACT_RMW);
    CHECK(fired == 32, "untried cap: %u of 32 untried exclusive reads, not all", fired);
    sim_fini(&s);
}

/* Node 1 holds a shared copy and the home's read ends: the upgrade ahead
 * (D14) goes, the home to HomeInvalid with node 1's entry marked and the
 * version it upgraded remembered. */
static void upgrade_after_read(struct sim *s)
{
    map_and_request(s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(s, DSM_MSG_SHARED_REQ, 1, 0);
    granted_op(s, 1, DSM_MSG_SHARED_ACK_DATA);
    sim_step(s, 0); /* the home's read */
    sim_step(s, 0); /* its end: the upgrade ahead */
    struct dsm_region *h = sim_region(s, 0, 0);
    int i = sim_find_flight(s, DSM_MSG_MODIFY_ACK, 0, 1);
    CHECK(i >= 0 && s->flight[i].m.aux == DSM_ACT_BIT(DSM_ACT_UPGRADE) && s->flight[i].m.from == 1 &&
              s->nodes[0].stats.act_taken[DSM_ACT_UPGRADE] == 1,
          "upgrade: no tagged upgrade ahead of version 1 at the home's read's end");
    CHECK(h->state == DSM_HOME_INVALID && h->ndir == 1 && h->dir[0].node == 1 && h->dir[0].version == 2 &&
              h->up_state == DSM_UP_OUT && h->up_to == 1 && h->up_from == 1,
          "upgrade: the home is in state %u (entries %u, up_state %u), not HomeInvalid with node 1's upgrade ahead",
          h->state, h->ndir, h->up_state);
}

/* upgrade: node 1 takes it as an idle modified copy, its write hits with
 * nothing in flight (confirmed there), and the home judges it confirmed
 * when the written copy comes back.  Each side hears what it would
 * without the action: the home the upgrade request (assumed), the remote
 * the upgrade's ack (the upgrade ahead is one). */
static void act_upgrade(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_UPGRADE, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0)}, {R(0), W(0)}},
                 (unsigned[SIM_MAX_NODES]){1, 2});
    struct dsm_observer obs[2];
    listen_both(&s, obs);
    upgrade_after_read(&s);
    sim_arrive(&s, DSM_MSG_MODIFY_ACK, 0, 1);
    struct dsm_region *r = sim_region(&s, 1, 0), *h = sim_region(&s, 0, 0);
    CHECK(r->state == DSM_REMOTE_MODIFIED && r->pushed == DSM_PUSHED_UPGRADED && r->version == 2,
          "upgrade: node 1 took it into state %u (pushed %u, version %u), not an idle modified copy", r->state,
          r->pushed, r->version);
    sim_step(&s, 1); /* start write: a hit */
    CHECK(r->state == DSM_REMOTE_MODIFIED_WIP && s.nflight == 0 && s.nodes[1].stats.act_confirmed[DSM_ACT_UPGRADE] == 1,
          "upgrade: node 1's write was not a confirmed hit");
    sim_step(&s, 1); /* end write */
    dsm_flush(&s.nodes[1], r);
    int i = sim_find_flight(&s, DSM_MSG_FLUSH_DATA, 1, 0);
    CHECK(i >= 0 && s.flight[i].m.aux == 0, "upgrade: the written copy's flush is tagged or missing");
    sim_arrive(&s, DSM_MSG_FLUSH_DATA, 1, 0);
    CHECK(s.nodes[0].act_trust[4].credit == 1 && h->state == DSM_HOME_EXCLUSIVE && h->up_state == DSM_UP_NONE &&
              home_value(&s) == sim_value(r),
          "upgrade: the home did not judge the written copy confirmed, or lost its data");
    static const unsigned home[] = {COSMOS_GET_RO_REQ, COSMOS_UPGRADE_REQ, COSMOS_FLUSH};
    static const unsigned remote[] = {COSMOS_GET_RO_RESP, COSMOS_UPGRADE_RESP};
    CHECK(heard_is(0, home, 3) && heard_is(1, remote, 2),
          "upgrade heard: the home %u types (%u %u %u), the remote %u (%u %u)", heard[0].n, heard[0].type[0],
          heard[0].type[1], heard[0].type[2], heard[1].n, heard[1].type[0], heard[1].type[1]);
    for (unsigned n = 0; n < 2; n++)
        s.nodes[n].observer = NULL;
    finish(&s);
}

/* upgrade crossed by node 1's own upgrade request: node 1 takes it as the
 * request's answer, and the home drops the request, judged as saving
 * nothing (an exclusive read's weight), whether the request comes before
 * the copy's flush (in order) or after it (the flush then says it crossed,
 * and the home waits for that request to drop it). */
static void act_upgrade_crossed(void)
{
    for (int late = 0; late < 2; late++) {
        struct sim s;
        act_scenario(&s, DSM_ACT_UPGRADE, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0)}, {R(0), W(0)}},
                     (unsigned[SIM_MAX_NODES]){1, 2});
        upgrade_after_read(&s);
        sim_step(&s, 1); /* start write: its upgrade request crosses the upgrade ahead */
        sim_arrive(&s, DSM_MSG_MODIFY_ACK, 0, 1);
        struct dsm_region *r = sim_region(&s, 1, 0), *h = sim_region(&s, 0, 0);
        CHECK(r->state == DSM_REMOTE_MODIFIED_WIP && !r->waiting && r->pushed == DSM_PUSHED_CROSSED &&
                  s.nodes[1].stats.act_wasted[DSM_ACT_UPGRADE] == 1,
              "upgrade: node 1 did not take it as its request's answer (state %u, pushed %u)", r->state, r->pushed);
        uint64_t stale = s.nodes[0].stats.stale;
        if (!late)
            sim_arrive(&s, DSM_MSG_MODIFY_REQ, 1, 0);
        sim_step(&s, 1); /* grant seen */
        sim_step(&s, 1); /* end write */
        dsm_flush(&s.nodes[1], r);
        int i = sim_find_flight(&s, DSM_MSG_FLUSH_DATA, 1, 0);
        CHECK(i >= 0 && s.flight[i].m.aux == DSM_AUX_CROSSED, "upgrade: the crossed copy's flush does not say so");
        sim_arrive(&s, DSM_MSG_FLUSH_DATA, 1, 0);
        CHECK(h->state == DSM_HOME_EXCLUSIVE && h->ndir == 0 && h->up_state == (late ? DSM_UP_STALE : DSM_UP_NONE),
              "upgrade: after the crossed copy's flush the home is in state %u, up_state %u (late %d)", h->state,
              h->up_state, late);
        if (late)
            sim_arrive(&s, DSM_MSG_MODIFY_REQ, 1, 0);
        CHECK(s.nodes[0].stats.stale == stale + 1 && h->up_state == DSM_UP_NONE && h->state == DSM_HOME_EXCLUSIVE &&
                  s.nodes[0].act_trust[4].credit == -1 && s.nflight == 0 && home_value(&s) == sim_value(r),
              "upgrade: the crossing request was not dropped and judged once (late %d: credit %d)", late,
              s.nodes[0].act_trust[4].credit);
        finish(&s);
    }
}

/* upgrade crossed, then released: the crossed copy answers the home's
 * recall with MsgRelease and later flushes; the flush overtakes the
 * release and must say it crossed too, or the home serves the crossing
 * request as a second grant (found by review: a protocol error at node 1). */
static void act_upgrade_crossed_released(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_UPGRADE,
                 (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0), R(0)}, {R(0), W(0), R(0)}},
                 (unsigned[SIM_MAX_NODES]){2, 3});
    upgrade_after_read(&s);
    sim_step(&s, 1); /* start write: its upgrade request crosses the upgrade ahead */
    sim_arrive(&s, DSM_MSG_MODIFY_ACK, 0, 1);
    sim_step(&s, 1); /* grant seen */
    sim_step(&s, 1); /* end write */
    sim_step(&s, 1); /* start read: a hit */
    sim_step(&s, 0); /* the home's read: a recall */
    sim_arrive(&s, DSM_MSG_RINVALIDATE, 0, 1);
    int i = sim_find_flight(&s, DSM_MSG_RELEASE, 1, 0);
    CHECK(i >= 0 && (s.flight[i].m.aux & DSM_AUX_CROSSED), "upgrade: the crossed copy's release does not say so");
    sim_step(&s, 1); /* end read */
    struct dsm_region *r = sim_region(&s, 1, 0), *h = sim_region(&s, 0, 0);
    dsm_flush(&s.nodes[1], r);
    i = sim_find_flight(&s, DSM_MSG_FLUSH_DATA, 1, 0);
    CHECK(i >= 0 && (s.flight[i].m.aux & DSM_AUX_CROSSED), "upgrade: the released crossed copy's flush does not say so");
    sim_arrive(&s, DSM_MSG_FLUSH_DATA, 1, 0); /* overtakes the release */
    CHECK(h->up_state == DSM_UP_STALE, "upgrade: after the overtaking flush up_state is %u, not stale", h->up_state);
    sim_arrive(&s, DSM_MSG_MODIFY_REQ, 1, 0);
    CHECK(h->up_state == DSM_UP_NONE && sim_find_flight(&s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1) < 0,
          "upgrade: the crossing request was served after the overtaking flush");
    finish(&s);
}

/* upgrade too early: the home's next read recalls the copy unwritten (its
 * ack has the upgrade tag: a waste of weight 3, and the timing is set
 * aside); and overtaken by an invalidation, a shared copy takes the
 * upgrade ahead at once and answers as the upgraded copy, and the upgrade
 * ahead is stale when it comes; and arriving before the grant it upgrades,
 * it is held until that grant is taken. */
static void act_upgrade_early(void)
{
    struct sim s;
    act_scenario(&s, DSM_ACT_UPGRADE, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0), R(0)}, {R(0)}},
                 (unsigned[SIM_MAX_NODES]){2, 1});
    upgrade_after_read(&s);
    sim_arrive(&s, DSM_MSG_MODIFY_ACK, 0, 1);
    sim_step(&s, 0); /* the home reads again: a recall */
    sim_arrive(&s, DSM_MSG_RINVALIDATE, 0, 1);
    int i = sim_find_flight(&s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0);
    CHECK(i >= 0 && s.flight[i].m.aux == DSM_ACT_BIT(DSM_ACT_UPGRADE),
          "upgrade: the recalled unwritten copy's ack is not tagged");
    sim_arrive(&s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0);
    struct dsm_region *h = sim_region(&s, 0, 0);
    CHECK(s.nodes[0].act_trust[4].credit == -2 && !h->up_steady && s.nodes[1].stats.act_wasted[DSM_ACT_UPGRADE] == 1,
          "upgrade: a recalled one weighed %d, not -2", s.nodes[0].act_trust[4].credit);
    finish(&s);

    act_scenario(&s, DSM_ACT_UPGRADE, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0), W(0)}, {R(0)}},
                 (unsigned[SIM_MAX_NODES]){2, 1});
    upgrade_after_read(&s);
    sim_step(&s, 0); /* the home writes: an invalidation that overtakes the upgrade ahead */
    sim_arrive(&s, DSM_MSG_WINVALIDATE, 0, 1);
    struct dsm_region *r = sim_region(&s, 1, 0);
    i = sim_find_flight(&s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0);
    CHECK(r->state == DSM_REMOTE_INVALID && r->version == 2 && i >= 0 && s.flight[i].m.version == 2,
          "upgrade: the overtaken copy did not answer as the upgraded one (state %u, version %u)", r->state,
          r->version);
    uint64_t stale = s.nodes[1].stats.stale;
    sim_arrive(&s, DSM_MSG_MODIFY_ACK, 0, 1);
    CHECK(i >= 0 && sim_find_flight(&s, DSM_MSG_FLUSH, 1, 0) >= 0 && s.nodes[1].stats.stale == stale,
          "upgrade: the overtaken upgrade ahead was not flushed unread");
    finish(&s);

    act_scenario(&s, DSM_ACT_UPGRADE, (const struct sim_step[SIM_MAX_NODES][SIM_MAX_OPS]){{R(0)}, {R(0), W(0)}},
                 (unsigned[SIM_MAX_NODES]){1, 2});
    map_and_request(&s, 1, DSM_MSG_SHARED_REQ);
    sim_arrive(&s, DSM_MSG_SHARED_REQ, 1, 0);
    sim_step(&s, 0);
    sim_step(&s, 0); /* the home's read ends before node 1 has its copy */
    sim_arrive(&s, DSM_MSG_MODIFY_ACK, 0, 1);
    r = sim_region(&s, 1, 0);
    CHECK(r->state == DSM_REMOTE_INVALID_REQ && r->up_held == 2 && s.nflight == 1,
          "upgrade: one that overtook its copy's grant was not held (state %u)", r->state);
    sim_arrive(&s, DSM_MSG_SHARED_ACK_DATA, 0, 1);
    CHECK(r->state == DSM_REMOTE_MODIFIED_RIP && r->version == 2 && !r->up_held && r->pushed == DSM_PUSHED_UPGRADED,
          "upgrade: the held one was not taken with the grant (state %u, version %u)", r->state, r->version);
    sim_step(&s, 1); /* grant seen */
    sim_step(&s, 1); /* end read */
    sim_step(&s, 1); /* start write: a hit */
    CHECK(r->state == DSM_REMOTE_MODIFIED_WIP && s.nflight == 0, "upgrade: the write after a held one missed");
    finish(&s);
}

/* The upgrade ahead's timing: fired freely before any real request; then
 * at the home's read after which the last two real requests came. */
static void act_upgrade_timing(void)
{
    struct sim s;
    sim_act = DSM_ACT_BIT(DSM_ACT_UPGRADE);
    sim_init(&s, 2, 2, 0);
    struct dsm_node *nd = &s.nodes[0];
    struct dsm_region *a = dsm_create(nd, SIM_DATA);
    CHECK(dsm_act_upgrade(nd, a, 1), "upgrade timing: not taken before any request");
    for (int period = 0; period < 2; period++) {
        dsm_act_upgrade_wrote(a);
        dsm_act_upgrade_read(a);
        dsm_act_upgrade_asked(a, 1); /* during the home's second read */
    }
    dsm_act_upgrade_wrote(a);
    dsm_act_upgrade_read(a);
    int first = dsm_act_upgrade(nd, a, 1);
    dsm_act_upgrade_read(a);
    int second = dsm_act_upgrade(nd, a, 1);
    CHECK(!first && second, "upgrade timing: after the home's first read %d, second %d (expected 0, 1)", first,
          second);
    dsm_act_upgrade_wrote(a);
    dsm_act_upgrade_asked(a, 0); /* a request with no read: the count changes, not trusted */
    dsm_act_upgrade_read(a);
    dsm_act_upgrade_read(a);
    CHECK(!dsm_act_upgrade(nd, a, 1), "upgrade timing: taken on a count that changed");
    sim_fini(&s);
}

static void actions(void)
{
    act_throttle();
    act_throttle_rank();
    act_untried_cap();
    act_retry_late();
    act_dsi_steady();
    act_dsi_upgrade_uses();
    act_rmw();
    act_rmw_wasted();
    act_migratory();
    act_dsi();
    act_heard();
    act_push();
    act_push_crossed();
    act_push_timing();
    act_xpush();
    act_xpush_crossed();
    act_xpush_judged();
    act_upgrade();
    act_upgrade_crossed();
    act_upgrade_crossed_released();
    act_upgrade_early();
    act_upgrade_timing();
    sim_act = 0;
    printf("actions: the throttle (and the rank's record of undecided regions, the long back-off), the cap on untried actions, a late retry, dsi's steady count, its uses across an "
           "upgrade, rmw, its misprediction, migratory, dsi (confirmed and wasted), what the predictor hears, push "
           "(read, crossed by its reader's request, its timing) and xpush (read and written, what each side hears, "
           "crossed by its reader's request and by a recall, its outcomes' weights, skip and cap) and the upgrade ahead (taken "
           "and written, what each side hears, crossed by its rank's request in order, late and after a release, recalled, overtaken, "
           "held for its grant, its timing) passed\n");
}

/* ---- random schedules ---------------------------------------------------------- */

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* One random schedule; rng and depth live in the explorer (memory, so a
 * failure's longjmp leaves them intact for the report). */
struct random_run {
    struct explorer ex;
    struct config cfg;
    uint64_t rng;
    unsigned depth;
};

static void random_script(struct random_run *rr, uint64_t seed)
{
    struct config *c = &rr->cfg;
    *c = (struct config){.nnodes = 4, .nregions = 2, .fifo = (int)(seed & 1)};
    for (unsigned n = 0; n < c->nnodes; n++) {
        c->len[n] = SIM_MAX_OPS;
        for (unsigned i = 0; i < SIM_MAX_OPS; i++) {
            unsigned r = (unsigned)(rng_next(&rr->rng) % 10);
            enum sim_op op = r < 4 ? SIM_READ : r < 8 ? SIM_WRITE : r < 9 ? SIM_FLUSH : SIM_EVICT;
            c->script[n][i] = (struct sim_step){op, (unsigned)(rng_next(&rr->rng) % c->nregions)};
        }
    }
    if (seed % 3 == 0) { /* one node's last step deletes a region */
        unsigned n = (unsigned)(rng_next(&rr->rng) % c->nnodes);
        c->script[n][SIM_MAX_OPS - 1] = (struct sim_step){SIM_DELETE, (unsigned)(rng_next(&rr->rng) % c->nregions)};
    }
}

static void random_one(struct random_run *rr, uint64_t seed)
{
    rr->rng = seed * 0x9E3779B97F4A7C15ull;
    rr->depth = 0;
    random_script(rr, seed);
    rr->ex = (struct explorer){.cfg = &rr->cfg};
    struct sim s;
    jmp_buf jb;
    s.on_fail = &jb;
    if (setjmp(jb)) {
        fprintf(stderr, "seed %llu: ", (unsigned long long)seed);
        report_failure(&rr->ex, rr->depth, s.why);
    }
    sim_setup(&s, &rr->cfg);
    unsigned acts[SIM_MAX_FLIGHT + SIM_MAX_NODES], n;
    while ((n = sim_enabled(&s, acts, sizeof acts / sizeof acts[0])) > 0) {
        CHECK(rr->depth < MAX_DEPTH, "seed %llu: schedule too long", (unsigned long long)seed);
        unsigned pick = (unsigned)(rng_next(&rr->rng) % n);
        rr->ex.choices[rr->depth++] = pick;
        sim_do(&s, acts[pick]);
        sim_check_step(&s);
    }
    if (!sim_all_done(&s))
        sim_fail(&s, "deadlock: nothing in flight and no node can move");
    sim_check_quiescent(&s);
    sim_fini(&s);
}

/* TEST_PROTO_SEEDS=N runs more (a longer search than CTest's). */
static void random_schedules(void)
{
    const char *env = getenv("TEST_PROTO_SEEDS");
    uint64_t seeds = env ? strtoull(env, NULL, 0) : 5000;
    static struct random_run rr;
    for (uint64_t seed = 1; seed <= seeds; seed++)
        random_one(&rr, seed);
    printf("random: %llu schedules of 4 nodes x %d operations on 2 regions (every third ending in a delete) passed\n",
           (unsigned long long)seeds, SIM_MAX_OPS);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2 || argc == 3, "usage: test_proto <test> [actions, as SHOAL_COSMOS_ACT]");
    int act = argc == 3 ? util_cosmos_act_mask(argv[2]) : 0;
    CHECK(act >= 0, "unknown action in %s (accepted: rmw, dsi, migratory, push, xpush, upgrade)", argv[2]);
    sim_act = (unsigned)act;
    static const struct test_case tests[] = {
        {"transitions", transitions},
        {"reorder", reorder},
        {"explore_fifo", explore_fifo},
        {"explore_reorder", explore_reorder},
        {"explore_two_regions", explore_two_regions},
        {"explore_big", explore_big},
        {"delete", deletion},
        {"explore_delete_home", explore_delete_home},
        {"explore_delete_remote", explore_delete_remote},
        {"explore_delete_two_regions", explore_delete_two_regions},
        {"random", random_schedules},
        {"actions", actions},
    };
    TEST_RUN_CASE(tests, argv[1]);
    return 0;
}
