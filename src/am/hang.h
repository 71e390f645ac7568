/* Hang diagnosis (docs/TUTORIAL.md "When a job hangs"): what the blocking
 * call now running waits for, the last messages this rank sent and
 * received, and the report printed when SIGQUIT arrives, when the launcher
 * asks, or after SHOAL_HANG_REPORT seconds without progress.
 *
 * Every blocking call pushes a record on entry and pops it on return; the
 * layers below refine the innermost one (a barrier's round, a region's
 * state).  The records and the event ring are plain stores, cheap enough
 * for the hot path; the report is built in normal context, from the wait
 * loop (am_wait_step), never in the signal handler. */
#ifndef SHOAL_AM_HANG_H
#define SHOAL_AM_HANG_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

struct hang_wait;
/* Writes what w waits for (one line, no newline) and returns the rank it
 * waits for, or -1 when that is not known. */
typedef int (*hang_describe_fn)(const struct hang_wait *w, char *buf, size_t n);

struct hang_wait {
    const char *call;          /* the call (public, or an inner step of one) */
    int peer;                  /* rank waited for; -1 unknown (describe may know better) */
    uint64_t value;            /* what describe reads: an epoch, a target value */
    const void *obj;           /* the object waited on: a flag, a region */
    hang_describe_fn describe; /* NULL: "waits for rank <peer>" */
};

/* One message this rank sent, a send refused, or messages received from
 * one peer in one poll (the first one's handler). */
struct hang_event {
    uint32_t peer;
    uint16_t handler;
    uint8_t what; /* HANG_EV_* | class << 2 */
    int8_t aux;   /* refused: the error code; received: how many (0: not known) */
};
enum { HANG_EV_SENT = 0, HANG_EV_RECEIVED = 1, HANG_EV_REFUSED = 2 };

#define HANG_DEPTH 6   /* nested waits: a call, its inner steps, a reply's wait for room */
#define HANG_EVENTS 16 /* recent messages kept (a power of two) */

struct hang_state {
    /* SIGQUIT arrived: report at the next wait step.  Atomic (lock-free, so
     * async-signal-safe): at MULTIPLE the signal may land on a thread
     * other than the one inside shoal that reads it. */
    _Atomic int asked;
    unsigned depth;
    uint32_t seq;                /* bumped by every push and refinement: progress */
    uint32_t nev;                /* events ever recorded */
    struct hang_wait stack[HANG_DEPTH];
    struct hang_event ev[HANG_EVENTS];
    uint64_t timer_ns;           /* SHOAL_HANG_REPORT in ns; 0: off */
    int timing;                  /* SHOAL_STATS: time the waits */
    uint64_t wait_from, wait_ns; /* the outermost blocking call began waiting then (0: it has not); total */
    uint32_t steps;              /* wait steps since the timer last looked */
};

extern struct hang_state hang;

static inline void hang_push(const char *call, int peer, uint64_t value, const void *obj, hang_describe_fn fn)
{
    if (hang.depth < HANG_DEPTH)
        hang.stack[hang.depth] = (struct hang_wait){call, peer, value, obj, fn};
    hang.depth++;
    hang.seq++;
}

static inline void hang_pop(void)
{
    hang.depth--;
    if (UTIL_UNLIKELY(hang.wait_from) && hang.depth == 0) {
        hang.wait_ns += util_now_ns() - hang.wait_from;
        hang.wait_from = 0;
    }
}

/* The innermost record now waits for peer (and value). */
static inline void hang_refine(int peer, uint64_t value)
{
    if (hang.depth - 1 < HANG_DEPTH) {
        hang.stack[hang.depth - 1].peer = peer;
        hang.stack[hang.depth - 1].value = value;
    }
    hang.seq++;
}

/* A thread, as a report names it: its kernel id and the name the
 * application gave it (pthread_setname_np), read at its first wait. */
struct hang_thread {
    int tid;
    char name[16];
};
/* The calling thread's. */
const struct hang_thread *hang_thread_self(void);
/* "1234 (name)". */
void hang_thread_text(const struct hang_thread *t, char *buf, size_t n);

/* At SHOAL_THREAD_MULTIPLE a waiting thread gives the lock back between
 * its polls: it takes its records out meanwhile, so the records are always
 * those of the thread inside shoal (the one a report describes), and parks
 * them where a report by another thread finds them (hang_park). */
struct hang_stash {
    unsigned depth;
    uint64_t wait_from;
    struct hang_wait stack[HANG_DEPTH];
    const struct hang_thread *thread;
    unsigned parked; /* its place in the parked list, + 1; 0: not parked */
};

/* Under shoal's lock, as the stash: a report lists the parked stashes as
 * other threads' waits. */
void hang_park(struct hang_stash *s);
void hang_unpark(struct hang_stash *s);

static inline void hang_stash(struct hang_stash *s)
{
    s->depth = hang.depth;
    s->wait_from = hang.wait_from;
    for (unsigned d = 0; d < hang.depth && d < HANG_DEPTH; d++)
        s->stack[d] = hang.stack[d];
    hang.depth = 0;
    hang.wait_from = 0;
    hang_park(s);
}

static inline void hang_unstash(struct hang_stash *s)
{
    hang_unpark(s);
    for (unsigned d = 0; d < s->depth && d < HANG_DEPTH; d++)
        hang.stack[d] = s->stack[d];
    hang.depth = s->depth;
    hang.wait_from = s->wait_from;
}

/* Records an event; returns its number for hang_event_count. */
static inline uint32_t hang_event(unsigned what, unsigned cls, int peer, unsigned handler, int aux)
{
    uint32_t n = hang.nev++;
    hang.ev[n & (HANG_EVENTS - 1)] =
        (struct hang_event){(uint32_t)peer, (uint16_t)handler, (uint8_t)(what | cls << 2), (int8_t)aux};
    return n;
}

/* Receive event n stands for count messages; unknown (0) if events came
 * after it meanwhile (sent by its handlers) or the count does not fit. */
static inline void hang_event_count(uint32_t n, unsigned count)
{
    hang.ev[n & (HANG_EVENTS - 1)].aux = hang.nev == n + 1 && count <= 127 ? (int8_t)count : 0;
}

/* Installs the SIGQUIT handler (before the launcher learns of this rank,
 * so it never asks a rank that would dump core) and reads the timer.  The
 * handler stays for the life of the process: a launcher that asks just as
 * a rank finalizes must not make it dump core; a flag nobody reads is
 * harmless. */
void hang_init(void);
/* Forgets the waits (shoal_finalize is returning) and stops the timer. */
void hang_fini(void);

/* describe for a wait on a flag (obj) to reach value: the rank is a guess,
 * the destination of the last request sent or refused. */
int hang_describe_flag(const struct hang_wait *w, char *buf, size_t n);

void hang_check_slow(void);
/* Called by every wait step: reports when asked or past the timer. */
static inline void hang_check(void)
{
    if (UTIL_UNLIKELY(atomic_load_explicit(&hang.asked, memory_order_relaxed)) || UTIL_UNLIKELY(hang.timer_ns && ++hang.steps >= 256))
        hang_check_slow();
}

#endif
