/* SHOAL_PROGRESS=thread: a progress thread per rank runs handlers while the
 * application computes outside shoal (the seeds' interrupt-driven delivery:
 * CMMD's interrupt handlers, von Eicken's Active Messages thesis §4.3.7; docs/API.md, "Progress modes").
 *
 * One thread at a time is inside shoal.  The application holds the lock
 * for the length of each public call (AM_GUARD) and runs handlers in its
 * own waits as in poll mode; the progress thread only ever tries the lock,
 * so the application never waits for it in the kernel and never pays a
 * wake-up.  While it holds the lock the progress thread polls; when nothing
 * is left it sleeps in the kernel until a message arrives: on a futex
 * doorbell in its shm inbox that a sender rings only after seeing the
 * thread announce its sleep, or in the message transport's wait (ppoll on
 * the socket) when peers are reached over the network, which a shm
 * sender's bell then ends with a signal.  It polls on for a while first
 * (SHOAL_PROGRESS_SPIN_US), so a stream of requests costs one wake-up. */
#include "am/state.h"
#include "am/hang.h"
#include "shm/shm.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int am_threaded;
int am_guard_on;
static int am_locking;       /* AM_GUARD takes the lock */
static int am_level = SHOAL_THREAD_SINGLE;
static int am_level_checked; /* SHOAL_STRICT: AM_GUARD checks the calling thread against am_level */
static int am_multiple;      /* waits give the lock back between polls */

/* The thread inside shoal (the address of its am_lock_self), 0: none. */
static _Atomic uintptr_t am_lock_owner;
static unsigned am_lock_depth; /* the owner's nested entries; only the owner touches it */
static _Thread_local char am_lock_self __attribute__((tls_model("initial-exec")));
static unsigned am_disabled; /* shoal_handlers_disable nesting */
static _Atomic unsigned am_lock_waiters; /* application threads spinning for the lock */
static uintptr_t am_main_self;           /* the thread that called shoal_init */
static _Atomic uintptr_t am_prog_self;   /* the progress thread */

/* The progress thread sleeps this long when the application is inside
 * shoal (it runs handlers itself then), doubling up to the cap. */
#define AM_PROGRESS_BUSY_MIN_NS 20000ull
#define AM_PROGRESS_BUSY_MAX_NS 1000000ull
/* Longest sleep on the message transport's descriptor: the thread looks
 * for the stop request and runs the transport's timers this often.  With
 * shm peers as well, whose messages ring no bell the socket could hear, or
 * a transport without a descriptor, it looks this often. */
#define AM_PROGRESS_NET_NS 10000000ull
#define AM_PROGRESS_NAP_NS 1000000ull
/* SHOAL_PROGRESS_SPIN_US=auto over shared memory alone. */
#define AM_PROGRESS_SPIN_SHM_NS 50000ull
/* Ends the progress thread's sleep on a socket when a local peer's message
 * arrives (a futex cannot end a ppoll); a real-time signal no library
 * claims by default. */
#define AM_WAKE_SIG (SIGRTMIN + 7)
/* Linux's sched_attr (uapi linux/sched/types.h, which cannot be included
 * beside glibc's sched.h): the fields up to sched_period. */
struct am_sched_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};
/* How long a waiting thread that gave the lock back leaves it to a thread
 * spinning for it before taking it again (relax steps). */
#define AM_HANDOFF_SPINS 512u

static struct {
    pthread_t thread;
    int started;
    _Atomic int stop;
    struct shm_doorbell *bell; /* this rank's, when shm peers can wake the sleep; else NULL */
    int fd;                    /* the transport's wait_fd, -1: none */
    sigset_t wake_mask;        /* with both: the mask of the sleep on fd, AM_WAKE_SIG let in */
    uint64_t sleep_ns;         /* the longest sleep on fd, or the nap without one */
    uint64_t spin_ns;          /* SHOAL_PROGRESS_SPIN_US: polls this long before a sleep */
} am_prog;

static inline uintptr_t am_self(void)
{
    return (uintptr_t)&am_lock_self;
}

static int am_lock_try(uintptr_t me)
{
    uintptr_t none = 0;
    return atomic_compare_exchange_strong_explicit(&am_lock_owner, &none, me, memory_order_acquire,
                                                   memory_order_relaxed);
}

static const char *am_level_name(int level)
{
    static const char *names[] = {"SHOAL_THREAD_SINGLE", "SHOAL_THREAD_FUNNELED", "SHOAL_THREAD_SERIALIZED",
                                  "SHOAL_THREAD_MULTIPLE"};
    return names[level];
}

/* SERIALIZED promises that no two threads are inside shoal at once: the
 * lock is held by another application thread (not the progress thread). */
static void am_serial_check(uintptr_t me, const char *call)
{
    uintptr_t owner = atomic_load_explicit(&am_lock_owner, memory_order_relaxed);
    if (am_level_checked && owner && owner != me && owner != atomic_load_explicit(&am_prog_self, memory_order_relaxed))
        util_fatal("rank %d: %s called while another thread is inside shoal, at %s (one thread at a time; "
                   "SHOAL_THREAD_MULTIPLE allows concurrent calls; checked because SHOAL_STRICT or a debug build)",
                   am.rank, call, am_level_name(am_level));
}

/* Spins until me holds the lock (the progress thread holds it only while
 * it runs a batch of handlers; another application thread, at MULTIPLE,
 * for one call or one step of its wait). */
static void am_lock_acquire(uintptr_t me, const char *call)
{
    if (am_lock_try(me))
        return;
    atomic_fetch_add_explicit(&am_lock_waiters, 1, memory_order_relaxed);
    struct util_backoff b;
    util_backoff_init(&b);
    while (!am_lock_try(me)) {
        am_serial_check(me, call);
        util_backoff_wait(&b);
    }
    atomic_fetch_sub_explicit(&am_lock_waiters, 1, memory_order_relaxed);
}

static void am_lock_enter(const char *call)
{
    uintptr_t me = am_self();
    if (atomic_load_explicit(&am_lock_owner, memory_order_relaxed) == me) {
        am_lock_depth++;
        return;
    }
    am_lock_acquire(me, call);
    am_lock_depth = 1;
}

void am_lock_leave(void)
{
    if (--am_lock_depth != 0)
        return;
    /* a burst ends with the call (or the handler batch) that sent it: on
     * shm its messages are in the rings, and their receivers must wake */
    if (am_extra_now() & AM_EXTRA_BELLS)
        am_progress_ring_owed();
    atomic_store_explicit(&am_lock_owner, 0, memory_order_release);
}

/* SINGLE and FUNNELED: only the thread that called shoal_init calls shoal
 * (handlers run on the progress thread as well). */
static void am_level_check(const char *call)
{
    uintptr_t me = am_self();
    if (am_level <= SHOAL_THREAD_FUNNELED && me != am_main_self &&
        me != atomic_load_explicit(&am_prog_self, memory_order_relaxed))
        util_fatal("rank %d: %s called from a thread other than the one that called shoal_init, at %s "
                   "(shoal_init_thread with SHOAL_THREAD_SERIALIZED or SHOAL_THREAD_MULTIPLE allows other "
                   "threads; checked because SHOAL_STRICT or a debug build)",
                   am.rank, call, am_level_name(am_level));
}

int am_guard_slow(const char *call)
{
    if (am_level_checked)
        am_level_check(call);
    if (!am_locking)
        return 0;
    am_lock_enter(call);
    return 1;
}

static void am_guard_update(void)
{
    am_locking = am_threaded || am_multiple || (am_level_checked && am_level == SHOAL_THREAD_SERIALIZED);
    am_guard_on = am_locking || am_level_checked;
}

void am_thread_level_set(int level)
{
    am_level = level;
    am_main_self = am_self();
    am_multiple = level == SHOAL_THREAD_MULTIPLE;
    am_send_multiple(am_multiple);
    am_level_checked = am.strict && level < SHOAL_THREAD_MULTIPLE;
    am_guard_update();
}

int am_thread_level(void)
{
    return am_level;
}

int am_wait_unlocked(struct util_backoff *b, int progressed)
{
    uintptr_t me = am_self();
    if (!am_multiple || am.depth || am.pinned || am_disabled ||
        atomic_load_explicit(&am_lock_owner, memory_order_relaxed) != me)
        return 0;
    if (progressed && !atomic_load_explicit(&am_lock_waiters, memory_order_relaxed))
        return 0;
    hang_check();
    struct hang_stash hs;
    hang_stash(&hs); /* the next owner's waits are its own */
    unsigned depth = am_lock_depth;
    atomic_store_explicit(&am_lock_owner, 0, memory_order_release);
    for (unsigned i = 0; i < AM_HANDOFF_SPINS && atomic_load_explicit(&am_lock_waiters, memory_order_relaxed) &&
                         !atomic_load_explicit(&am_lock_owner, memory_order_relaxed);
         i++)
        util_cpu_relax();
    if (progressed)
        b->spins = 0;
    else
        util_backoff_wait(b);
    am_lock_acquire(me, "a wait");
    am_lock_depth = depth;
    hang_unstash(&hs);
    return 1;
}

static void am_futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

int am_lock_mine(void)
{
    return atomic_load_explicit(&am_lock_owner, memory_order_relaxed) == am_self();
}

void am_progress_block(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    am_futex(word, FUTEX_WAIT, val, ns == UINT64_MAX ? NULL : &ts);
}

void am_progress_unblock(_Atomic uint32_t *word)
{
    am_futex(word, FUTEX_WAKE, INT32_MAX, NULL);
}

/* Bit r: local rank r's bell is owed (words of 64 ranks; atomic, as
 * sends at MULTIPLE may one day run without the lock). */
static _Atomic uint64_t *am_owed;

/* The first to clear the sleep announcement wakes the sleeper: on the
 * futex, or out of its socket's ppoll with the wake-up signal. */
static void am_bell_wake(struct shm_doorbell *bell)
{
    if (!atomic_exchange_explicit(&bell->asleep, 0, memory_order_acquire))
        return;
    int32_t tid = atomic_load_explicit(&bell->tid, memory_order_relaxed);
    if (tid)
        syscall(SYS_tgkill, atomic_load_explicit(&bell->pid, memory_order_relaxed), tid, AM_WAKE_SIG);
    else
        am_futex(&bell->asleep, FUTEX_WAKE, 1, NULL);
}

static void am_ring(int dest)
{
    struct shm_doorbell *bell = shm_doorbell(am.shm, dest);
    /* The message's control word before the look at the bell, as the
     * sleeper sets the bell before its last look at the rings: one of the
     * two sees the other (store-load order needs a full fence on x86 too). */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&bell->asleep, memory_order_relaxed))
        am_bell_wake(bell);
}

void am_progress_ring_owed(void)
{
    am_extra_set(AM_EXTRA_BELLS, 0);
    for (int w = 0; w < (am.nranks + 63) / 64; w++)
        for (uint64_t bits = atomic_exchange_explicit(&am_owed[w], 0, memory_order_relaxed); bits;
             bits &= bits - 1)
            am_ring(w * 64 + __builtin_ctzll(bits));
}

/* A burst (SHOAL_MORE) rings once, at its end: the receiver wakes to the
 * whole burst instead of to its first message, and the sender pays one
 * fence, not one per message. */
void am_progress_ring(int dest, unsigned more)
{
    if (more) {
        atomic_fetch_or_explicit(&am_owed[dest / 64], 1ull << (dest % 64), memory_order_relaxed);
        am_extra_set(AM_EXTRA_BELLS, 1);
        return;
    }
    am_ring(dest);
    if (am_extra_now() & AM_EXTRA_BELLS)
        am_progress_ring_owed();
}

/* Polls with the lock held; with a bell, announces the sleep before the
 * last look.  Returns what ran. */
static unsigned am_progress_poll(void)
{
    unsigned n = am_poll(0);
    if (n || !am_prog.bell)
        return n;
    atomic_store_explicit(&am_prog.bell->asleep, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    return am_poll(0);
}

static void am_nap(uint64_t ns)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ns};
    nanosleep(&ts, NULL);
}

static void am_progress_sleep(void)
{
    if (am_prog.fd >= 0) {
        /* with a bell, the wake-up signal is let in only here: one sent
         * before waits pending and ends this sleep at once */
        struct pollfd pfd = {.fd = am_prog.fd, .events = POLLIN};
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)am_prog.sleep_ns};
        ppoll(&pfd, 1, &ts, am_prog.bell ? &am_prog.wake_mask : NULL);
    } else if (am_prog.bell) {
        am_futex(&am_prog.bell->asleep, FUTEX_WAIT, 1, NULL); /* returns at once if a sender cleared it */
    } else {
        am_nap(am_prog.sleep_ns);
    }
}

/* Takes back the sleep am_progress_poll announced. */
static void am_progress_awake(void)
{
    if (am_prog.bell)
        atomic_store_explicit(&am_prog.bell->asleep, 0, memory_order_relaxed);
}

/* One look with the lock held; outside the spin, with a bell, announces
 * the sleep before the look.  Returns what ran, -1: the application holds
 * the lock. */
static int am_progress_look(uintptr_t me, int spinning)
{
    if (!am_lock_try(me))
        return -1;
    am_lock_depth = 1;
    unsigned n = spinning ? am_poll(0) : am_progress_poll();
    am_lock_leave();
    return (int)n;
}

/* Linux's EEVDF scheduler lets a woken thread preempt the one running on
 * its core only when the woken one's deadline is earlier.  With the default
 * slice the progress thread, woken by a datagram on the core where the
 * application computes (the other cores busy too), waited for the next
 * scheduler tick: ~3.9 ms at HZ=250 over udp, eth and ofi (PERFORMANCE.md).
 * A short slice, which an unprivileged thread may ask for (sched_runtime of
 * SCHED_OTHER, honoured from Linux 6.12, ignored before), makes the wake-up
 * preempt at once: the seeds' interrupt.  The thread runs briefly, so its
 * short slices cost the application nothing. */
static void am_progress_slice(void)
{
    uint64_t us = (uint64_t)util_config_int(CFG_PROGRESS_SLICE_US);
    if (!us)
        return;
    struct am_sched_attr a = {.size = sizeof a, .policy = SCHED_OTHER, .runtime = us * 1000u};
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0)
        LOG(LOG_DEBUG, "the progress thread keeps the kernel's time slice: sched_setattr: %s", strerror(errno));
}

/* Polls until nothing arrived for spin_ns, then sleeps until arrival.  The
 * spin is what makes a stream of requests (a home serving misses) cost no
 * wake-up each; it yields the CPU at every look, so on a core shared with
 * the application it takes only what nobody else wants. */
static void *am_progress_main(void *arg)
{
    (void)arg;
    uintptr_t me = am_self();
    atomic_store_explicit(&am_prog_self, me, memory_order_relaxed);
    if (am_prog.bell && am_prog.fd >= 0) { /* before the first sleep's fence publishes it */
        atomic_store_explicit(&am_prog.bell->pid, (int32_t)getpid(), memory_order_relaxed);
        atomic_store_explicit(&am_prog.bell->tid, (int32_t)syscall(SYS_gettid), memory_order_relaxed);
    }
    am_progress_slice();
    uint64_t busy_ns = AM_PROGRESS_BUSY_MIN_NS;
    uint64_t spin_end = util_now_ns() + am_prog.spin_ns;
    while (!atomic_load_explicit(&am_prog.stop, memory_order_acquire)) {
        int spinning = am_prog.spin_ns && util_now_ns() < spin_end;
        int n = am_progress_look(me, spinning);
        if (n > 0) {
            if (!spinning)
                am_progress_awake();
            spin_end = util_now_ns() + am_prog.spin_ns;
            continue;
        }
        if (spinning) {
            sched_yield();
            continue;
        }
        if (n < 0) {
            am_nap(busy_ns); /* the application is inside shoal and runs handlers itself */
            busy_ns = busy_ns * 2 < AM_PROGRESS_BUSY_MAX_NS ? busy_ns * 2 : AM_PROGRESS_BUSY_MAX_NS;
            continue;
        }
        busy_ns = AM_PROGRESS_BUSY_MIN_NS;
        /* the bell was set before this look (am_progress_poll's fence), so
         * a stop requested after it rings the bell */
        if (!atomic_load_explicit(&am_prog.stop, memory_order_seq_cst))
            am_progress_sleep();
        am_progress_awake();
        spin_end = util_now_ns() + am_prog.spin_ns;
    }
    return NULL;
}

/* The application's signals (SIGINT, SIGALRM, its own) go to its threads,
 * not to this one; faults stay deliverable, so a crash in a handler is
 * reported where it happened. */
static void am_progress_sigmask(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, old);
}

static void am_wake_handler(int sig)
{
    (void)sig; /* its work is to end the progress thread's ppoll */
}

/* Installs the wake-up signal's handler, unless the application has its
 * own for that signal, and builds the mask of the progress thread's sleep
 * on the socket (everything blocked but the wake-up).  1 when ready. */
static int am_wake_signal_ready(sigset_t *mask)
{
    struct sigaction old, sa = {.sa_handler = am_wake_handler};
    if (sigaction(AM_WAKE_SIG, NULL, &old) || (old.sa_handler != SIG_DFL && old.sa_handler != am_wake_handler)) {
        LOG(LOG_INFO, "SHOAL_PROGRESS=thread: signal %d has the application's handler; a local peer's message "
                      "wakes the progress thread within 1 ms instead of at once", AM_WAKE_SIG);
        return 0;
    }
    sigemptyset(&sa.sa_mask);
    if (sigaction(AM_WAKE_SIG, &sa, NULL))
        return 0;
    sigfillset(mask);
    sigdelset(mask, AM_WAKE_SIG);
    return 1;
}

/* 1 when some peer other than this rank is reached over shared memory. */
static int am_has_shm_peers(void)
{
    for (int i = 0; i < am.shm->nlocal; i++)
        if (am.shm->local[i] != am.rank && !am_is_remote(am.shm->local[i]))
            return 1;
    return 0;
}

/* SHOAL_PROGRESS_SPIN_US, auto resolved (after am_prog.fd is known): on
 * a loaded host a spin whose looks are system calls slowed LU over udp
 * 2-4 x, where over shm it removed 97 % of the wake-ups (PERFORMANCE.md). */
static uint64_t am_progress_spin_ns(void)
{
    if (strcmp(util_config_str(CFG_PROGRESS_SPIN_US), "auto") != 0)
        return (uint64_t)util_config_int(CFG_PROGRESS_SPIN_US) * 1000u;
    return am_prog.fd >= 0 ? 0 : AM_PROGRESS_SPIN_SHM_NS;
}

int am_progress_start(void)
{
    if (strcmp(util_config_str(CFG_PROGRESS), "thread") != 0)
        return SHOAL_OK;
    am_owed = calloc((size_t)(am.nranks + 63) / 64, sizeof *am_owed);
    if (!am_owed)
        return SHOAL_ENOMEM;
    am_prog.fd = am.tp && am.tp->wait_fd ? am.tp->wait_fd() : -1;
    int shm_peers = am_has_shm_peers();
    am_prog.bell = !am.tp || (shm_peers && am_prog.fd >= 0 && am_wake_signal_ready(&am_prog.wake_mask))
                       ? shm_doorbell(am.shm, am.rank) : NULL;
    am_prog.spin_ns = am_progress_spin_ns();
    am_prog.sleep_ns = am_prog.fd >= 0 && (!shm_peers || am_prog.bell) ? AM_PROGRESS_NET_NS : AM_PROGRESS_NAP_NS;
    atomic_store_explicit(&am_prog.stop, 0, memory_order_relaxed);
    am_threaded = 1; /* before the thread: every call from now on takes the lock */
    am_guard_update();
    sigset_t old;
    am_progress_sigmask(&old);
    int err = pthread_create(&am_prog.thread, NULL, am_progress_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        am_threaded = 0;
        am_guard_update();
        free(am_owed);
        am_owed = NULL;
        LOG(LOG_ERROR, "SHOAL_PROGRESS=thread: cannot start the progress thread: %s", strerror(err));
        return SHOAL_ESYS;
    }
    am_prog.started = 1;
    return SHOAL_OK;
}

void am_progress_stop(void)
{
    if (!am_prog.started)
        return;
    atomic_store_explicit(&am_prog.stop, 1, memory_order_seq_cst);
    if (am_prog.bell)
        am_bell_wake(am_prog.bell);
    pthread_join(am_prog.thread, NULL);
    if (am_prog.bell)
        atomic_store_explicit(&am_prog.bell->tid, 0, memory_order_relaxed);
    am_prog.started = 0;
    am_threaded = 0;
    am_guard_update();
    am_progress_ring_owed(); /* a burst cut short: its receivers may sleep */
    free(am_owed);
    am_owed = NULL;
}

int shoal_handlers_disable(void)
{
    if (am.rank < 0)
        return SHOAL_ENOTINIT;
    am_guard_enter(__func__); /* held until the matching enable */
    am_disabled++;
    return SHOAL_OK;
}

int shoal_handlers_enable(void)
{
    if (am.rank < 0)
        return SHOAL_ENOTINIT;
    if (am_disabled == 0)
        return SHOAL_EINVAL;
    am_disabled--;
    if (am_locking)
        am_lock_leave();
    return SHOAL_OK;
}

int shoal_progress_threaded(void)
{
    return am_threaded;
}
