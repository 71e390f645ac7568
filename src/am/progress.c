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
 * thread announce its sleep, or in the message transport's wait (epoll on
 * the socket) when peers are reached over the network. */
#include "am/state.h"
#include "shm/shm.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int am_threaded;

/* The thread inside shoal (the address of its am_lock_self), 0: none. */
static _Atomic uintptr_t am_lock_owner;
static unsigned am_lock_depth; /* the owner's nested entries; only the owner touches it */
static _Thread_local char am_lock_self __attribute__((tls_model("initial-exec")));
static unsigned am_disabled; /* shoal_handlers_disable nesting */

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

static struct {
    pthread_t thread;
    int started;
    _Atomic int stop;
    struct shm_doorbell *bell; /* this rank's, when shm is the only way in; else NULL */
    int fd;                    /* else the transport's wait_fd, -1: none */
    uint64_t sleep_ns;         /* the longest sleep on fd, or the nap without one */
} am_prog;

static int am_lock_try(uintptr_t me)
{
    uintptr_t none = 0;
    return atomic_compare_exchange_strong_explicit(&am_lock_owner, &none, me, memory_order_acquire,
                                                   memory_order_relaxed);
}

void am_lock_enter(void)
{
    uintptr_t me = (uintptr_t)&am_lock_self;
    if (atomic_load_explicit(&am_lock_owner, memory_order_relaxed) == me) {
        am_lock_depth++;
        return;
    }
    /* The progress thread holds it only while it runs a batch of handlers. */
    struct util_backoff b;
    util_backoff_init(&b);
    while (!am_lock_try(me))
        util_backoff_wait(&b);
    am_lock_depth = 1;
}

void am_lock_leave(void)
{
    if (--am_lock_depth == 0)
        atomic_store_explicit(&am_lock_owner, 0, memory_order_release);
}

static void am_futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

int am_lock_mine(void)
{
    return atomic_load_explicit(&am_lock_owner, memory_order_relaxed) == (uintptr_t)&am_lock_self;
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

void am_progress_ring(int dest)
{
    struct shm_doorbell *bell = shm_doorbell(am.shm, dest);
    /* The message's control word before the look at the bell, as the
     * sleeper sets the bell before its last look at the rings: one of the
     * two sees the other (store-load order needs a full fence on x86 too). */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&bell->asleep, memory_order_relaxed) &&
        atomic_exchange_explicit(&bell->asleep, 0, memory_order_relaxed))
        am_futex(&bell->asleep, FUTEX_WAKE, 1, NULL);
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
    if (am_prog.bell) {
        am_futex(&am_prog.bell->asleep, FUTEX_WAIT, 1, NULL); /* returns at once if a sender cleared it */
    } else if (am_prog.fd >= 0) {
        struct pollfd pfd = {.fd = am_prog.fd, .events = POLLIN};
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)am_prog.sleep_ns};
        ppoll(&pfd, 1, &ts, NULL);
    } else {
        am_nap(am_prog.sleep_ns);
    }
}

static void *am_progress_main(void *arg)
{
    (void)arg;
    uintptr_t me = (uintptr_t)&am_lock_self;
    uint64_t busy_ns = AM_PROGRESS_BUSY_MIN_NS;
    while (!atomic_load_explicit(&am_prog.stop, memory_order_acquire)) {
        if (!am_lock_try(me)) {
            am_nap(busy_ns); /* the application is inside shoal and runs handlers itself */
            busy_ns = busy_ns * 2 < AM_PROGRESS_BUSY_MAX_NS ? busy_ns * 2 : AM_PROGRESS_BUSY_MAX_NS;
            continue;
        }
        busy_ns = AM_PROGRESS_BUSY_MIN_NS;
        am_lock_depth = 1;
        unsigned n = am_progress_poll();
        am_lock_leave();
        /* the bell was set before this look (am_progress_poll's fence), so
         * a stop requested after it rings the bell */
        if (n == 0 && !atomic_load_explicit(&am_prog.stop, memory_order_seq_cst))
            am_progress_sleep();
        if (am_prog.bell)
            atomic_store_explicit(&am_prog.bell->asleep, 0, memory_order_relaxed);
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

/* 1 when some peer other than this rank is reached over shared memory. */
static int am_has_shm_peers(void)
{
    for (int i = 0; i < am.shm->nlocal; i++)
        if (am.shm->local[i] != am.rank && !am_is_remote(am.shm->local[i]))
            return 1;
    return 0;
}

int am_progress_start(void)
{
    if (strcmp(util_config_str(CFG_PROGRESS), "thread") != 0)
        return SHOAL_OK;
    am_prog.bell = am.tp ? NULL : shm_doorbell(am.shm, am.rank);
    am_prog.fd = am.tp && am.tp->wait_fd ? am.tp->wait_fd() : -1;
    am_prog.sleep_ns = am_prog.fd >= 0 && !am_has_shm_peers() ? AM_PROGRESS_NET_NS : AM_PROGRESS_NAP_NS;
    atomic_store_explicit(&am_prog.stop, 0, memory_order_relaxed);
    am_threaded = 1; /* before the thread: every call from now on takes the lock */
    sigset_t old;
    am_progress_sigmask(&old);
    int err = pthread_create(&am_prog.thread, NULL, am_progress_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        am_threaded = 0;
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
    if (am_prog.bell && atomic_exchange_explicit(&am_prog.bell->asleep, 0, memory_order_seq_cst))
        am_futex(&am_prog.bell->asleep, FUTEX_WAKE, 1, NULL);
    pthread_join(am_prog.thread, NULL);
    am_prog.started = 0;
    am_threaded = 0;
}

int shoal_handlers_disable(void)
{
    if (am.rank < 0)
        return SHOAL_ENOTINIT;
    if (am_threaded)
        am_lock_enter();
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
    if (am_threaded)
        am_lock_leave();
    return SHOAL_OK;
}

int shoal_progress_threaded(void)
{
    return am_threaded;
}
