/* Segment creation as a collective: handlers keep running inside it (a
 * peer blocked on our full ring is served), a failure on one rank is every
 * rank's failure with the same code, and ids stay in step afterwards.
 * A size whose page rounding would wrap is SHOAL_ENOMEM like any other
 * size too large, and so is one past what the memory cgroup has left (run
 * by check_cgroup.py inside a cgroup limited below 512 MiB).  Also: output
 * written before shoal_abort reaches the launcher, and shoal_init's
 * refusals (a bad setting, rings past the cgroup's limit).
 * Usage: test_seg progress | fail | cgroup | abort | init-fails CODE */
#include "shoal.h"
#include "../common/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t arrived;

static void count(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
    arrived++;
}

/* Rank 0 floods rank 1 past what its ring holds, then creates a segment;
 * rank 1 goes straight into the creation.  Rank 0 can only finish its
 * sends if rank 1 runs handlers while it waits in the exchange. */
static void test_progress(int me, int np)
{
    const int n = 20000; /* > the 64-slot ring this test runs with */
    if (me == 0)
        for (int i = 0; i < n; i++)
            CHECK_RC(shoal_am_request_short(1, 1, 0, shoal_noargs), SHOAL_OK);
    shoal_seg_t seg;
    CHECK_RC(shoal_seg_create(4096, &seg), SHOAL_OK);
    if (me == 1) {
        double t0 = test_now();
        while (arrived < (uint64_t)n) {
            CHECK_RC(shoal_poll(), SHOAL_OK);
            TEST_DEADLINE(t0, 30, "the flood");
        }
    }
    (void)np;
}

/* Rank 0 asks for more than the host has; the others for a page.  Every
 * rank must get SHOAL_ENOMEM, and the next creation must give every rank
 * the same, working segment. */
static void test_fail(int me, int np)
{
    shoal_seg_t bad = -1, good = -1;
    size_t want = me == 0 ? (size_t)1 << 46 : 4096;
    CHECK_RC(shoal_seg_create(want, &bad), SHOAL_ENOMEM);
    CHECK_RC(shoal_seg_create(me == 0 ? SIZE_MAX : 4096, &bad), SHOAL_ENOMEM);
    CHECK_RC(shoal_seg_create(SIZE_MAX, &bad), SHOAL_ENOMEM);
    CHECK_RC(shoal_seg_create(8192, &good), SHOAL_OK);
    /* ids agree: a long message into (rank+1, good) lands where expected */
    uint64_t v = 0x5eed0000u + (uint64_t)me;
    int next = (me + 1) % np;
    CHECK_RC(shoal_am_request_long(next, 1, 0, &v, 8, good, 8, shoal_noargs), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    void *base;
    CHECK_RC(shoal_seg_local(good, &base, NULL), SHOAL_OK);
    uint64_t got;
    memcpy(&got, (char *)base + 8, 8);
    CHECK(got == 0x5eed0000u + (uint64_t)((me + np - 1) % np), "segment %d holds %llx", good,
          (unsigned long long)got);
}

/* Inside a cgroup limited below 512 MiB: past what it has left is
 * SHOAL_ENOMEM (not signal 9), and what fits still works. */
static void test_cgroup(void)
{
    const size_t big = (size_t)512 << 20, small = (size_t)1 << 20;
    shoal_seg_t seg;
    shoal_mem_t mem;
    CHECK_RC(shoal_seg_create(big, &seg), SHOAL_ENOMEM);
    CHECK_RC(shoal_mem_create(big, SHOAL_MEM_ALL, &mem), SHOAL_ENOMEM);
    /* each part would fit alone; together the host's ranks' would not */
    CHECK_RC(shoal_seg_create(big / shoal_size() * 5 / 8, &seg), SHOAL_ENOMEM);
    CHECK_RC(shoal_seg_create(small, &seg), SHOAL_OK);
    CHECK_RC(shoal_mem_create(small, SHOAL_MEM_ALL, &mem), SHOAL_OK);
}

int main(int argc, char **argv)
{
    const char *test = argc > 1 ? argv[1] : "progress";
    if (!strcmp(test, "init-fails")) { /* run where shoal_init must refuse */
        CHECK(argc > 2, "init-fails needs the expected status");
        CHECK_RC(shoal_init(&argc, &argv), atoi(argv[2]));
        return 0;
    }
    shoal_am_register(1, count);
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    int me = shoal_rank(), np = shoal_size();
    if (!strcmp(test, "progress")) {
        CHECK(np >= 2, "needs 2 ranks");
        test_progress(me, np);
    } else if (!strcmp(test, "fail")) {
        test_fail(me, np);
    } else if (!strcmp(test, "cgroup")) {
        test_cgroup();
    } else if (!strcmp(test, "abort")) {
        printf("rank %d wrote this before the abort\n", me); /* a pipe: fully buffered */
        CHECK_RC(shoal_barrier(), SHOAL_OK);
        if (me == np - 1)
            shoal_abort(3, "test abort from rank %d", me);
        CHECK_RC(shoal_barrier(), SHOAL_OK); /* never completes: the job ends */
    }
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    if (me == 0)
        printf("test_seg %s passed on %d ranks\n", test, np);
    return 0;
}
