/* CRL over shoal, run through shoalrun at several job sizes: the region
 * calls' semantics, data of every size (fragmented above the medium
 * limit), global operations, the unmapped region cache under pressure,
 * litmus tests of the consistency model, a randomized stress, and misuse
 * that must abort with a message naming the rank, the region and the call.
 * Usage: test_crl <test>   (see the table in main) */
#include "shoal/crl.h"
#include "../common/check.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned me, np;

/* Rank 0 creates count regions of size bytes; every rank learns their ids. */
static void create_shared(rid_t *rids, unsigned count, unsigned size)
{
    if (me == 0) {
        for (unsigned i = 0; i < count; i++)
            rids[i] = rgn_create(size);
        rgn_bcast_send((int)(count * sizeof *rids), rids);
    } else
        rgn_bcast_recv((int)(count * sizeof *rids), rids);
}

/* ---- basic: create, map, rid/size, zeroed contents, read what was written */
static void test_basic(void)
{
    rid_t mine = rgn_create(24);
    rid_t all[64];
    CHECK(np <= 64, "too many ranks");
    for (unsigned r = 0; r < np; r++) {
        rid_t x = mine;
        if (r == me)
            rgn_bcast_send(sizeof x, &x);
        else
            rgn_bcast_recv(sizeof x, &x);
        all[r] = x;
    }
    /* every region starts zeroed, on every rank */
    for (unsigned r = 0; r < np; r++) {
        uint64_t *p = rgn_map(all[r]);
        CHECK(rgn_rid(p) == all[r], "rgn_rid");
        CHECK(rgn_size(p) == 24, "rgn_size %u", rgn_size(p));
        rgn_start_read(p);
        CHECK(p[0] == 0 && p[1] == 0 && p[2] == 0, "region %u not zeroed", r);
        rgn_end_read(p);
        rgn_unmap(p);
    }
    rgn_barrier();
    /* each rank writes into the next rank's region; its owner reads it */
    uint64_t *p = rgn_map(all[(me + 1) % np]);
    uint64_t *again = rgn_map(all[(me + 1) % np]);
    CHECK(p == again, "a second map of a mapped region returns the same copy");
    rgn_unmap(again);
    rgn_start_write(p);
    p[0] = 1000 + me;
    p[2] = 7;
    rgn_end_write(p);
    rgn_unmap(p);
    rgn_barrier();
    uint64_t *own = rgn_map(mine);
    rgn_start_read(own);
    CHECK(own[0] == 1000 + (me + np - 1) % np && own[2] == 7, "rank %u's region holds %llu", me,
          (unsigned long long)own[0]);
    rgn_end_read(own);
    rgn_unmap(own);
    rgn_barrier();
}

/* ---- counter: every rank increments shared counters under write ---- */
static void test_counter(void)
{
    enum { COUNTERS = 3, ROUNDS = 300 };
    rid_t rids[COUNTERS];
    create_shared(rids, COUNTERS, sizeof(uint64_t));
    uint64_t *c[COUNTERS];
    for (unsigned i = 0; i < COUNTERS; i++)
        c[i] = rgn_map(rids[i]);
    for (unsigned k = 0; k < ROUNDS; k++) {
        unsigned i = (k + me) % COUNTERS;
        rgn_start_write(c[i]);
        c[i][0]++;
        rgn_end_write(c[i]);
        if (k % 7 == 0) { /* readers in between must never see a torn count */
            rgn_start_read(c[(i + 1) % COUNTERS]);
            uint64_t v = c[(i + 1) % COUNTERS][0];
            rgn_end_read(c[(i + 1) % COUNTERS]);
            CHECK(v <= (uint64_t)ROUNDS * np, "count %llu too large", (unsigned long long)v);
        }
    }
    rgn_barrier();
    uint64_t total = 0;
    for (unsigned i = 0; i < COUNTERS; i++) {
        rgn_start_read(c[i]);
        total += c[i][0];
        rgn_end_read(c[i]);
        rgn_unmap(c[i]);
    }
    CHECK(total == (uint64_t)ROUNDS * np, "lost increments: %llu of %llu", (unsigned long long)total,
          (unsigned long long)ROUNDS * np);
    rgn_barrier();
}

/* ---- sizes: each rank in turn writes a pattern, all others read it ---- */
static unsigned char pat(unsigned round, size_t i)
{
    return (unsigned char)(round * 37u + i * 11u + (i >> 9));
}

static void test_sizes(void)
{
    static const unsigned sizes[] = {1, 16, 1000, 4096, 70000, 300000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        rid_t rid;
        create_shared(&rid, 1, sizes[s]);
        unsigned char *p = rgn_map(rid);
        CHECK(rgn_size(p) == sizes[s], "size");
        for (unsigned round = 0; round < np; round++) {
            if (round == me) {
                rgn_start_write(p);
                for (size_t i = 0; i < sizes[s]; i++)
                    p[i] = pat(round + (unsigned)s, i);
                rgn_end_write(p);
            }
            rgn_barrier();
            rgn_start_read(p);
            for (size_t i = 0; i < sizes[s]; i++)
                CHECK(p[i] == pat(round + (unsigned)s, i), "size %u round %u: byte %zu wrong", sizes[s], round, i);
            rgn_end_read(p);
            rgn_barrier();
        }
        rgn_unmap(p);
    }
}

/* ---- coll: broadcast from every root (small and fragmented), reductions */
static void test_coll(void)
{
    /* above the medium limit, and many times it (am's pieces) */
    static const size_t sizes[] = {40, 200000, (3u << 20) + 5};
    unsigned char *buf = malloc(sizes[2]);
    CHECK(buf, "malloc");
    for (unsigned root = 0; root < np; root++) {
        for (int pass = 0; pass < 3; pass++) {
            size_t n = sizes[pass];
            if (me == root) {
                for (size_t i = 0; i < n; i++)
                    buf[i] = pat(root, i);
                rgn_bcast_send((int)n, buf);
            } else {
                memset(buf, 0, n);
                rgn_bcast_recv((int)n, buf);
                for (size_t i = 0; i < n; i++)
                    CHECK(buf[i] == pat(root, i), "bcast from %u: byte %zu", root, i);
            }
        }
    }
    free(buf);
    for (int k = 0; k < 20; k++) {
        double sum = rgn_reduce_dadd((double)(me + 1) * 0.5);
        CHECK(sum == 0.25 * np * (np + 1), "dadd %g", sum);
        CHECK(rgn_reduce_dmin((double)me - k) == -(double)k, "dmin");
        CHECK(rgn_reduce_dmax((double)me * 2 + k) == (double)(np - 1) * 2 + k, "dmax");
        rgn_barrier();
    }
}

/* ---- urc: many regions through a small cache, data survives eviction ---- */
static void test_urc(void)
{
    enum { REGIONS = 200, SIZE = 40 };
    rid_t *rids = malloc(REGIONS * sizeof *rids);
    CHECK(rids, "malloc");
    create_shared(rids, REGIONS, SIZE);
    for (int pass = 0; pass < 3; pass++) {
        /* rank (i % np) writes region i; the rest of the time it reads */
        for (unsigned i = 0; i < REGIONS; i++) {
            uint32_t *p = rgn_map(rids[i]);
            if (i % np == me) {
                rgn_start_write(p);
                p[0] = (uint32_t)(i * 10 + (unsigned)pass);
                p[SIZE / 4 - 1] = (uint32_t)pass;
                rgn_end_write(p);
            }
            rgn_unmap(p);
        }
        rgn_barrier();
        for (unsigned k = 0; k < REGIONS; k++) {
            unsigned i = (k + me * 17) % REGIONS;
            uint32_t *p = rgn_map(rids[i]);
            rgn_start_read(p);
            CHECK(p[0] == i * 10 + (unsigned)pass && p[SIZE / 4 - 1] == (uint32_t)pass,
                  "pass %d region %u holds %u", pass, i, p[0]);
            rgn_end_read(p);
            rgn_unmap(p);
        }
        rgn_barrier();
    }
    free(rids);
}

/* ---- litmus tests of the consistency model (§3.4): operations are
 * sequentially consistent.  Regions live at different homes. */

/* A region of size bytes created by rank `owner`; every rank gets its id. */
static rid_t create_at(unsigned owner, unsigned size)
{
    rid_t rid = 0;
    if (me == owner % np) {
        rid = rgn_create(size);
        rgn_bcast_send(sizeof rid, &rid);
    } else
        rgn_bcast_recv(sizeof rid, &rid);
    return rid;
}

static uint64_t read_word(uint64_t *p)
{
    rgn_start_read(p);
    uint64_t v = p[0];
    rgn_end_read(p);
    return v;
}

static void write_word(uint64_t *p, uint64_t v)
{
    rgn_start_write(p);
    p[0] = v;
    rgn_end_write(p);
}

/* Message passing: whoever sees the flag sees the data written before it. */
static void litmus_mp(void)
{
    enum { ROUNDS = 400 };
    uint64_t *data = rgn_map(create_at(1, 8)), *flag = rgn_map(create_at(2, 8));
    unsigned writer = np - 1;
    if (me == writer)
        for (uint64_t k = 1; k <= ROUNDS; k++) {
            write_word(data, k);
            write_word(flag, k);
        }
    else {
        double t0 = test_now();
        uint64_t seen = 0;
        while (seen < ROUNDS) {
            uint64_t f = read_word(flag);
            uint64_t d = read_word(data);
            CHECK(d >= f, "rank %u saw flag %llu before data %llu", me, (unsigned long long)f, (unsigned long long)d);
            CHECK(f >= seen, "flag went back from %llu to %llu", (unsigned long long)seen, (unsigned long long)f);
            seen = f;
            TEST_DEADLINE(t0, 30, "the last flag");
        }
    }
    rgn_barrier();
    rgn_unmap(data);
    rgn_unmap(flag);
}

/* Store buffering: of two ranks that each write one region and then read
 * the other's, at least one sees the other's write. */
static void litmus_sb(void)
{
    enum { ROUNDS = 300 };
    uint64_t *x = rgn_map(create_at(0, 8)), *y = rgn_map(create_at(1, 8));
    for (uint64_t k = 1; k <= ROUNDS; k++) {
        rgn_barrier();
        double saw_other = 0;
        if (me == 0) {
            write_word(x, k);
            saw_other = read_word(y) == k;
        } else if (me == 1) {
            write_word(y, k);
            saw_other = read_word(x) == k;
        }
        CHECK(rgn_reduce_dmax(saw_other) == 1 || np == 1, "round %llu: neither rank saw the other's write",
              (unsigned long long)k);
    }
    rgn_unmap(x);
    rgn_unmap(y);
}

/* Independent reads of independent writes: the two readers agree on the
 * order of the two writes.  Needs 4 ranks. */
static void litmus_iriw(void)
{
    enum { ROUNDS = 300 };
    CHECK(np >= 4, "litmus_iriw needs 4 ranks");
    uint64_t *x = rgn_map(create_at(2, 8)), *y = rgn_map(create_at(3, 8));
    for (uint64_t k = 1; k <= ROUNDS; k++) {
        rgn_barrier();
        double outcome = 0;
        if (me == 0)
            write_word(x, k);
        else if (me == 1)
            write_word(y, k);
        else if (me == 2) {
            uint64_t a = read_word(x), b = read_word(y);
            outcome = (a == k && b != k) ? 1 : 0; /* x before y */
        } else if (me == 3) {
            uint64_t b = read_word(y), a = read_word(x);
            outcome = (b == k && a != k) ? 2 : 0; /* y before x */
        }
        CHECK(rgn_reduce_dadd(outcome) != 3, "round %llu: the readers saw the writes in opposite orders",
              (unsigned long long)k);
    }
    rgn_unmap(x);
    rgn_unmap(y);
}

/* ---- stress: every rank reads and writes a shared set of regions at
 * random, nesting operations in region order, flushing, unmapping and
 * remapping; every region always holds a self-consistent record. */
enum { STRESS_REGIONS = 12, STRESS_WORDS = 24 };

static uint64_t word_for(uint64_t count, unsigned i)
{
    return count * 0x9E3779B97F4A7C15ull + i;
}

static void check_record(const uint64_t *p, unsigned k)
{
    for (unsigned i = 1; i < STRESS_WORDS; i++)
        CHECK(p[i] == (p[0] ? word_for(p[0], i) : 0), "region %u (count %llu): word %u torn", k,
              (unsigned long long)p[0], i);
}

static uint64_t stress_rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void stress(void)
{
    enum { OPS = 1500 };
    rid_t rids[STRESS_REGIONS];
    for (unsigned k = 0; k < STRESS_REGIONS; k++)
        rids[k] = create_at(k, STRESS_WORDS * 8);
    uint64_t *map[STRESS_REGIONS] = {0};
    uint64_t x = 0x1234567ull * (me + 1), writes = 0;
    for (unsigned op = 0; op < OPS; op++) {
        unsigned k = (unsigned)(stress_rng(&x) % STRESS_REGIONS), what = (unsigned)(stress_rng(&x) % 10);
        if (!map[k])
            map[k] = rgn_map(rids[k]);
        uint64_t *p = map[k];
        if (what < 4) { /* write */
            rgn_start_write(p);
            check_record(p, k);
            p[0]++;
            for (unsigned i = 1; i < STRESS_WORDS; i++)
                p[i] = word_for(p[0], i);
            rgn_end_write(p);
            writes++;
        } else if (what < 8) { /* read, sometimes with a nested read of a later region */
            rgn_start_read(p);
            check_record(p, k);
            if (what == 7 && k + 1 < STRESS_REGIONS) {
                if (!map[k + 1])
                    map[k + 1] = rgn_map(rids[k + 1]);
                rgn_start_read(map[k + 1]);
                rgn_start_read(p); /* reads nest */
                check_record(map[k + 1], k + 1);
                rgn_end_read(p);
                rgn_end_read(map[k + 1]);
            }
            rgn_end_read(p);
        } else if (what == 8)
            rgn_flush(p);
        else {
            rgn_unmap(p);
            map[k] = NULL;
        }
    }
    rgn_barrier();
    uint64_t total = 0;
    for (unsigned k = 0; k < STRESS_REGIONS; k++) {
        uint64_t *p = map[k] ? map[k] : rgn_map(rids[k]);
        rgn_start_read(p);
        check_record(p, k);
        total += p[0];
        rgn_end_read(p);
        rgn_unmap(p);
    }
    double all_writes = rgn_reduce_dadd((double)writes);
    CHECK((double)total == all_writes, "regions count %llu writes, ranks made %.0f", (unsigned long long)total,
          all_writes);
}

/* ---- deletion (docs/CRL.md D10) ---- */

/* Who deletes the region of cycle c homed at `home`: the home on even
 * rounds of the ranks, its neighbour on odd ones. */
static unsigned deleter_of(unsigned c, unsigned home)
{
    return (c / np) % 2 ? (home + 1) % np : home;
}

/* One cycle: every rank writes its slot of a fresh region (which must be
 * zero: no data of a deleted region shows through), all read all slots
 * exactly; then, as the apps end, every rank unmaps while the deleter
 * deletes (after a barrier: no operation is left), except one rank that
 * keeps its mapping across the delete and only unmaps it afterwards. */
static rid_t delete_cycle(unsigned c, unsigned size)
{
    unsigned home = c % np, deleter = deleter_of(c, home);
    int keeper = np > 1 && me == (deleter + 1) % np;
    rid_t rid = create_at(home, size);
    uint64_t *p = rgn_map(rid);
    rgn_start_write(p);
    CHECK(p[me] == 0, "cycle %u: a fresh region holds %llu", c, (unsigned long long)p[me]);
    p[me] = (uint64_t)c << 16 | me;
    rgn_end_write(p);
    rgn_barrier();
    rgn_start_read(p);
    for (unsigned r = 0; r < np; r++)
        CHECK(p[r] == ((uint64_t)c << 16 | r), "cycle %u: slot %u holds %llx", c, r, (unsigned long long)p[r]);
    rgn_end_read(p);
    rgn_barrier(); /* no operation on the region is left */
    if (!keeper)
        rgn_unmap(p);
    if (me == deleter)
        rgn_delete(rid);
    rgn_barrier();
    if (keeper) {
        CHECK(rgn_rid(p) == rid && rgn_size(p) == size, "cycle %u: a mapping kept across the delete changed", c);
        rgn_unmap(p);
    }
    return rid;
}

/* Create, write everywhere, read everywhere, delete; rids never repeat. */
static void delete_cycles(void)
{
    enum { CYCLES = 64 };
    rid_t rids[CYCLES];
    for (unsigned c = 0; c < CYCLES; c++) {
        rids[c] = delete_cycle(c, np * 8);
        for (unsigned d = 0; d < c; d++)
            CHECK(rids[d] != rids[c], "cycle %u reuses cycle %u's rid", c, d);
    }
    rgn_barrier();
}

/* Regions whose copies sit in the unmapped region caches in every state
 * (modified, shared, invalid, evicted) are deleted, half of them by their
 * home and half by another rank; the survivors keep their values, new
 * regions start zeroed. */
static void delete_cached(void)
{
    enum { REGIONS = 48, WORDS = 4 };
    rid_t rids[REGIONS];
    for (unsigned k = 0; k < REGIONS; k++)
        rids[k] = create_at(k, WORDS * 8);
    for (unsigned k = 0; k < REGIONS; k++) {
        uint64_t *p = rgn_map(rids[k]);
        if (me == (k + 1) % np) /* a modified copy, or the home's own write */
            write_word(p, 100 + k);
        rgn_unmap(p);
    }
    rgn_barrier();
    for (unsigned k = 0; k < REGIONS; k++)
        if ((me + k) % 3 != 0) { /* shared copies here, the writer's downgraded or invalidated */
            uint64_t *p = rgn_map(rids[k]);
            CHECK(read_word(p) == 100 + k, "region %u holds %llu", k, (unsigned long long)read_word(p));
            if (k % 4 == 1)
                rgn_flush(p);
            rgn_unmap(p);
        }
    rgn_barrier();
    for (unsigned k = 0; k < REGIONS; k += 2) /* even ones go, odd ones stay */
        if (me == (k % 4 ? k % np : (k + 1) % np))
            rgn_delete(rids[k]);
    rgn_barrier();
    for (unsigned k = 1; k < REGIONS; k += 2) {
        uint64_t *p = rgn_map(rids[k]);
        CHECK(read_word(p) == 100 + k, "surviving region %u holds %llu", k, (unsigned long long)read_word(p));
        rgn_unmap(p);
    }
    rid_t fresh = create_at(0, WORDS * 8);
    for (unsigned k = 0; k < REGIONS; k++)
        CHECK(fresh != rids[k], "a new region has deleted region %u's rid", k);
    uint64_t *p = rgn_map(fresh);
    rgn_start_read(p);
    for (unsigned i = 0; i < WORDS; i++)
        CHECK(p[i] == 0, "new region: word %u holds %llu", i, (unsigned long long)p[i]);
    rgn_end_read(p);
    rgn_unmap(p);
    rgn_barrier();
}

/* Bytes malloc has handed out and not had back (0 from allocators that
 * do not keep glibc's books, such as the sanitizers'). */
static size_t heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    return mallinfo2().uordblks;
#else
    return 0;
#endif
}

/* Thousands of cycles of 1 KB regions: the heap does not grow.  Without
 * deletion every home would keep its regions (about 3 MB over the job)
 * and every rank a full cache of copies (1024 entries, over 1 MB). */
static void delete_memory(void)
{
    enum { WARMUP = 100, CYCLES = 3000, SIZE = 1024, SLACK = 256 * 1024 };
    size_t base = 0;
    for (unsigned c = 0; c < WARMUP + CYCLES; c++) {
        if (c == WARMUP) {
            rgn_barrier();
            base = heap_in_use();
        }
        delete_cycle(c, SIZE);
    }
    rgn_barrier();
    size_t now = heap_in_use();
    if (base == 0)
        printf("rank %u: the allocator reports no heap use: memory check skipped\n", me);
    else
        CHECK(now < base + SLACK, "rank %u: the heap grew by %zu bytes over %u create/delete cycles", me,
              now - base, (unsigned)CYCLES);
    rgn_barrier();
}

/* ---- home_busy: a home that only hits its own region still serves the
 * others' requests (every 64th start polls) ---- */
static void home_busy(void)
{
    uint64_t *flag = rgn_map(create_at(0, 8));
    rgn_barrier();
    if (me == 0) {
        double t0 = test_now();
        uint64_t arrived = 0;
        while (arrived < np - 1) { /* hits only, until every other rank's write */
            arrived = read_word(flag);
            TEST_DEADLINE(t0, 20, "the other ranks' writes to a region whose home only hits");
        }
    } else {
        rgn_start_write(flag);
        flag[0]++;
        rgn_end_write(flag);
    }
    rgn_barrier();
    rgn_unmap(flag);
}

/* ---- poll_only: a home that only calls shoal_poll still sends what its
 * handlers could not send at once (run with tiny rings: the grant of a
 * large region fills them) ---- */
#define H_DONE 7
static volatile int done_flag;

static void on_done(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    done_flag = 1;
}

static void poll_only(void)
{
    enum { SIZE = 20000 };
    rid_t rid = create_at(0, SIZE);
    if (me == 0) {
        double t0 = test_now();
        while (!done_flag) { /* no CRL call until rank 1 is done */
            CHECK_RC(shoal_poll(), SHOAL_OK);
            TEST_DEADLINE(t0, 20, "rank 1's read of a region whose home only calls shoal_poll");
        }
    } else if (me == 1) {
        unsigned char *p = rgn_map(rid);
        rgn_start_read(p);
        for (unsigned i = 0; i < SIZE; i++)
            CHECK(p[i] == 0, "byte %u", i);
        rgn_end_read(p);
        rgn_unmap(p);
        CHECK_RC(shoal_am_request_short(0, H_DONE, 0, shoal_noargs), SHOAL_OK);
    }
    rgn_barrier();
}

/* ---- stats: a known sequence on rank 1, whose counters the test's
 * expected output pins (SHOAL_CRL_STATS=1) ---- */
static void stats_sequence(void)
{
    rid_t rid = create_at(0, 16);
    if (me == 1) {
        uint64_t *p = rgn_map(rid);  /* map miss */
        (void)read_word(p);          /* read miss: MsgSharedReq */
        (void)read_word(p);          /* read hit */
        write_word(p, 5);            /* upgrade: MsgModifyReq, MsgModifyAck */
        rgn_flush(p);                /* MsgFlushData */
        rgn_unmap(p);
    }
    rgn_barrier();
}

/* ---- misuse: each must abort naming the rank, the region and the call ---- */
static void misuse_write_in_read(void)
{
    rid_t rid = rgn_create(8);
    void *p = rgn_map(rid);
    rgn_start_read(p);
    rgn_start_write(p);
}

static void misuse_end_without_start(void)
{
    void *p = rgn_map(rgn_create(8));
    rgn_end_write(p);
}

static void misuse_unmapped(void)
{
    void *p = rgn_map(rgn_create(8));
    rgn_unmap(p);
    rgn_start_read(p);
}

static void misuse_bad_rid(void)
{
    if (me == np - 1)
        rgn_map(((rid_t)0 << 32) | 12345u);
    rgn_barrier();
}

static void misuse_delete_bad_rid(void)
{
    rgn_delete(((rid_t)me << 32) | 999u);
}

/* Rank 0 creates a region and every rank learns its rid. */
static rid_t misuse_region(void)
{
    return create_at(0, 8);
}

static void misuse_map_after_delete(void)
{
    rid_t rid = misuse_region();
    if (me == 0)
        rgn_delete(rid);
    rgn_barrier();
    if (me == np - 1)
        rgn_map(rid);
    rgn_barrier();
}

static void misuse_delete_twice(void)
{
    rid_t rid = misuse_region();
    if (me == np - 1) {
        rgn_delete(rid);
        rgn_delete(rid);
    }
    rgn_barrier();
}

static void misuse_delete_mapped(void)
{
    rid_t rid = misuse_region();
    if (me == 0) {
        rgn_map(rid);
        rgn_delete(rid);
    }
    rgn_barrier();
}

/* Rank 1 is reading the region when rank 0 deletes it: rank 1 aborts when
 * the MsgDelete arrives (in the barrier). */
static void misuse_delete_in_operation(void)
{
    rid_t rid = misuse_region();
    if (me == 1)
        rgn_start_read(rgn_map(rid));
    rgn_barrier();
    if (me == 0)
        rgn_delete(rid);
    rgn_barrier();
}

/* Rank 1 deletes while the home is reading the region. */
static void misuse_delete_in_use(void)
{
    rid_t rid = misuse_region();
    if (me == 0)
        rgn_start_read(rgn_map(rid));
    rgn_barrier();
    if (me == 1)
        rgn_delete(rid);
    rgn_barrier();
}

/* Rank 1 keeps its mapping across rank 0's delete (allowed), then starts
 * an operation on it (not). */
static void misuse_use_after_delete(void)
{
    rid_t rid = misuse_region();
    uint64_t *p = me == 1 ? rgn_map(rid) : NULL;
    rgn_barrier();
    if (me == 0)
        rgn_delete(rid);
    rgn_barrier();
    if (me == 1)
        rgn_start_read(p);
    rgn_barrier();
}

static void misuse_bcast_size(void)
{
    uint64_t buf[2] = {0};
    if (me == 0)
        rgn_bcast_send(8, buf);
    else
        rgn_bcast_recv(16, buf);
    rgn_barrier();
}

/* Rank 0 sums while rank 1 takes the maximum: shoal_allreduce names both. */
static void misuse_reduce_mismatch(void)
{
    if (me == 0)
        rgn_reduce_dadd(1.0);
    else
        rgn_reduce_dmax(1.0);
    rgn_barrier();
}

static void misuse_stray_pointer(void)
{
    static uint64_t junk[64];
    rgn_start_read(&junk[32]);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_crl <test>");
    CHECK_RC(shoal_am_register(H_DONE, on_done), SHOAL_OK);
    crl_init();
    me = crl_self_addr();
    np = crl_num_nodes();
    static const struct test_case tests[] = {
        {"basic", test_basic},
        {"counter", test_counter},
        {"sizes", test_sizes},
        {"coll", test_coll},
        {"urc", test_urc},
        {"litmus_mp", litmus_mp},
        {"litmus_sb", litmus_sb},
        {"litmus_iriw", litmus_iriw},
        {"stress", stress},
        {"delete_cycles", delete_cycles},
        {"delete_cached", delete_cached},
        {"delete_memory", delete_memory},
        {"stats", stats_sequence},
        {"home_busy", home_busy},
        {"poll_only", poll_only},
        {"misuse_write_in_read", misuse_write_in_read},
        {"misuse_end_without_start", misuse_end_without_start},
        {"misuse_unmapped", misuse_unmapped},
        {"misuse_bad_rid", misuse_bad_rid},
        {"misuse_stray_pointer", misuse_stray_pointer},
        {"misuse_delete_bad_rid", misuse_delete_bad_rid},
        {"misuse_bcast_size", misuse_bcast_size},
        {"misuse_map_after_delete", misuse_map_after_delete},
        {"misuse_delete_twice", misuse_delete_twice},
        {"misuse_delete_mapped", misuse_delete_mapped},
        {"misuse_delete_in_operation", misuse_delete_in_operation},
        {"misuse_delete_in_use", misuse_delete_in_use},
        {"misuse_use_after_delete", misuse_use_after_delete},
        {"misuse_reduce_mismatch", misuse_reduce_mismatch},
    };
    TEST_RUN_CASE(tests, argv[1]);
    crl_exit();
    return 0;
}
