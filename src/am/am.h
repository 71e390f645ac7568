/* am layer: handler table, request/reply sends over the shm rings and the
 * message transports, polling, handler-context rules, segments that long
 * messages write into.  What the layers above use; am's own state is in
 * am/state.h, which only am's sources include. */
#ifndef SHOAL_AM_H
#define SHOAL_AM_H

#include <stdatomic.h>
#include <stdint.h>

#include "transport/transport.h"
#include "util/transports.h"
#include "util/util.h"
#include "shoal.h"

enum am_class { AM_REQ = 0, AM_REP = 1 };
enum am_kind { AM_SHORT = 0, AM_MEDIUM = 1, AM_LONG = 2 };
/* The tag's kind of a medium whose payload waits in the sender's outbox
 * (shm only; the handler sees a medium): docs/SHM_QUEUE.md. */
#define AM_KIND_OUTBOX 3u

/* Tag (the ring's upper 44 bits): handler 10 | nargs 5 | kind 2 | len/seg 27 */
#define AM_HANDLER_BITS 10
#define AM_MAX_INDEX (1u << AM_HANDLER_BITS)
#define AM_MAX_SEGMENTS 64

/* Handler indices above the user's range, for the layers built on am: a
 * block of AM_LAYER_HANDLERS each, so no two layers can collide (the indices
 * travel in messages: docs/RMA.md and docs/CRL.md list them). */
#define AM_INTERNAL_BASE SHOAL_AM_MAX_HANDLERS
#define AM_LAYER_HANDLERS 16u
enum am_layer_block { AM_BLOCK_RMA, AM_BLOCK_COLL, AM_BLOCK_DSM, AM_BLOCK_AM, AM_BLOCK_CMAM, AM_BLOCK_GAMMA, AM_BLOCKS };
#define AM_LAYER_BASE(block) (AM_INTERNAL_BASE + (block) * AM_LAYER_HANDLERS)
_Static_assert(AM_LAYER_BASE(AM_BLOCKS) <= AM_MAX_INDEX, "the layers' handler blocks fit the table");
void am_register_internal(unsigned index, shoal_handler_t fn);
/* Medium request from the main program / reply from an internal request
 * handler, to an internal handler; the callers validated their arguments. */
int am_request_internal(int dest, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                        unsigned nargs, const uint64_t *args);
int am_reply_internal(shoal_token_t tok, unsigned handler, const void *src, size_t nbytes, unsigned nargs,
                      const uint64_t *args);

/* ---- mediums of any size, for the layers above (large.c) --------------
 * A payload that does not fit one message to dest travels as pieces, each
 * an internal medium of the same class on the same channel (docs/WIRE.md
 * §10.6); the handler runs once, with the whole payload, where the last
 * piece arrives.  So the message counts as sent when its last piece is:
 * it runs after everything this rank sent dest on that channel before the
 * call completed (small messages sent meanwhile may run before it).  At
 * most nargs <= AM_LARGE_MAX_ARGS, nbytes <= am_large_max() (SHOAL_ETOOBIG).
 * One large request per destination is in pieces at a time: another waits
 * (SHOAL_EAGAIN with SHOAL_IMMEDIATE, having sent nothing). */
#define AM_LARGE_MAX_ARGS (SHOAL_AM_MAX_ARGS - 3)
size_t am_large_max(void);
/* *done: bytes sent so far, 0 for a new message.  SHOAL_IMMEDIATE sends
 * what fits now and returns SHOAL_EAGAIN if some is left: call again with
 * the same arguments and *done before sending dest another large request.
 * Without it, waits for room (running every handler) until all is sent. */
int am_request_large(int dest, unsigned handler, unsigned flags, const void *src, size_t nbytes, unsigned nargs,
                     const uint64_t *args, size_t *done);
/* A reply of any size from an internal request handler: waits for room
 * running only reply handlers, as every reply does, so it never needs the
 * requester to make room on its request side. */
int am_reply_large(shoal_token_t tok, unsigned handler, const void *src, size_t nbytes, unsigned nargs,
                   const uint64_t *args);

/* Maps the shared-memory rings (collective) and sets up the handler table;
 * level: the thread level shoal_init_thread grants (MULTIPLE adds lanes). */
int am_init(int rank, int nranks, int level);
void am_fini(void);

/* ---- ranks whose memory is mapped here (the shared-memory transport) ---- */
/* The ranks reached over shared memory, this one included, in rank order. */
const int *am_local_ranks(int *n);
/* rank's index in am_local_ranks(), or -1. */
int am_local_index(int rank);
/* Flag words of rank's that every local rank may write (release) and rank
 * reads (acquire): AM_LOCAL_FLAGS of them, for barriers whose epochs only
 * grow.  Only for local ranks. */
#define AM_LOCAL_FLAGS 16u
_Atomic uint64_t *am_local_flag(int rank, unsigned round);
/* The shm rings' size, for a log line. */
uint32_t am_ring_slots(void);

/* Medium payload limit for rings of ring_slots and outbox pools of
 * outbox_bytes: SHOAL_SHM_MEDIUM_MAX capped at the larger of what fits a
 * ring with all arguments and a quarter of a pool. */
size_t am_medium_limit(uint32_t ring_slots, size_t outbox_bytes);

/* shoal_seg_create without its closing barrier, which the caller (core)
 * adds: am calls no layer above it. */
int am_seg_create(size_t size, shoal_seg_t *seg);
/* Unmaps every segment. */
void am_seg_fini(void);

/* Runs arrived handlers; replies_only services only the reply rings (what a
 * reply send may do while it waits).  Returns the number of messages run. */
unsigned am_poll(int replies_only);

/* One step of a blocking wait: back off (a sleep on the socket ends the job
 * if a peer died meanwhile). */
void am_wait_step(struct util_backoff *b);
/* One step of a wait that polls: runs handlers, backs off only while
 * nothing arrives, and every few steps, busy or not, ends the job if a
 * peer died. */
void am_progress_wait(struct util_backoff *b, int replies_only);


/* ---- SHOAL_PROGRESS=thread and the thread levels (progress.c) ---------- */
/* One thread at a time is inside shoal: an application thread during its
 * calls (it runs handlers in its waits, as in poll mode), the progress
 * thread while it runs handlers, or the application inside
 * shoal_handlers_disable.  Every public call that touches state a handler
 * may touch starts with AM_GUARD(), which takes that lock in thread mode
 * and at SHOAL_THREAD_MULTIPLE (nested calls on the same thread count) and
 * gives it back when the call returns; where SHOAL_STRICT checks the
 * thread level it checks the calling thread there.  Otherwise it costs one
 * test of a flag that never changes after shoal_init. */
extern int am_threaded; /* the progress thread runs */
extern int am_guard_on; /* AM_GUARD locks or checks */
int am_guard_slow(const char *call);
void am_lock_leave(void);
static inline int am_guard_enter(const char *call)
{
    if (UTIL_LIKELY(!am_guard_on))
        return 0;
    return am_guard_slow(call);
}
static inline void am_guard_leave(int *held)
{
    if (*held)
        am_lock_leave();
}
#define AM_GUARD()                                                                                              \
    int am_guard_held_ __attribute__((cleanup(am_guard_leave), unused)) = am_guard_enter(__func__)
/* The level shoal_init_thread granted (SHOAL_THREAD_*), set before the
 * progress thread starts; the thread calling it is the main thread. */
void am_thread_level_set(int level);
int am_thread_level(void);
/* 1 when the calling thread holds the lock (inside a call or a critical
 * section): then no other thread can deliver, and a wait must poll. */
int am_lock_mine(void);
/* A blocking wait's sleep in thread mode, with the lock not held: returns
 * when *word != val, after ns (UINT64_MAX: no limit), or when woken; whoever changes *word calls
 * am_progress_unblock (the wait announces itself first, so the wake-up's
 * system call is paid only when someone sleeps). */
void am_progress_block(_Atomic uint32_t *word, uint32_t val, uint64_t ns);
void am_progress_unblock(_Atomic uint32_t *word);
/* Starts the progress thread when SHOAL_PROGRESS=thread (end of shoal_init):
 * SHOAL_OK or SHOAL_ESYS after logging why. */
int am_progress_start(void);
/* Stops and joins it (start of shoal_finalize; nothing when not started). */
void am_progress_stop(void);

/* ---- the transports (transports.c) -------------------------------------- */
/* The implementation of transport t: NULL for shm (inline here) and for a
 * transport this build lacks. */
const struct tp_ops *am_transport_ops(enum util_transport t);
/* 1 when this build can run transport t. */
int am_transport_built_in(enum util_transport t);
/* The message transport's native one-sided commands when they reach rank
 * (remote, and available() says so; rank -1: the job's transport, the same
 * answer on every rank), else NULL; *atomics (may be NULL) as available(). */
const struct tp_rma_ops *am_native_rma(int rank, int *atomics);

/* ---- over a message transport (am_net.c) -------------------------------- */
/* Collective: starts the transport when SHOAL_TRANSPORT names one and some
 * peer is not reached over shm (SHOAL_NET_LOCAL=1: every peer but self). */
int am_net_init(uint64_t job_id);
void am_net_fini(void);
int am_net_send(int dest, enum am_class cls, unsigned handler, unsigned flags, enum am_kind kind,
                const void *src, size_t nbytes, uint32_t seg, uint64_t offset, unsigned nargs,
                const uint64_t *args);
/* A request to every other rank as one packet of the message transport
 * (tp_ops.send_all), in order with each rank's other requests: SHOAL_OK,
 * SHOAL_EINVAL when this job cannot (a rank on shared memory, no such
 * packet on the carrier, too many ranks, a message of several packets: the
 * caller sends one request per rank), or the transport's error. */
int am_net_send_all(unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                    unsigned nargs, const uint64_t *args);
/* Sends what requests with SHOAL_MORE left queued in the message transport
 * (nothing queues over shared memory). */
void am_flush(void);
/* 1 when am_bcast_internal is one transmission that every other host
 * receives (the transport's native broadcast). */
int am_bcast_native(void);
/* A collective starts (1) or stops (0) waiting for broadcasts (nests). */
void am_bcast_listen(int on);
/* What the message transport did; zeros when the job has none. */
void am_transport_stats(struct tp_stats *out);
/* One best-effort datagram to every other rank, run there as a request to
 * internal handler `handler` (it may be lost), with a medium payload of up
 * to am_net_medium_in_one(nargs) bytes (SHOAL_ETOOBIG above). */
int am_bcast_internal(unsigned handler, unsigned nargs, const uint64_t *args, const void *src, size_t nbytes);
/* The largest medium payload with nargs arguments that travels to a remote
 * rank in one packet: handed to the handler where it landed, never gathered. */
size_t am_net_medium_in_one(unsigned nargs);
/* What shoal_finalize's quiescence detection counts at this rank. */
struct am_quiet {
    uint64_t sent;      /* requests and replies sent (best-effort broadcasts are not: they may be lost) */
    uint64_t run;       /* requests and replies whose handler ran here */
    uint64_t dropped;   /* malformed messages dropped (a sender's bug: they never run) */
    uint64_t unsettled; /* 1 while a packet this rank sent is not acknowledged */
};
void am_quiet_state(struct am_quiet *q);
/* 1 when rank is reached over the message transport, 0 over shared memory
 * (its memory is mapped here). */
int am_is_remote(int rank);
/* The largest medium payload with nargs arguments that reaches rank in one
 * piece, handed to the handler where it landed (per peer: the ring's limit
 * or the transport's packet). */
size_t am_medium_in_one(int rank, unsigned nargs);


/* Handler-rule violation: SHOAL_EHANDLER, or abort when strict. */
int am_rule_violation(const char *what);

/* Context check for calls that block (poll, barrier, finalize, wait):
 * SHOAL_OK outside handlers. */
int am_blocking_allowed(const char *call);

/* SHOAL_THREAD_MULTIPLE (from am_thread_level_set): requests to ranks on
 * this host from threads outside shoal skip the owner lock, each request
 * ring taking a lock of its own (am.c). */
void am_send_multiple(int on);
/* Adds what those requests counted in their rings to am_stats(): before
 * the counters are read (shoal_stats_get, quiescence), under the owner lock. */
void am_stats_settle(void);

/* What the layers above read of am. */
int am_rank(void);
int am_size(void);
size_t am_max_medium(void);
/* 1 while a handler runs on this thread (calls that may block are refused). */
int am_in_handler(void);
/* 1 when some peer is reached over a message transport. */
int am_has_transport(void);
/* One line on the job's layout and transports, for the start-up summary:
 * ranks and hosts, and which transport reaches which peers and why. */
const char *am_describe_job(char *buf, size_t n);
/* The job's counters; each layer keeps its own fields of them. */
struct shoal_stats *am_stats(void);
/* Bumped (release) by every poll, so a waiter sees that no one-sided
 * command runs here (rma's quiescence counter); NULL: none. */
void am_set_poll_counter(_Atomic uint64_t *counter);

#endif
