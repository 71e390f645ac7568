/* Active-message tests, run through shoalrun: every class in both
 * directions, payload sizes across slot and ring boundaries, handler-rule
 * violations, immediate mode, SHOAL_MORE bursts, API misuse, barrier, and an
 * all-to-all storm that fills rings (deadlock freedom with bounded buffers).
 * Usage: test_am <test>   (see the table in main) */
#include "shoal.h"
#include "../common/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    H_SHORT_REQ = 1, H_SHORT_REP, H_MED_REQ, H_MED_REP, H_LONG_REQ, H_LONG_REP,
    H_RULES_REQ, H_RULES_REP, H_COUNT, H_STORM_REQ, H_STORM_REP, H_IN_ORDER,
    H_DEFER_KICK, H_DEFER_FAN, H_DEFER_ACK, H_DEFER_FLOOD, H_NOP,
};

static int me, np;
static volatile uint64_t replies, arrivals;
static shoal_seg_t seg;
static char *seg_base;
static size_t seg_bytes;

/* Deterministic payload byte i of a message tagged t. */
static unsigned char pat(uint64_t t, size_t i) { return (unsigned char)(t * 131u + i * 7u + (i >> 8)); }

static void fill(void *buf, size_t n, uint64_t t)
{
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)buf)[i] = pat(t, i);
}

static void expect(const void *buf, size_t n, uint64_t t, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(((const unsigned char *)buf)[i] == pat(t, i), "%s: byte %zu of %zu wrong", what, i, n);
}

static void wait_replies(uint64_t n, const char *what)
{
    double t0 = test_now();
    while (replies < n) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, 30, what);
    }
}

/* ---- short: args echoed back, reply carries source and count ---------- */
static void short_req(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    CHECK(buf == NULL && n == 0, "short request has a payload");
    for (unsigned i = 0; i < na; i++)
        CHECK(a[i] == 1000u * (unsigned)shoal_token_source(t) + i, "arg %u", i);
    uint64_t back[SHOAL_AM_MAX_ARGS];
    for (unsigned i = 0; i < na; i++)
        back[i] = a[i] + 1;
    CHECK_RC(shoal_am_reply_short(t, H_SHORT_REP, 0, na, back), SHOAL_OK);
}

static void short_rep(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n;
    int src = shoal_token_source(t);
    CHECK(src >= 0 && src < np, "bad source %d", src);
    for (unsigned i = 0; i < na; i++)
        CHECK(a[i] == 1000u * (unsigned)me + i + 1, "reply arg %u", i);
    replies++;
}

static void test_short(void)
{
    uint64_t args[SHOAL_AM_MAX_ARGS];
    for (unsigned i = 0; i < SHOAL_AM_MAX_ARGS; i++)
        args[i] = 1000u * (unsigned)me + i;
    uint64_t sent = 0;
    for (int d = 0; d < np; d++)
        for (unsigned na = 0; na <= SHOAL_AM_MAX_ARGS; na++, sent++)
            CHECK_RC(shoal_am_request_short(d, H_SHORT_REQ, 0, na, args), SHOAL_OK);
    wait_replies(sent, "short replies");
}

/* ---- medium: request payload checked, reply echoes a derived payload ---- */
static void med_req(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    CHECK(na == 1 && a[0] == n, "medium length %zu, sender said %llu", n, (unsigned long long)a[0]);
    CHECK(((uintptr_t)buf & 7u) == 0, "medium payload not 8-byte aligned");
    CHECK(n < 256 || ((uintptr_t)buf & 63u) == 0, "medium payload of %zu bytes not 64-byte aligned", n);
    expect(buf, n, n + (uint64_t)shoal_token_source(t), "medium request payload");
    fill(buf, n, n + 1); /* the buffer is the handler's to use */
    CHECK_RC(shoal_am_reply_medium(t, H_MED_REP, 0, buf, n, shoal_args(n)), SHOAL_OK);
}

static void med_rep(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t;
    CHECK(na == 1 && a[0] == n, "medium reply length %zu", n);
    expect(buf, n, n + 1, "medium reply payload");
    replies++;
}

static void test_medium(void)
{
    size_t max = shoal_am_max_medium();
    /* the default geometry promises 64 KiB up to 16 ranks; tiny test rings
     * and the smaller rings of bigger jobs give less */
    CHECK(getenv("SHOAL_SHM_RING_SLOTS") || np > 16 || max >= 65536, "medium limit %zu below 64 KiB", max);
    char *buf = malloc(max);
    CHECK(buf, "oom");
    size_t sizes[64];
    int ns = 0;
    const size_t fixed[] = {0, 1, 7, 8, 40, 47, 48, 49, 55, 56, 57, 63, 64, 65, 120, 121, 1000, 4096};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (fixed[i] < max)
            sizes[ns++] = fixed[i];
    for (size_t s = 8192; s < max; s *= 2)
        sizes[ns++] = s + 3;
    sizes[ns++] = max;
    uint64_t sent = 0;
    for (int rep = 0; rep < 4; rep++) {
        for (int d = 0; d < np; d++) {
            for (int i = 0; i < ns; i++, sent++) {
                fill(buf, sizes[i], sizes[i] + (uint64_t)me);
                CHECK_RC(shoal_am_request_medium(d, H_MED_REQ, 0, buf, sizes[i], shoal_args(sizes[i])), SHOAL_OK);
            }
        }
    }
    wait_replies(sent, "medium replies");
    free(buf);
}

/* ---- long: data lands in the segment at the offset before the handler ---- */
static void long_req(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    CHECK(na == 2, "long nargs");
    size_t off = (size_t)a[0];
    CHECK(buf == seg_base + off, "long buf %p, expected segment base + %zu", buf, off);
    CHECK(n == a[1], "long length %zu, sender said %llu", n, (unsigned long long)a[1]);
    expect(buf, n, n + (uint64_t)shoal_token_source(t), "long request data");
    /* reply into the requester's segment, same offset */
    fill(buf, n, n + 2);
    CHECK_RC(shoal_am_reply_long(t, H_LONG_REP, 0, buf, n, seg, off, shoal_args(off, n)), SHOAL_OK);
}

static void long_rep(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)na;
    CHECK(buf == seg_base + a[0] && n == a[1], "long reply placement");
    expect(buf, n, n + 2, "long reply data");
    replies++;
}

static void test_long(void)
{
    /* Each sender owns a stripe of every target's segment. */
    size_t stripe = seg_bytes / (size_t)np;
    const size_t sizes[] = {0, 1, 8, 100, 4096, 65536, 1 << 20};
    char *buf = malloc(1 << 20);
    CHECK(buf, "oom");
    uint64_t sent = 0;
    for (int d = 0; d < np; d++) {
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            if (n > stripe)
                continue;
            size_t off = (size_t)me * stripe + (stripe - n) / 2;
            fill(buf, n, n + (uint64_t)me);
            CHECK_RC(shoal_am_request_long(d, H_LONG_REQ, 0, buf, n, seg, off, shoal_args(off, n)), SHOAL_OK);
            sent++;
            wait_replies(sent, "long reply"); /* one at a time: the stripe is reused */
        }
    }
    free(buf);
}

/* ---- handler rules -------------------------------------------------- */
static void rules_rep(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    /* a reply handler may not send anything, nor block */
    CHECK_RC(shoal_am_reply_short(t, H_COUNT, 0, shoal_noargs), SHOAL_EHANDLER);
    CHECK_RC(shoal_am_request_short(me, H_COUNT, 0, shoal_noargs), SHOAL_EHANDLER);
    CHECK_RC(shoal_poll(), SHOAL_EHANDLER);
    replies++;
}

static shoal_token_t first_rules_token;

static void rules_req(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n; (void)na;
    if (a[0] == 0) { /* keep this call's token; the second call checks it is dead */
        first_rules_token = t;
        CHECK_RC(shoal_am_reply_short(t, H_RULES_REP, 0, shoal_noargs), SHOAL_OK);
        return;
    }
    CHECK(shoal_token_source(first_rules_token) == -1, "a token from an earlier handler still names a source");
    CHECK_RC(shoal_am_reply_short(first_rules_token, H_RULES_REP, 0, shoal_noargs), SHOAL_EHANDLER);
    /* a request is allowed (deferred if there is no room), a broadcast not */
    CHECK_RC(shoal_am_request_short(shoal_token_source(t), H_NOP, 0, shoal_noargs), SHOAL_OK);
    CHECK_RC(shoal_am_bcast_short(H_NOP, 0, shoal_noargs), SHOAL_EHANDLER);
    CHECK_RC(shoal_poll(), SHOAL_EHANDLER);
    CHECK_RC(shoal_barrier(), SHOAL_EHANDLER);
    uint64_t v = 0;
    CHECK_RC(shoal_wait_until(&v, 1), SHOAL_EHANDLER);
    CHECK_RC(shoal_am_reply_short(t, H_RULES_REP, 0, shoal_noargs), SHOAL_OK);
    CHECK_RC(shoal_am_reply_short(t, H_RULES_REP, 0, shoal_noargs), SHOAL_EHANDLER); /* second reply */
}

/* counts nothing: a message that may arrive during a later test */
static void nop_handler(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
}

static shoal_token_t saved_token;
static void count_handler(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    saved_token = t;
    arrivals++;
}

static void test_rules(void)
{
    int peer = (me + 1) % np;
    CHECK_RC(shoal_am_request_short(peer, H_RULES_REQ, 0, shoal_args(0)), SHOAL_OK);
    wait_replies(1, "first rules reply");
    CHECK_RC(shoal_am_request_short(peer, H_RULES_REQ, 0, shoal_args(1)), SHOAL_OK);
    wait_replies(2, "second rules reply");
    /* a token outside its handler is stale: no reply possible */
    CHECK_RC(shoal_am_request_short(me, H_COUNT, 0, shoal_noargs), SHOAL_OK);
    double t0 = test_now();
    while (arrivals < 1) {
        shoal_poll();
        TEST_DEADLINE(t0, 10, "self message");
    }
    CHECK_RC(shoal_am_reply_short(saved_token, H_COUNT, 0, shoal_noargs), SHOAL_EHANDLER);
    CHECK(shoal_token_source(saved_token) == -1, "stale token still answers");
}

/* ---- API misuse ----------------------------------------------------- */
static void test_misuse(void)
{
    uint64_t args[SHOAL_AM_MAX_ARGS + 1] = {0};
    char small[16] = {0};
    /* locality as the test's launch arranged it: every rank alone with
     * SHOAL_NET_LOCAL=1, else blocks of TEST_RANKS_PER_HOST ranks
     * (shoalrun --hosts), else all on one host */
    const char *net_local = getenv("SHOAL_NET_LOCAL"), *per_host = getenv("TEST_RANKS_PER_HOST");
    int block = net_local && !strcmp(net_local, "1") ? 1 : per_host ? atoi(per_host) : np;
    CHECK(block > 0, "TEST_RANKS_PER_HOST=%s", per_host);
    CHECK_RC(shoal_rank_local(np), SHOAL_ERANK);
    CHECK_RC(shoal_rank_local(-1), SHOAL_ERANK);
    for (int r = 0; r < np; r++)
        CHECK_RC(shoal_rank_local(r), r / block == me / block);
    CHECK_RC(shoal_am_request_short(np, H_COUNT, 0, shoal_noargs), SHOAL_ERANK);
    CHECK_RC(shoal_am_request_short(-1, H_COUNT, 0, shoal_noargs), SHOAL_ERANK);
    CHECK_RC(shoal_am_request_short(0, SHOAL_AM_MAX_HANDLERS, 0, shoal_noargs), SHOAL_EINVAL);
    CHECK_RC(shoal_am_request_short(0, 200, 0, shoal_noargs), SHOAL_ENOHANDLER);
    CHECK_RC(shoal_am_request_short(0, H_COUNT, 0, SHOAL_AM_MAX_ARGS + 1, args), SHOAL_ETOOBIG);
    CHECK_RC(shoal_am_request_short(0, H_COUNT, 0, 2, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_am_request_short(0, H_COUNT, 0x80, shoal_noargs), SHOAL_EINVAL);
    CHECK_RC(shoal_am_request_medium(0, H_COUNT, 0, small, shoal_am_max_medium() + 1, shoal_noargs),
             SHOAL_ETOOBIG);
    CHECK_RC(shoal_am_request_medium(0, H_COUNT, 0, NULL, 8, shoal_noargs), SHOAL_EINVAL);
    CHECK_RC(shoal_am_request_long(0, H_COUNT, 0, small, 16, seg, seg_bytes - 8, shoal_noargs), SHOAL_ERANGE);
    CHECK_RC(shoal_am_request_long(0, H_COUNT, 0, small, 16, seg, (size_t)-4, shoal_noargs), SHOAL_ERANGE);
    CHECK_RC(shoal_am_request_long(0, H_COUNT, 0, small, 16, 63, 0, shoal_noargs), SHOAL_ESEGMENT);
    CHECK_RC(shoal_am_request_long(0, H_COUNT, 0, small, 16, -1, 0, shoal_noargs), SHOAL_ESEGMENT);
    CHECK_RC(shoal_am_register(SHOAL_AM_MAX_HANDLERS, count_handler), SHOAL_EINVAL);
    CHECK_RC(shoal_am_register(5, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_init(NULL, NULL), SHOAL_EINIT);
    CHECK_RC(shoal_seg_local(42, NULL, NULL), SHOAL_ESEGMENT);
    CHECK_RC(shoal_seg_size(seg, np, &seg_bytes), SHOAL_ERANK);
    CHECK_RC(shoal_seg_create(0, &seg), SHOAL_EINVAL);
    CHECK_RC(shoal_stats_get(NULL), SHOAL_EINVAL);
    CHECK(shoal_token_source(NULL) == -1, "NULL token has a source");
    CHECK(strstr(shoal_strerror(SHOAL_EAGAIN), "SHOAL_EAGAIN") != NULL, "strerror names codes");
}

/* ---- immediate mode: a full ring gives EAGAIN, then everything arrives ---- */
static void test_immediate(void)
{
    CHECK(np >= 2, "needs 2 ranks");
    if (me == 0) {
        uint64_t sent = 0;
        int rc;
        double t0 = test_now();
        while ((rc = shoal_am_request_short(1, H_COUNT, SHOAL_IMMEDIATE, shoal_args(sent))) == SHOAL_OK) {
            sent++;
            TEST_DEADLINE(t0, 10, "a full ring");
        }
        CHECK_RC(rc, SHOAL_EAGAIN);
        CHECK(sent > 0, "nothing fit an empty ring");
        /* tell rank 1 how many to expect, through the reply-free path */
        CHECK_RC(shoal_am_request_short(1, H_COUNT, 0, shoal_args(sent)), SHOAL_OK);
        CHECK_RC(shoal_barrier(), SHOAL_OK);
    } else if (me == 1) {
        /* stay deaf until rank 0 has filled the ring */
        usleep(200000);
        CHECK_RC(shoal_barrier(), SHOAL_OK);
        CHECK(arrivals > 1, "rank 1 received %llu", (unsigned long long)arrivals);
    } else {
        CHECK_RC(shoal_barrier(), SHOAL_OK);
    }
}

/* ---- more: SHOAL_MORE bursts arrive whole and in order, and over the
 * network leave in batches ------------------------------------------------ */
static volatile uint64_t in_order;
static void in_order_handler(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)na;
    CHECK(a[0] == in_order, "message %llu arrived when %llu was due", (unsigned long long)a[0],
          (unsigned long long)in_order);
    in_order++;
}

static void wait_in_order(uint64_t n, double limit, const char *what)
{
    double t0 = test_now();
    while (in_order < n) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, limit, what);
    }
}

/* Sends n requests to rank 1, with SHOAL_MORE on all but the last when
 * `more`; the batches the transport used to send them. */
static uint64_t burst(uint64_t first, uint64_t n, int more)
{
    struct shoal_stats a, b;
    CHECK_RC(shoal_stats_get(&a), SHOAL_OK);
    for (uint64_t i = first; i < first + n; i++)
        CHECK_RC(shoal_am_request_short(1, H_IN_ORDER, more && i + 1 < first + n ? SHOAL_MORE : 0, shoal_args(i)),
                 SHOAL_OK);
    CHECK_RC(shoal_stats_get(&b), SHOAL_OK);
    return b.net_send_batches - a.net_send_batches;
}

static void test_more(void)
{
    enum { N = 200 };
    CHECK(np >= 2, "needs 2 ranks");
    CHECK_RC(shoal_am_request_short(1, H_IN_ORDER, 0x100, shoal_noargs), SHOAL_EINVAL);
    in_order = 0;
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0) {
        uint64_t plain = burst(0, N, 0), batched = burst(N, N, 1);
        if (!shoal_rank_local(1)) { /* SHOAL_FAULTS may hold a plain request back for a later batch */
            CHECK(plain >= N * 3 / 4, "%d plain requests left in %llu batches", N, (unsigned long long)plain);
            CHECK(batched <= N / 4, "%d requests with SHOAL_MORE left in %llu batches", N,
                  (unsigned long long)batched);
        }
        /* one left queued: the progress thread sends it while this rank sleeps */
        CHECK_RC(shoal_am_request_short(1, H_IN_ORDER, SHOAL_MORE, shoal_args(2 * N)), SHOAL_OK);
        usleep(1000000);
    } else if (me == 1) {
        wait_in_order(2 * N, 30, "the two bursts");
        double t0 = test_now();
        wait_in_order(2 * N + 1, 30, "the request left queued");
        CHECK(test_now() - t0 < 0.5, "a request left queued took %.3f s", test_now() - t0);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

/* ---- storm: everyone sends to everyone, rings fill, nothing deadlocks --- */
static uint64_t storm_expected;
/* its own count: on shm the barrier test's last H_COUNT messages may still
 * be handled after the reset that starts this test */
static volatile uint64_t storm_arrivals;
static void storm_req(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)na;
    expect(buf, n, a[0], "storm payload");
    storm_arrivals++;
    CHECK_RC(shoal_am_reply_medium(t, H_STORM_REP, 0, buf, n, shoal_args(a[0])), SHOAL_OK);
}

static void storm_rep(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)na;
    expect(buf, n, a[0], "storm reply");
    replies++;
}

static void test_storm(int rounds)
{
    size_t max = shoal_am_max_medium();
    char *buf = malloc(max);
    CHECK(buf, "oom");
    uint64_t sent = 0;
    for (int r = 0; r < rounds; r++) {
        for (int k = 1; k <= np; k++) {
            int d = (me + k) % np;
            size_t n = (size_t)((r * 7919 + k * 104729) % (int)(max < 20000 ? max : 20000));
            uint64_t tag = (uint64_t)r * 1000 + (uint64_t)k;
            fill(buf, n, tag);
            CHECK_RC(shoal_am_request_medium(d, H_STORM_REQ, 0, buf, n, shoal_args(tag)), SHOAL_OK);
            sent++;
        }
    }
    storm_expected = sent;
    wait_replies(sent, "storm replies");
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK(storm_arrivals == sent, "rank %d handled %llu requests, expected %llu", me, (unsigned long long)storm_arrivals,
          (unsigned long long)sent);
    free(buf);
}

/* ---- barrier: values written before a barrier are visible after it ----
 * On shared memory a long message's data is in place when its send
 * returns; over the network only when its handler runs, so there every
 * rank first waits for its np arrivals. */
static void test_barrier(int iters)
{
    uint64_t *slots = (uint64_t *)seg_base;
    int all_local = 1;
    for (int r = 0; r < np; r++)
        all_local &= shoal_rank_local(r) == 1;
    for (int it = 1; it <= iters; it++) {
        uint64_t v = (uint64_t)it;
        for (int d = 0; d < np; d++)
            CHECK_RC(shoal_am_request_long(d, H_COUNT, 0, &v, 8, seg, (size_t)me * 8, shoal_noargs), SHOAL_OK);
        double t0 = test_now();
        while (!all_local && arrivals < (uint64_t)it * (uint64_t)np) {
            shoal_poll();
            TEST_DEADLINE(t0, 20, "this round's long messages");
        }
        CHECK_RC(shoal_barrier(), SHOAL_OK);
        for (int r = 0; r < np; r++)
            CHECK(slots[r] == v, "after barrier %d rank %d's value is %llu", it, r, (unsigned long long)slots[r]);
        CHECK_RC(shoal_barrier(), SHOAL_OK);
    }
}

/* ---- defer: handlers send more requests than the rings hold ----------
 * Every rank kicks every other; the kick's handler sends DEFER_N medium
 * requests back, each of whose handlers sends one request back again:
 * handlers on both sides of a pair flood each other, which a handler
 * waiting for room would nest or deadlock on.  Every request must run
 * once, in order per pair (its sequence number). */
#define DEFER_N 3000u
#define DEFER_BYTES 1500u
static uint64_t *fan_next, *ack_next; /* [np]: the sequence number expected next from each rank */
static volatile uint64_t defer_fans, defer_acks;

static void defer_kick(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n; (void)a; (void)na;
    int src = shoal_token_source(t);
    unsigned char msg[DEFER_BYTES];
    for (uint64_t i = 0; i < DEFER_N; i++) {
        fill(msg, sizeof msg, i + (uint64_t)me);
        CHECK_RC(shoal_am_request_medium(src, H_DEFER_FAN, 0, msg, sizeof msg, shoal_args(i)), SHOAL_OK);
    }
}

static void defer_fan(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    int src = shoal_token_source(t);
    CHECK(na == 1 && n == DEFER_BYTES, "fan from %d: %u args, %zu bytes", src, na, n);
    CHECK(a[0] == fan_next[src], "fan from rank %d out of order: %llu, expected %llu", src,
          (unsigned long long)a[0], (unsigned long long)fan_next[src]);
    expect(buf, n, a[0] + (uint64_t)src, "fan payload");
    fan_next[src]++;
    defer_fans++;
    CHECK_RC(shoal_am_request_short(src, H_DEFER_ACK, 0, shoal_args(a[0])), SHOAL_OK);
}

static void defer_ack(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf; (void)n;
    int src = shoal_token_source(t);
    CHECK(na == 1 && a[0] == ack_next[src], "ack from rank %d out of order: %llu, expected %llu", src,
          na ? (unsigned long long)a[0] : 0ull, (unsigned long long)ack_next[src]);
    ack_next[src]++;
    defer_acks++;
}

static void test_defer(void)
{
    for (int d = 0; d < np; d++)
        if (d != me)
            CHECK_RC(shoal_am_request_short(d, H_DEFER_KICK, 0, shoal_noargs), SHOAL_OK);
    uint64_t want = (uint64_t)(np - 1) * DEFER_N;
    double t0 = test_now();
    while (defer_fans < want || defer_acks < want) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, 60, "deferred requests");
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK(defer_fans == want && defer_acks == want, "%llu fans and %llu acks, expected %llu each",
          (unsigned long long)defer_fans, (unsigned long long)defer_acks, (unsigned long long)want);
    /* the handlers' sends found rings full and were deferred: this test
     * tested the deferral (DEFER_N * DEFER_BYTES is beyond every ring and window) */
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    CHECK(np == 1 || st.send_stalls > 0, "no send found a ring full: nothing was deferred");
}

/* ---- defer_limit: a handler floods a rank that never polls: past the
 * deferred queue's bound, an abort naming both ranks ---------------------- */
static void defer_flood(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
    size_t max = shoal_am_max_medium();
    char *msg = calloc(1, max);
    CHECK(msg, "oom");
    for (unsigned i = 0; i < (128u << 20) / max + 1; i++) /* twice the bound */
        CHECK_RC(shoal_am_request_medium(1, H_COUNT, 0, msg, max, shoal_noargs), SHOAL_OK);
    free(msg);
    CHECK(0, "128 MiB deferred to a rank that does not poll, and no abort");
}

static void test_defer_limit(void)
{
    CHECK(np == 2, "defer_limit runs on 2 ranks");
    if (me == 1) {
        sleep(60); /* never polls: rank 0's abort ends the job first */
        CHECK(0, "rank 0 did not abort");
    }
    CHECK_RC(shoal_am_request_short(0, H_DEFER_FLOOD, 0, shoal_noargs), SHOAL_OK);
    for (;;)
        CHECK_RC(shoal_poll(), SHOAL_OK);
}

int main(int argc, char **argv)
{
    const char *test = argc > 1 ? argv[1] : "all";
    CHECK(shoal_rank() == -1 && shoal_size() == -1, "rank/size before init");
    CHECK_RC(shoal_am_request_short(0, 1, 0, shoal_noargs), SHOAL_ENOTINIT);
    CHECK_RC(shoal_poll(), SHOAL_ENOTINIT);
    CHECK_RC(shoal_barrier(), SHOAL_ENOTINIT);
    shoal_am_register(H_SHORT_REQ, short_req);
    shoal_am_register(H_SHORT_REP, short_rep);
    shoal_am_register(H_MED_REQ, med_req);
    shoal_am_register(H_MED_REP, med_rep);
    shoal_am_register(H_LONG_REQ, long_req);
    shoal_am_register(H_LONG_REP, long_rep);
    shoal_am_register(H_RULES_REQ, rules_req);
    shoal_am_register(H_RULES_REP, rules_rep);
    shoal_am_register(H_COUNT, count_handler);
    shoal_am_register(H_STORM_REQ, storm_req);
    shoal_am_register(H_STORM_REP, storm_rep);
    shoal_am_register(H_IN_ORDER, in_order_handler);
    shoal_am_register(H_DEFER_KICK, defer_kick);
    shoal_am_register(H_DEFER_FAN, defer_fan);
    shoal_am_register(H_DEFER_ACK, defer_ack);
    shoal_am_register(H_DEFER_FLOOD, defer_flood);
    shoal_am_register(H_NOP, nop_handler);
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    /* before the first barrier: a peer's kick may run inside it */
    fan_next = calloc((size_t)np, sizeof *fan_next);
    ack_next = calloc((size_t)np, sizeof *ack_next);
    CHECK(fan_next && ack_next, "oom");
    CHECK_RC(shoal_seg_create(4u << 20, &seg), SHOAL_OK);
    void *base;
    CHECK_RC(shoal_seg_local(seg, &base, &seg_bytes), SHOAL_OK);
    seg_base = base;

    int all = !strcmp(test, "all");
    /* Counting restarts per test; the barrier keeps a fast rank's messages
     * for the next test from arriving before the reset. */
#define RUN(name, call)                                \
    do {                                               \
        if (all || !strcmp(test, name)) {              \
            replies = 0;                               \
            arrivals = 0;                              \
            CHECK_RC(shoal_barrier(), SHOAL_OK);       \
            call;                                      \
        }                                              \
    } while (0)
    RUN("short", test_short());
    RUN("medium", test_medium());
    RUN("long", test_long());
    RUN("rules", test_rules());
    RUN("misuse", test_misuse());
    RUN("barrier", test_barrier(200));
    RUN("storm", test_storm(np > 4 ? 20 : 200));
    if (!strcmp(test, "immediate"))
        test_immediate();
    if (!strcmp(test, "more"))
        test_more();
    if (!strcmp(test, "defer"))
        test_defer();
    if (!strcmp(test, "defer_limit"))
        test_defer_limit();
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    free(fan_next);
    free(ack_next);
    CHECK_RC(shoal_poll(), SHOAL_ENOTINIT);
    CHECK_RC(shoal_am_request_short(0, H_COUNT, 0, shoal_noargs), SHOAL_ENOTINIT);
    CHECK(shoal_am_max_medium() == 0, "medium limit after finalize");
    if (me == 0)
        printf("test_am %s passed on %d ranks\n", test, np);
    return 0;
}
