/* Mediums that do not fit their ring go through the sender's outbox
 * (docs/SHM_QUEUE.md, "The outbox").  Modes:
 *   limit         shoal_am_max_medium() >= 64 KiB whatever the ranks per
 *                 host, and 64 KiB requests and replies round a ring of
 *                 ranks with their contents checked
 *   stream        rank 0 streams mediums of mixed sizes to every other rank,
 *                 which poll at different rates: the outbox wraps and frees
 *                 out of order; every message whole, in order, counted
 *   backpressure  rank 1 does not poll: rank 0's SHOAL_IMMEDIATE mediums get
 *                 SHOAL_EAGAIN exactly when the outbox is full (a short still
 *                 fits the ring), and blocking ones arrive once rank 1 polls
 *   replies       both ranks flood each other with requests whose handlers
 *                 reply with mediums: with one pool for both classes the
 *                 replies would wait for space the requests hold
 *   threads       SHOAL_THREAD_MULTIPLE: TEST_THREADS threads per rank send
 *                 mediums to every other rank at once, counted exactly
 * Every wait has a deadline that fails with a message. */
#include <shoal.h>
#include "../common/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEADLINE_S 60.0
#define H_REQ 1
#define H_REP 2
#define H_READY 3
#define H_FLAG 4
#define H_SHORT 5

static int me, np;
static size_t limit;
static _Atomic uint64_t got_req, got_rep, got_short, ready;
static uint64_t *next_seq; /* [np * threads]: next sequence expected from (src, thread) */
static unsigned nthreads = 1;

static unsigned char pattern(uint64_t seed, size_t i)
{
    return (unsigned char)(seed * 2654435761u + i * 131u + (i >> 8));
}

static void fill(unsigned char *buf, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(seed, i);
}

static void check_payload(const unsigned char *buf, size_t n, uint64_t seed, const char *what, int src)
{
    for (size_t i = 0; i < n; i++)
        CHECK(buf[i] == pattern(seed, i), "rank %d: %s of %zu bytes from rank %d (seed %llu): byte %zu is %u, not %u",
              me, what, n, src, (unsigned long long)seed, i, buf[i], pattern(seed, i));
}

/* A request's size for sequence k, from 1 byte to the limit, both inline
 * in the ring and via the outbox. */
static size_t mixed_size(uint64_t k)
{
    return 1 + (size_t)((k * 7919u) % limit);
}

static void wait_for(_Atomic uint64_t *c, uint64_t want, const char *what)
{
    double end = test_now() + DEADLINE_S;
    while (atomic_load(c) < want) {
        CHECK(test_now() < end, "rank %d: %llu of %llu %s after %.0f s", me, (unsigned long long)atomic_load(c),
              (unsigned long long)want, what, DEADLINE_S);
        shoal_poll();
    }
    CHECK(atomic_load(c) == want, "rank %d: %llu %s, expected %llu", me, (unsigned long long)atomic_load(c), what,
          (unsigned long long)want);
}

/* args: seed, thread, sequence; replies (mode limit, replies) with a
 * medium of the same size and seed + 1. */
static int reply_to_requests;
static void on_req(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    int src = shoal_token_source(t);
    CHECK(na == 3, "rank %d: %u arguments", me, na);
    check_payload(buf, n, a[0], "request", src);
    uint64_t *want = &next_seq[(size_t)src * nthreads + a[1]];
    CHECK(a[2] == *want, "rank %d: request %llu of thread %llu from rank %d, expected %llu", me,
          (unsigned long long)a[2], (unsigned long long)a[1], src, (unsigned long long)*want);
    ++*want;
    atomic_fetch_add(&got_req, 1);
    if (!reply_to_requests)
        return;
    unsigned char *out = malloc(n ? n : 1);
    fill(out, n, a[0] + 1);
    uint64_t args[3] = {a[0] + 1, a[1], a[2]};
    CHECK_RC(shoal_am_reply_medium(t, H_REP, 0, out, n, 3, args), SHOAL_OK);
    free(out);
}

static void on_rep(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    CHECK(na == 3, "rank %d: %u arguments", me, na);
    check_payload(buf, n, a[0], "reply", shoal_token_source(t));
    atomic_fetch_add(&got_rep, 1);
}

static void on_ready(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
    atomic_store(&ready, 1);
}

static void on_ignore(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
}

static void on_short(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
    atomic_fetch_add(&got_short, 1);
}

static int send_req(int dest, unsigned flags, size_t n, uint64_t seed, uint64_t thread, uint64_t seq)
{
    unsigned char *buf = malloc(n ? n : 1);
    fill(buf, n, seed);
    uint64_t args[3] = {seed, thread, seq};
    int rc = shoal_am_request_medium(dest, H_REQ, flags, buf, n, 3, args);
    free(buf);
    return rc;
}

static void mode_limit(void)
{
    CHECK(limit >= 65536, "rank %d of %d: shoal_am_max_medium() is %zu", me, np, limit);
    enum { REQS = 3 };
    for (uint64_t k = 0; k < REQS; k++)
        CHECK_RC(send_req((me + 1) % np, 0, 65536, (uint64_t)me * 100 + k, 0, k), SHOAL_OK);
    wait_for(&got_req, REQS, "requests");
    wait_for(&got_rep, REQS, "replies");
}

static void mode_stream(void)
{
    enum { PER_RECEIVER = 400 };
    if (me == 0) {
        for (uint64_t k = 0; k < PER_RECEIVER; k++)
            for (int r = 1; r < np; r++)
                CHECK_RC(send_req(r, 0, mixed_size(k * (uint64_t)np + (uint64_t)r), k * 1000 + (uint64_t)r, 0, k),
                         SHOAL_OK);
        return;
    }
    /* rank r looks every r * 200 us: rank 0's pool frees out of order */
    double end = test_now() + DEADLINE_S;
    while (atomic_load(&got_req) < PER_RECEIVER) {
        CHECK(test_now() < end, "rank %d: %llu of %d mediums after %.0f s", me,
              (unsigned long long)atomic_load(&got_req), PER_RECEIVER, DEADLINE_S);
        shoal_poll();
        test_nap(200e-6 * me);
    }
    CHECK(atomic_load(&got_req) == PER_RECEIVER, "rank %d: %llu mediums", me, (unsigned long long)atomic_load(&got_req));
}

static void mode_backpressure(void)
{
    enum { CHUNK = 8192, MORE = 20 };
    shoal_seg_t seg;
    CHECK_RC(shoal_seg_create(4096, &seg), SHOAL_OK);
    if (me == 1) {
        volatile uint64_t *flag;
        size_t size;
        CHECK_RC(shoal_seg_local(seg, (void **)&flag, &size), SHOAL_OK);
        CHECK_RC(shoal_am_request_short(0, H_READY, 0, 0, NULL), SHOAL_OK);
        /* no shoal call until rank 0 has filled its outbox */
        double end = test_now() + DEADLINE_S;
        while (*flag == 0)
            CHECK(test_now() < end, "rank 1: no word from rank 0 after %.0f s", DEADLINE_S);
        uint64_t accepted = *flag;
        wait_for(&got_req, accepted + MORE, "mediums");
        wait_for(&got_short, 1, "shorts");
        return;
    }
    wait_for(&ready, 1, "ready words");
    uint64_t k = 0;
    int rc;
    while ((rc = send_req(1, SHOAL_IMMEDIATE, CHUNK, k, 0, k)) == SHOAL_OK)
        k++;
    CHECK(rc == SHOAL_EAGAIN, "rank 0: medium %llu gave %d", (unsigned long long)k, rc);
    size_t pool = (size_t)atoll(getenv("SHOAL_SHM_OUTBOX_BYTES"));
    CHECK(k == pool / CHUNK, "rank 0: %llu %d-byte mediums fit a %zu-byte outbox", (unsigned long long)k, CHUNK, pool);
    /* the ring still has room: it was the outbox that refused */
    CHECK_RC(shoal_am_request_short(1, H_SHORT, SHOAL_IMMEDIATE, 0, NULL), SHOAL_OK);
    uint64_t word = k;
    CHECK_RC(shoal_am_request_long(1, H_FLAG, 0, &word, sizeof word, seg, 0, 0, NULL), SHOAL_OK);
    for (uint64_t i = 0; i < MORE; i++, k++) /* these wait for rank 1 to take the first ones */
        CHECK_RC(send_req(1, 0, CHUNK, k, 0, k), SHOAL_OK);
}

static void mode_replies(void)
{
    enum { REQS = 300 };
    for (uint64_t k = 0; k < REQS; k++)
        CHECK_RC(send_req(1 - me, 0, 8192 + 64 * (k % 16), (uint64_t)me * 10000 + k, 0, k), SHOAL_OK);
    wait_for(&got_req, REQS, "requests");
    wait_for(&got_rep, REQS, "replies");
}

enum { THREAD_COUNT = 200 };

static void *sender(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    for (uint64_t k = 0; k < THREAD_COUNT; k++)
        for (int i = 1; i < np; i++) {
            int dest = (me + i) % np;
            CHECK_RC(send_req(dest, 0, mixed_size(k + t * 31), ((uint64_t)me << 40) + (t << 20) + k, t, k), SHOAL_OK);
        }
    return NULL;
}

static void mode_threads(void)
{
    pthread_t th[16];
    for (unsigned t = 0; t < nthreads; t++)
        CHECK(pthread_create(&th[t], NULL, sender, (void *)(uintptr_t)t) == 0, "pthread_create");
    wait_for(&got_req, (uint64_t)(np - 1) * nthreads * THREAD_COUNT, "mediums");
    for (unsigned t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int threads = !strcmp(mode, "threads");
    if (threads && getenv("TEST_THREADS"))
        nthreads = (unsigned)atoi(getenv("TEST_THREADS"));
    CHECK(nthreads >= 1 && nthreads <= 16, "TEST_THREADS 1-16");
    int provided;
    CHECK_RC(shoal_init_thread(&argc, &argv, threads ? SHOAL_THREAD_MULTIPLE : SHOAL_THREAD_SINGLE, &provided),
             SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    limit = shoal_am_max_medium();
    next_seq = calloc((size_t)np * nthreads, sizeof *next_seq);
    CHECK_RC(shoal_am_register(H_REQ, on_req), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_REP, on_rep), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_READY, on_ready), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_FLAG, on_ignore), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_SHORT, on_short), SHOAL_OK);
    /* before the barrier: a peer's first requests may come while this rank
     * is still in it */
    reply_to_requests = !strcmp(mode, "limit") || !strcmp(mode, "replies");
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (!strcmp(mode, "limit"))
        mode_limit();
    else if (!strcmp(mode, "stream"))
        mode_stream();
    else if (!strcmp(mode, "backpressure"))
        mode_backpressure();
    else if (!strcmp(mode, "replies"))
        mode_replies();
    else if (threads)
        mode_threads();
    else
        CHECK(0, "unknown mode '%s'", mode);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    free(next_seq);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    if (me == 0)
        printf("outbox %s: %d ranks, medium limit %zu\n", mode, np, limit);
    return 0;
}
