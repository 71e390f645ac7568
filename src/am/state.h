/* am's own state and the inline checks of its fast paths: only am's
 * sources include this (the layers above use am.h's functions). */
#ifndef SHOAL_AM_STATE_H
#define SHOAL_AM_STATE_H

#include "am/am.h"

enum am_context { AM_CTX_NONE = 0, AM_CTX_REQUEST, AM_CTX_REPLY };


struct am_segment {
    int used;
    void **bases;  /* [nranks] mapped here */
    size_t *sizes; /* [nranks] */
};

/* A request handler, and a reply handler run while it waits to reply. */
#define AM_MAX_NEST 2

struct am_frame {
    uint64_t serial; /* what the handler's token encodes */
    int src;
    int replied;
};

struct shm_state;

struct am_state {
    int rank;
    int nranks;
    struct shm_state *shm;
    size_t max_medium;
    uint32_t ring_msg_max;   /* slots of the largest message a ring takes: a larger medium goes via the outbox */
    uint32_t outbox_from;    /* a medium of more slots may go via the outbox (ring_msg_max where there is none) */
    size_t outbox_max;       /* largest payload the outbox takes: a quarter of a pool (0: none) */
    int strict;
    enum am_context ctx;
    struct am_frame frames[AM_MAX_NEST]; /* handler calls now running */
    unsigned depth;
    uint64_t token_serial;
    struct am_segment segs[AM_MAX_SEGMENTS];
    struct shoal_stats stats;
    _Atomic uint64_t *quiescent; /* bumped by every poll: no one-sided command is running here */
    uint8_t *remote;             /* [nranks]: 1 = reached over the message transport tp; NULL: all over shm */
    const struct tp_ops *tp;     /* the job's message transport (SHOAL_TRANSPORT), NULL while remote is */
    uint64_t net_block_ns;       /* 0: waits spin; else they sleep on the network up to this long */
    unsigned pinned;             /* > 0: a wait keeps the lock (a message's fragments are half sent) */
};

extern struct am_state am;

/* One message sent, whichever transport took it. */
static inline void am_count_sent(unsigned cls, enum am_kind kind, size_t nbytes)
{
    am.stats.am_sent[cls]++;
    am.stats.bytes_sent += nbytes;
    am.stats.am_class_sent[kind]++;
    am.stats.bytes_class_sent[kind] += nbytes;
}

extern shoal_handler_t am_handlers[AM_MAX_INDEX];

/* One thread at a time, checked where am.strict (until threads may call
 * shoal at once): every poll records its thread, and a second thread
 * polling meanwhile aborts naming both threads and the public calls they
 * are in (am_thread_call: the last one each thread entered). */
extern _Thread_local const char *am_thread_call;
static inline void am_thread_note(const char *call)
{
    if (UTIL_UNLIKELY(am.strict))
        am_thread_call = call;
}

/* One step of a wait at SHOAL_THREAD_MULTIPLE, outside handlers and
 * critical sections, after a poll that ran something (progressed) or
 * nothing: gives the lock back, backs off when nothing ran, takes it
 * again, so other threads' calls and waits go on meanwhile.  After a poll
 * that ran something it does so only when a thread waits for the lock (a
 * stream of arrivals must not keep the others out).  0, nothing done,
 * where the wait keeps the lock. */
struct util_backoff;
int am_wait_unlocked(struct util_backoff *b, int progressed);

/* After a message to local rank dest is in its ring, in thread mode: wakes
 * dest's progress thread if it announced it sleeps (progress.c), with
 * more (SHOAL_MORE) only at the burst's end: the next send without it, a
 * poll, am_flush or the end of the public call (or of the progress
 * thread's batch of handlers) rings every bell a burst left owed. */
void am_progress_ring(int dest, unsigned more);
void am_progress_ring_owed(void);

/* What the hot paths must do beyond a plain send and poll, in one word,
 * so that a process doing none of it pays one load and branch per send
 * and per poll for all of it (the flood rate notices each one). */
#define AM_EXTRA_MULTIPLE 1u /* SHOAL_THREAD_MULTIPLE: requests take the lanes' path */
#define AM_EXTRA_DEFER 2u    /* some request is deferred (defer.c) */
#define AM_EXTRA_BELLS 4u    /* some doorbell is owed (progress.c) */
#define AM_EXTRA_LANES 8u    /* this rank's inbox has lanes to poll */
#define AM_EXTRA_SEND (AM_EXTRA_MULTIPLE | AM_EXTRA_DEFER)
#define AM_EXTRA_POLL (AM_EXTRA_DEFER | AM_EXTRA_BELLS | AM_EXTRA_LANES)
extern _Atomic unsigned am_extra;

static inline unsigned am_extra_now(void)
{
    return atomic_load_explicit(&am_extra, memory_order_relaxed);
}

static inline void am_extra_set(unsigned bit, int on)
{
    if (!on)
        atomic_fetch_and_explicit(&am_extra, ~bit, memory_order_relaxed);
    else if (!(am_extra_now() & bit))
        atomic_fetch_or_explicit(&am_extra, bit, memory_order_relaxed);
}

/* Runs handler h for a message from src (its table entry is checked). */
void am_run_handler(int src, enum am_class cls, unsigned h, unsigned nargs, const uint64_t *args, void *buf,
                    size_t n);

/* One medium message of class cls, as every send makes it (large.c's pieces). */
int am_send_medium(int dest, enum am_class cls, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                   unsigned nargs, const uint64_t *args);
/* Sends a large message of class cls (large.c; am_reply_large's core). */
int am_large_send(int dest, enum am_class cls, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                  unsigned nargs, const uint64_t *args, size_t *done);
/* large.c's table and handler (from am_init), and its buffers (am_fini). */
void am_large_init(void);
void am_large_fini(void);

/* hang_describe_fn for a send that waits for room to w->peer (value: the
 * class); am_net.c's window waits use it too. */
struct hang_wait;
int am_describe_credits(const struct hang_wait *w, char *buf, size_t n);
int am_describe_outbox(const struct hang_wait *w, char *buf, size_t n);

/* Requests a handler could not send for want of room (defer.c). */
#define AM_DEFER_MAX_BYTES (64ull << 20) /* their copies, per rank: beyond it, an abort naming the ranks */
#define AM_SEND_NOW 1                     /* am_defer_first: nothing queued ahead, send it */
#define AM_DEFER 2                        /* am_wait_for_room: a handler found no room, defer it */
/* Copies a request to dest into dest's queue (aborts past AM_DEFER_MAX_BYTES). */
int am_defer_add(int dest, unsigned handler, enum am_kind kind, const void *src, size_t nbytes, uint32_t seg,
                 uint64_t offset, unsigned nargs, const uint64_t *args);
/* A request to dest while some request is deferred: AM_SEND_NOW once none
 * is queued for dest (outside a handler it sends them first, waiting if it
 * must), else SHOAL_EAGAIN (SHOAL_IMMEDIATE) or the request is queued. */
int am_defer_first(int dest, unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                   uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args);
/* Sends what fits of the queues, outside handlers (every poll); how many. */
unsigned am_defer_drain(void);
void am_defer_fini(void);
/* A request sent now or never (its flags SHOAL_IMMEDIATE): the queues' way out. */
int am_send_now(int dest, unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args);

#endif
