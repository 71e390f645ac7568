/* One-sided commands on the transport's native RMA (SHOAL_RMA_NATIVE):
 * that they really run natively (the counters), that the initiator's
 * check refuses exactly what the owner's would, that a destroyed segment
 * is never written once its memory is reused, that a put's data is at the
 * target when its handle completes, and that concurrent fetch-adds sum
 * exactly.  Every rank but 0 reaches rank 0 over the transport
 * (SHOAL_NET_LOCAL=1).  Usage: test_rma_native EXPECT, EXPECT one of
 *   rw       put and get native, atomics executed by the target
 *   atomics  put, get, fetch-add and compare-swap native
 *   none     nothing native (SHOAL_RMA_NATIVE=0): the same errors */
#include "../common/check.h"

#include <shoal.h>
#include <stdint.h>
#include <string.h>

#define SEG_BYTES (256u * 1024)
#define MAX_RANKS 64

static int me, np, want_native, want_atomics;

struct seg {
    shoal_mem_t mem;
    char *base;
    shoal_rmem_t all[MAX_RANKS];
};

static void seg_make(struct seg *s, unsigned perms)
{
    CHECK_RC(shoal_mem_create(SEG_BYTES, perms, &s->mem), SHOAL_OK);
    CHECK_RC(shoal_mem_local(s->mem, (void **)&s->base, NULL), SHOAL_OK);
    CHECK_RC(shoal_mem_exchange(s->mem, s->all), SHOAL_OK);
}

static struct shoal_stats stats(void)
{
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    return st;
}

/* The second command to a segment hits the cache: the counters move by
 * exactly the commands that may go natively. */
static void test_counters(void)
{
    struct seg s;
    seg_make(&s, SHOAL_MEM_ALL);
    if (me != 0) {
        uint64_t v = 0x1000 + (uint64_t)me, back = 0;
        int64_t old;
        struct shoal_cas_result cr;
        size_t off = (size_t)me * 64;
        CHECK_RC(shoal_put(s.all[0], off, &v, 8, 0, NULL), SHOAL_OK); /* fills the cache */
        struct shoal_stats a = stats();
        CHECK_RC(shoal_put(s.all[0], off, &v, 8, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_get(&back, s.all[0], off, 8, 0, NULL), SHOAL_OK);
        CHECK(back == v, "get returned %llx, put %llx", (unsigned long long)back, (unsigned long long)v);
        CHECK_RC(shoal_fetch_add64(s.all[0], off + 8, 5, &old), SHOAL_OK);
        CHECK(old == 0, "fetch-add saw %lld", (long long)old);
        CHECK_RC(shoal_cas(s.all[0], off + 8, 5, off + 8, 9, &cr, 0, NULL), SHOAL_OK);
        CHECK(cr.swapped && cr.observed == 5 && cr.old == 5, "compare-swap: swapped %d observed %llu old %llu",
              cr.swapped, (unsigned long long)cr.observed, (unsigned long long)cr.old);
        CHECK_RC(shoal_cas(s.all[0], off + 8, 5, off + 8, 11, &cr, 0, NULL), SHOAL_OK);
        CHECK(!cr.swapped && cr.observed == 9, "a failing compare-swap swapped (observed %llu)",
              (unsigned long long)cr.observed);
        struct shoal_stats b = stats();
        CHECK(b.rma_native_puts - a.rma_native_puts == (uint64_t)want_native, "%llu native puts, expected %d",
              (unsigned long long)(b.rma_native_puts - a.rma_native_puts), want_native);
        CHECK(b.rma_native_gets - a.rma_native_gets == (uint64_t)want_native, "%llu native gets, expected %d",
              (unsigned long long)(b.rma_native_gets - a.rma_native_gets), want_native);
        CHECK(b.rma_native_atomics - a.rma_native_atomics == 3u * (uint64_t)want_atomics,
              "%llu native atomics, expected %d", (unsigned long long)(b.rma_native_atomics - a.rma_native_atomics),
              3 * want_atomics);
        CHECK(b.rma_remote - a.rma_remote == (uint64_t)(5 - 2 * want_native - 3 * want_atomics),
              "%llu commands executed by the target", (unsigned long long)(b.rma_remote - a.rma_remote));
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0)
        for (int r = 1; r < np; r++)
            CHECK(((uint64_t *)(s.base + r * 64))[1] == 9, "rank %d's word after its atomics", r);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(s.mem), SHOAL_OK);
}

/* Refused at the initiator with the owner's codes, and without effect. */
static void test_protection(void)
{
    struct seg rw, ro;
    seg_make(&rw, SHOAL_MEM_ALL);
    seg_make(&ro, SHOAL_MEM_READ);
    if (me != 0) {
        uint64_t v = 7, back;
        int64_t old;
        CHECK_RC(shoal_get(&back, rw.all[0], 0, 8, 0, NULL), SHOAL_OK); /* cache both entries */
        CHECK_RC(shoal_get(&back, ro.all[0], 0, 8, 0, NULL), SHOAL_OK);
        struct shoal_stats a = stats();
        shoal_rmem_t bad = rw.all[0];
        bad.key ^= 1;
        CHECK_RC(shoal_put(bad, 0, &v, 8, 0, NULL), SHOAL_EACCES);
        CHECK_RC(shoal_get(&back, bad, 0, 8, 0, NULL), SHOAL_EACCES);
        CHECK_RC(shoal_put(ro.all[0], 0, &v, 8, 0, NULL), SHOAL_EACCES);
        CHECK_RC(shoal_put(rw.all[0], SEG_BYTES - 4, &v, 8, 0, NULL), SHOAL_ERANGE);
        CHECK_RC(shoal_get(&back, rw.all[0], SIZE_MAX - 2, 8, 0, NULL), SHOAL_ERANGE);
        CHECK_RC(shoal_fetch_add64(rw.all[0], 12, 1, &old), SHOAL_EALIGN);
        shoal_handle_t h; /* a refusal reaches a handle and a colour too */
        CHECK_RC(shoal_put(bad, 0, &v, 8, 0, &h), SHOAL_OK);
        CHECK_RC(shoal_wait(&h), SHOAL_EACCES);
        CHECK_RC(shoal_put(rw.all[0], SEG_BYTES, &v, 8, SHOAL_COLOR(4), NULL), SHOAL_OK);
        CHECK_RC(shoal_color_wait(4), SHOAL_ERANGE);
        struct shoal_stats b = stats();
        uint64_t here = b.rma_native_refused - a.rma_native_refused;
        CHECK(here == (want_native ? 7u : 0u), "%llu refusals checked here, expected %d", (unsigned long long)here,
              want_native ? 7 : 0);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0)
        for (size_t i = 0; i < SEG_BYTES; i++)
            CHECK(!rw.base[i] && !ro.base[i], "byte %zu changed by a refused command", i);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(rw.mem), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(ro.mem), SHOAL_OK);
}

/* Destroy a segment every peer has cached and used natively; its memory
 * goes to a new segment, which no later command touches. */
static void test_destroyed(void)
{
    struct seg d;
    seg_make(&d, SHOAL_MEM_ALL);
    uint64_t v = 0xdeadbeef;
    if (me != 0)
        for (int i = 0; i < 3; i++)
            CHECK_RC(shoal_put(d.all[0], (size_t)me * 8, &v, 8, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    shoal_mem_t fresh = -1;
    char *fb = NULL;
    if (me == 0) {
        CHECK_RC(shoal_mem_destroy(d.mem), SHOAL_OK);
        CHECK_RC(shoal_mem_create(SEG_BYTES, SHOAL_MEM_ALL, &fresh), SHOAL_OK);
        CHECK_RC(shoal_mem_local(fresh, (void **)&fb, NULL), SHOAL_OK);
        CHECK(fb == d.base, "the destroyed segment's memory was not reused (the test needs it)");
        memset(fb, 0x5a, SEG_BYTES);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me != 0) {
        uint64_t back = 0;
        int64_t old;
        for (int i = 0; i < 3; i++)
            CHECK_RC(shoal_put(d.all[0], (size_t)me * 8, &v, 8, 0, NULL), SHOAL_ESEGMENT);
        CHECK_RC(shoal_get(&back, d.all[0], 0, 8, 0, NULL), SHOAL_ESEGMENT);
        CHECK(back == 0, "a refused get wrote its destination");
        CHECK_RC(shoal_fetch_add64(d.all[0], 0, 1, &old), SHOAL_ESEGMENT);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0) {
        for (size_t i = 0; i < SEG_BYTES; i++)
            CHECK((unsigned char)fb[i] == 0x5a, "byte %zu of the segment in reused memory written", i);
        CHECK_RC(shoal_mem_destroy(fresh), SHOAL_OK);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

/* A put's handle completes when its data is at the target: several pieces
 * and an odd tail, then a barrier, and the target finds every byte. */
static void test_completion(void)
{
    struct seg s;
    seg_make(&s, SHOAL_MEM_ALL);
    enum { N = 64 * 1024 + 3 };
    static unsigned char src[N];
    if (me != 0) {
        uint64_t x;
        CHECK_RC(shoal_get(&x, s.all[0], 0, 8, 0, NULL), SHOAL_OK); /* cache it */
        size_t per = (SEG_BYTES / (size_t)np) & ~(size_t)63;
        CHECK(per >= N, "at most %zu ranks", (size_t)SEG_BYTES / N);
        for (int round = 0; round < 4; round++) {
            for (size_t i = 0; i < N; i++)
                src[i] = (unsigned char)(i * 13 + (size_t)me * 7 + (size_t)round);
            shoal_handle_t h;
            CHECK_RC(shoal_put(s.all[0], (size_t)me * per, src, N, 0, &h), SHOAL_OK);
            CHECK_RC(shoal_wait(&h), SHOAL_OK);
            CHECK_RC(shoal_barrier(), SHOAL_OK); /* rank 0 checks */
            CHECK_RC(shoal_barrier(), SHOAL_OK);
        }
    } else {
        for (int round = 0; round < 4; round++) {
            CHECK_RC(shoal_barrier(), SHOAL_OK);
            size_t per = (SEG_BYTES / (size_t)np) & ~(size_t)63;
            for (int r = 1; r < np; r++)
                for (size_t i = 0; i < N; i++)
                    CHECK((unsigned char)s.base[(size_t)r * per + i] == (unsigned char)(i * 13 + (size_t)r * 7 +
                                                                                        (size_t)round),
                          "round %d: byte %zu from rank %d not there when its put completed", round, i, r);
            CHECK_RC(shoal_barrier(), SHOAL_OK);
        }
    }
    CHECK_RC(shoal_mem_destroy(s.mem), SHOAL_OK);
}

/* Every rank adds to one word of rank 0's (rank 0 on its own memory, the
 * others natively where atomics are): the sum is exact and no two adds
 * saw the same old value. */
static void test_fetch_add(void)
{
    struct seg s;
    seg_make(&s, SHOAL_MEM_ALL);
    enum { ADDS = 300 };
    int64_t prev = -1;
    for (int i = 0; i < ADDS; i++) {
        int64_t old;
        CHECK_RC(shoal_fetch_add64(s.all[0], 64, 1, &old), SHOAL_OK);
        CHECK(old > prev, "fetch-add %d saw %lld after %lld", i, (long long)old, (long long)prev);
        prev = old;
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    int64_t sum;
    CHECK_RC(shoal_get(&sum, s.all[0], 64, 8, 0, NULL), SHOAL_OK);
    CHECK(sum == (int64_t)ADDS * np, "the counter is %lld, expected %lld", (long long)sum, (long long)ADDS * np);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(s.mem), SHOAL_OK);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_rma_native rw|atomics|none");
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    CHECK(np >= 2 && np <= MAX_RANKS, "2 to %d ranks", MAX_RANKS);
    want_native = strcmp(argv[1], "none") != 0;
    want_atomics = strcmp(argv[1], "atomics") == 0;
    CHECK(want_atomics || !strcmp(argv[1], "rw") || !want_native, "unknown expectation %s", argv[1]);
    test_counters();
    test_protection();
    test_destroyed();
    test_completion();
    test_fetch_add();
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    return 0;
}
