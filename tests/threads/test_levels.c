/* Thread levels (issue 21 item 2), run through shoalrun:
 *   provided:L   shoal_init_thread refuses a level outside SINGLE..MULTIPLE
 *                and a NULL provided, grants level L (0..3) and
 *                shoal_query_thread reports it
 *   am           MULTIPLE: TEST_THREADS threads per rank each send
 *                TEST_COUNT short, medium and long requests to every rank
 *                (itself too), answered by a reply of the same kind; every
 *                payload is checked where it lands and the counts are exact
 *   rma          MULTIPLE: the threads put (handle, colour, fire and forget
 *                with a fence), get back and fetch-add on every rank's
 *                segment; the data and the counters are exact
 *   crl          MULTIPLE: thread t of every rank increments region t
 *                (home rank 0) in write sections; the totals are exact
 *                (TEST_REGION_BYTES: regions that large travel in pieces,
 *                as large mediums, checked by their last word)
 *   slots        MULTIPLE: two waves of TEST_THREADS threads per rank each
 *                send every rank TEST_COUNT pairs of a 16-argument short and a medium
 *                of 0-700 bytes (1-12 ring slots), words and bytes from a
 *                generator seeded by (sender, thread, number), with a
 *                checksum; the main thread polls meanwhile.  Where a
 *                message lands its checksum, its contents and its place in
 *                its thread's sequence are checked (a wave's thread is a
 *                thread of its own: API.md promises no order between the
 *                first wave's messages still in flight and the second's,
 *                which may take another lane; two threads' messages
 *                mixed in one ring entry, or an entry read before it was
 *                whole, fail here), and the counts and shoal_stats_get's
 *                requests sent are exact.  TEST_SINGLE_RANK=R: rank R is
 *                at SINGLE and sends from its main thread (no lanes in its
 *                inbox: the others' threads share its request ring).
 *                TEST_INBOX_LANES=L: every inbox mapped is the size of one
 *                with L lanes per sender
 *   reinit       MULTIPLE, one process alone (no launcher): threads that
 *                took lanes live through shoal_finalize and a second
 *                shoal_init_thread and send again while new threads hold
 *                every lane; two of them exit then; later threads take the
 *                lanes exited threads left.  slots' checks per thread and
 *                cycle, and shoal_stats_get's requests sent per cycle
 *   lanes_differ MULTIPLE, rank 1 with SHOAL_SHM_LANES=2, the others 4:
 *                shoal_init_thread fails with SHOAL_EBOOT on every rank
 *   handoff      MULTIPLE, 2 ranks: a thread waits for an answer that rank 1
 *                sends only once rank 0's other thread has asked for it:
 *                the wait must give shoal's lock back between its polls
 *   funneled     (SHOAL_STRICT=1) FUNNELED, a second thread calls shoal:
 *                the job ends with the error naming the rank and the call
 *   serialized   (SHOAL_STRICT=1) SERIALIZED, a second thread calls shoal
 *                while the first waits inside: the same
 * A watchdog ends a stuck rank after TEST_LIMIT_S seconds, saying so. */
#include "shoal.h"
#include "shoal/crl.h"
#include "../common/check.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 16
#define SLOT 64 /* bytes a long message's slot holds */
#define TEST_LIMIT_S 60

enum { H_REQ = 1, H_REP };
enum { K_SHORT, K_MEDIUM, K_LONG, KINDS };

static int me, np, nthreads, count;
static shoal_seg_t seg;
static unsigned char *seg_base;
/* requests run here per kind, replies per thread (written by handlers,
 * which run under shoal's lock; read by the main thread after the join) */
static _Atomic uint64_t requests_run[KINDS];
static volatile uint64_t replies[MAX_THREADS];      /* even threads: read by shoal_wait_until */
static _Atomic uint64_t replies_seen[MAX_THREADS]; /* odd threads: read outside shoal */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_levels: a rank is still running after the test's limit: stuck\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* The bytes message (src, t, i) carries: its length and contents. */
static size_t payload_len(int t, int i)
{
    return (size_t)(1 + (t * 131 + i * 17) % 2000);
}

static unsigned char payload_byte(int src, int t, int i, size_t k)
{
    return (unsigned char)(src * 7 + t * 13 + i * 29 + (int)k);
}

static void fill(unsigned char *buf, size_t n, int src, int t, int i)
{
    for (size_t k = 0; k < n; k++)
        buf[k] = payload_byte(src, t, i, k);
}

static void verify(const unsigned char *buf, size_t n, size_t want, int src, int t, int i, const char *what)
{
    CHECK(n == want, "rank %d: %s from rank %d thread %d #%d has %zu bytes, want %zu", me, what, src, t, i, n,
          want);
    for (size_t k = 0; k < n; k++)
        CHECK(buf[k] == payload_byte(src, t, i, k), "rank %d: %s from rank %d thread %d #%d: byte %zu wrong", me,
              what, src, t, i, k);
}

/* A long message's slot: requests in the first half of the segment, by
 * sender, thread and number; replies in the second, by target. */
static size_t slot_off(int reply, int rank, int t, int i)
{
    return ((((size_t)reply * (size_t)np + (size_t)rank) * (size_t)nthreads + (size_t)t) * (size_t)count +
            (size_t)i) *
           SLOT;
}

static size_t long_len(int t, int i)
{
    return (size_t)(1 + (t + i) % SLOT);
}

/* args: kind, thread, number */
static void on_req(shoal_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    CHECK(na == 3, "rank %d: request with %u arguments", me, na);
    int src = shoal_token_source(tok), kind = (int)a[0], t = (int)a[1], i = (int)a[2];
    if (kind == K_SHORT) {
        CHECK_RC(shoal_am_reply_short(tok, H_REP, 0, 3, a), SHOAL_OK);
    } else if (kind == K_MEDIUM) {
        verify(buf, n, payload_len(t, i), src, t, i, "a medium request");
        CHECK_RC(shoal_am_reply_medium(tok, H_REP, 0, buf, n, 3, a), SHOAL_OK);
    } else {
        CHECK(buf == seg_base + slot_off(0, src, t, i), "rank %d: a long request landed elsewhere", me);
        verify(buf, n, long_len(t, i), src, t, i, "a long request");
        CHECK_RC(shoal_am_reply_long(tok, H_REP, 0, buf, n, seg, slot_off(1, me, t, i), 3, a), SHOAL_OK);
    }
    atomic_fetch_add_explicit(&requests_run[kind], 1, memory_order_relaxed);
}

static void on_rep(shoal_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    CHECK(na == 3, "rank %d: reply with %u arguments", me, na);
    int src = shoal_token_source(tok), kind = (int)a[0], t = (int)a[1], i = (int)a[2];
    if (kind == K_MEDIUM)
        verify(buf, n, payload_len(t, i), me, t, i, "a medium reply");
    else if (kind == K_LONG)
        verify(buf, n, long_len(t, i), me, t, i, "a long reply");
    (void)src;
    if (t % 2 == 0)
        replies[t]++;
    else
        atomic_fetch_add_explicit(&replies_seen[t], 1, memory_order_release);
}

static void *am_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned char buf[2048];
    for (int i = 0; i < count; i++)
        for (int p = 0; p < np; p++) {
            int dest = (p + me + t) % np; /* the threads start on different ranks */
            uint64_t a[3] = {K_SHORT, (uint64_t)t, (uint64_t)i};
            CHECK_RC(shoal_am_request_short(dest, H_REQ, 0, 3, a), SHOAL_OK);
            a[0] = K_MEDIUM;
            size_t n = payload_len(t, i);
            fill(buf, n, me, t, i);
            CHECK_RC(shoal_am_request_medium(dest, H_REQ, 0, buf, n, 3, a), SHOAL_OK);
            a[0] = K_LONG;
            n = long_len(t, i);
            fill(buf, n, me, t, i);
            CHECK_RC(shoal_am_request_long(dest, H_REQ, 0, buf, n, seg, slot_off(0, me, t, i), 3, a), SHOAL_OK);
        }
    uint64_t want = (uint64_t)KINDS * (uint64_t)count * (uint64_t)np;
    if (t % 2 == 0) { /* a wait that gives the lock back between polls */
        CHECK_RC(shoal_wait_until(&replies[t], want), SHOAL_OK);
    } else { /* polls from several threads at once */
        while (atomic_load_explicit(&replies_seen[t], memory_order_acquire) < want)
            CHECK_RC(shoal_poll(), SHOAL_OK);
    }
    return NULL;
}

static void run_threads(void *(*fn)(void *))
{
    pthread_t th[MAX_THREADS];
    for (int t = 0; t < nthreads; t++)
        CHECK(pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
}

static void test_am(void)
{
    CHECK_RC(shoal_am_register(H_REQ, on_req), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_REP, on_rep), SHOAL_OK);
    CHECK_RC(shoal_seg_create(2 * slot_off(0, np, 0, 0), &seg), SHOAL_OK);
    CHECK_RC(shoal_seg_local(seg, (void **)&seg_base, NULL), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK); /* every handler sees seg_base */
    run_threads(am_thread);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    uint64_t want = (uint64_t)np * (uint64_t)nthreads * (uint64_t)count;
    for (int k = 0; k < KINDS; k++)
        CHECK(atomic_load(&requests_run[k]) == want, "rank %d: %llu requests of kind %d ran, want %llu", me,
              (unsigned long long)atomic_load(&requests_run[k]), k, (unsigned long long)want);
    uint64_t each = (uint64_t)KINDS * (uint64_t)count * (uint64_t)np;
    for (int t = 0; t < nthreads; t++) {
        uint64_t extra = t % 2 == 0 ? replies[t] : atomic_load(&replies_seen[t]) - each;
        CHECK(extra == 0, "rank %d thread %d: %llu replies beyond the count", me, t, (unsigned long long)extra);
    }
    printf("rank %d: %d threads, %llu requests of each kind run, every reply back\n", me, nthreads,
           (unsigned long long)want);
}

/* ---- ring entries written by several threads at once ------------------- */
enum { H_SLOT = 3 };
#define SLOT_MAX_BYTES 700
static uint64_t slot_next[64][2][MAX_THREADS]; /* next number from (rank, wave, thread); handlers only */
static int slot_single = -1;                /* TEST_SINGLE_RANK: this rank is at SINGLE */

/* Rank r's sending threads: its main thread alone at SINGLE. */
static int slot_threads(int r)
{
    return r == slot_single ? 1 : nthreads;
}
static volatile uint64_t slot_received;     /* handlers only, and shoal_wait_until */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* Message (src, t, n)'s argument words: 0 thread, 1 number, 2..14 from
 * the generator, 15 the checksum of the rest and of the payload. */
static void slot_words(int src, int t, uint64_t n, uint64_t w[SHOAL_AM_MAX_ARGS])
{
    uint64_t x = mix(((uint64_t)src << 48) ^ ((uint64_t)t << 40) ^ n);
    w[0] = (uint64_t)t;
    w[1] = n;
    for (int k = 2; k < SHOAL_AM_MAX_ARGS - 1; k++)
        w[k] = x = mix(x + (uint64_t)k);
}

static uint64_t slot_sum(const uint64_t *w, const unsigned char *buf, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < SHOAL_AM_MAX_ARGS - 1; k++)
        h = mix(h ^ w[k]);
    for (size_t k = 0; k < len; k++)
        h = h * 1099511628211ull ^ buf[k];
    return h;
}

/* Even numbers are shorts, odd ones mediums of a length the number sets. */
static size_t slot_len(uint64_t n)
{
    return n % 2 ? (size_t)(mix(n) % (SLOT_MAX_BYTES + 1)) : 0;
}

static void slot_payload(const uint64_t *w, unsigned char *buf, size_t len)
{
    for (size_t k = 0; k < len; k++)
        buf[k] = (unsigned char)(w[2 + k % 13] >> (8 * (k / 13 % 8)));
}

static void on_slot(shoal_token_t tok, void *buf, size_t len, const uint64_t *a, unsigned na)
{
    int src = shoal_token_source(tok);
    CHECK(na == SHOAL_AM_MAX_ARGS, "rank %d: a message from rank %d with %u arguments", me, src, na);
    int t = (int)a[0];
    uint64_t n = a[1];
    CHECK(t >= 0 && t < slot_threads(src), "rank %d: a message from rank %d names thread %d", me, src, t);
    CHECK(a[SHOAL_AM_MAX_ARGS - 1] == slot_sum(a, buf, len),
          "rank %d: message from rank %d thread %d #%llu fails its checksum (mixed or read before written)", me,
          src, t, (unsigned long long)n);
    CHECK(n < 4u * (uint64_t)count, "rank %d: rank %d thread %d sent #%llu, beyond its two waves", me, src, t,
          (unsigned long long)n);
    uint64_t *next = &slot_next[src][n / (2u * (uint64_t)count)][t];
    CHECK(n == *next, "rank %d: rank %d thread %d's #%llu arrived where #%llu was due", me, src, t,
          (unsigned long long)n, (unsigned long long)*next);
    uint64_t w[SHOAL_AM_MAX_ARGS];
    unsigned char want[SLOT_MAX_BYTES];
    slot_words(src, t, n, w);
    slot_payload(w, want, slot_len(n));
    CHECK(len == slot_len(n) && memcmp(a, w, sizeof w - sizeof w[0]) == 0 && (len == 0 || memcmp(buf, want, len) == 0),
          "rank %d: message from rank %d thread %d #%llu has other contents than sent", me, src, t,
          (unsigned long long)n);
    ++*next;
    slot_received++;
}

/* Thread t's messages [from, to) to every rank. */
static void slot_send(int t, uint64_t from, uint64_t to)
{
    unsigned char buf[SLOT_MAX_BYTES];
    uint64_t w[SHOAL_AM_MAX_ARGS];
    for (uint64_t n = from; n < to; n++)
        for (int p = 0; p < np; p++) {
            int dest = (p + me + t) % np;
            size_t len = slot_len(n);
            slot_words(me, t, n, w);
            slot_payload(w, buf, len);
            w[SHOAL_AM_MAX_ARGS - 1] = slot_sum(w, buf, len);
            if (n % 2 == 0)
                CHECK_RC(shoal_am_request_short(dest, H_SLOT, 0, SHOAL_AM_MAX_ARGS, w), SHOAL_OK);
            else
                CHECK_RC(shoal_am_request_medium(dest, H_SLOT, 0, buf, len, SHOAL_AM_MAX_ARGS, w), SHOAL_OK);
        }
}

/* arg: thread + MAX_THREADS * wave; wave w sends its thread's numbers
 * [2w, 2w + 2) * TEST_COUNT */
static void *slot_thread(void *arg)
{
    int t = (int)(intptr_t)arg % MAX_THREADS, wave = (int)(intptr_t)arg / MAX_THREADS;
    slot_send(t, 2 * (uint64_t)count * (uint64_t)wave, 2 * (uint64_t)count * (uint64_t)(wave + 1));
    return NULL;
}

/* TEST_INBOX_LANES=L: every inbox mapped here (/proc/self/maps) is as
 * large as one with L lanes per sender (docs/SHM_QUEUE.md's geometry, with
 * SHOAL_SHM_RING_SLOTS slots per ring, rings too small for the mediums, so
 * two outbox pools of SHOAL_SHM_OUTBOX_BYTES): SHOAL_SHM_LANES took effect. */
static void slot_check_inbox(void)
{
    int lanes = env_int("TEST_INBOX_LANES", -1);
    if (lanes < 0)
        return;
    size_t k = (size_t)np * (2u + (size_t)lanes), slots = (size_t)env_int("SHOAL_SHM_RING_SLOTS", 0);
    size_t rings = (8192 + k * 128 + 4095) / 4096 * 4096 + k * slots * 64;
    size_t want = (rings + 4095) / 4096 * 4096 + 2 * (size_t)env_int("SHOAL_SHM_OUTBOX_BYTES", 0);
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL, "rank %d: cannot read /proc/self/maps", me);
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (!strstr(line, "shoal-inbox") || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        CHECK(hi - lo == want, "rank %d: an inbox of %lu bytes, want %zu (%d lanes per sender)", me, hi - lo, want,
              lanes);
        seen++;
    }
    fclose(f);
    CHECK(seen == np, "rank %d: %d inboxes mapped, want %d", me, seen, np);
}

static void test_slots(void)
{
    slot_check_inbox();
    CHECK(np <= 64, "slots runs on at most 64 ranks");
    CHECK_RC(shoal_am_register(H_SLOT, on_slot), SHOAL_OK);
    for (int r = 0; r < np; r++)
        for (int t = 0; t < MAX_THREADS; t++)
            slot_next[r][1][t] = 2u * (uint64_t)count; /* the second wave's first number */
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    struct shoal_stats before, after;
    CHECK_RC(shoal_stats_get(&before), SHOAL_OK);
    pthread_t th[MAX_THREADS];
    uint64_t want = 0;
    for (int r = 0; r < np; r++)
        want += (uint64_t)slot_threads(r) * 2u * (uint64_t)count;
    /* two waves of threads: the second takes the rings (lanes) the first left */
    for (int wave = 0; wave < 2; wave++) {
        if (me == slot_single)
            slot_thread((void *)(intptr_t)(MAX_THREADS * wave));
        for (int t = 0; t < nthreads && me != slot_single; t++)
            CHECK(pthread_create(&th[t], NULL, slot_thread, (void *)(intptr_t)(t + MAX_THREADS * wave)) == 0,
                  "pthread_create");
        CHECK_RC(shoal_wait_until(&slot_received, want), SHOAL_OK); /* polls while the threads send */
        for (int t = 0; t < nthreads && me != slot_single; t++)
            pthread_join(th[t], NULL);
    }
    CHECK_RC(shoal_stats_get(&after), SHOAL_OK); /* before the barrier, which may send messages of its own */
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK(slot_received == 0, "rank %d: %llu messages ran beyond the %llu per wave sent here", me,
          (unsigned long long)slot_received, (unsigned long long)want); /* the waits took them off */
    for (int r = 0; r < np; r++)
        for (int t = 0; t < slot_threads(r); t++)
            for (int w = 0; w < 2; w++)
                CHECK(slot_next[r][w][t] == 2u * (uint64_t)count * (uint64_t)(w + 1),
                      "rank %d: wave %d's thread %d of rank %d sent up to #%llu", me, w, t, r,
                      (unsigned long long)slot_next[r][w][t]);
    want = (uint64_t)np * (uint64_t)slot_threads(me) * 4u * (uint64_t)count; /* what this rank sent */
    uint64_t sent = after.am_sent[0] - before.am_sent[0], shorts = after.am_class_sent[0] - before.am_class_sent[0];
    CHECK(sent == want && shorts == want / 2,
          "rank %d: shoal_stats_get counts %llu requests sent, %llu of them short; want %llu, %llu", me,
          (unsigned long long)sent, (unsigned long long)shorts, (unsigned long long)want,
          (unsigned long long)(want / 2));
    printf("rank %d: %d threads sent %llu messages; each that arrived was whole and in its thread's order\n", me,
           slot_threads(me), (unsigned long long)want);
}

/* ---- one-sided commands ------------------------------------------------- */
/* ---- threads that outlive shoal_finalize --------------------------------
 * One process alone (a job of one rank, which may init again), sending to
 * itself.  Cycle 1 is wave 0 of on_slot's numbering, cycle 2 wave 1: each
 * thread's messages in a cycle are checked whole and in order. */
enum { RE_OLD = 4, RE_NEW = 4, RE_LATE = 2, RE_LAST = 4 }; /* threads 0-3, 4-7, 8-9, 10-13 */
static _Atomic int re_holding, re_go_old, re_go_new, re_old_done;

static void re_await(_Atomic int *flag, int value)
{
    while (atomic_load_explicit(flag, memory_order_acquire) < value)
        usleep(100); /* bounded by the test's alarm */
}

/* Threads 0-3: live through both cycles; 0 and 1 send in both, 2 and 3
 * exit during the second, while the new threads hold every lane. */
static void *re_old(void *arg)
{
    int t = (int)(intptr_t)arg;
    slot_send(t, 0, 2 * (uint64_t)count);
    atomic_fetch_add_explicit(&re_old_done, 1, memory_order_release); /* out of shoal before finalize */
    re_await(&re_go_old, 1);
    if (t < 2)
        slot_send(t, 2 * (uint64_t)count, 4 * (uint64_t)count);
    return NULL;
}

/* Threads 4-7: take their lanes with a first message, hold them while the
 * old threads send and exit, then send the rest. */
static void *re_new(void *arg)
{
    int t = (int)(intptr_t)arg;
    slot_send(t, 2 * (uint64_t)count, 2 * (uint64_t)count + 1);
    atomic_fetch_add_explicit(&re_holding, 1, memory_order_release);
    re_await(&re_go_new, 1);
    slot_send(t, 2 * (uint64_t)count + 1, 4 * (uint64_t)count);
    return NULL;
}

/* The main thread polls until `msgs` more messages ran here; shoal
 * counted `sent` requests sent since `before`. */
static void re_expect(uint64_t msgs, uint64_t sent, const struct shoal_stats *before, const char *when)
{
    CHECK_RC(shoal_wait_until(&slot_received, msgs), SHOAL_OK);
    struct shoal_stats now;
    CHECK_RC(shoal_stats_get(&now), SHOAL_OK);
    CHECK(now.am_sent[0] - before->am_sent[0] == sent, "%s: shoal_stats_get counts %llu requests sent, want %llu",
          when, (unsigned long long)(now.am_sent[0] - before->am_sent[0]), (unsigned long long)sent);
}

static void re_init(void)
{
    int got;
    CHECK_RC(shoal_am_register(H_SLOT, on_slot), SHOAL_OK);
    CHECK_RC(shoal_init_thread(NULL, NULL, SHOAL_THREAD_MULTIPLE, &got), SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    CHECK(np == 1, "reinit runs as one process alone, not under a launcher");
}

static void re_round(void)
{
    nthreads = RE_OLD + RE_NEW + RE_LATE + RE_LAST;
    memset(slot_next, 0, sizeof slot_next);
    for (int t = 0; t < MAX_THREADS; t++)
        slot_next[0][1][t] = 2u * (uint64_t)count;
    atomic_store(&re_holding, 0);
    atomic_store(&re_go_old, 0);
    atomic_store(&re_go_new, 0);
    atomic_store(&re_old_done, 0);
    uint64_t each = 2u * (uint64_t)count;
    pthread_t old[RE_OLD], fresh[RE_NEW], late[RE_LATE], last[RE_LAST];
    struct shoal_stats s0;
    re_init();
    CHECK_RC(shoal_stats_get(&s0), SHOAL_OK);
    for (int t = 0; t < RE_OLD; t++)
        CHECK(pthread_create(&old[t], NULL, re_old, (void *)(intptr_t)t) == 0, "pthread_create");
    re_expect(RE_OLD * each, RE_OLD * each, &s0, "cycle 1");
    re_await(&re_old_done, RE_OLD);
    CHECK_RC(shoal_finalize(), SHOAL_OK);

    re_init(); /* the old threads still hold the lanes they took in cycle 1 */
    CHECK_RC(shoal_stats_get(&s0), SHOAL_OK);
    for (int t = 0; t < RE_NEW; t++)
        CHECK(pthread_create(&fresh[t], NULL, re_new, (void *)(intptr_t)(RE_OLD + t)) == 0, "pthread_create");
    re_await(&re_holding, RE_NEW);
    atomic_store_explicit(&re_go_old, 1, memory_order_release);
    for (int t = 2; t < RE_OLD; t++) /* their exits must not free lanes of this cycle */
        pthread_join(old[t], NULL);
    for (int t = 0; t < RE_LATE; t++)
        CHECK(pthread_create(&late[t], NULL, slot_thread,
                             (void *)(intptr_t)(RE_OLD + RE_NEW + t + MAX_THREADS)) == 0, "pthread_create");
    atomic_store_explicit(&re_go_new, 1, memory_order_release);
    re_expect((2 + RE_NEW + RE_LATE) * each, (2 + RE_NEW + RE_LATE) * each, &s0, "cycle 2");
    for (int t = 0; t < 2; t++)
        pthread_join(old[t], NULL);
    for (int t = 0; t < RE_NEW; t++)
        pthread_join(fresh[t], NULL);
    for (int t = 0; t < RE_LATE; t++)
        pthread_join(late[t], NULL);
    /* the lanes the exited threads left are taken again */
    for (int t = 0; t < RE_LAST; t++)
        CHECK(pthread_create(&last[t], NULL, slot_thread,
                             (void *)(intptr_t)(RE_OLD + RE_NEW + RE_LATE + t + MAX_THREADS)) == 0,
              "pthread_create");
    for (int t = 0; t < RE_LAST; t++)
        pthread_join(last[t], NULL);
    re_expect(RE_LAST * each, (2 + RE_NEW + RE_LATE + RE_LAST) * each, &s0, "cycle 2's last wave");
    for (int t = 0; t < nthreads; t++) {
        uint64_t want1 = t < RE_OLD ? each : 0, want2 = t < 2 || t >= RE_OLD ? 2 * each : each;
        CHECK(slot_next[0][0][t] == want1 && slot_next[0][1][t] == want2,
              "thread %d sent up to #%llu in cycle 1 and #%llu in cycle 2, want %llu and %llu", t,
              (unsigned long long)slot_next[0][0][t], (unsigned long long)slot_next[0][1][t],
              (unsigned long long)want1, (unsigned long long)want2);
    }
    CHECK_RC(shoal_finalize(), SHOAL_OK);
}

/* TEST_ROUNDS rounds: two threads sharing a lane go wrong only when their
 * sends overlap, which one round may not catch. */
static void test_reinit(void)
{
    int rounds = env_int("TEST_ROUNDS", 5);
    for (int r = 0; r < rounds; r++)
        re_round();
    printf("%d rounds of %d threads across two cycles of init and finalize: every message whole and in its "
           "thread's order\n", rounds, nthreads);
}

static shoal_rmem_t *rmem;

/* Segment layout: word 0 the fetch-add counter, then a word per (sender,
 * thread, number). */
static size_t word_off(int src, int t, int i)
{
    return 8 * (1 + ((size_t)src * (size_t)nthreads + (size_t)t) * (size_t)count + (size_t)i);
}

static uint64_t word_value(int src, int t, int i)
{
    return (uint64_t)src << 48 | (uint64_t)t << 32 | (uint64_t)i;
}

static void *rma_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned colour = 1 + (unsigned)t % (SHOAL_COLORS - 1);
    for (int p = 0; p < np; p++) {
        int dest = (p + me + t) % np;
        for (int i = 0; i < count; i++) {
            uint64_t v = word_value(me, t, i);
            shoal_handle_t h;
            switch (i % 3) {
            case 0:
                CHECK_RC(shoal_put(rmem[dest], word_off(me, t, i), &v, 8, 0, &h), SHOAL_OK);
                CHECK_RC(shoal_wait(&h), SHOAL_OK);
                break;
            case 1:
                CHECK_RC(shoal_put(rmem[dest], word_off(me, t, i), &v, 8, SHOAL_COLOR(colour), NULL), SHOAL_OK);
                break;
            default:
                CHECK_RC(shoal_put(rmem[dest], word_off(me, t, i), &v, 8, SHOAL_STATUS_FAILURES, NULL), SHOAL_OK);
            }
            int64_t add = 1, old = -1;
            CHECK_RC(shoal_fetch_op(rmem[dest], 0, SHOAL_AOP_ADD, SHOAL_INT64, &add, &old, 1, 0, &h), SHOAL_OK);
            CHECK_RC(shoal_wait(&h), SHOAL_OK);
            CHECK(old >= 0, "rank %d thread %d: fetch-add returned %lld", me, t, (long long)old);
        }
        CHECK_RC(shoal_color_wait(colour), SHOAL_OK);
        CHECK_RC(shoal_fence(), SHOAL_OK);
        for (int i = 0; i < count; i++) {
            uint64_t got = 0;
            CHECK_RC(shoal_get(&got, rmem[dest], word_off(me, t, i), 8, 0, NULL), SHOAL_OK);
            CHECK(got == word_value(me, t, i), "rank %d thread %d: word %d at rank %d reads %llx, want %llx", me, t,
                  i, dest, (unsigned long long)got, (unsigned long long)word_value(me, t, i));
        }
    }
    return NULL;
}

static void test_rma(void)
{
    shoal_mem_t mem;
    CHECK_RC(shoal_mem_create(word_off(np, 0, 0), SHOAL_MEM_ALL, &mem), SHOAL_OK);
    rmem = calloc((size_t)np, sizeof *rmem);
    CHECK(rmem != NULL, "calloc");
    CHECK_RC(shoal_mem_exchange(mem, rmem), SHOAL_OK);
    run_threads(rma_thread);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    uint64_t *base;
    CHECK_RC(shoal_mem_local(mem, (void **)&base, NULL), SHOAL_OK);
    uint64_t want = (uint64_t)np * (uint64_t)nthreads * (uint64_t)count;
    CHECK(base[0] == want, "rank %d: the counter reads %llu, want %llu", me, (unsigned long long)base[0],
          (unsigned long long)want);
    printf("rank %d: %d threads, %llu puts and fetch-adds landed, gets read them back\n", me, nthreads,
           (unsigned long long)want);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    free(rmem);
}

/* ---- CRL ---------------------------------------------------------------- */
static rid_t rids[MAX_THREADS];
static unsigned region_words; /* TEST_REGION_BYTES / 8: large regions travel as large mediums */

static void *crl_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t *r = rgn_map(rids[t]);
    for (int i = 0; i < count; i++) {
        rgn_start_write(r);
        /* the region's last word came with its first: the whole copy travelled */
        CHECK(r[region_words - 1] == r[0], "rank %d thread %d: region's last word %llu, first %llu", me, t,
              (unsigned long long)r[region_words - 1], (unsigned long long)r[0]);
        r[0]++;
        r[1 + me] += (uint64_t)t + 1;
        r[region_words - 1] = r[0];
        rgn_end_write(r);
    }
    rgn_unmap(r);
    return NULL;
}

static void test_crl(void)
{
    crl_init();
    region_words = (unsigned)env_int("TEST_REGION_BYTES", 0) / 8;
    if (region_words < (unsigned)np + 2)
        region_words = (unsigned)np + 2;
    if (me == 0)
        for (int t = 0; t < nthreads; t++)
            rids[t] = rgn_create(8 * region_words);
    if (me == 0)
        rgn_bcast_send((int)sizeof rids, rids);
    else
        rgn_bcast_recv((int)sizeof rids, rids);
    run_threads(crl_thread);
    rgn_barrier();
    if (me == 0)
        for (int t = 0; t < nthreads; t++) {
            uint64_t *r = rgn_map(rids[t]);
            rgn_start_read(r);
            CHECK(r[0] == (uint64_t)np * (uint64_t)count, "region %d counts %llu writes, want %llu", t,
                  (unsigned long long)r[0], (unsigned long long)np * (uint64_t)count);
            for (int p = 0; p < np; p++)
                CHECK(r[1 + p] == (uint64_t)(t + 1) * (uint64_t)count, "region %d: rank %d's sum %llu", t, p,
                      (unsigned long long)r[1 + p]);
            rgn_end_read(r);
            rgn_unmap(r);
        }
    if (me == 0)
        printf("rank 0: %d regions, %d ranks x %d writes each, exact\n", nthreads, np, count);
    rgn_barrier();
    crl_exit();
}

/* ---- a wait gives the lock back ----------------------------------------- */
enum { H_GO = 3, H_ANSWER };
static volatile uint64_t go, answered;

static void on_go(shoal_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok, (void)buf, (void)n, (void)a, (void)na;
    go++;
}

static void on_answer(shoal_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok, (void)buf, (void)n, (void)a, (void)na;
    answered++;
}

/* Rank 0's second thread asks rank 1 for the answer its first thread
 * waits for, once the first is inside its wait: a wait that kept the lock
 * would keep the sender out for ever (the watchdog ends the job). */
static void *asker(void *arg)
{
    (void)arg;
    usleep(100000);
    CHECK_RC(shoal_am_request_short(1, H_GO, 0, 0, NULL), SHOAL_OK);
    return NULL;
}

static void test_handoff(void)
{
    CHECK(np == 2, "handoff runs on 2 ranks");
    CHECK_RC(shoal_am_register(H_GO, on_go), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_ANSWER, on_answer), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, asker, NULL) == 0, "pthread_create");
        CHECK_RC(shoal_wait_until(&answered, 1), SHOAL_OK);
        pthread_join(th, NULL);
        printf("rank 0: the wait let the other thread send the request it waited on\n");
    } else {
        CHECK_RC(shoal_wait_until(&go, 1), SHOAL_OK);
        CHECK_RC(shoal_am_request_short(0, H_ANSWER, 0, 0, NULL), SHOAL_OK);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

/* ---- the lower levels misused ------------------------------------------- */
static volatile uint64_t never;

static void *intruder(void *arg)
{
    (void)arg;
    usleep(200000); /* the main thread is inside shoal_wait_until by now */
    CHECK_RC(shoal_poll(), SHOAL_OK);
    fprintf(stderr, "rank %d: a second thread called shoal and was not stopped\n", me);
    exit(1);
}

static void test_misuse(void)
{
    pthread_t th;
    if (me == 0)
        CHECK(pthread_create(&th, NULL, intruder, NULL) == 0, "pthread_create");
    shoal_wait_until(&never, 1); /* never returns: the intruder ends the job */
}

/* Rank 1 asks for 2 lanes where the others have the default 4: every rank
 * at MULTIPLE refuses to start (its threads would write past a peer's
 * lanes, or leave some unread). */
static void test_lanes_differ(void)
{
    int rank = env_int("SHOAL_RANK", -1), got;
    if (rank == 1)
        CHECK(setenv("SHOAL_SHM_LANES", "2", 1) == 0, "setenv");
    CHECK_RC(shoal_init_thread(NULL, NULL, SHOAL_THREAD_MULTIPLE, &got), SHOAL_EBOOT);
    printf("rank %d: shoal_init refused the other lane count\n", rank);
}

static void test_provided(int level)
{
    int got = -1;
    CHECK_RC(shoal_query_thread(&got), SHOAL_ENOTINIT);
    CHECK_RC(shoal_init_thread(NULL, NULL, SHOAL_THREAD_MULTIPLE + 1, &got), SHOAL_EINVAL);
    CHECK_RC(shoal_init_thread(NULL, NULL, -1, &got), SHOAL_EINVAL);
    CHECK_RC(shoal_init_thread(NULL, NULL, level, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_init_thread(NULL, NULL, level, &got), SHOAL_OK);
    CHECK(got == level, "provided %d, required %d", got, level);
    got = -1;
    CHECK_RC(shoal_query_thread(&got), SHOAL_OK);
    CHECK(got == level, "shoal_query_thread says %d, granted %d", got, level);
    CHECK_RC(shoal_query_thread(NULL), SHOAL_EINVAL);
    printf("rank %d: level %d granted and reported\n", shoal_rank(), level);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_levels provided:LEVEL|am|rma|crl|slots|reinit|lanes_differ|handoff|funneled|serialized");
    signal(SIGALRM, on_alarm);
    alarm(TEST_LIMIT_S);
    nthreads = env_int("TEST_THREADS", 3);
    count = env_int("TEST_COUNT", 300);
    CHECK(nthreads >= 1 && nthreads <= MAX_THREADS && count >= 1, "TEST_THREADS 1..%d, TEST_COUNT >= 1",
          MAX_THREADS);
    const char *c = argv[1];
    if (strcmp(c, "reinit") == 0) {
        test_reinit();
        return 0;
    }
    if (strcmp(c, "lanes_differ") == 0) {
        test_lanes_differ();
        return 0;
    }
    if (strncmp(c, "provided:", 9) == 0) {
        test_provided(atoi(c + 9));
        return shoal_finalize() == SHOAL_OK ? 0 : 1;
    }
    int want = strcmp(c, "funneled") == 0     ? SHOAL_THREAD_FUNNELED
               : strcmp(c, "serialized") == 0 ? SHOAL_THREAD_SERIALIZED
                                              : SHOAL_THREAD_MULTIPLE;
    if (strcmp(c, "slots") == 0 && getenv("TEST_SINGLE_RANK")) { /* a job of mixed levels */
        slot_single = env_int("TEST_SINGLE_RANK", -1);
        if (slot_single == env_int("SHOAL_RANK", -1))
            want = SHOAL_THREAD_SINGLE;
    }
    int got;
    CHECK_RC(shoal_init_thread(NULL, NULL, want, &got), SHOAL_OK);
    CHECK(got == want, "provided %d, required %d", got, want);
    me = shoal_rank();
    np = shoal_size();
    if (strcmp(c, "am") == 0)
        test_am();
    else if (strcmp(c, "rma") == 0)
        test_rma();
    else if (strcmp(c, "crl") == 0)
        test_crl();
    else if (strcmp(c, "handoff") == 0)
        test_handoff();
    else if (strcmp(c, "slots") == 0)
        test_slots();
    else if (strcmp(c, "funneled") == 0 || strcmp(c, "serialized") == 0)
        test_misuse();
    else
        CHECK(0, "unknown case %s", c);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    return 0;
}
