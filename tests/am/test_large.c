/* am's mediums of any size (am_request_large, am_reply_large) and coll's
 * collectives built on them, run through shoalrun on any transport:
 *   sizes    every rank sends every rank (itself too) requests of 0 and 1
 *            bytes, one-message limit - 1, limit, limit + 1 (the limit
 *            per peer: the ring's medium limit, or one packet), the medium
 *            limit + 1, twice the limit + 1 and 3 MiB + 5, blocking and
 *            with SHOAL_IMMEDIATE resumed; each handler checks every byte
 *            and argument and answers with an am_reply_large of the same
 *            size, which the sender checks; sizes above SHOAL_AM_LARGE_MAX
 *            are refused (SHOAL_ETOOBIG), nothing sent;
 *   order    rank 0 sends rank 1 small and large requests alternately:
 *            they run in the order their calls completed; and a small one
 *            sent while a large one is only partly sent runs before it
 *            (a large message counts as sent with its last piece);
 *   obarrier every rank sends the ranks it is paired with in the
 *            dissemination rounds a small and a large one-way request,
 *            then calls coll_barrier_ordered: when it returns, the
 *            requests of the ranks paired with it have run here, with no
 *            poll in between;
 *   bcast    coll_bcast_any from every root, sizes 0 to 3 MiB, receivers
 *            naming no root, every byte checked; above SHOAL_AM_LARGE_MAX
 *            and without a buffer: refused, nothing sent;
 *   obarrier_mismatch  rank 0 calls coll_barrier_ordered where the others
 *            call shoal_barrier: the job must end naming both calls;
 *   die      rank 1 sends rank 0 part of a 3 MiB request and exits; rank 0,
 *            waiting with the pieces half gathered, must leave naming it. */
#include "am/am.h"
#include "coll/coll.h"
#include "shoal.h"
#include "../common/check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { H_REQ = AM_LAYER_BASE(AM_BLOCK_DSM) + 15, H_REP = H_REQ - 1, H_SEQ = H_REQ - 2 };
#define BIG ((3u << 20) + 5)
#define WAIT_S 60

static int me, np;
static unsigned char *out;
static size_t replied_len;
static uint64_t replies, runs[1024], last_tag[64];
static uint64_t seq_seen[64];
static unsigned nseq;

static unsigned char pat(uint64_t tag, size_t i) { return (unsigned char)(tag * 151u + i * 13u + (i >> 11)); }

static void fill(unsigned char *p, size_t n, uint64_t tag)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(tag, i);
}

static void check_bytes(const unsigned char *p, size_t n, uint64_t tag, const char *what, int from)
{
    for (size_t i = 0; i < n; i++)
        CHECK(p[i] == pat(tag, i), "%s of %zu bytes from rank %d: byte %zu is %u, expected %u", what, n, from, i,
              p[i], pat(tag, i));
}

/* args: [tag, n, 0x5eed...] — checks the payload, replies with the same size. */
static void on_req(shoal_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    int src = shoal_token_source(tok);
    CHECK(na == 4 && a[1] == n && a[2] == 0x5eed0000u + (uint64_t)src && a[3] == ~a[0],
          "large request from rank %d: %u arguments, length %zu (args say %llu)", src, na, n,
          (unsigned long long)a[1]);
    check_bytes(buf, n, a[0], "request", src);
    runs[src]++;
    if (a[0] > last_tag[src])
        last_tag[src] = a[0];
    unsigned char *r = malloc(n ? n : 1);
    CHECK(r, "out of memory");
    fill(r, n, a[0] + 1);
    uint64_t ra[2] = {a[0] + 1, n};
    CHECK_RC(am_reply_large(tok, H_REP, r, n, 2, ra), SHOAL_OK);
    free(r);
}

static void on_rep(shoal_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    CHECK(na == 2 && a[1] == n, "large reply: %u arguments, length %zu", na, n);
    check_bytes(buf, n, a[0], "reply", shoal_token_source(tok));
    replied_len = n;
    replies++;
}

static void wait_for(volatile uint64_t *counter, uint64_t want, const char *what)
{
    double t0 = test_now();
    while (*counter < want) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, WAIT_S, what);
    }
}

/* One request of n bytes to dest and its reply of n bytes. */
static void round_trip(int dest, size_t n, uint64_t tag, int immediate)
{
    fill(out, n, tag);
    uint64_t a[4] = {tag, n, 0x5eed0000u + (uint64_t)me, ~tag};
    uint64_t before = replies;
    size_t done = 0;
    if (n > am_large_max()) { /* refused, nothing sent */
        CHECK_RC(am_request_large(dest, H_REQ, immediate ? SHOAL_IMMEDIATE : 0, out, n, 4, a, &done),
                 SHOAL_ETOOBIG);
        CHECK(done == 0, "%zu bytes of a refused request sent", done);
        return;
    }
    if (!immediate) {
        CHECK_RC(am_request_large(dest, H_REQ, 0, out, n, 4, a, &done), SHOAL_OK);
    } else {
        double t0 = test_now();
        int rc;
        while ((rc = am_request_large(dest, H_REQ, SHOAL_IMMEDIATE, out, n, 4, a, &done)) == SHOAL_EAGAIN) {
            CHECK_RC(shoal_poll(), SHOAL_OK);
            TEST_DEADLINE(t0, WAIT_S, "room for a large request");
        }
        CHECK_RC(rc, SHOAL_OK);
    }
    CHECK(done == n, "%zu of %zu bytes sent", done, n);
    wait_for((volatile uint64_t *)&replies, before + 1, "a large reply");
    CHECK(replied_len == n, "reply of %zu bytes to a request of %zu", replied_len, n);
}

static void test_sizes(void)
{
    size_t m = am_max_medium();
    uint64_t tag = 1, expect[64] = {0};
    for (int k = 0; k < np; k++) {
        int dest = (me + k) % np;
        size_t one = am_medium_in_one(dest, 4); /* the same both ways */
        const size_t sizes[] = {0, 1, one - 1, one, one + 1, m + 1, 2 * one + 1, BIG};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            for (int immediate = 0; immediate < 2; immediate++)
                round_trip(dest, sizes[i], tag++ + 1000u * (uint64_t)me, immediate);
            expect[dest] += sizes[i] <= am_large_max() ? 2 : 0;
        }
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    for (int src = 0; src < np; src++)
        CHECK(runs[src] == expect[src], "rank %d's requests ran %llu times here, expected %llu", src,
              (unsigned long long)runs[src], (unsigned long long)expect[src]);
    /* above the limit: refused, nothing sent */
    size_t done = 0;
    uint64_t a[4] = {0};
    CHECK_RC(am_request_large(me, H_REQ, 0, out, am_large_max() + 1, 4, a, &done), SHOAL_ETOOBIG);
    CHECK_RC(am_request_large(me, H_REQ, 0, out, 1, AM_LARGE_MAX_ARGS + 1, runs, &done), SHOAL_EINVAL);
    CHECK_RC(am_request_large(np, H_REQ, 0, out, 1, 0, NULL, &done), SHOAL_ERANK);
}

/* args: [sequence number]: records the order handlers run in. */
static void on_seq(shoal_token_t tok, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)tok;
    CHECK(na == 1 && nseq < 64, "sequenced message: %u arguments, %u so far", na, nseq);
    check_bytes(buf, n, a[0], "sequenced message", 0);
    seq_seen[nseq++] = a[0];
}

static void send_seq(uint64_t s, size_t n)
{
    size_t done = 0;
    fill(out, n, s);
    CHECK_RC(am_request_large(1, H_SEQ, 0, out, n, 1, &s, &done), SHOAL_OK);
}

/* Rank 0 sends 1..20 (small and large by turns), then a 3 MiB request 22
 * with SHOAL_IMMEDIATE; if it went only in part, an empty request 21 before
 * its rest (21 runs first), else an empty request 23 after it. */
static void test_order(void)
{
    CHECK(np == 2, "the order test runs on 2 ranks, not %d", np);
    if (me == 0) {
        for (uint64_t s = 1; s <= 20; s++)
            send_seq(s, s % 2 ? 100 : 5 * am_medium_in_one(1, 1) + 3);
        uint64_t s = 22;
        size_t done = 0;
        fill(out, BIG, s);
        double t0 = test_now();
        int rc;
        while ((rc = am_request_large(1, H_SEQ, SHOAL_IMMEDIATE, out, BIG, 1, &s, &done)) == SHOAL_EAGAIN &&
               done == 0) {
            CHECK_RC(shoal_poll(), SHOAL_OK);
            TEST_DEADLINE(t0, WAIT_S, "room for a piece");
        }
        if (rc == SHOAL_OK) {
            send_seq(23, 0);
            return;
        }
        send_seq(21, 0);
        while ((rc = am_request_large(1, H_SEQ, SHOAL_IMMEDIATE, out, BIG, 1, &s, &done)) == SHOAL_EAGAIN) {
            CHECK_RC(shoal_poll(), SHOAL_OK);
            TEST_DEADLINE(t0, WAIT_S, "room for the rest of a 3 MiB request");
        }
        CHECK_RC(rc, SHOAL_OK);
        return;
    }
    double t0 = test_now();
    while (nseq < 22) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, WAIT_S, "22 sequenced messages");
    }
    for (unsigned i = 0; i < 20; i++)
        CHECK(seq_seen[i] == i + 1, "message %llu ran as number %u", (unsigned long long)seq_seen[i], i + 1);
    CHECK((seq_seen[20] == 21 && seq_seen[21] == 22) || (seq_seen[20] == 22 && seq_seen[21] == 23),
          "the last two messages ran as %llu, %llu", (unsigned long long)seq_seen[20],
          (unsigned long long)seq_seen[21]);
    printf("order: the 3 MiB request went %s\n", seq_seen[20] == 21 ? "in part, then the rest" : "at once");
}

static void test_obarrier(void)
{
    size_t big = 4 * am_max_medium() + 17;
    for (uint64_t it = 1; it <= 30; it++) {
        for (int d = 1; d < np; d <<= 1) {
            size_t n = it % 2 ? big : 8;
            uint64_t a[4] = {it, n, 0x5eed0000u + (uint64_t)me, ~it};
            size_t done = 0;
            fill(out, n, it);
            CHECK_RC(am_request_large((me + d) % np, H_REQ, 0, out, n, 4, a, &done), SHOAL_OK);
        }
        CHECK_RC(coll_barrier_ordered(), SHOAL_OK);
        for (int d = 1; d < np; d <<= 1) {
            int from = (me + np - d) % np;
            CHECK(last_tag[from] >= it, "iteration %llu: the barrier returned before rank %d's request ran",
                  (unsigned long long)it, from);
        }
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

static void test_bcast(void)
{
    const size_t sizes[] = {0, 1, am_max_medium() - 1, am_max_medium() + 1, 300000, BIG};
    uint64_t tag = 7;
    for (int root = 0; root < np; root++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++, tag++) {
            size_t n = sizes[i];
            if (me == root)
                fill(out, n, tag);
            else
                memset(out, 0xee, n);
            int from = -2;
            size_t sent = 0;
            CHECK_RC(coll_bcast_any(out, n, me == root ? root : -1, &from, &sent), SHOAL_OK);
            check_bytes(out, n, tag, "broadcast", root);
        }
    int from;
    size_t sent;
    CHECK_RC(coll_bcast_any(out, am_large_max() + 1, me, &from, &sent), SHOAL_ETOOBIG);
    CHECK_RC(coll_bcast_any(NULL, 1, -1, &from, &sent), SHOAL_EINVAL);
}

static void test_obarrier_mismatch(void)
{
    CHECK_RC(me == 0 ? coll_barrier_ordered() : shoal_barrier(), SHOAL_OK);
    CHECK(0, "the mismatched barriers returned");
}

static void test_die(void)
{
    CHECK(np == 2, "the die test runs on 2 ranks, not %d", np);
    if (me == 1) {
        size_t done = 0;
        uint64_t a[4] = {1, BIG, 0x5eed0001u, ~1ull};
        fill(out, BIG, 1);
        double t0 = test_now();
        while (am_request_large(0, H_REQ, SHOAL_IMMEDIATE, out, BIG, 4, a, &done) == SHOAL_EAGAIN && done == 0) {
            CHECK_RC(shoal_poll(), SHOAL_OK);
            TEST_DEADLINE(t0, WAIT_S, "room for a piece");
        }
        CHECK(done > 0 && done < BIG, "%zu of %u bytes went at once", done, BIG);
        fflush(stdout);
        _exit(5);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK(0, "the barrier returned although rank 1 died");
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_large sizes|order|obarrier|bcast|obarrier_mismatch|die");
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    CHECK(np <= 64, "at most 64 ranks");
    out = malloc(BIG + 1);
    CHECK(out, "out of memory");
    am_register_internal(H_REQ, on_req);
    am_register_internal(H_REP, on_rep);
    am_register_internal(H_SEQ, on_seq);
    CHECK_RC(shoal_barrier(), SHOAL_OK); /* every rank has its handlers */
    static const struct test_case tests[] = {{"sizes", test_sizes},   {"order", test_order},
                                             {"obarrier", test_obarrier}, {"bcast", test_bcast},
                                             {"obarrier_mismatch", test_obarrier_mismatch}, {"die", test_die}};
    TEST_RUN_CASE(tests, argv[1]);
    free(out);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    return 0;
}
