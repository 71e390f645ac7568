/* Collective tests, run through shoalrun (any transport, any layout):
 *   bcast     every root broadcasts payloads from 0 bytes to past 1 MiB
 *             (one packet, several, the shm medium limit and beyond); then
 *             a burst of broadcasts from rotating roots with no barrier
 *             between, so pieces of the next one arrive early; every
 *             byte checked on every rank.  TEST_EXPECT_NATIVE=0|1 also
 *             checks whether the job crosses hosts with the network's
 *             broadcast, and TEST_EXPECT_RESENT=1 (under heavy loss) that
 *             lost broadcast packets were recovered by resends;
 *             TEST_BCAST_MAX=N leaves out the sizes above N bytes;
 *   reduce    shoal_reduce into every root and shoal_allreduce, every
 *             operation on every type, vectors of 0 to 20,000 elements
 *             (pieces beyond the medium limit), in place and not; values
 *             chosen so the exact result is known (integer-valued doubles)
 *             and checked on every rank, and identical bits everywhere;
 *   misuse    bad root, type or operation, NULL buffers, calls from a
 *             handler: error codes, nothing sent; the job goes on;
 *   mismatch  rank 1 passes another length than the root: the job must
 *             end naming both (checked by the test's expected output);
 *   mismatch0 the same against an empty broadcast;
 *   rmismatch the same for a reduction's element count;
 *   kinds     rank 0 calls shoal_barrier where the others call
 *             shoal_broadcast: the job must end naming both calls;
 *   finalize  rank 0 calls shoal_barrier where the others call
 *             shoal_finalize: the same;
 *   hosts     the job's hosts hold the ranks TEST_LAYOUT says ("2,1": two
 *             on the first, one on the second), which the leaders must
 *             show; then 100 barriers, each entered late by one rank in
 *             turn, where a rank told that another left barrier i before
 *             this rank entered it fails; then a broadcast and an
 *             allreduce of every rank's number, and a reduction into
 *             every root, checked everywhere. */
#include "coll/coll.h"
#include "shoal.h"
#include "../common/check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H_TRY = 1, H_LEFT };
static int me, np;
static volatile uint64_t tried;
static int try_rc;

static uint64_t entered; /* barriers this rank has entered */

static unsigned char pat(uint64_t tag, size_t i) { return (unsigned char)(tag * 151u + i * 13u + (i >> 9)); }

/* One broadcast of n bytes from root, tagged: checked everywhere. */
static void one(unsigned char *buf, size_t n, int root, uint64_t tag)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = me == root ? pat(tag, i) : 0xee;
    CHECK_RC(shoal_broadcast(buf, n, root), SHOAL_OK);
    for (size_t i = 0; i < n; i++)
        CHECK(buf[i] == pat(tag, i), "broadcast %llu from rank %d, %zu bytes: byte %zu is %u, expected %u",
              (unsigned long long)tag, root, n, i, buf[i], pat(tag, i));
}

static void test_bcast(void)
{
    static const size_t sizes[] = {0, 1, 8, 100, 1371, 1500, 4096, 9000, 65000, 65536, 65537, 300000,
                                   (1u << 20) + 3};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    const char *max = getenv("TEST_BCAST_MAX");
    size_t limit = max ? strtoul(max, NULL, 10) : SIZE_MAX;
    unsigned char *buf = malloc(sizes[nsizes - 1]);
    CHECK(buf, "out of memory");
    uint64_t tag = 0, calls = 0;
    for (int root = 0; root < np; root++)
        for (size_t s = 0; s < nsizes && sizes[s] <= limit; s++, calls++)
            one(buf, sizes[s], root, ++tag);
    /* back to back: a fast root's next broadcast reaches ranks still in this one */
    for (unsigned k = 0; k < 200; k++, calls++)
        one(buf, 8 + (k % 5) * 700, (int)(k % (unsigned)np), ++tag);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    CHECK(st.broadcasts == calls, "stats count %llu broadcasts, made %llu", (unsigned long long)st.broadcasts,
          (unsigned long long)calls);
    const char *native = getenv("TEST_EXPECT_NATIVE");
    if (native)
        CHECK(coll_use_broadcast() == atoi(native), "the network's broadcast is %s, expected %s",
              coll_use_broadcast() ? "used" : "not used", atoi(native) ? "used" : "not");
    if (native && atoi(native) && me == 0)
        CHECK(st.bcast_packets > 0, "rank 0 sent no broadcast packet");
    if (getenv("TEST_EXPECT_RESENT") && me == 0)
        CHECK(st.bcast_resent > 0, "no lost broadcast packet was resent (%llu sent)",
              (unsigned long long)st.bcast_packets);
    if (me == 0)
        printf("bcast: %llu broadcasts on %d ranks, rank 0 sent %llu as broadcast packets, resent %llu\n",
               (unsigned long long)calls, np, (unsigned long long)st.bcast_packets,
               (unsigned long long)st.bcast_resent);
    free(buf);
}

/* Rank r's element i for a reduction of type t: exact under every operation. */
static uint64_t elem(int r, size_t i, enum shoal_atype t)
{
    if (t == SHOAL_DOUBLE) {
        double d = (double)((r * 7919 + (int)i * 31) % 1000) - 500.5;
        uint64_t u;
        memcpy(&u, &d, 8);
        return u;
    }
    if (t == SHOAL_UINT64) /* high bits: a signed comparison would order them wrongly */
        return ((uint64_t)(r % 3 + 1) << 62) ^ (uint64_t)(i * 2654435761u + (size_t)r);
    return (uint64_t)(int64_t)((r * 7919 + (int)i * 31) % 1000 - 500) * 1000003u;
}

/* What the reduction of every rank's element i must be. */
static uint64_t expected(size_t i, enum shoal_atype t, enum shoal_rop op)
{
    uint64_t acc = elem(0, i, t);
    for (int r = 1; r < np; r++) {
        uint64_t b = elem(r, i, t);
        if (t == SHOAL_DOUBLE) {
            double x, y;
            memcpy(&x, &acc, 8);
            memcpy(&y, &b, 8);
            x = op == SHOAL_ROP_SUM ? x + y : op == SHOAL_ROP_MIN ? (y < x ? y : x) : (y > x ? y : x);
            memcpy(&acc, &x, 8);
            continue;
        }
        int less = t == SHOAL_INT64 ? (int64_t)b < (int64_t)acc : b < acc;
        int more = t == SHOAL_INT64 ? (int64_t)b > (int64_t)acc : b > acc;
        acc = op == SHOAL_ROP_SUM ? acc + b : op == SHOAL_ROP_MIN ? (less ? b : acc) : op == SHOAL_ROP_MAX ? (more ? b : acc)
            : op == SHOAL_ROP_AND ? acc & b : op == SHOAL_ROP_OR ? acc | b : acc ^ b;
    }
    return acc;
}

static void test_reduce(void)
{
    static const size_t counts[] = {0, 1, 3, 1000, 20000};
    uint64_t *in = malloc(20000 * 8), *out = malloc(20000 * 8);
    CHECK(in && out, "out of memory");
    uint64_t calls = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (int t = SHOAL_INT64; t <= SHOAL_DOUBLE; t++)
            for (int op = SHOAL_ROP_SUM; op <= (t == SHOAL_DOUBLE ? SHOAL_ROP_MAX : SHOAL_ROP_XOR); op++)
                for (int root = -1; root < np; root++, calls++) { /* -1: allreduce */
                    size_t n = counts[c];
                    for (size_t i = 0; i < n; i++) {
                        in[i] = elem(me, i, t);
                        out[i] = 0x5a5a5a5a5a5a5a5aull;
                    }
                    int inplace = root < 0 && c % 2;
                    uint64_t *dst = inplace ? in : out;
                    if (root < 0)
                        CHECK_RC(shoal_allreduce(in, dst, n, t, op), SHOAL_OK);
                    else
                        CHECK_RC(shoal_reduce(in, out, n, t, op, root), SHOAL_OK);
                    for (size_t i = 0; i < n; i++) {
                        uint64_t want = root < 0 || root == me ? expected(i, t, op) : 0x5a5a5a5a5a5a5a5aull;
                        CHECK(dst[i] == want, "%s of %zu elements, type %d, op %d, root %d: element %zu is %#llx, "
                              "expected %#llx", root < 0 ? "allreduce" : "reduce", n, t, op, root, i,
                              (unsigned long long)dst[i], (unsigned long long)want);
                    }
                }
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    CHECK(st.reductions == calls, "stats count %llu reductions, made %llu", (unsigned long long)st.reductions,
          (unsigned long long)calls);
    free(in);
    free(out);
}

/* Over the network a collective's pieces for a peer leave together
 * (SHOAL_MORE): a 768 KiB broadcast from rank 0 and a 768 KiB reduction to
 * it take far fewer send batches at the sender than pieces (one each sent
 * them before).  Within the 1 MiB window, so that no piece waits for an
 * ACK: those leave from the polls the ACKs arrive in, as many batches as
 * the receiver's timing makes (17 pieces of a 1 MiB broadcast took 1-6).
 * The sender's other packets (an ACK, a keepalive) and a full socket
 * buffer (a send cut short, the rest sent at the next flush) may add a few:
 * 13 pieces took 1-4 batches.  2 ranks. */
static void test_batched(void)
{
    enum { BYTES = 3 << 18 };
    unsigned char *buf = malloc(BYTES);
    double *in = malloc(BYTES), *out = malloc(BYTES);
    CHECK(buf && in && out, "out of memory");
    CHECK(np == 2, "the batched test runs on 2 ranks, not %d", np);
    for (size_t i = 0; i < BYTES / 8; i++)
        in[i] = (double)(i % 1000) + me;
    struct shoal_stats a, b;
    for (int kind = 0; kind < 2; kind++) {
        int sender = kind == 0 ? 0 : 1;
        CHECK_RC(shoal_barrier(), SHOAL_OK);
        CHECK_RC(shoal_stats_get(&a), SHOAL_OK);
        if (kind == 0)
            one(buf, BYTES, 0, 1);
        else
            CHECK_RC(shoal_reduce(in, out, BYTES / 8, SHOAL_DOUBLE, SHOAL_ROP_SUM, 0), SHOAL_OK);
        CHECK_RC(shoal_stats_get(&b), SHOAL_OK);
        if (kind == 1 && me == 0)
            for (size_t i = 0; i < BYTES / 8; i++)
                CHECK(out[i] == 2.0 * (double)(i % 1000) + 1, "reduction element %zu is %g", i, out[i]);
        if (me != sender)
            continue;
        uint64_t pieces = b.am_sent[0] - a.am_sent[0], batches = b.net_send_batches - a.net_send_batches;
        printf("batched %s: rank %d sent %llu pieces in %llu batches\n", kind ? "reduce" : "bcast", me,
               (unsigned long long)pieces, (unsigned long long)batches);
        CHECK(pieces >= 8, "%s of %d bytes: only %llu pieces sent", kind ? "reduce" : "bcast", BYTES,
              (unsigned long long)pieces);
        CHECK(batches * 2 <= pieces, "%s: %llu pieces left in %llu send batches (at most half as many expected)",
              kind ? "reduce" : "bcast", (unsigned long long)pieces, (unsigned long long)batches);
    }
    free(buf);
    free(in);
    free(out);
}

/* A handler may not block: the collectives fail from one. */
static void try_in_handler(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    uint64_t x = 0, y = 0;
    try_rc = shoal_broadcast(&x, sizeof x, 0);
    if (try_rc == SHOAL_EHANDLER)
        try_rc = shoal_reduce(&x, &y, 1, SHOAL_INT64, SHOAL_ROP_SUM, 0);
    if (try_rc == SHOAL_EHANDLER)
        try_rc = shoal_allreduce(&x, &y, 1, SHOAL_INT64, SHOAL_ROP_SUM);
    tried++;
}

static void test_misuse(void)
{
    uint64_t x = 7;
    CHECK_RC(shoal_broadcast(&x, sizeof x, -1), SHOAL_ERANK);
    CHECK_RC(shoal_broadcast(&x, sizeof x, np), SHOAL_ERANK);
    CHECK_RC(shoal_broadcast(NULL, 8, 0), SHOAL_EINVAL);
    uint64_t y = 0;
    CHECK_RC(shoal_reduce(&x, &y, 1, SHOAL_INT64, SHOAL_ROP_SUM, np), SHOAL_ERANK);
    CHECK_RC(shoal_reduce(&x, &y, 1, SHOAL_DOUBLE, SHOAL_ROP_XOR, 0), SHOAL_EINVAL);
    CHECK_RC(shoal_reduce(&x, &y, 1, (enum shoal_atype)7, SHOAL_ROP_SUM, 0), SHOAL_EINVAL);
    CHECK_RC(shoal_allreduce(&x, &y, 1, SHOAL_INT64, (enum shoal_rop)9), SHOAL_EINVAL);
    CHECK_RC(shoal_allreduce(NULL, &y, 1, SHOAL_INT64, SHOAL_ROP_SUM), SHOAL_EINVAL);
    CHECK_RC(shoal_allreduce(&x, NULL, 1, SHOAL_INT64, SHOAL_ROP_SUM), SHOAL_EINVAL);
    CHECK_RC(shoal_reduce(&x, NULL, 1, SHOAL_INT64, SHOAL_ROP_SUM, me), SHOAL_EINVAL);
    CHECK_RC(shoal_am_request_short(me, H_TRY, 0, 0, NULL), SHOAL_OK);
    double t0 = test_now();
    while (!tried) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, 30, "the handler to run");
    }
    CHECK_RC(try_rc, SHOAL_EHANDLER);
    CHECK_RC(shoal_broadcast(NULL, 0, 0), SHOAL_OK); /* empty: buf may be NULL */
    /* none of the refused ones counted or sent anything: a real one still works */
    x = me == np - 1 ? 42 : 0;
    CHECK_RC(shoal_broadcast(&x, sizeof x, np - 1), SHOAL_OK);
    CHECK(x == 42, "value %llu after the broadcast", (unsigned long long)x);
    x = 1;
    CHECK_RC(shoal_allreduce(&x, &y, 1, SHOAL_INT64, SHOAL_ROP_SUM), SHOAL_OK);
    CHECK(y == (uint64_t)np, "allreduce sum of ones is %llu on %d ranks", (unsigned long long)y, np);
}

/* Rank 1 passes another length than the root's: 16 against 8, or (empty)
 * 8 against an empty broadcast, which must not leave it waiting. */
static void test_mismatch(int empty)
{
    uint64_t x[2] = {1, 2};
    shoal_broadcast(x, empty ? (me == 1 ? 8 : 0) : (me == 1 ? 16 : 8), 0);
    CHECK(np < 2, "a broadcast of mismatched lengths returned");
}

static void test_mismatch_lengths(void)
{
    test_mismatch(0);
}

static void test_mismatch_empty(void)
{
    test_mismatch(1);
}

static void test_rmismatch(void)
{
    uint64_t x[2] = {1, 2}, y[2];
    shoal_allreduce(x, y, me == 1 ? 2 : 1, SHOAL_INT64, SHOAL_ROP_SUM);
    CHECK(np < 2, "a reduction of mismatched counts returned");
}

static void test_kinds(void)
{
    uint64_t x = 7;
    if (me == 0)
        shoal_barrier();
    else
        shoal_broadcast(&x, sizeof x, 1);
    /* ranks past 1 called the broadcast rank 1 called: theirs may return
     * (a ring's first message is slower) before rank 0 or 1 finds the
     * mismatch and ends the job */
    for (double end = test_now() + 20; me > 1 && test_now() < end;)
        shoal_poll();
    CHECK(np < 2, "a barrier met a broadcast and returned (or, at rank %d, the job was not ended in 20 s)", me);
}

static void test_finalize_mismatch(void)
{
    if (me == 0) {
        shoal_barrier();
        CHECK(np < 2, "a barrier met shoal_finalize and returned");
    }
}

/* Another rank left barrier a[0]: this one must have entered it. */
static void left_barrier(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf, (void)n;
    CHECK(na == 1 && a[0] <= entered, "rank %d left barrier %llu before rank %d entered it (entered %llu)",
          shoal_token_source(t), (unsigned long long)(na ? a[0] : 0), me, (unsigned long long)entered);
}

/* The leaders coll_leaders reports: the first rank of each TEST_LAYOUT
 * host, so a job launched evenly by mistake cannot pass as uneven. */
static void check_layout(void)
{
    const char *layout = getenv("TEST_LAYOUT");
    CHECK(layout, "hosts: TEST_LAYOUT (ranks per host, as 2,1) is not set");
    int n;
    const int *leaders = coll_leaders(&n);
    int h = 0, first = 0;
    for (const char *p = layout; *p; h++) {
        char *end;
        long k = strtol(p, &end, 10);
        CHECK(end != p && k > 0 && (*end == ',' || !*end), "hosts: bad TEST_LAYOUT %s", layout);
        CHECK(h < n && leaders[h] == first, "hosts: host %d of %s should be led by rank %d, found %d of %d leaders",
              h, layout, first, h < n ? leaders[h] : -1, n);
        first += (int)k;
        p = *end ? end + 1 : end;
    }
    CHECK(h == n && first == np, "hosts: %s names %d hosts of %d ranks; the job has %d hosts of %d ranks", layout,
          h, first, n, np);
}

static void test_hosts(void)
{
    check_layout();
    for (uint64_t i = 1; i <= 100; i++) {
        if ((uint64_t)me == i % (uint64_t)np)
            test_nap(0.001);
        entered = i;
        CHECK_RC(shoal_barrier(), SHOAL_OK);
        for (int r = 0; r < np; r++)
            if (r != me)
                CHECK_RC(shoal_am_request_short(r, H_LEFT, 0, 1, &i), SHOAL_OK);
    }
    uint64_t x = 0, sum = 0, want = (uint64_t)np * (uint64_t)(np + 1) / 2;
    for (int root = 0; root < np; root++) {
        x = me == root ? 1000u + (uint64_t)root : 0;
        CHECK_RC(shoal_broadcast(&x, sizeof x, root), SHOAL_OK);
        CHECK(x == 1000u + (uint64_t)root, "broadcast from rank %d gave %llu", root, (unsigned long long)x);
        x = (uint64_t)me + 1;
        sum = 0;
        CHECK_RC(shoal_reduce(&x, &sum, 1, SHOAL_UINT64, SHOAL_ROP_SUM, root), SHOAL_OK);
        CHECK(sum == (me == root ? want : 0), "reduce into rank %d gave %llu", root, (unsigned long long)sum);
    }
    CHECK_RC(shoal_allreduce(&x, &sum, 1, SHOAL_UINT64, SHOAL_ROP_SUM), SHOAL_OK);
    CHECK(sum == want, "allreduce gave %llu, expected %llu", (unsigned long long)sum, (unsigned long long)want);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0)
        printf("hosts: %s: 100 barriers, broadcasts and reductions from every root\n", getenv("TEST_LAYOUT"));
}

int main(int argc, char **argv)
{
    uint64_t early = 0;
    CHECK_RC(shoal_broadcast(&early, sizeof early, 0), SHOAL_ENOTINIT);
    CHECK_RC(shoal_am_register(H_TRY, try_in_handler), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_LEFT, left_barrier), SHOAL_OK);
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    CHECK(argc == 2, "usage: test_coll bcast|reduce|batched|misuse|mismatch|mismatch0|rmismatch|kinds|finalize|hosts");
    static const struct test_case tests[] = {
        {"bcast", test_bcast},         {"misuse", test_misuse},       {"mismatch", test_mismatch_lengths},
        {"mismatch0", test_mismatch_empty}, {"reduce", test_reduce},   {"batched", test_batched},
        {"rmismatch", test_rmismatch}, {"kinds", test_kinds},         {"finalize", test_finalize_mismatch},
        {"hosts", test_hosts}};
    TEST_RUN_CASE(tests, argv[1]);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    return 0;
}
