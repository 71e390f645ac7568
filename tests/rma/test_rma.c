/* One-sided commands: every command, every completion mode, every refusal,
 * at any job size, on both paths (SHOAL_RMA_DIRECT=1: run on mapped memory;
 * 0: run by the target's progress engine).  Usage: test_rma MODE. */
#include "../common/check.h"

#include <shoal.h>
#include <stdint.h>
#include <string.h>

#define SEG_BYTES (1u << 20)

static int me, np;
static shoal_mem_t mem;
#define MAX_RANKS 64
static shoal_rmem_t all[MAX_RANKS];
static char *base;

static void setup(unsigned perms)
{
    CHECK_RC(shoal_mem_create(SEG_BYTES, perms, &mem), SHOAL_OK);
    CHECK_RC(shoal_mem_local(mem, (void **)&base, NULL), SHOAL_OK);
    CHECK_RC(shoal_mem_exchange(mem, all), SHOAL_OK);
}

static uint64_t pattern(int writer, uint64_t i)
{
    return (uint64_t)writer << 40 ^ i * 0x9e3779b97f4a7c15ull;
}

/* put/get/put_flag in every completion mode, to every rank (self too). */
static void test_putget(void)
{
    setup(SHOAL_MEM_ALL);
    enum { N = 3000 }; /* bytes: crosses nothing special; 256 KiB below splits */
    uint64_t buf[N / 8], back[N / 8];
    for (int t = 0; t < np; t++) {
        size_t off = (size_t)me * 8192;
        for (unsigned i = 0; i < N / 8; i++)
            buf[i] = pattern(me, i + (uint64_t)t);
        CHECK_RC(shoal_put(all[t], off, buf, N, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_get(back, all[t], off, N, 0, NULL), SHOAL_OK);
        CHECK(!memcmp(buf, back, N), "blocking get from %d returned other bytes", t);
        shoal_handle_t h;
        buf[0]++;
        CHECK_RC(shoal_put(all[t], off, buf, 8, 0, &h), SHOAL_OK);
        CHECK_RC(shoal_wait(&h), SHOAL_OK);
        CHECK_RC(shoal_get(back, all[t], off, 8, 0, &h), SHOAL_OK);
        CHECK_RC(shoal_wait(&h), SHOAL_OK);
        CHECK(back[0] == buf[0], "handle get saw %llx", (unsigned long long)back[0]);
        buf[0]++;
        CHECK_RC(shoal_put(all[t], off, buf, 8, SHOAL_COLOR(3), NULL), SHOAL_OK);
        CHECK_RC(shoal_color_wait(3), SHOAL_OK);
        buf[1]++;
        CHECK_RC(shoal_put(all[t], off, buf, 16, SHOAL_STATUS_NONE, NULL), SHOAL_OK);
        CHECK_RC(shoal_put(all[t], off + 16, buf + 2, 8, SHOAL_STATUS_FAILURES, NULL), SHOAL_OK);
        CHECK_RC(shoal_fence(), SHOAL_OK);
        CHECK_RC(shoal_get(back, all[t], off, 24, 0, NULL), SHOAL_OK);
        CHECK(!memcmp(back, buf, 24), "fire-and-forget puts to %d not complete after the fence", t);
    }
    /* A transfer bigger than one message on the served path. */
    size_t big = 96 * 1024;
    char *src = malloc(big), *dst = malloc(big);
    for (size_t i = 0; i < big; i++)
        src[i] = (char)(i * 7 + (size_t)me);
    int peer = (me + 1) % np;
    size_t at = 128 * 1024 + (size_t)me * big;
    CHECK_RC(shoal_put(all[peer], at, src, big, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_get(dst, all[peer], at, big, 0, NULL), SHOAL_OK);
    CHECK(!memcmp(src, dst, big), "96 KiB put/get round trip differs");
    free(src);
    free(dst);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    for (int w = 0; w < np; w++) /* what each writer left here last */
        CHECK(((uint64_t *)(base + (size_t)w * 8192))[3] == pattern(w, 3 + (uint64_t)me),
              "word 3 from writer %d", w);
}

/* Registered private memory: peers' commands are served by this rank. */
static void test_register(void)
{
    static uint64_t priv[512];
    shoal_mem_t rm;
    CHECK_RC(shoal_mem_register(priv, sizeof priv, SHOAL_MEM_ALL, &rm), SHOAL_OK);
    static shoal_rmem_t r[MAX_RANKS];
    CHECK_RC(shoal_mem_exchange(rm, r), SHOAL_OK);
    int peer = (me + 1) % np;
    uint64_t v = pattern(me, 1), got = 0;
    CHECK_RC(shoal_put(r[peer], (size_t)me * 8, &v, 8, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_get(&got, r[peer], (size_t)me * 8, 8, 0, NULL), SHOAL_OK);
    CHECK(got == v, "registered memory get");
    int64_t old;
    CHECK_RC(shoal_fetch_add64(r[0], 500 * 8, 1, &old), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    int from = (me + np - 1) % np;
    CHECK(priv[from] == pattern(from, 1), "registered word from %d", from);
    if (me == 0)
        CHECK(priv[500] == (uint64_t)np, "registered fetch-add total %llu", (unsigned long long)priv[500]);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(rm), SHOAL_OK);
}

/* Commands longer than one message (split on the served path) that run
 * past the segment's end, or whose flag does: refused as a whole, nothing
 * written or read, one refusal each.  Returns the refusals made. */
static int test_split_refusals(int t)
{
    size_t chunk = shoal_am_max_medium(), size = 3 * chunk, n = 2 * chunk + 4096;
    shoal_mem_t big;
    static shoal_rmem_t b[MAX_RANKS];
    CHECK_RC(shoal_mem_create(size, SHOAL_MEM_ALL, &big), SHOAL_OK);
    CHECK_RC(shoal_mem_exchange(big, b), SHOAL_OK);
    char *src = malloc(n), *dst = malloc(n);
    CHECK(src && dst, "out of memory");
    memset(src, 0x77, n);
    memset(dst, 0x33, n);
    size_t past = size - n + 8; /* starts inside, ends 8 bytes past the end */
    CHECK_RC(shoal_put(b[t], past, src, n, 0, NULL), SHOAL_ERANGE);
    CHECK_RC(shoal_get(dst, b[t], past, n, 0, NULL), SHOAL_ERANGE);
    CHECK_RC(shoal_put_flag(b[t], 0, src, n, size, 1, 0, NULL), SHOAL_ERANGE); /* flag past the end */
    size_t count = n / 8;
    CHECK_RC(shoal_fetch_op(b[t], past, SHOAL_AOP_ADD, SHOAL_UINT64, src, NULL, count, 0, NULL), SHOAL_ERANGE);
    CHECK_RC(shoal_zbuffer_packed(b[t], past, (const uint64_t *)src, count, 0, NULL), SHOAL_ERANGE);
    CHECK_RC(shoal_put(b[t], past, src, n, SHOAL_STATUS_NONE, NULL), SHOAL_OK);
    CHECK_RC(shoal_fence(), SHOAL_ERANGE);
    for (size_t i = 0; i < n; i++)
        CHECK(dst[i] == 0x33, "a refused get wrote byte %zu of its destination", i);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    char *mine;
    CHECK_RC(shoal_mem_local(big, (void **)&mine, NULL), SHOAL_OK);
    for (size_t i = 0; i < size; i++)
        CHECK(mine[i] == 0, "byte %zu of the target changed by a refused split command", i);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(big), SHOAL_OK);
    free(src);
    free(dst);
    return 6;
}

/* Refusals: documented code, no effect, counted at the owner. */
static void test_misuse(void)
{
    CHECK_RC(shoal_mem_create(4096, SHOAL_MEM_READ, &mem), SHOAL_OK); /* read-only */
    static shoal_rmem_t ro[MAX_RANKS], w[MAX_RANKS];
    CHECK_RC(shoal_mem_exchange(mem, ro), SHOAL_OK);
    char *rob;
    CHECK_RC(shoal_mem_local(mem, (void **)&rob, NULL), SHOAL_OK);
    memset(rob, 0x5a, 4096);
    shoal_mem_t rw;
    CHECK_RC(shoal_mem_create(4096, SHOAL_MEM_ALL, &rw), SHOAL_OK);
    shoal_mem_t huge_mem;
    CHECK_RC(shoal_mem_create(SIZE_MAX, SHOAL_MEM_ALL, &huge_mem), SHOAL_ENOMEM);

    CHECK_RC(shoal_mem_exchange(rw, w), SHOAL_OK);
    struct shoal_stats before;
    CHECK_RC(shoal_stats_get(&before), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);

    int t = (me + 1) % np, refusals = 0;
    uint64_t v = 1, out = 7;
    shoal_rmem_t bad = w[t];
    bad.key ^= 1;
    CHECK_RC(shoal_put(bad, 0, &v, 8, 0, NULL), SHOAL_EACCES); refusals++;
    CHECK_RC(shoal_get(&out, bad, 0, 8, 0, NULL), SHOAL_EACCES); refusals++;
    CHECK(out == 7, "a refused get wrote its destination");
    CHECK_RC(shoal_put(w[t], 4090, &v, 8, 0, NULL), SHOAL_ERANGE); refusals++;
    CHECK_RC(shoal_put(w[t], SIZE_MAX - 2, &v, 8, 0, NULL), SHOAL_ERANGE); refusals++;
    CHECK_RC(shoal_put(ro[t], 0, &v, 8, 0, NULL), SHOAL_EACCES); refusals++;
    CHECK_RC(shoal_fetch_add64(ro[t], 0, 1, NULL), SHOAL_EACCES); refusals++;
    CHECK_RC(shoal_fetch_add64(w[t], 4, 1, NULL), SHOAL_EALIGN);
    CHECK_RC(shoal_put_flag(w[t], 0, &v, 8, 12, 1, 0, NULL), SHOAL_EALIGN); refusals++;
    CHECK_RC(shoal_fifo_enqueue(w[t], 0, &v, 8, 0, NULL), SHOAL_ENOSTRUCT); refusals++;
    CHECK_RC(shoal_signal(w[t], 64, &v, 8, 0, 0, NULL), SHOAL_ENOSTRUCT); refusals++;
    char huge[5000] = {0};
    CHECK_RC(shoal_zbuffer(w[t], 0, 1, 8, huge, sizeof huge, NULL, 0, NULL), SHOAL_ETOOBIG);
    CHECK_RC(shoal_fifo_enqueue(w[t], 0, huge, sizeof huge, 0, NULL), SHOAL_ETOOBIG);
    shoal_rmem_t nowhere = w[t];
    nowhere.rank = np;
    CHECK_RC(shoal_put(nowhere, 0, &v, 8, 0, NULL), SHOAL_ERANK);
    nowhere.rank = -1;
    CHECK_RC(shoal_get(&out, nowhere, 0, 8, 0, NULL), SHOAL_ERANK);
    CHECK_RC(shoal_put(w[t], 0, NULL, 8, 0, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_put(w[t], 0, &v, 8, SHOAL_STATUS_NONE | SHOAL_STATUS_FAILURES, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_put(w[t], 0, &v, 8, 0x10000, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_fetch_op(w[t], 0, SHOAL_AOP_XOR, SHOAL_DOUBLE, &v, NULL, 1, 0, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_fifo_init(rw, 0, 8, 1, 0), SHOAL_EINVAL); /* a FIFO needs two entries */
    for (int code = SHOAL_EACCES; code >= SHOAL_ENOSTRUCT; code--)
        CHECK(strncmp(shoal_strerror(code), "SHOAL_E", 7) == 0, "no name for status %d", code);
    shoal_handle_t hc; /* a handle and a colour: both complete */
    CHECK_RC(shoal_put(w[t], 0, &v, 8, SHOAL_COLOR(6), &hc), SHOAL_OK);
    CHECK_RC(shoal_wait(&hc), SHOAL_OK);
    CHECK_RC(shoal_color_wait(6), SHOAL_OK);
    CHECK_RC(shoal_color_wait(0), SHOAL_EINVAL);
    CHECK_RC(shoal_color_wait(SHOAL_COLORS), SHOAL_EINVAL);
    /* refusals through every completion mode */
    shoal_handle_t h;
    CHECK_RC(shoal_put(bad, 0, &v, 8, 0, &h), SHOAL_OK); refusals++;
    CHECK_RC(shoal_wait(&h), SHOAL_EACCES);
    CHECK_RC(shoal_put(bad, 0, &v, 8, SHOAL_COLOR(5), NULL), SHOAL_OK); refusals++;
    CHECK_RC(shoal_put(w[t], 0, &v, 8, SHOAL_COLOR(5), NULL), SHOAL_OK);
    CHECK_RC(shoal_color_wait(5), SHOAL_EACCES);
    CHECK_RC(shoal_color_wait(5), SHOAL_OK); /* cleared */
    CHECK_RC(shoal_put(w[t], 4096, &v, 8, SHOAL_STATUS_NONE, NULL), SHOAL_OK); refusals++;
    CHECK_RC(shoal_fence(), SHOAL_ERANGE);
    CHECK_RC(shoal_fence(), SHOAL_OK);
    refusals += test_split_refusals(t);
    /* fire and forget: results would have nowhere to go */
    CHECK_RC(shoal_get(&out, w[t], 0, 8, SHOAL_STATUS_FAILURES, NULL), SHOAL_EINVAL);
    CHECK_RC(shoal_fetch_op(w[t], 0, SHOAL_AOP_ADD, SHOAL_INT64, &v, &out, 1, SHOAL_STATUS_NONE, NULL),
             SHOAL_EINVAL);
    struct shoal_cas_result cr;
    CHECK_RC(shoal_cas(w[t], 0, 0, 0, 1, &cr, SHOAL_STATUS_NONE, NULL), SHOAL_EINVAL);
    CHECK(out == 7, "a refused get wrote its destination");
    /* a destroyed segment */
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(mem), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(mem), SHOAL_ESEGMENT);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_get(&out, ro[t], 0, 8, 0, NULL), SHOAL_ESEGMENT); refusals++;

    CHECK_RC(shoal_barrier(), SHOAL_OK);
    struct shoal_stats after;
    CHECK_RC(shoal_stats_get(&after), SHOAL_OK);
    /* every rank made the same refusals against its right neighbour; those
     * of native commands are counted where they were checked, the initiator */
    uint64_t counted = after.rma_refused - before.rma_refused + after.rma_native_refused - before.rma_native_refused;
    CHECK(counted == (uint64_t)refusals, /* misaligned fetch-op: caught before issue */
          "%llu accesses to this rank refused (%llu by its own native commands), expected %d",
          (unsigned long long)counted, (unsigned long long)(after.rma_native_refused - before.rma_native_refused),
          refusals);
    char *wb;
    CHECK_RC(shoal_mem_local(rw, (void **)&wb, NULL), SHOAL_OK);
    CHECK(((uint64_t *)wb)[0] == 1, "the one valid put is there");
    for (int i = 8; i < 4096; i++)
        CHECK(wb[i] == 0, "byte %d of the target changed by a refused command", i);
    CHECK(after.rma_failures >= before.rma_failures + 3, "failures reported to this rank not counted");
    CHECK_RC(shoal_mem_destroy(rw), SHOAL_OK);
}

/* Every atomic, the hot spot, and a CAS lock protecting plain data. */
static void test_atomics(void)
{
    setup(SHOAL_MEM_ALL);
    enum { K = 2000 };
    for (int i = 0; i < K; i++)
        CHECK_RC(shoal_fetch_add64(all[0], 0, 1, NULL), SHOAL_OK);
    int64_t ops[4] = {1, -2, 3, -4}, old[4];
    CHECK_RC(shoal_fetch_op(all[0], 64, SHOAL_AOP_ADD, SHOAL_INT64, ops, old, 4, 0, NULL), SHOAL_OK);
    double d = 0.5, dold;
    CHECK_RC(shoal_fetch_op(all[0], 128, SHOAL_AOP_ADD, SHOAL_DOUBLE, &d, &dold, 1, 0, NULL), SHOAL_OK);
    uint64_t bit = 1ull << me, uold;
    CHECK_RC(shoal_fetch_op(all[0], 192, SHOAL_AOP_OR, SHOAL_UINT64, &bit, &uold, 1, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_fetch_op(all[0], 200, SHOAL_AOP_XOR, SHOAL_UINT64, &bit, &uold, 1, 0, NULL), SHOAL_OK);
    uint64_t mask = ~bit;
    CHECK_RC(shoal_fetch_op(all[0], 208, SHOAL_AOP_AND, SHOAL_UINT64, &mask, NULL, 1, 0, NULL), SHOAL_OK);
    /* CAS lock around a get-increment-put of a plain word */
    for (int i = 0; i < 200; i++) {
        struct shoal_cas_result r;
        do
            CHECK_RC(shoal_cas(all[0], 256, 0, 256, (uint64_t)me + 1, &r, 0, NULL), SHOAL_OK);
        while (!r.swapped);
        uint64_t v;
        CHECK_RC(shoal_get(&v, all[0], 320, 8, 0, NULL), SHOAL_OK);
        v++;
        CHECK_RC(shoal_put(all[0], 320, &v, 8, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_fence(), SHOAL_OK);
        CHECK_RC(shoal_cas(all[0], 256, (uint64_t)me + 1, 256, 0, &r, 0, NULL), SHOAL_OK);
        CHECK(r.swapped, "unlock failed: lock word %llu", (unsigned long long)r.observed);
    }
    /* generalized CAS: compare one word, swap another */
    if (me == 0) {
        ((uint64_t *)base)[48] = 11;
        ((uint64_t *)base)[49] = 100;
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == np - 1) {
        struct shoal_cas_result r;
        CHECK_RC(shoal_cas(all[0], 48 * 8, 12, 49 * 8, 200, &r, 0, NULL), SHOAL_OK);
        CHECK(!r.swapped && r.observed == 11, "mismatching CAS swapped (observed %llu)", (unsigned long long)r.observed);
        shoal_handle_t h;
        CHECK_RC(shoal_cas(all[0], 48 * 8, 11, 49 * 8, 200, &r, 0, &h), SHOAL_OK);
        CHECK_RC(shoal_wait(&h), SHOAL_OK);
        CHECK(r.swapped && r.old == 100 && r.observed == 11, "generalized CAS result %d %llu",
              r.swapped, (unsigned long long)r.old);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0) {
        uint64_t *w = (uint64_t *)base;
        CHECK(w[0] == (uint64_t)np * K, "hot spot total %llu, expected %llu", (unsigned long long)w[0],
              (unsigned long long)np * K);
        CHECK((int64_t)w[8] == np * 1 && (int64_t)w[9] == -2 * np && (int64_t)w[10] == 3 * np &&
              (int64_t)w[11] == -4 * np, "vector fetch-add");
        double sum;
        memcpy(&sum, &w[16], 8);
        CHECK(sum == 0.5 * np, "double fetch-add %g", sum);
        uint64_t full = np >= 64 ? ~0ull : (1ull << np) - 1;
        CHECK(w[24] == full && w[25] == full, "or/xor words %llx %llx", (unsigned long long)w[24],
              (unsigned long long)w[25]);
        CHECK(w[40] == 200u * (unsigned)np, "CAS lock lost updates: %llu", (unsigned long long)w[40]);
        CHECK(w[49] == 200, "generalized CAS target %llu", (unsigned long long)w[49]);
    }
    /* swap returns the previous value */
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    uint64_t mine = 1000 + (uint64_t)me, prev;
    CHECK_RC(shoal_fetch_op(all[0], 512, SHOAL_AOP_SWAP, SHOAL_UINT64, &mine, &prev, 1, 0, NULL), SHOAL_OK);
    uint64_t sum_prev = prev;
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    (void)sum_prev;
}

static void test_zbuffer(void)
{
    setup(SHOAL_MEM_ALL);
    if (me == 0) {
        ((int64_t *)base)[0] = 1000;
        for (int i = 0; i < 16; i++)
            ((uint64_t *)base)[64 + i] = SHOAL_ZCELL(1000, 0);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    /* every rank writes depth 100 + rank: the nearest (rank 0) must win */
    char img[64];
    memset(img, 'A' + me, sizeof img);
    int written = -1;
    CHECK_RC(shoal_zbuffer(all[0], 0, 100 + me, 8, img, sizeof img, &written, 0, NULL), SHOAL_OK);
    uint64_t cells[16];
    for (int i = 0; i < 16; i++)
        cells[i] = SHOAL_ZCELL(100 + ((i + me) % np), (uint32_t)(me * 100 + i));
    CHECK_RC(shoal_zbuffer_packed(all[0], 64 * 8, cells, 16, 0, NULL), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0) {
        CHECK(((int64_t *)base)[0] == 100, "z ref %lld", (long long)((int64_t *)base)[0]);
        for (int i = 0; i < 64; i++)
            CHECK(base[8 + i] == 'A', "z data from a farther writer");
        for (int i = 0; i < 16; i++) {
            uint64_t c = ((uint64_t *)base)[64 + i];
            int winner = (np - i % np) % np; /* (i + r) % np == 0 */
            CHECK(c == SHOAL_ZCELL(100, (uint32_t)(winner * 100 + i)), "packed cell %d = %llx", i,
                  (unsigned long long)c);
        }
    }
    /* a farther write changes nothing and says so */
    CHECK_RC(shoal_zbuffer(all[0], 0, 500, 8, img, 8, &written, 0, NULL), SHOAL_OK);
    CHECK(written == 0, "a farther z write reported written");
}

/* Takes one entry of rank 0's FIFO at offset 0, checking per-sender order. */
static int fifo_take(uint64_t *next, uint64_t *got)
{
    uint64_t v;
    int src;
    int rc = shoal_fifo_dequeue(mem, 0, &v, sizeof v, NULL, &src);
    if (rc == SHOAL_EAGAIN)
        return 0;
    CHECK_RC(rc, SHOAL_OK);
    CHECK((int)(v >> 32) == src && (v & 0xffffffffu) == next[src], "entry %llx from %d out of order",
          (unsigned long long)v, src);
    next[src]++;
    (*got)++;
    return 1;
}

/* FIFO overflow and dequeue without any handler at the owner. */
static void test_fifo(void)
{
    setup(SHOAL_MEM_ALL);
    enum { CAP = 8 };
    CHECK_RC(shoal_fifo_init(mem, 0, 32, CAP, 0), SHOAL_OK);
    CHECK(shoal_fifo_footprint(32, CAP, 0) > 0, "footprint");
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == np - 1) {
        int stored = 0, full = 0;
        for (uint64_t i = 0; i < CAP + 4; i++) {
            int rc = shoal_fifo_enqueue(all[0], 0, &i, 8, 0, NULL);
            CHECK(rc == SHOAL_OK || rc == SHOAL_EFULL, "enqueue %llu: %s", (unsigned long long)i, shoal_strerror(rc));
            stored += rc == SHOAL_OK;
            full += rc == SHOAL_EFULL;
        }
        CHECK(stored == CAP && full == 4, "stored %d cancelled %d", stored, full);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0) {
        uint64_t v;
        size_t n;
        int src;
        for (uint64_t i = 0; i < CAP; i++) {
            CHECK_RC(shoal_fifo_dequeue(mem, 0, &v, sizeof v, &n, &src), SHOAL_OK);
            CHECK(v == i && n == 8 && src == np - 1, "entry %llu: %llu from %d", (unsigned long long)i,
                  (unsigned long long)v, src);
        }
        CHECK_RC(shoal_fifo_dequeue(mem, 0, &v, sizeof v, &n, &src), SHOAL_EAGAIN);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    /* everyone sends to rank 0 while it drains: nothing lost or duplicated */
    enum { M = 500 };
    uint64_t next[64] = {0}, got = 0, want = (uint64_t)(np == 1 ? 1 : np - 1) * M;
    double t0 = test_now();
    if (me != 0 || np == 1) {
        for (uint64_t i = 0; i < M; i++) {
            uint64_t msg = (uint64_t)me << 32 | i;
            int rc;
            while ((rc = shoal_fifo_enqueue(all[0], 0, &msg, 8, 0, NULL)) == SHOAL_EFULL) {
                if (me == 0)
                    fifo_take(next, &got);
                shoal_poll();
                TEST_DEADLINE(t0, 20, "room in the FIFO");
            }
            CHECK_RC(rc, SHOAL_OK);
        }
    }
    while (me == 0 && got < want) {
        if (!fifo_take(next, &got))
            shoal_poll();
        TEST_DEADLINE(t0, 20, "FIFO entries");
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

/* FIFOe: several senders overflow a tiny queue; each one's order survives. */
static void test_fifoe(void)
{
    setup(SHOAL_MEM_ALL);
    CHECK_RC(shoal_fifo_init(mem, 0, 16, 4, SHOAL_FIFO_ORDERED), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    /* the three statuses, seen by one sender on a full queue */
    if (me == 0) {
        uint64_t v = 0;
        for (int i = 0; i < 4; i++)
            CHECK_RC(shoal_fifo_enqueue(all[0], 0, &v, 8, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_fifo_enqueue(all[0], 0, &v, 8, 0, NULL), SHOAL_EFULL);
        CHECK_RC(shoal_fifo_enqueue(all[0], 0, &v, 8, 0, NULL), SHOAL_ESTOPPED);
        CHECK_RC(shoal_fifo_dequeue(mem, 0, &v, 8, NULL, NULL), SHOAL_OK);
        CHECK_RC(shoal_fifo_enqueue(all[0], 0, &v, 8, 0, NULL), SHOAL_ESTOPPED); /* room, but stopped */
        CHECK_RC(shoal_fifo_enqueue(all[0], 0, &v, 8, SHOAL_FIFO_RETRY, NULL), SHOAL_OK);
        CHECK_RC(shoal_fifo_enqueue(all[0], 0, &v, 8, 0, NULL), SHOAL_EFULL);
        while (shoal_fifo_dequeue(mem, 0, &v, 8, NULL, NULL) == SHOAL_OK) {
        }
        CHECK_RC(shoal_fifo_enqueue(all[0], 0, &v, 8, SHOAL_FIFO_RETRY, NULL), SHOAL_OK);
        CHECK_RC(shoal_fifo_dequeue(mem, 0, &v, 8, NULL, NULL), SHOAL_OK);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    enum { M = 400 };
    struct shoal_stats st0, st1;
    CHECK_RC(shoal_stats_get(&st0), SHOAL_OK);
    shoal_fifoe_sender_t *s;
    CHECK_RC(shoal_fifoe_sender_create(all[0], 0, 16, &s), SHOAL_OK);
    uint64_t next[64] = {0}, got = 0, want = (uint64_t)np * M;
    double t0 = test_now();
    unsigned stalls = 0;
    for (uint64_t i = 0; i < M; i++) {
        uint64_t msg = (uint64_t)me << 32 | i;
        int rc;
        while ((rc = shoal_fifoe_send(s, &msg, 8)) == SHOAL_EAGAIN) {
            shoal_poll();
            TEST_DEADLINE(t0, 30, "room in the FIFOe sender");
            if (me == 0 && ++stalls % 3 == 0) { /* the owner drains slowly while it sends */
                uint64_t v;
                int src;
                if (shoal_fifo_dequeue(mem, 0, &v, 8, NULL, &src) == SHOAL_OK) {
                    CHECK((v & 0xffffffffu) == next[src], "FIFOe entry %llx from %d out of order",
                          (unsigned long long)v, src);
                    next[src]++;
                    got++;
                }
            }
        }
        CHECK_RC(rc, SHOAL_OK);
    }
    while (me == 0 && got < want) {
        shoal_fifoe_progress(s);
        uint64_t v;
        int src;
        int rc = shoal_fifo_dequeue(mem, 0, &v, 8, NULL, &src);
        if (rc == SHOAL_EAGAIN) {
            shoal_poll();
            TEST_DEADLINE(t0, 30, "FIFOe entries");
            continue;
        }
        CHECK((v & 0xffffffffu) == next[src], "FIFOe entry %llx from %d out of order (expected %llu)",
              (unsigned long long)v, src, (unsigned long long)next[src]);
        next[src]++;
        got++;
    }
    CHECK_RC(shoal_fifoe_flush(s, 30), SHOAL_OK);
    CHECK_RC(shoal_fifoe_sender_destroy(s), SHOAL_OK);
    /* the queue really overflowed: cancellations were resent */
    CHECK_RC(shoal_stats_get(&st1), SHOAL_OK);
    CHECK_RC(shoal_fetch_add64(all[0], 4096, (int64_t)(st1.rma_failures - st0.rma_failures), NULL), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0)
        CHECK(*(uint64_t *)(base + 4096) > 0, "no FIFOe entry was ever cancelled: the test tested nothing");
}

static volatile int sig_calls;
static volatile int sig_last_src = -1;
static volatile uint64_t sig_last;
static void on_signal(shoal_mem_t m, size_t off, int src, const void *data, size_t n, size_t offset)
{
    (void)m, (void)off, (void)offset;
    CHECK(n == 8, "signal datum of %zu bytes", n);
    memcpy((void *)&sig_last, data, 8);
    sig_last_src = src;
    sig_calls++;
}

/* Storage modes and invocation conditions, each against a fresh structure. */
static void test_signal(void)
{
    CHECK_RC(shoal_signal_register(3, on_signal), SHOAL_OK);
    setup(SHOAL_MEM_ALL);
    struct shoal_signal_config cfgs[] = {
        {SHOAL_SIG_STORE_QUEUE, SHOAL_SIG_FIRST, 3, 16, 8},
        {SHOAL_SIG_STORE_BUFFER, SHOAL_SIG_EVERY, 3, 64, 0},
        {SHOAL_SIG_STORE_BUFFER_OFFSET, SHOAL_SIG_FIRST_BLOCKING, 3, 64, 0},
        {SHOAL_SIG_STORE_NONE, SHOAL_SIG_EVERY_BLOCKING, 3, 0, 0},
        {SHOAL_SIG_STORE_QUEUE, SHOAL_SIG_EVERY, SHOAL_SIG_POLL, 16, 4},
    };
    size_t at[5], off = 0;
    for (int i = 0; i < 5; i++) {
        at[i] = off;
        CHECK_RC(shoal_signal_init(mem, off, &cfgs[i]), SHOAL_OK);
        off += (shoal_signal_footprint(&cfgs[i]) + 63) / 64 * 64;
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    int owner = 0, sender = np - 1;
    if (me == sender) {
        uint64_t v = 41;
        /* FIRST + QUEUE: one invocation, later arrivals queue */
        for (int i = 0; i < 3; i++, v++)
            CHECK_RC(shoal_signal(all[owner], at[0], &v, 8, 0, 0, NULL), SHOAL_OK);
        /* EVERY + BUFFER: each arrival runs, newest wins the buffer */
        CHECK_RC(shoal_signal(all[owner], at[1], &v, 8, 0, 0, NULL), SHOAL_OK);
        v++;
        CHECK_RC(shoal_signal(all[owner], at[1], &v, 8, 0, 0, NULL), SHOAL_OK);
        /* FIRST_BLOCKING: the second is cancelled until the owner calls next */
        CHECK_RC(shoal_signal(all[owner], at[2], &v, 8, 16, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_signal(all[owner], at[2], &v, 8, 16, 0, NULL), SHOAL_ECANCELED);
        CHECK_RC(shoal_signal(all[owner], at[2], &v, 8, 60, 0, NULL), SHOAL_ECANCELED);
        /* EVERY_BLOCKING, no storage */
        CHECK_RC(shoal_signal(all[owner], at[3], &v, 8, 0, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_signal(all[owner], at[3], &v, 8, 0, 0, NULL), SHOAL_OK);
        /* polling queue: 4 stored, the fifth cancelled */
        for (int i = 0; i < 4; i++)
            CHECK_RC(shoal_signal(all[owner], at[4], &v, 8, 0, 0, NULL), SHOAL_OK);
        CHECK_RC(shoal_signal(all[owner], at[4], &v, 8, 0, 0, NULL), SHOAL_EFULL);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == owner) {
        CHECK(sig_calls == 1 + 2 + 1 + 2, "%d handler calls, expected 6", sig_calls);
        CHECK(sig_last_src == sender, "signal source %d", sig_last_src);
        int running;
        uint32_t queued;
        CHECK_RC(shoal_signal_state(mem, at[0], &running, &queued), SHOAL_OK);
        CHECK(running == 1 && queued == 3, "FIRST queue: running %d queued %u", running, queued);
        uint64_t v;
        size_t n;
        int src;
        for (uint64_t i = 0; i < 3; i++) {
            CHECK_RC(shoal_signal_next(mem, at[0], &v, 8, &n, &src), SHOAL_OK);
            CHECK(v == 41 + i && src == sender, "queued signal %llu", (unsigned long long)v);
        }
        CHECK_RC(shoal_signal_next(mem, at[0], &v, 8, &n, &src), SHOAL_EAGAIN);
        CHECK_RC(shoal_signal_state(mem, at[0], &running, &queued), SHOAL_OK);
        CHECK(running == 0 && queued == 0, "done call left running %d", running);
        CHECK(*(uint64_t *)(base + at[1] + 128) == 45, "signal buffer keeps the newest");
        CHECK(*(uint64_t *)(base + at[2] + 128 + 16) == 45, "signal buffer+offset");
        CHECK_RC(shoal_signal_next(mem, at[2], NULL, 0, NULL, NULL), SHOAL_EAGAIN); /* clears running */
        CHECK_RC(shoal_signal_state(mem, at[4], &running, &queued), SHOAL_OK);
        CHECK(queued == 4 && running == 0, "polling queue holds %u", queued);
        CHECK_RC(shoal_signal_enable(mem, at[3], 0), SHOAL_OK);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == sender) {
        uint64_t v = 7;
        CHECK_RC(shoal_signal(all[owner], at[2], &v, 8, 0, 0, NULL), SHOAL_OK); /* runnable again */
        CHECK_RC(shoal_signal(all[owner], at[2], &v, 8, 64, 0, NULL), SHOAL_ECANCELED);
        CHECK_RC(shoal_signal(all[owner], at[3], &v, 8, 0, 0, NULL), SHOAL_ECANCELED); /* disabled */
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == owner)
        CHECK(sig_calls == 7, "%d handler calls after re-arming, expected 7", sig_calls);
}

/* Colour counters: issued and completed per colour, waited separately. */
static void test_colors(void)
{
    setup(SHOAL_MEM_ALL);
    int t = (me + 1) % np;
    uint64_t v = 1, i0, c0, i1, c1;
    CHECK_RC(shoal_color_counts(2, &i0, &c0), SHOAL_OK);
    for (int i = 0; i < 100; i++)
        CHECK_RC(shoal_fetch_op(all[t], 0, SHOAL_AOP_ADD, SHOAL_UINT64, &v, NULL, 1, SHOAL_COLOR(2), NULL), SHOAL_OK);
    for (int i = 0; i < 50; i++)
        CHECK_RC(shoal_put(all[t], 64 + (size_t)i * 8, &v, 8, SHOAL_COLOR(9), NULL), SHOAL_OK);
    CHECK_RC(shoal_color_counts(2, &i1, &c1), SHOAL_OK);
    CHECK(i1 - i0 == 100, "colour 2 issued %llu", (unsigned long long)(i1 - i0));
    CHECK_RC(shoal_color_wait(2), SHOAL_OK);
    CHECK_RC(shoal_color_counts(2, &i1, &c1), SHOAL_OK);
    CHECK(c1 == i1, "colour 2 completed %llu of %llu after its wait", (unsigned long long)c1,
          (unsigned long long)i1);
    CHECK_RC(shoal_color_wait(9), SHOAL_OK);
    uint64_t got;
    CHECK_RC(shoal_get(&got, all[t], 64 + 49 * 8, 8, 0, NULL), SHOAL_OK);
    CHECK(got == 1, "colour 9 put");
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK(*(uint64_t *)base == 100, "colour adds arrived: %llu", (unsigned long long)*(uint64_t *)base);
}

/* put_flag: whoever sees the flag sees all the data. */
static void test_putflag(void)
{
    setup(SHOAL_MEM_ALL);
    enum { N = 64 * 1024, ROUNDS = 200 };
    int to = (me + 1) % np, from = (me + np - 1) % np;
    uint64_t *src = malloc(N), *data = (uint64_t *)(base + 4096);
    volatile uint64_t *flag = (volatile uint64_t *)base, *ack = (volatile uint64_t *)(base + 64);
    for (uint64_t r = 1; r <= ROUNDS; r++) {
        for (size_t i = 0; i < N / 8; i++)
            src[i] = r * 1000003 + i;
        double t0 = test_now();
        /* wait until the receiver took the previous round */
        uint64_t a = 0;
        for (;;) {
            CHECK_RC(shoal_get(&a, all[to], 64, 8, 0, NULL), SHOAL_OK);
            if (a + 1 >= r)
                break;
            shoal_poll();
            TEST_DEADLINE(t0, 20, "the receiver's acknowledgement");
        }
        CHECK_RC(shoal_put_flag(all[to], 4096, src, N, 0, r, 0, NULL), SHOAL_OK);
        while (*flag < r) {
            shoal_poll();
            TEST_DEADLINE(t0, 20, "the flag");
        }
        for (size_t i = 0; i < N / 8; i++)
            CHECK(data[i] == r * 1000003 + i, "round %llu: word %zu from %d not there when the flag was",
                  (unsigned long long)r, i, from);
        *ack = r;
    }
    free(src);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

/* Destroy while a peer hammers the segment: no crash, and every command
 * after the destroy fails.  Then destroy while the peer is computing right
 * after a command: its memory must not be handed out again until the peer
 * has been seen outside any command. */
static void test_destroy(void)
{
    if (np < 2)
        return;
    setup(SHOAL_MEM_ALL);
    uint64_t v = 0xdeadbeef;
    if (me == 1) {
        int rc, n = 0;
        double t0 = test_now();
        while ((rc = shoal_put(all[0], 0, &v, 8, 0, NULL)) == SHOAL_OK) {
            TEST_DEADLINE(t0, 20, "the destroy to take effect");
            if (++n % 64 == 0)
                shoal_poll();
        }
        CHECK_RC(rc, SHOAL_ESEGMENT);
        for (int i = 0; i < 100; i++)
            CHECK_RC(shoal_put(all[0], (size_t)i * 8, &v, 8, 0, NULL), SHOAL_ESEGMENT);
    }
    shoal_mem_t fresh = -1;
    char *fb = NULL;
    if (me == 0) {
        double t0 = test_now();
        while (*(volatile uint64_t *)base != 0xdeadbeef) {
            shoal_poll();
            TEST_DEADLINE(t0, 20, "the peer's puts");
        }
        CHECK_RC(shoal_mem_destroy(mem), SHOAL_OK);
        CHECK_RC(shoal_mem_create(SEG_BYTES, SHOAL_MEM_ALL, &fresh), SHOAL_OK);
        CHECK_RC(shoal_mem_local(fresh, (void **)&fb, NULL), SHOAL_OK);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0)
        for (size_t i = 0; i < SEG_BYTES / 8; i++)
            CHECK(((uint64_t *)fb)[i] == 0, "word %zu of a fresh segment written after the destroy", i);

    /* phase 2: the peer computes right after a command */
    shoal_mem_t m2;
    char *b2;
    CHECK_RC(shoal_mem_create(SEG_BYTES, SHOAL_MEM_ALL, &m2), SHOAL_OK);
    CHECK_RC(shoal_mem_local(m2, (void **)&b2, NULL), SHOAL_OK);
    CHECK_RC(shoal_mem_exchange(m2, all), SHOAL_OK);
    if (me == 1) {
        CHECK_RC(shoal_put(all[0], 8, &v, 8, 0, NULL), SHOAL_OK);
        double t0 = test_now();
        while (test_now() - t0 < 0.3) { /* computing: no library call */
        }
        CHECK_RC(shoal_put(all[0], 8, &v, 8, 0, NULL), SHOAL_ESEGMENT);
    }
    if (me == 0) {
        double t0 = test_now();
        while (((volatile uint64_t *)b2)[1] != 0xdeadbeef) {
            shoal_poll();
            TEST_DEADLINE(t0, 20, "the peer's put");
        }
        CHECK_RC(shoal_mem_destroy(m2), SHOAL_OK);
        shoal_mem_t m3;
        char *b3;
        CHECK_RC(shoal_mem_create(SEG_BYTES, SHOAL_MEM_ALL, &m3), SHOAL_OK);
        CHECK_RC(shoal_mem_local(m3, (void **)&b3, NULL), SHOAL_OK);
        /* a peer on the network never writes it: its commands run here and
         * find the segment dead, so reuse at once is safe there */
        CHECK(!shoal_rank_local(1) || b3 + SEG_BYTES <= b2 || b3 >= b2 + SEG_BYTES,
              "memory of a destroyed segment reused while a peer could still be writing it");
        CHECK_RC(shoal_mem_destroy(m3), SHOAL_OK);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    /* now that the peer has polled, memory comes back, zero-filled */
    if (me == 0) {
        int reused = 0;
        for (int i = 0; i < 4; i++) {
            shoal_mem_t m;
            char *b;
            CHECK_RC(shoal_mem_create(SEG_BYTES, SHOAL_MEM_ALL, &m), SHOAL_OK);
            CHECK_RC(shoal_mem_local(m, (void **)&b, NULL), SHOAL_OK);
            reused |= b == b2;
            for (size_t j = 0; j < SEG_BYTES / 8; j += 512)
                CHECK(((uint64_t *)b)[j] == 0, "recycled segment not zero");
            memset(b, 1, SEG_BYTES);
            CHECK_RC(shoal_mem_destroy(m), SHOAL_OK);
        }
        CHECK(reused, "destroyed memory never came back");
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_rma MODE");
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    CHECK(np <= MAX_RANKS, "at most %d ranks", MAX_RANKS);
    const char *mode = argv[1];
    struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {{"putget", test_putget}, {"register", test_register}, {"misuse", test_misuse},
                 {"atomics", test_atomics}, {"zbuffer", test_zbuffer}, {"fifo", test_fifo},
                 {"fifoe", test_fifoe}, {"signal", test_signal}, {"colors", test_colors},
                 {"putflag", test_putflag}, {"destroy", test_destroy}};
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (!strcmp(mode, tests[i].name) || !strcmp(mode, "all")) {
            tests[i].fn();
            ran = 1;
        }
    CHECK(ran, "unknown mode %s", mode);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    return 0;
}
