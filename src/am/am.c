/* Active messages over the shm rings (von Eicken's Active Messages contract). */
#include "am/state.h"
#include "am/hang.h"
#include "boot/boot.h"
#include "shm/shm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct am_state am = {.rank = -1};
static struct shm_state am_shm;
_Static_assert(AM_LOCAL_FLAGS == SHM_BARRIER_ROUNDS, "the barrier flags are the shm region's");
shoal_handler_t am_handlers[AM_MAX_INDEX];

/* A token is not an address: it is the serial number of the handler call it
 * was made for, so a token kept past its handler (whose stack slot a later
 * call reuses) can never pass for the current one. */
static inline shoal_token_t am_token(uint64_t serial)
{
    return (shoal_token_t)(uintptr_t)serial;
}

/* The running handler call that token names, or NULL for a stale token. */
static struct am_frame *am_frame_of(shoal_token_t tok)
{
    for (unsigned d = 0; d < am.depth; d++)
        if (am_token(am.frames[d].serial) == tok)
            return &am.frames[d];
    return NULL;
}

/* Bytes of a message before any medium payload: control word, args, and the
 * long descriptor (offset, length). */
static inline size_t am_header_bytes(unsigned nargs, enum am_kind kind)
{
    return 8 + 8 * (size_t)nargs + (kind == AM_LONG ? 16 : 0);
}

/* Where a medium payload starts, in bytes from the control word.  Small
 * payloads pack right after the arguments, so up to 56 bytes of arguments
 * and payload share the first line; larger ones start on the next slot
 * boundary, so the copy in and the handler's reads are line-aligned (an
 * unaligned bulk copy writes every destination line twice). */
#define AM_ALIGN_PAYLOAD_FROM 256u
static inline size_t am_payload_offset(size_t hdr, size_t nbytes)
{
    if (nbytes < AM_ALIGN_PAYLOAD_FROM)
        return hdr;
    return (hdr + RING_SLOT_BYTES - 1) / RING_SLOT_BYTES * RING_SLOT_BYTES;
}

static inline uint32_t am_slots(size_t bytes)
{
    return (uint32_t)((bytes + RING_SLOT_BYTES - 1) / RING_SLOT_BYTES);
}

static inline uint64_t am_tag(unsigned handler, unsigned nargs, enum am_kind kind, uint64_t extra)
{
    return (uint64_t)handler | ((uint64_t)nargs << 10) | ((uint64_t)kind << 15) | (extra << 17);
}

int am_rule_violation(const char *what)
{
    static const char *ctx_name[] = {"main program", "a request handler", "a reply handler"};
    if (am.strict)
        util_fatal("handler rule violated: %s called from %s", what, ctx_name[am.ctx]);
    LOG(LOG_DEBUG, "handler rule violated: %s called from %s", what, ctx_name[am.ctx]);
    return SHOAL_EHANDLER;
}

/* Polls of the socket (system calls, ~1 us each) before a blocking wait
 * sleeps: long enough to catch a reply already on its way. */
#define AM_BLOCK_AFTER_POLLS 256u
/* Wait steps between two looks at the launcher's failure flag, whatever
 * the polls found: a waiter that a steady stream keeps busy must notice a
 * dead peer too.  A look is one load of a line nobody writes until then. */
#define AM_CHECK_EVERY 64u

static void am_check_launcher(void)
{
    int dead;
    const char *reason;
    if (boot_peer_failed(&dead, &reason)) {
        if (dead < 0)
            util_peer_fatal(-1, "the launcher ended the job (%s)", reason);
        util_peer_fatal(dead, "peer rank %d %s; ending the job", dead, reason);
    }
}

void am_progress_wait(struct util_backoff *b, int replies_only)
{
    static unsigned steps;
    if (UTIL_UNLIKELY(++steps % AM_CHECK_EVERY == 0))
        am_check_launcher();
    unsigned ran = am_poll(replies_only);
    if (UTIL_UNLIKELY(am_guard_on) && am_wait_unlocked(b, ran != 0))
        return;
    if (ran != 0) {
        b->spins = 0; /* progress: the peer is active, keep spinning */
        return;
    }
    am_wait_step(b);
}

void am_wait_step(struct util_backoff *b)
{
    if (UTIL_UNLIKELY(hang.timing) && !hang.wait_from) /* only waits that wait: no clock on the fast path */
        hang.wait_from = util_now_ns();
    hang_check();
    if (UTIL_UNLIKELY(am.net_block_ns) && b->spins >= AM_BLOCK_AFTER_POLLS) {
        am.tp->wait(am.net_block_ns); /* no CPU until something happens */
        am_check_launcher(); /* the sleep may have been long */
        return;
    }
    util_backoff_wait(b);
}

/* ---- receive side --------------------------------------------------------- */

void am_run_handler(int src, enum am_class cls, unsigned h, unsigned nargs, const uint64_t *args, void *buf,
                    size_t n)
{
    shoal_handler_t fn = am_handlers[h];
    if (UTIL_UNLIKELY(!fn))
        util_fatal("%s from rank %d names handler %u, which is not registered here",
                   cls == AM_REQ ? "request" : "reply", src, h);

    /* Nesting is bounded: only a request handler's reply send polls, and it
     * runs reply handlers only, which cannot send. */
    struct am_frame *f = &am.frames[am.depth++];
    *f = (struct am_frame){.serial = ++am.token_serial, .src = src, .replied = 0};
    enum am_context saved_ctx = am.ctx;
    am.ctx = cls == AM_REQ ? AM_CTX_REQUEST : AM_CTX_REPLY;
    fn(am_token(f->serial), buf, n, args, nargs);
    am.ctx = saved_ctx;
    am.depth--;
    am.stats.am_received[cls]++;
}

/* A medium's payload in its sender's outbox pool of class cls: checked
 * against the pool's bounds (a corrupt or forged descriptor aborts). */
static void *am_outbox_payload(int src, enum am_class cls, uint64_t off, uint64_t n)
{
    size_t bytes = am.shm->outbox_bytes;
    if (UTIL_UNLIKELY(!outbox_in_bounds(bytes, off, n)))
        util_fatal("medium from rank %d names bytes [%llu, +%llu) of its %s outbox, outside its %zu bytes", src,
                   (unsigned long long)off, (unsigned long long)n, cls == AM_REQ ? "request" : "reply", bytes);
    return am.shm->outbox[src] + (size_t)cls * bytes + off;
}

static void am_dispatch(int src, enum am_class cls, const struct ring_slot *s, uint64_t ctl)
{
    uint64_t tag = ring_ctl_tag(ctl);
    unsigned h = (unsigned)(tag & (AM_MAX_INDEX - 1));
    unsigned nargs = (unsigned)(tag >> 10) & 31u;
    enum am_kind kind = (enum am_kind)((tag >> 15) & 3u);
    uint64_t extra = tag >> 17;
    const uint64_t *args = ring_msg_body(s);
    void *buf = NULL;
    size_t n = 0;

    if (kind == AM_MEDIUM) {
        n = (size_t)extra;
        buf = (char *)s + am_payload_offset(am_header_bytes(nargs, AM_MEDIUM), n);
    } else if (kind == AM_KIND_OUTBOX) {
        n = (size_t)extra;
        buf = am_outbox_payload(src, cls, args[nargs], n);
    } else if (kind == AM_LONG) {
        uint64_t off = args[nargs], len = args[nargs + 1];
        const struct am_segment *seg = extra < AM_MAX_SEGMENTS ? &am.segs[extra] : NULL;
        /* the sender checked the bounds; a mismatch here means corruption */
        if (!seg || !seg->used || off > seg->sizes[am.rank] || len > seg->sizes[am.rank] - off)
            util_fatal("long AM from rank %d names segment %llu [%llu, +%llu) outside this rank's segments",
                       src, (unsigned long long)extra, (unsigned long long)off, (unsigned long long)len);
        buf = (char *)seg->bases[am.rank] + off;
        n = (size_t)len;
    }
    am_run_handler(src, cls, h, nargs, args, buf, n);
}

/* Bounded per ring per call, so one busy sender cannot starve the rest. */
#define AM_POLL_BATCH 64u

/* A batch is one hang event, recorded before its handlers run (their sends
 * come after it): one per message cost a one-way flood 10 % of its rate. */
static inline __attribute__((always_inline)) unsigned am_poll_ring(struct ring_rx *rx, int src,
                                                                  enum am_class cls)
{
    unsigned done = 0;
    uint64_t ctl;
    const struct ring_slot *s;
    uint32_t ev = 0;
    while (done < AM_POLL_BATCH && (s = ring_rx_peek(rx, &ctl)) != NULL) {
        if (done == 0)
            ev = hang_event(HANG_EV_RECEIVED, cls, src, (unsigned)(ring_ctl_tag(ctl) & (AM_MAX_INDEX - 1)), 1);
        am_dispatch(src, cls, s, ctl);
        ring_rx_release(rx, ring_ctl_slots(ctl));
        done++;
    }
    if (done > 1)
        hang_event_count(ev, done);
    return done;
}

/* ---- one thread at a time ----------------------------------------------- */

_Thread_local const char *am_thread_call = "shoal";
static _Atomic long am_inside;               /* thread id of the thread polling, 0: none */
static _Atomic(const char *) am_inside_call; /* the public call it is in */

static long am_self_tid(void)
{
    static _Thread_local long tid;
    if (!tid)
        tid = syscall(SYS_gettid);
    return tid;
}

/* Returns what am_thread_leave restores: the same thread when nested (a
 * reply's wait inside a handler), else 0. */
static long am_thread_enter(void)
{
    long me = am_self_tid(), prev = atomic_exchange_explicit(&am_inside, me, memory_order_acquire);
    if (prev && prev != me)
        util_fatal("two threads inside shoal at once: thread %ld entered %s while thread %ld is in %s "
                   "(one thread at a time may call shoal; checked because SHOAL_STRICT or a debug build)",
                   me, am_thread_call, prev, atomic_load_explicit(&am_inside_call, memory_order_relaxed));
    if (!prev)
        atomic_store_explicit(&am_inside_call, am_thread_call, memory_order_relaxed);
    return prev;
}

static void am_thread_leave(long prev)
{
    atomic_store_explicit(&am_inside, prev, memory_order_release);
}

_Atomic unsigned am_extra;

/* The lanes of threads at SHOAL_THREAD_MULTIPLE of watched sender i. */
static unsigned am_poll_lanes_of(int i)
{
    unsigned done = 0;
    struct ring_rx *rx = &am.shm->lane_rx[(size_t)i * am.shm->lanes];
    for (unsigned l = 0; l < am.shm->lanes; l++)
        done += am_poll_ring(&rx[l], am.shm->local[i], AM_REQ);
    return done;
}

/* The lanes of the watched senders, once some peer used one. */
static __attribute__((noinline)) unsigned am_poll_lanes(void)
{
    unsigned done = 0;
    for (int j = 0; j < am.shm->watch.n; j++)
        done += am_poll_lanes_of(am.shm->watch.list[j]);
    return done;
}

static inline int am_lanes_used(void)
{
    return (am_extra_now() & AM_EXTRA_LANES) &&
           atomic_load_explicit(&shm_lanes(am.shm, am.rank)->used, memory_order_relaxed);
}

/* What a poll does beyond the rings when am_extra says so. */
static inline unsigned am_poll_extra(unsigned extra, int replies_only)
{
    unsigned done = 0;
    if (extra & AM_EXTRA_BELLS)
        am_progress_ring_owed();
    if (replies_only)
        return 0;
    if (am_lanes_used())
        done += am_poll_lanes();
    if (extra & AM_EXTRA_DEFER)
        done += am_defer_drain();
    return done;
}

/* Every ring of local sender i: replies, then (unless replies_only) its
 * requests and lanes. */
static unsigned am_poll_sender(int i, int replies_only)
{
    struct ring_rx *rx = &am.shm->rx[(size_t)i * SHM_CLASSES];
    int p = am.shm->local[i];
    unsigned done = am_poll_ring(&rx[AM_REP], p, AM_REP);
    if (!replies_only) {
        done += am_poll_ring(&rx[AM_REQ], p, AM_REQ);
        if (am_lanes_used())
            done += am_poll_lanes_of(i);
    }
    return done;
}

/* Polls between two demotion passes: a watched sender whose rings took
 * no message in that long is demoted (docs/SHM_QUEUE.md). */
#define AM_WATCH_PASS_POLLS 4096u

/* Where sender i's consumers are: its heads' sum only grows. */
static uint64_t am_watch_heads(int i)
{
    const struct shm_state *st = am.shm;
    uint64_t sum = st->rx[(size_t)i * SHM_CLASSES + AM_REQ].head + st->rx[(size_t)i * SHM_CLASSES + AM_REP].head;
    for (unsigned l = 0; l < st->lanes; l++)
        sum += st->lane_rx[(size_t)i * st->lanes + l].head;
    return sum;
}

/* Demotes the watched senders that were idle for a whole pass: flags
 * cleared, then the fence after which a sender that read its flag as set
 * has its message visible here, then their rings once more; one that had
 * something after all stays watched.  The handlers run here may promote
 * senders (reply waits poll the summary): the list is read afresh. */
static unsigned am_watch_pass(void)
{
    struct shm_state *st = am.shm;
    struct shm_watch *w = &st->watch;
    int idle = 0;
    w->polls = 0;
    for (int j = 0; j < w->n; j++) {
        int i = w->list[j];
        uint64_t heads = am_watch_heads(i);
        if (heads == w->seen[i]) {
            __atomic_store_n(&w->flag[i], 0, __ATOMIC_RELAXED);
            idle++;
        }
        w->seen[i] = heads;
    }
    if (!idle)
        return 0;
    w->passes++;
    shm_watch_fence(st);
    unsigned done = 0;
    for (int j = 0; j < w->n; j++) {
        int i = w->list[j];
        if (__atomic_load_n(&w->flag[i], __ATOMIC_RELAXED))
            continue;
        unsigned got = am_poll_sender(i, 0);
        if (got) /* it talks after all */
            __atomic_store_n(&w->flag[i], 1, __ATOMIC_RELAXED);
        done += got;
    }
    int kept = 0;
    for (int j = 0; j < w->n; j++) {
        int i = w->list[j];
        if (__atomic_load_n(&w->flag[i], __ATOMIC_RELAXED))
            w->list[kept++] = i;
        else {
            w->member[i] = 0;
            w->demotions++;
        }
    }
    w->n = kept;
    return done;
}

/* Line L of the summary (8 words, 64 senders): a set byte is an unwatched
 * sender with a message; it is cleared, the sender watched, and its rings
 * polled. */
static unsigned am_poll_summary_line(int line, int replies_only)
{
    struct shm_state *st = am.shm;
    struct shm_watch *w = &st->watch;
    unsigned done = 0;
    int end = (line + 1) * 8 < w->words ? (line + 1) * 8 : w->words;
    for (int k = line * 8; k < end; k++) {
        uint64_t v = __atomic_load_n(&w->summary[k], __ATOMIC_ACQUIRE);
        for (int b = 0; v && b < 8; b++) {
            int i = k * 8 + b;
            if (!((v >> (8 * b)) & 0xff))
                continue;
            __atomic_store_n((uint8_t *)&w->summary[k] + b, 0, __ATOMIC_RELAXED);
            if (!__atomic_load_n(&w->flag[i], __ATOMIC_RELAXED))
                shm_watch_add(st, i);
            done += am_poll_sender(i, replies_only);
        }
    }
    return done;
}

/* The summary, through its top: one load when nothing is set (up to 512
 * senders).  A top byte is cleared before its line is read, with a fence
 * between, so a sender whose top store that clear overwrote has its
 * summary byte read here (it stored it first).  A reply-only poll promotes
 * too: the sender's requests wait for the next full poll, which now looks
 * at them. */
static __attribute__((noinline)) unsigned am_poll_summary(int replies_only)
{
    struct shm_watch *w = &am.shm->watch;
    unsigned done = 0;
    for (int t = 0; t < w->top_words; t++) {
        uint64_t v = __atomic_load_n(&w->top[t], __ATOMIC_ACQUIRE);
        for (int b = 0; v && b < 8; b++) {
            if (!((v >> (8 * b)) & 0xff))
                continue;
            __atomic_store_n((uint8_t *)&w->top[t] + b, 0, __ATOMIC_RELAXED);
            atomic_thread_fence(memory_order_seq_cst);
            done += am_poll_summary_line(t * 8 + b, replies_only);
        }
    }
    if (!replies_only && ++w->polls >= AM_WATCH_PASS_POLLS)
        done += am_watch_pass();
    return done;
}

static unsigned am_poll_all(int replies_only)
{
    unsigned done = am.tp ? am.tp->poll(replies_only) : 0;
    if (am.quiescent)
        atomic_store_explicit(am.quiescent, atomic_load_explicit(am.quiescent, memory_order_relaxed) + 1,
                              memory_order_release);
    const struct shm_state *st = am.shm;
    int on = st->watch.on;
    for (int j = 0; j < st->watch.n; j++) {
        int i = on ? st->watch.list[j] : j; /* every sender watched, in order: no indirection */
        struct ring_rx *rx = &st->rx[(size_t)i * SHM_CLASSES];
        int p = st->local[i];
        done += am_poll_ring(&rx[AM_REP], p, AM_REP);
        if (!replies_only)
            done += am_poll_ring(&rx[AM_REQ], p, AM_REQ);
    }
    unsigned extra = am_extra_now() & AM_EXTRA_POLL;
    if (UTIL_UNLIKELY(extra))
        done += am_poll_extra(extra, replies_only);
    if (UTIL_UNLIKELY(on))
        done += am_poll_summary(replies_only);
    return done;
}

unsigned am_poll(int replies_only)
{
    if (UTIL_LIKELY(!am.strict))
        return am_poll_all(replies_only);
    long prev = am_thread_enter();
    unsigned done = am_poll_all(replies_only);
    am_thread_leave(prev);
    return done;
}

/* ---- send side ---------------------------------------------------------- */

/* value: the class, | (lane + 1) << 1 for a thread's lane; obj: at
 * MULTIPLE, the sending thread (struct hang_thread). */
int am_describe_credits(const struct hang_wait *w, char *buf, size_t n)
{
    char lane[32] = "", thread[64] = "", who[48];
    if (w->value >> 1)
        snprintf(lane, sizeof lane, " in lane %u", (unsigned)(w->value >> 1) - 1);
    if (w->obj) {
        hang_thread_text(w->obj, who, sizeof who);
        snprintf(thread, sizeof thread, " from thread %s", who);
    }
    snprintf(buf, n, "no room for a %s to rank %d%s%s (credits): waits for it to take messages",
             (w->value & 1) == AM_REP ? "reply" : "request", w->peer, lane, thread);
    return w->peer;
}

/* value: the class; obj as above. */
int am_describe_outbox(const struct hang_wait *w, char *buf, size_t n)
{
    char thread[64] = "", who[48];
    if (w->obj) {
        hang_thread_text(w->obj, who, sizeof who);
        snprintf(thread, sizeof thread, " from thread %s", who);
    }
    snprintf(buf, n, "no outbox space for a %s medium to rank %d%s: waits for the ranks its %s pool's mediums "
             "went to (the oldest first) to take them", w->value == AM_REP ? "reply" : "request", w->peer, thread,
             w->value == AM_REP ? "reply" : "request");
    return w->peer;
}

/* ---- SHOAL_THREAD_MULTIPLE's request rings ---------------------------------
 * At MULTIPLE a request to a rank on this host takes no process-wide lock.
 * A sending thread takes a lane, a request ring of its own in every local
 * peer's inbox (docs/SHM_QUEUE.md), the first time it sends, and keeps it
 * until it exits: it is the lane's only producer, so it sends as a thread
 * at SINGLE does, with no atomic read-modify-write, and its requests to
 * user handlers stay in order on every path (waits for room too).
 * Threads beyond SHOAL_SHM_LANES, and every request to an internal handler (the
 * layers'), share the ordinary request ring, which then has a lock of its
 * own, held from a message's slot reservation to its publication.
 * Reply rings need neither: replies are sent only by handlers, which run
 * under the owner lock (docs/ARCHITECTURE.md, "Locking"). */

/* What requests sent outside the owner lock counted: written by the one
 * thread that owns the lane or holds the ring's lock, read by
 * am_stats_settle under the owner lock. */
struct am_sent_count {
    _Atomic uint64_t n[AM_LONG + 1], bytes[AM_LONG + 1]; /* by kind, only grow */
    uint64_t seen_n[AM_LONG + 1], seen_bytes[AM_LONG + 1]; /* what am_stats_settle has added */
} __attribute__((aligned(64))); /* one line each: no false sharing between lanes or destinations */

struct am_mt_ring {
    _Atomic uint32_t lock;
    struct am_sent_count count;
};

static int am_mt_on;                           /* the level is MULTIPLE */
static struct am_mt_ring *am_mt;               /* [nranks] */
static struct am_sent_count am_lane_count[UTIL_SHM_LANES_MAX];
static uint8_t *am_lane_told;                  /* [lane * nranks + dest]: dest polls its lanes */
/* A thread may outlive shoal_finalize and send after the next init, whose
 * lanes are new: each init starts a generation, and a thread's lane, and
 * its exit's freeing of it, count only in the generation it was taken. */
static uint32_t am_lane_gen;                   /* written by init only, with no other thread in shoal */
static _Atomic uint64_t am_lanes_free;         /* am_lane_gen << 32 | bit l: lane l has no thread */
static pthread_key_t am_lane_key;              /* its destructor frees an exiting thread's lane */
static pthread_once_t am_lane_once = PTHREAD_ONCE_INIT;
/* generation << 32 | 1 none free, or 2 + lane; another generation: none taken yet */
static _Thread_local uint64_t am_lane_tls __attribute__((tls_model("initial-exec")));
/* lane * nranks: the lane's row in lane_tx and am_lane_told, so that a send
 * indexes it by dest with no multiply */
static _Thread_local size_t am_lane_row __attribute__((tls_model("initial-exec")));

void am_send_multiple(int on)
{
    am_mt_on = on;
    am_extra_set(AM_EXTRA_MULTIPLE, on);
}

static void am_mt_lock(struct am_mt_ring *r)
{
    util_spin_lock(&r->lock);
}

static void am_mt_unlock(struct am_mt_ring *r)
{
    util_spin_unlock(&r->lock);
}

/* Runs in the exiting thread, whose am_lane_tls is still there (release:
 * its writes to the lane's ring state happen before the next taker's). */
static void am_lane_free(void *v)
{
    (void)v;
    uint64_t mine = am_lane_tls, f = atomic_load_explicit(&am_lanes_free, memory_order_relaxed);
    if ((uint32_t)mine < 2)
        return;
    while (f >> 32 == mine >> 32 &&
           !atomic_compare_exchange_weak_explicit(&am_lanes_free, &f, f | 1ull << ((uint32_t)mine - 2),
                                                  memory_order_release, memory_order_relaxed))
        ;
}

static void am_lane_key_init(void)
{
    if (pthread_key_create(&am_lane_key, am_lane_free) != 0)
        util_fatal("rank %d: no thread-specific key for SHOAL_THREAD_MULTIPLE's lanes", am.rank);
}

/* A thread's first send at MULTIPLE in this generation: a free lane
 * (acquire: the lane's last thread's writes to its ring state happened
 * before), or none. */
static uint64_t am_lane_take(void)
{
    uint64_t f = atomic_load_explicit(&am_lanes_free, memory_order_relaxed);
    while ((uint32_t)f && !atomic_compare_exchange_weak_explicit(&am_lanes_free, &f, f & (f - 1),
                                                                 memory_order_acquire, memory_order_relaxed))
        ;
    uint64_t gen = (uint64_t)am_lane_gen << 32;
    if (!(uint32_t)f)
        return gen | 1;
    pthread_setspecific(am_lane_key, &am_lane_key); /* any non-NULL value: the destructor runs */
    return gen | (2u + (unsigned)__builtin_ctz((uint32_t)f));
}

/* The shared request ring to dest: its lock taken. */
static struct ring_tx *am_mt_shared(int dest, struct am_mt_ring **mt, struct am_sent_count **count)
{
    *mt = &am_mt[dest];
    *count = &(*mt)->count;
    am_mt_lock(*mt);
    return &am.shm->tx[(size_t)dest * SHM_CLASSES + AM_REQ];
}

/* A thread's first message into lane i (lane * nranks + dest): 1, with
 * the shared ring locked, when dest's inbox has no lanes (dest is not at
 * MULTIPLE; then always); else tells dest to poll its lanes, and 0. */
static __attribute__((noinline)) int am_lane_none(int dest, size_t i, struct am_mt_ring **mt,
                                                  struct am_sent_count **count)
{
    if (!am.shm->lane_tx[i].slots) {
        am_mt_shared(dest, mt, count);
        return 1;
    }
    am_lane_told[i] = 1;
    atomic_store_explicit(&shm_lanes(am.shm, dest)->used, 1, memory_order_relaxed);
    return 0;
}

/* The ring a request to local rank dest goes into at MULTIPLE: the calling
 * thread's lane, or the shared request ring with *mt set and locked.  The
 * layers' requests (internal handlers) all take the shared ring: their
 * protocols (large messages' pieces, collectives' sequences, CRL's) count
 * on one channel in order from each rank to each rank, whichever thread
 * sends. */
static inline __attribute__((always_inline)) struct ring_tx *
am_mt_tx(int dest, unsigned handler, struct am_mt_ring **mt, struct am_sent_count **count)
{
    if (UTIL_UNLIKELY(handler >= SHOAL_AM_MAX_HANDLERS))
        return am_mt_shared(dest, mt, count);
    uint64_t mine = am_lane_tls;
    if (UTIL_UNLIKELY(mine >> 32 != am_lane_gen)) {
        am_lane_tls = mine = am_lane_take();
        am_lane_row = (uint32_t)mine < 2 ? 0 : ((uint32_t)mine - 2) * (size_t)am.nranks;
    }
    if (UTIL_UNLIKELY((uint32_t)mine == 1))
        return am_mt_shared(dest, mt, count);
    size_t l = (uint32_t)mine - 2, i = am_lane_row + (size_t)dest;
    if (UTIL_UNLIKELY(!am_lane_told[i]) && am_lane_none(dest, i, mt, count))
        return &am.shm->tx[(size_t)dest * SHM_CLASSES + AM_REQ];
    *mt = NULL;
    *count = &am_lane_count[l];
    return &am.shm->lane_tx[i];
}

/* Only the counter's one writer calls this. */
static inline void am_sent_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

static void am_sent_settle(struct am_sent_count *c)
{
    for (int k = AM_SHORT; k <= AM_LONG; k++) {
        uint64_t n = atomic_load_explicit(&c->n[k], memory_order_relaxed);
        uint64_t bytes = atomic_load_explicit(&c->bytes[k], memory_order_relaxed);
        am.stats.am_sent[AM_REQ] += n - c->seen_n[k];
        am.stats.am_class_sent[k] += n - c->seen_n[k];
        am.stats.bytes_sent += bytes - c->seen_bytes[k];
        am.stats.bytes_class_sent[k] += bytes - c->seen_bytes[k];
        c->seen_n[k] = n;
        c->seen_bytes[k] = bytes;
    }
}

void am_stats_settle(void)
{
    if (!am_mt_on)
        return;
    for (int d = 0; d < am.nranks; d++)
        am_sent_settle(&am_mt[d].count);
    for (unsigned l = 0; l < am.shm->lanes; l++)
        am_sent_settle(&am_lane_count[l]);
}

/* Whether a send that found no room (in a ring or an outbox pool) may
 * wait for it. */
static int am_wait_allowed(enum am_class cls, unsigned flags)
{
    if (flags & SHOAL_IMMEDIATE)
        return SHOAL_EAGAIN;
    if (cls == AM_REQ && am.depth > 0)
        return AM_DEFER; /* a handler never waits (defer.c) */
    am.stats.send_stalls++;
    return SHOAL_OK;
}

/* Runs with mt (the shared request ring's lock at MULTIPLE; NULL for a lane,
 * a reply, or below MULTIPLE) held, and gives it back while it polls: a wait may hand the owner lock to a thread that sends
 * into the same ring.  lane: the thread's lane + 1 when tx is one, else 0. */
static int am_wait_for_room(int dest, struct ring_tx *tx, enum am_class cls, uint32_t m, unsigned flags,
                            struct ring_slot **slot, struct am_mt_ring *mt, unsigned lane)
{
    if (UTIL_UNLIKELY(tx->cold)) { /* first contact: not full, not backed yet */
        int rc = shm_tx_first_contact(tx, dest);
        if (rc || (*slot = ring_tx_reserve(tx, m)) != NULL)
            return rc;
    }
    int rc = am_wait_allowed(cls, flags);
    if (rc)
        return rc;
    struct util_backoff b;
    util_backoff_init(&b);
    /* at MULTIPLE the report may come from another thread: name this one */
    hang_push("a send", dest, cls | (uint64_t)lane << 1, am_mt_on ? hang_thread_self() : NULL, am_describe_credits);
    /* Requests keep serving everything (their handlers may need to reply to
     * the peer we wait for); replies serve only replies, whose handlers
     * never send, so this cannot deadlock (von Eicken's thesis: CMAM's two networks). */
    do {
        if (mt)
            am_mt_unlock(mt);
        am_progress_wait(&b, cls == AM_REP);
        if (mt)
            am_mt_lock(mt);
    } while ((*slot = ring_tx_reserve(tx, m)) == NULL);
    hang_pop();
    return SHOAL_OK;
}

/* No room in the outbox pool of cls: waits as for ring room (a request
 * serves everything, a reply only replies: the two pools are the two
 * classes' networks again, docs/SHM_QUEUE.md). */
static int am_wait_for_outbox(int dest, enum am_class cls, unsigned flags, size_t nbytes, size_t *off,
                              int64_t *chunk)
{
    int rc = am_wait_allowed(cls, flags);
    if (rc)
        return rc;
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("a send", dest, cls, am_mt_on ? hang_thread_self() : NULL, am_describe_outbox);
    do
        am_progress_wait(&b, cls == AM_REP);
    while ((*chunk = outbox_take(&am.shm->out[cls], nbytes, off)) < 0);
    hang_pop();
    return SHOAL_OK;
}

/* A medium too large for its ring inline: its payload into this rank's
 * outbox pool of cls (waiting for room unless wait is 0, when no room is
 * SHOAL_EAGAIN); *off is where, *chunk what to tell the pool once the
 * descriptor is in the ring. */
static int am_outbox_put(int dest, enum am_class cls, unsigned flags, int wait, const void *src, size_t nbytes,
                         size_t *off, int64_t *chunk)
{
    struct outbox *ob = &am.shm->out[cls];
    if ((*chunk = outbox_take(ob, nbytes, off)) < 0) {
        int rc = wait ? am_wait_for_outbox(dest, cls, flags, nbytes, off, chunk) : SHOAL_EAGAIN;
        if (rc)
            return rc;
    }
    mem_copy(ob->base + *off, src, nbytes);
    return SHOAL_OK;
}

/* A medium of *m slots that its ring should not carry inline (too large,
 * or at least AM_OUTBOX_FROM bytes where there is an outbox and the pool
 * takes it): its payload into the outbox (am_outbox_put), *m the
 * descriptor's slots, *payload_at the payload's offset in the pool, *chunk
 * >= 0.  Otherwise nothing, and *chunk stays -1.  (A medium too large for
 * its ring is never too large for the pool: am_medium_limit.) */
static inline int am_outbox_maybe(int dest, enum am_class cls, unsigned flags, int wait, enum am_kind kind,
                                  unsigned nargs, const void *src, size_t nbytes, uint32_t *m, size_t *payload_at,
                                  int64_t *chunk)
{
    *chunk = -1;
    if (UTIL_LIKELY(kind != AM_MEDIUM || *m <= am.outbox_from) || (*m <= am.ring_msg_max && nbytes > am.outbox_max))
        return SHOAL_OK;
    int rc = am_outbox_put(dest, cls, flags, wait, src, nbytes, payload_at, chunk);
    *m = am_slots(am_header_bytes(nargs, AM_MEDIUM) + sizeof(uint64_t)); /* arguments, the payload's offset */
    return rc;
}

/* Tells the pool of cls what became of an outbox medium's descriptor: in
 * tx's ring now (the chunk is free once tx's consumer head passes it), or
 * never sent (tx NULL: free now). */
static inline void am_outbox_settle(enum am_class cls, int64_t chunk, const struct ring_tx *tx)
{
    if (chunk < 0)
        return;
    if (tx)
        outbox_sent(&am.shm->out[cls], chunk, &tx->head->head, tx->tail);
    else
        outbox_cancel(&am.shm->out[cls], chunk);
}

/* After a message to dest is published, where dest may not watch this
 * rank: the control word's store, then the load of the flag (the fence
 * that orders them is dest's membarrier when it demotes, or this one),
 * and the summary byte, then its line's top byte, if the flag is clear
 * (docs/SHM_QUEUE.md). */
static inline void am_shm_notify(int dest)
{
    const struct shm_peer *p = &am.shm->peer[dest];
    if (UTIL_UNLIKELY(am.shm->watch.sender_fence))
        atomic_thread_fence(memory_order_seq_cst);
    if (!__atomic_load_n(p->watched, __ATOMIC_RELAXED)) {
        __atomic_store_n(p->summary, 1, __ATOMIC_RELEASE);
        __atomic_store_n(p->top, 1, __ATOMIC_RELEASE);
    }
}

/* After a message to dest is published: the ways dest may not be looking
 * at this rank's rings, its summary (it does not watch this rank) and its
 * doorbell (its progress thread sleeps); more defers the bell to the end
 * of a SHOAL_MORE burst. */
static inline void am_tell_receiver(int dest, unsigned more)
{
    if (UTIL_UNLIKELY(am.shm->watch.on))
        am_shm_notify(dest);
    if (UTIL_UNLIKELY(am_threaded))
        am_progress_ring(dest, more);
}

/* Where a message's payload starts in its slots, and how many slots it takes. */
static inline uint32_t am_msg_slots(enum am_kind kind, unsigned nargs, size_t nbytes, size_t *payload_at)
{
    size_t hdr = am_header_bytes(nargs, kind);
    *payload_at = kind == AM_MEDIUM ? am_payload_offset(hdr, nbytes) : hdr;
    return am_slots(*payload_at + (kind == AM_MEDIUM ? nbytes : 0));
}

/* Writes a message's arguments and payload into its reserved slots (a long
 * one's payload into dest's segment, an outbox medium's offset); returns
 * its tag. */
static inline __attribute__((always_inline)) uint64_t
am_msg_fill(struct ring_slot *slot, size_t payload_at, int dest, unsigned handler, unsigned kind,
            const void *src, size_t nbytes, uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args)
{
    uint64_t *body = ring_msg_body(slot);
    for (unsigned i = 0; i < nargs; i++)
        body[i] = args[i];
    uint64_t extra = 0;
    if (kind == AM_KIND_OUTBOX) { /* the payload is in the outbox already, at payload_at */
        body[nargs] = payload_at;
        extra = nbytes;
    } else if (kind == AM_MEDIUM) {
        mem_copy((char *)slot + payload_at, src, nbytes);
        extra = nbytes;
    } else if (kind == AM_LONG) {
        if (nbytes) /* memmove: a long message to self may overlap its source */
            memmove((char *)am.segs[seg].bases[dest] + offset, src, nbytes);
        body[nargs] = offset;
        body[nargs + 1] = nbytes;
        extra = seg;
    }
    return am_tag(handler, nargs, kind, extra);
}

static inline __attribute__((always_inline)) int
am_send_ring(int multiple, int dest, enum am_class cls, unsigned handler, unsigned flags, enum am_kind kind,
             const void *src, size_t nbytes, uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args)
{
    hang_event(HANG_EV_SENT, cls, dest, handler, 0);
    if (UTIL_UNLIKELY(am.remote != NULL) && am.remote[dest])
        return am_net_send(dest, cls, handler, flags, kind, src, nbytes, seg, offset, nargs, args);
    size_t payload_at;
    uint32_t m = am_msg_slots(kind, nargs, nbytes, &payload_at);
    int64_t chunk;
    int rc = am_outbox_maybe(dest, cls, flags, 1, kind, nargs, src, nbytes, &m, &payload_at, &chunk);
    if (UTIL_UNLIKELY(rc))
        return rc == AM_DEFER ? am_defer_add(dest, handler, kind, src, nbytes, seg, offset, nargs, args) : rc;
    struct am_mt_ring *mt = NULL;
    struct am_sent_count *unused;
    struct ring_tx *tx = multiple && cls == AM_REQ ? am_mt_tx(dest, handler, &mt, &unused)
                                                    : &am.shm->tx[(size_t)dest * SHM_CLASSES + cls];
    struct ring_slot *slot = ring_tx_reserve(tx, m);
    if (UTIL_UNLIKELY(!slot)) {
        unsigned lane = multiple && cls == AM_REQ && !mt ? (uint32_t)am_lane_tls - 1 : 0;
        rc = am_wait_for_room(dest, tx, cls, m, flags, &slot, mt, lane);
        if (rc) {
            if (mt)
                am_mt_unlock(mt);
            am_outbox_settle(cls, chunk, NULL);
            return rc == AM_DEFER ? am_defer_add(dest, handler, kind, src, nbytes, seg, offset, nargs, args) : rc;
        }
    }
    ring_tx_commit(tx, m, am_msg_fill(slot, payload_at, dest, handler, chunk >= 0 ? AM_KIND_OUTBOX : kind, src,
                                      nbytes, seg, offset, nargs, args));
    am_outbox_settle(cls, chunk, tx);
    if (mt)
        am_mt_unlock(mt);
    am_tell_receiver(dest, flags & SHOAL_MORE);
    am_count_sent(cls, kind, nbytes);
    return SHOAL_OK;
}

/* A send when am_extra says more than a plain send is to be done: a
 * request goes behind any request deferred to dest; at MULTIPLE a request
 * takes the calling thread's lane. */
static __attribute__((noinline)) int
am_send_extra(int dest, enum am_class cls, unsigned handler, unsigned flags, enum am_kind kind, const void *src,
              size_t nbytes, uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args)
{
    if ((am_extra_now() & AM_EXTRA_DEFER) && cls == AM_REQ) {
        int rc = am_defer_first(dest, handler, flags, kind, src, nbytes, seg, offset, nargs, args);
        if (rc != AM_SEND_NOW)
            return rc;
    }
    return am_send_ring(am_mt_on, dest, cls, handler, flags, kind, src, nbytes, seg, offset, nargs, args);
}

/* Every send. */
static inline __attribute__((always_inline)) int
am_send(int dest, enum am_class cls, unsigned handler, unsigned flags, enum am_kind kind,
        const void *src, size_t nbytes, uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args)
{
    if (UTIL_UNLIKELY(am_extra_now() & AM_EXTRA_SEND))
        return am_send_extra(dest, cls, handler, flags, kind, src, nbytes, seg, offset, nargs, args);
    return am_send_ring(0, dest, cls, handler, flags, kind, src, nbytes, seg, offset, nargs, args);
}

int am_send_now(int dest, unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args)
{
    return am_send_ring(am_mt_on, dest, AM_REQ, handler, flags, kind, src, nbytes, seg, offset, nargs, args);
}

#define AM_SEND_FLAGS (SHOAL_IMMEDIATE | SHOAL_MORE)

/* Which argument is wrong, once am_check_common's fast test has failed. */
static int am_check_which(int dest, unsigned handler, unsigned flags, unsigned nargs, const uint64_t *args)
{
    if (am.rank < 0)
        return SHOAL_ENOTINIT;
    if (dest < 0 || dest >= am.nranks)
        return SHOAL_ERANK;
    if (handler >= SHOAL_AM_MAX_HANDLERS)
        return SHOAL_EINVAL;
    if (!am_handlers[handler])
        return SHOAL_ENOHANDLER;
    if (nargs > SHOAL_AM_MAX_ARGS)
        return SHOAL_ETOOBIG;
    if ((nargs && !args) || (flags & ~AM_SEND_FLAGS))
        return SHOAL_EINVAL;
    return SHOAL_OK;
}

/* Every send's argument check, as one test on the fast path: a one-way
 * flood runs at a rate set by how the sender's per-message cost compares
 * with the receiver's, and each branch here showed in it. */
static inline int am_check_common(int dest, unsigned handler, unsigned flags, unsigned nargs,
                                  const uint64_t *args)
{
    unsigned bad = ((unsigned)dest >= (unsigned)am.nranks) | (handler >= SHOAL_AM_MAX_HANDLERS) |
                   (nargs > SHOAL_AM_MAX_ARGS) | (flags & ~AM_SEND_FLAGS) | (nargs && !args);
    if (UTIL_LIKELY(!bad && am_handlers[handler]))
        return SHOAL_OK; /* am.nranks is 0 before init, so dest fails then */
    return am_check_which(dest, handler, flags, nargs, args);
}

static int am_check_request(int dest, unsigned handler, unsigned flags, unsigned nargs, const uint64_t *args,
                            const char *call)
{
    am_thread_note(call);
    /* a request handler may send requests: one that finds no room is deferred */
    if (UTIL_UNLIKELY(am.ctx == AM_CTX_REPLY))
        return am_rule_violation(call);
    int rc = am_check_common(dest, handler, flags, nargs, args);
    if (UTIL_UNLIKELY(rc))
        hang_event(HANG_EV_REFUSED, AM_REQ, dest, handler, rc);
    return rc;
}

/* A reply: only from the request handler now running (the innermost call),
 * once. */
static struct am_frame *am_reply_frame(shoal_token_t tok)
{
    if (am.ctx != AM_CTX_REQUEST || am.depth == 0)
        return NULL;
    struct am_frame *f = &am.frames[am.depth - 1];
    return am_token(f->serial) == tok && !f->replied ? f : NULL;
}

static int am_check_reply(struct am_frame *f, unsigned handler, unsigned flags, unsigned nargs,
                          const uint64_t *args, const char *call)
{
    if (UTIL_UNLIKELY(!f))
        return am_rule_violation(call);
    int rc = am_check_common(f->src, handler, flags, nargs, args);
    if (UTIL_UNLIKELY(rc))
        hang_event(HANG_EV_REFUSED, AM_REP, f->src, handler, rc);
    return rc;
}

static int am_check_long(int dest, shoal_seg_t seg, size_t offset, size_t nbytes)
{
    if (seg < 0 || seg >= AM_MAX_SEGMENTS || !am.segs[seg].used)
        return SHOAL_ESEGMENT;
    size_t size = am.segs[seg].sizes[dest];
    if (offset > size || nbytes > size - offset || nbytes > UINT32_MAX)
        return SHOAL_ERANGE;
    return SHOAL_OK;
}

static int am_check_payload(const void *src, size_t nbytes)
{
    if (nbytes && !src)
        return SHOAL_EINVAL;
    return SHOAL_OK;
}

/* Say once what the limit is and what raises it: SHOAL_SHM_MEDIUM_MAX when
 * it is the cap; else the pools or rings, whose sizes may move with the
 * ranks per host (a program that worked at -n 4 may meet a ring's limit at
 * -n 48 when the outbox is off). */
static int am_too_big(size_t nbytes)
{
    static int told;
    if (!told) {
        told = 1;
        if (am.max_medium == (size_t)util_config_int(CFG_SHM_MEDIUM_MAX))
            LOG(LOG_WARN,
                "a %zu-byte medium message is above this job's limit of %zu bytes (shoal_am_max_medium, "
                "SHOAL_SHM_MEDIUM_MAX raises it up to a quarter of SHOAL_SHM_OUTBOX_BYTES); a long message into "
                "a segment has none", nbytes, am.max_medium);
        else
            LOG(LOG_WARN,
                "a %zu-byte medium message is above this job's limit of %zu bytes (shoal_am_max_medium): with "
                "%d ranks on this host each ring has %u slots and each outbox pool %zu bytes; "
                "SHOAL_SHM_OUTBOX_BYTES or SHOAL_SHM_RING_SLOTS raises it (shoal-info -n %d shows the limit), a "
                "long message into a segment has none",
                nbytes, am.max_medium, am.shm->nlocal, am.shm->ring_slots, am.shm->outbox_bytes, am.shm->nlocal);
    }
    return SHOAL_ETOOBIG;
}

static int am_check_medium(const void *src, size_t nbytes)
{
    return nbytes > am.max_medium ? am_too_big(nbytes) : am_check_payload(src, nbytes);
}

static int am_check_long_payload(int dest, shoal_seg_t seg, size_t offset, const void *src, size_t nbytes)
{
    int rc = am_check_long(dest, seg, offset, nbytes);
    return rc ? rc : am_check_payload(src, nbytes);
}

/* A request at MULTIPLE from a thread outside shoal (so in no handler and
 * no critical section) to a rank on this host, without the owner lock:
 * the argument checks, then the message into the thread's lane (or the
 * shared request ring under its lock), counted there.  AM_TAKE_LOCK where the call must go the owner lock's way
 * instead: a bad argument (that path names it), a remote destination
 * (the transports' state is under the owner lock), a thread that holds
 * the lock, or a full ring (that path waits for room, polling). */
#define AM_TAKE_LOCK 1
static inline __attribute__((always_inline)) int
am_request_unlocked(int dest, unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                    uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args)
{
    if (am_check_common(dest, handler, flags, nargs, args) != SHOAL_OK || (am.remote && am.remote[dest]) ||
        (am_extra_now() & AM_EXTRA_DEFER) || am_lock_mine())
        return AM_TAKE_LOCK;
    if (kind == AM_MEDIUM ? am_check_medium(src, nbytes) != SHOAL_OK
                          : kind == AM_LONG && am_check_long_payload(dest, (shoal_seg_t)seg, offset, src, nbytes))
        return AM_TAKE_LOCK;
    size_t payload_at;
    uint32_t m = am_msg_slots(kind, nargs, nbytes, &payload_at);
    int64_t chunk;
    if (am_outbox_maybe(dest, AM_REQ, flags, 0, kind, nargs, src, nbytes, &m, &payload_at, &chunk) != SHOAL_OK)
        return AM_TAKE_LOCK;
    struct am_mt_ring *mt;
    struct am_sent_count *count;
    struct ring_tx *tx = am_mt_tx(dest, handler, &mt, &count);
    struct ring_slot *slot = ring_tx_reserve(tx, m);
    if (!slot) {
        if (mt)
            am_mt_unlock(mt);
        am_outbox_settle(AM_REQ, chunk, NULL);
        return AM_TAKE_LOCK;
    }
    ring_tx_commit(tx, m, am_msg_fill(slot, payload_at, dest, handler, chunk >= 0 ? AM_KIND_OUTBOX : kind, src,
                                      nbytes, seg, offset, nargs, args));
    am_outbox_settle(AM_REQ, chunk, tx);
    am_sent_add(&count->n[kind], 1);
    am_sent_add(&count->bytes[kind], nbytes);
    if (mt)
        am_mt_unlock(mt);
    /* more 0: rung now even in a SHOAL_MORE burst, as no end of a locked
     * call follows to ring an owed bell */
    am_tell_receiver(dest, 0);
    return SHOAL_OK;
}

int shoal_am_request_short(int dest, unsigned handler, unsigned flags, unsigned nargs, const uint64_t *args)
{
    int rc;
    if (UTIL_UNLIKELY(am_guard_on) && am_mt_on &&
        (rc = am_request_unlocked(dest, handler, flags, AM_SHORT, NULL, 0, 0, 0, nargs, args)) != AM_TAKE_LOCK)
        return rc;
    AM_GUARD();
    rc = am_check_request(dest, handler, flags, nargs, args, "shoal_am_request_short");
    if (UTIL_UNLIKELY(rc))
        return rc;
    return am_send(dest, AM_REQ, handler, flags, AM_SHORT, NULL, 0, 0, 0, nargs, args);
}

int shoal_am_request_medium(int dest, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                            unsigned nargs, const uint64_t *args)
{
    int rc;
    if (UTIL_UNLIKELY(am_guard_on) && am_mt_on &&
        (rc = am_request_unlocked(dest, handler, flags, AM_MEDIUM, src, nbytes, 0, 0, nargs, args)) != AM_TAKE_LOCK)
        return rc;
    AM_GUARD();
    rc = am_check_request(dest, handler, flags, nargs, args, "shoal_am_request_medium");
    if (!rc)
        rc = am_check_medium(src, nbytes);
    if (UTIL_UNLIKELY(rc))
        return rc;
    return am_send(dest, AM_REQ, handler, flags, AM_MEDIUM, src, nbytes, 0, 0, nargs, args);
}

/* One packet that every other rank takes as its next request, where the
 * carrier broadcasts (eth, udp with SHOAL_NET_BCAST=1) and every other rank
 * is on it; otherwise each other rank's request, sent in turn from the
 * next rank up, leaving together (SHOAL_MORE).  Reliable either way (API.md).
 * Checked once, so a bad argument sends nothing. */
static int am_bcast(unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                    unsigned nargs, const uint64_t *args, const char *call)
{
    AM_GUARD();
    if (UTIL_UNLIKELY(am.ctx != AM_CTX_NONE)) /* a broadcast packet would wait for every rank's credits */
        return am_rule_violation(call);
    int rc = am_check_request(am.rank, handler, flags, nargs, args, call);
    if (!rc && kind == AM_MEDIUM)
        rc = am_check_medium(src, nbytes);
    if (!rc && (flags & SHOAL_IMMEDIATE))
        rc = SHOAL_EINVAL; /* a broadcast is not sent in part */
    if (!rc && am.nranks > 1) {
        rc = am_net_send_all(handler, flags, kind, src, nbytes, nargs, args);
        if (rc != SHOAL_EINVAL)
            return rc;
        rc = SHOAL_OK; /* this job has no such packet: a request per rank */
    }
    for (int i = 1; i < am.nranks && !rc; i++)
        rc = am_send((am.rank + i) % am.nranks, AM_REQ, handler, i + 1 < am.nranks ? flags | SHOAL_MORE : flags, kind,
                     src, nbytes, 0, 0, nargs, args);
    return rc;
}

int shoal_am_bcast_short(unsigned handler, unsigned flags, unsigned nargs, const uint64_t *args)
{
    return am_bcast(handler, flags, AM_SHORT, NULL, 0, nargs, args, "shoal_am_bcast_short");
}

int shoal_am_bcast_medium(unsigned handler, unsigned flags, const void *src, size_t nbytes, unsigned nargs,
                          const uint64_t *args)
{
    return am_bcast(handler, flags, AM_MEDIUM, src, nbytes, nargs, args, "shoal_am_bcast_medium");
}

int shoal_am_request_long(int dest, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                          shoal_seg_t seg, size_t offset, unsigned nargs, const uint64_t *args)
{
    int rc;
    if (UTIL_UNLIKELY(am_guard_on) && am_mt_on &&
        (rc = am_request_unlocked(dest, handler, flags, AM_LONG, src, nbytes, (uint32_t)seg, offset, nargs, args)) !=
            AM_TAKE_LOCK)
        return rc;
    AM_GUARD();
    rc = am_check_request(dest, handler, flags, nargs, args, "shoal_am_request_long");
    if (!rc)
        rc = am_check_long_payload(dest, seg, offset, src, nbytes);
    if (UTIL_UNLIKELY(rc))
        return rc;
    return am_send(dest, AM_REQ, handler, flags, AM_LONG, src, nbytes, (uint32_t)seg, offset, nargs, args);
}

/* Marks the token replied only once the reply is in the ring, so a reply
 * that failed with SHOAL_EAGAIN can be retried. */
static int am_reply_sent(struct am_frame *f, int rc)
{
    if (rc == SHOAL_OK)
        f->replied = 1;
    return rc;
}

int shoal_am_reply_short(shoal_token_t tok, unsigned handler, unsigned flags, unsigned nargs,
                         const uint64_t *args)
{
    AM_GUARD();
    struct am_frame *f = am_reply_frame(tok);
    int rc = am_check_reply(f, handler, flags, nargs, args, "shoal_am_reply_short");
    if (UTIL_UNLIKELY(rc))
        return rc;
    return am_reply_sent(f, am_send(f->src, AM_REP, handler, flags, AM_SHORT, NULL, 0, 0, 0, nargs, args));
}

int shoal_am_reply_medium(shoal_token_t tok, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                          unsigned nargs, const uint64_t *args)
{
    AM_GUARD();
    struct am_frame *f = am_reply_frame(tok);
    int rc = am_check_reply(f, handler, flags, nargs, args, "shoal_am_reply_medium");
    if (!rc)
        rc = am_check_medium(src, nbytes);
    if (UTIL_UNLIKELY(rc))
        return rc;
    return am_reply_sent(f, am_send(f->src, AM_REP, handler, flags, AM_MEDIUM, src, nbytes, 0, 0, nargs, args));
}

int shoal_am_reply_long(shoal_token_t tok, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                        shoal_seg_t seg, size_t offset, unsigned nargs, const uint64_t *args)
{
    AM_GUARD();
    struct am_frame *f = am_reply_frame(tok);
    int rc = am_check_reply(f, handler, flags, nargs, args, "shoal_am_reply_long");
    if (!rc)
        rc = am_check_long_payload(f->src, seg, offset, src, nbytes);
    if (UTIL_UNLIKELY(rc))
        return rc;
    return am_reply_sent(f, am_send(f->src, AM_REP, handler, flags, AM_LONG, src, nbytes, (uint32_t)seg,
                                      offset, nargs, args));
}

void am_register_internal(unsigned index, shoal_handler_t fn)
{
    am_handlers[index] = fn;
}

int am_send_medium(int dest, enum am_class cls, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                   unsigned nargs, const uint64_t *args)
{
    return am_send(dest, cls, handler, flags, AM_MEDIUM, src, nbytes, 0, 0, nargs, args);
}

int am_request_internal(int dest, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                        unsigned nargs, const uint64_t *args)
{
    return am_send_medium(dest, AM_REQ, handler, flags, src, nbytes, nargs, args);
}

int am_reply_internal(shoal_token_t tok, unsigned handler, const void *src, size_t nbytes, unsigned nargs,
                      const uint64_t *args)
{
    struct am_frame *f = am_reply_frame(tok);
    if (!f)
        return am_rule_violation("an internal reply");
    return am_reply_sent(f, am_send_medium(f->src, AM_REP, handler, 0, src, nbytes, nargs, args));
}

int am_reply_large(shoal_token_t tok, unsigned handler, const void *src, size_t nbytes, unsigned nargs,
                   const uint64_t *args)
{
    struct am_frame *f = am_reply_frame(tok);
    if (!f)
        return am_rule_violation("an internal reply");
    size_t done = 0;
    return am_reply_sent(f, am_large_send(f->src, AM_REP, handler, 0, src, nbytes, nargs, args, &done));
}

int shoal_token_source(shoal_token_t tok)
{
    AM_GUARD();
    const struct am_frame *f = am_frame_of(tok);
    return f ? f->src : -1;
}

int shoal_am_register(unsigned index, shoal_handler_t fn)
{
    AM_GUARD();
    if (index >= SHOAL_AM_MAX_HANDLERS || !fn)
        return SHOAL_EINVAL;
    am_handlers[index] = fn;
    return SHOAL_OK;
}

size_t shoal_am_max_medium(void)
{
    return am.max_medium;
}

unsigned shoal_am_max_args(void)
{
    return SHOAL_AM_MAX_ARGS;
}

#define AM_OUTBOX_SHARE 4u
/* Where there is an outbox (rings too small for every medium), payloads
 * from this size on take it even when they would fit their ring: a small
 * ring brings a sender back to lines the receiver still holds every few
 * messages, each a cross-core invalidation, while the 1 MiB pool's lines
 * have aged out; measured with 128- to 1024-slot rings, 1-8 KiB mediums
 * 5-30 % faster through the outbox, 256-512 bytes the same
 * (docs/SHM_QUEUE.md). */
#define AM_OUTBOX_FROM 1024u
_Static_assert((8 + 8 * SHOAL_AM_MAX_ARGS + RING_SLOT_BYTES - 1) / RING_SLOT_BYTES * RING_SLOT_BYTES ==
                   SHM_MEDIUM_HEAD_MAX, "shm sizes the outbox by am's medium layout");

int am_init(int rank, int nranks, int level)
{
    unsigned lanes = level == SHOAL_THREAD_MULTIPLE ? (unsigned)util_config_int(CFG_SHM_LANES) : 0;
    int rc = shm_init(&am_shm, rank, nranks, lanes);
    if (rc) {
        shm_fini(&am_shm); /* what it mapped before it failed */
        return rc;
    }
    struct shm_state *shm = am.shm = &am_shm;
    am.rank = rank;
    am.nranks = nranks;
    am.ctx = AM_CTX_NONE;
    am.depth = 0;
    memset(&am.stats, 0, sizeof am.stats);
#ifdef NDEBUG
    int debug_build = 0;
#else
    int debug_build = 1;
#endif
    const char *strict = util_config_str(CFG_STRICT); /* "" counts as unset */
    am.strict = strict[0] ? strict[0] == '1' : debug_build;
    am.max_medium = am_medium_limit(shm->ring_slots, shm->outbox_bytes);
    am.ring_msg_max = am.outbox_from = ring_max_msg_slots(shm->ring_slots);
    am.outbox_max = shm->outbox_bytes / AM_OUTBOX_SHARE;
    if (shm->outbox_bytes && am.outbox_from > am_slots(RING_SLOT_BYTES + AM_OUTBOX_FROM) - 1)
        am.outbox_from = am_slots(RING_SLOT_BYTES + AM_OUTBOX_FROM) - 1;
    am_mt = aligned_alloc(_Alignof(struct am_mt_ring), (size_t)nranks * sizeof *am_mt);
    am_lane_told = calloc((size_t)nranks * lanes + 1, 1); /* + 1: never a NULL for 0 */
    if (!am_mt || !am_lane_told)
        return SHOAL_ENOMEM;
    memset(am_mt, 0, (size_t)nranks * sizeof *am_mt);
    memset(am_lane_count, 0, sizeof am_lane_count);
    atomic_store(&am_lanes_free, (uint64_t)++am_lane_gen << 32 | ((1u << lanes) - 1));
    pthread_once(&am_lane_once, am_lane_key_init);
    am_extra_set(AM_EXTRA_LANES, shm->lanes != 0);
    am_large_init();
    return SHOAL_OK;
}

size_t am_medium_limit(uint32_t ring_slots, size_t outbox_bytes)
{
    size_t ring_max = (size_t)ring_max_msg_slots(ring_slots) * RING_SLOT_BYTES -
                      am_payload_offset(am_header_bytes(SHOAL_AM_MAX_ARGS, AM_MEDIUM), AM_ALIGN_PAYLOAD_FROM);
    /* a quarter: at least four in flight per pool, and a chunk always fits
     * an empty pool whatever the skip at its end */
    size_t max = outbox_bytes / AM_OUTBOX_SHARE > ring_max ? outbox_bytes / AM_OUTBOX_SHARE : ring_max;
    size_t cfg = (size_t)util_config_int(CFG_SHM_MEDIUM_MAX);
    size_t lim = cfg < max ? cfg : max;
    return lim < (1u << 27) ? lim : (1u << 27) - 1; /* the tag's length field */
}

void am_fini(void)
{
    hang_fini();
    am_seg_fini();
    am_large_fini();
    am_defer_fini();
    free(am_mt);
    am_mt = NULL;
    free(am_lane_told);
    am_lane_told = NULL;
    am_mt_on = 0;
    atomic_store(&am_extra, 0);
    am.rank = -1;
    am.nranks = 0; /* the send check relies on it: no destination is valid */
    if (am.shm)
        shm_fini(am.shm);
    am.shm = NULL;
    am.max_medium = 0;
}

const int *am_local_ranks(int *n)
{
    *n = am.shm->nlocal;
    return am.shm->local;
}

int am_local_index(int rank)
{
    return am.shm->local_index[rank];
}

_Atomic uint64_t *am_local_flag(int rank, unsigned round)
{
    return &shm_barrier_flag(am.shm, rank, round)->epoch;
}

uint32_t am_ring_slots(void)
{
    return am.shm->ring_slots;
}

int am_is_remote(int rank)
{
    return am.remote && am.remote[rank];
}

size_t am_medium_in_one(int rank, unsigned nargs)
{
    return am_is_remote(rank) ? am_net_medium_in_one(nargs) : am.max_medium;
}

int am_blocking_allowed(const char *call)
{
    am_thread_note(call);
    return am.ctx == AM_CTX_NONE ? SHOAL_OK : am_rule_violation(call);
}

int am_rank(void)
{
    return am.rank;
}

int am_size(void)
{
    return am.nranks;
}

size_t am_max_medium(void)
{
    return am.max_medium;
}

int am_in_handler(void)
{
    return am.ctx != AM_CTX_NONE;
}

int am_has_transport(void)
{
    return am.tp != NULL;
}

struct shoal_stats *am_stats(void)
{
    return &am.stats;
}

void am_set_poll_counter(_Atomic uint64_t *counter)
{
    am.quiescent = counter;
}
