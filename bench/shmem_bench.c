/* The OpenSHMEM side of the one-sided (RMA) comparison.  bench/compare
 * builds this file with Open MPI's oshcc and runs it with
 * `oshrun -np 2 --bind-to core`, one PE per core.  The test names are
 * shoal_bench's; PE 0 times and prints one JSON record per line (see
 * common.h).  Tests:
 *   put    ping-pong of 8-byte puts: PE 0 puts a sequence number into a word
 *          of PE 1, which waits until the word holds it and puts it back
 *          into PE 0's word; half round trip ("put_lat", size 8).  PE r
 *          waits on line r of a symmetric pair of lines, so the word a PE
 *          stores to and the word it then polls sit at different offsets
 *          in their pages (the same offset makes every poll load wait on
 *          the store before it: 4 KiB aliasing, several ns per trip).
 *   get    back-to-back blocking shmem_getmem of 8 bytes from PE 1; mean
 *          time per get ("get_lat", size 8).
 *   fadd   back-to-back shmem_atomic_fetch_add on a long long of PE 1; mean
 *          time per operation ("fadd_lat", size 8).
 *   cswap  back-to-back shmem_atomic_compare_swap on a long long of PE 1,
 *          every one succeeding; mean time per operation ("cswap_lat").
 *   arate  N non-blocking shmem_atomic_add on a long long of PE 1 back to
 *          back, then shmem_quiet; million operations per second
 *          ("atomic_rate", size 8, unit Mops).
 *   putbw  shmem_putmem of S bytes, --window (16) of them to one buffer of
 *          PE 1 (ucx_perftest's pattern), then shmem_quiet, repeated; GB/s
 *          (10^9 B/s) per size ("put_bw").
 * In the one-sided tests (all but put) PE 1 waits in shmem_barrier_all
 * while PE 0 works, as ucx_perftest's responder waits in its progress
 * loop.  The results of fadd, cswap and arate are checked after the timing. */
#include "common.h"

#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me;

/* Words of the symmetric heap: the ping-pong words (one line per PE) and
 * the atomic target. */
#define LINE_WORDS 8
static long long *word, *counter;

static _Noreturn void fail(const char *what)
{
    fprintf(stderr, "bench: %s\n", what);
    shmem_global_exit(1);
    exit(1); /* not reached */
}

/* One round trip per iteration; the sequence number changes every time,
 * so each wait sees a new value. */
static void put_pingpong(long n, long long base)
{
    int peer = 1 - me;
    long long *mine = word + me * LINE_WORDS, *theirs = word + peer * LINE_WORDS;
    for (long long i = base + 1; i <= base + n; i++) {
        if (me == 0) {
            shmem_putmem(theirs, &i, sizeof i, peer);
            shmem_longlong_wait_until(mine, SHMEM_CMP_EQ, i);
        } else {
            shmem_longlong_wait_until(mine, SHMEM_CMP_EQ, i);
            shmem_putmem(theirs, &i, sizeof i, peer);
        }
    }
}

/* The one-sided tests: PE 0 runs n operations on PE 1's memory. */
static void one_sided(const char *test, long n, unsigned char *dst, unsigned char *src,
                      size_t size, int window)
{
    long long sink = 0;
    if (strcmp(test, "get") == 0) {
        for (long i = 0; i < n; i++)
            shmem_getmem(&sink, word, sizeof sink, 1);
    } else if (strcmp(test, "fadd") == 0) {
        for (long i = 0; i < n; i++)
            sink += shmem_longlong_atomic_fetch_add(counter, 1, 1);
    } else if (strcmp(test, "cswap") == 0) {
        /* The counter holds the last value swapped in: each compare
         * matches, so every operation writes. */
        long long cur = shmem_longlong_g(counter, 1);
        for (long i = 0; i < n; i++) {
            long long old = shmem_longlong_atomic_compare_swap(counter, cur, cur + 1, 1);
            if (old != cur)
                fail("cswap: compare failed");
            cur++;
        }
    } else if (strcmp(test, "arate") == 0) {
        for (long i = 0; i < n; i++)
            shmem_longlong_atomic_add(counter, 1, 1);
        shmem_quiet();
    } else { /* putbw */
        for (long done = 0; done < n; done += window) {
            int k = n - done < window ? (int)(n - done) : window;
            for (int j = 0; j < k; j++)
                shmem_putmem(dst, src, size, 1);
            shmem_quiet();
        }
    }
    /* Keep the fetched values alive without printing them. */
    if (sink == -1)
        fprintf(stderr, "bench: unexpected fetched value\n");
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .system = "openshmem", .batches = 7, .iters = 0,
        .min_size = 8, .max_size = 1u << 20, .window = 16,
    };
    double v[BENCH_MAX_BATCHES];

    shmem_init();
    me = shmem_my_pe();
    int npes = shmem_n_pes();
    if (bench_parse(argc, argv, &o, "put get fadd cswap arate putbw") < 0) {
        shmem_global_exit(2);
        return 2;
    }
    if (npes != 2)
        fail("every test needs exactly 2 PEs");
    bench_pin_if_unpinned(me);

    int is_rate = strcmp(o.test, "arate") == 0;
    int is_bw = strcmp(o.test, "putbw") == 0;
    if (o.iters == 0) /* a streamed operation costs a fraction of a round trip */
        o.iters = is_rate ? 200000 : 20000;
    size_t dst_bytes = is_bw ? o.max_size : 8;
    word = shmem_malloc(2 * LINE_WORDS * sizeof *word);
    counter = shmem_malloc(sizeof *counter);
    unsigned char *dst = shmem_malloc(dst_bytes);
    unsigned char *src = malloc(is_bw ? o.max_size : 8);
    if (!word || !counter || !dst || !src)
        fail("out of memory (symmetric heap: raise SHMEM_SYMMETRIC_HEAP_SIZE)");
    memset(word, 0, 2 * LINE_WORDS * sizeof *word);
    *counter = 0;
    memset(dst, 0, dst_bytes);
    memset(src, 0x5a, is_bw ? o.max_size : 8);
    shmem_barrier_all();

    if (strcmp(o.test, "put") == 0) {
        long long base = 0;
        for (int b = -1; b < o.batches; b++) {
            shmem_barrier_all();
            double t0 = bench_now();
            put_pingpong(o.iters, base);
            base += o.iters;
            if (b >= 0)
                v[b] = (bench_now() - t0) / (double)o.iters / 2 * 1e6;
        }
        if (me == 0)
            bench_emit(&o, "put_lat", 8, npes, "us", o.iters, v, o.batches);
    } else {
        size_t lo = is_bw ? o.min_size : 8, hi = is_bw ? o.max_size : 8;
        long long expect = 0;
        const char *name = is_bw ? "put_bw" : is_rate ? "atomic_rate"
                           : strcmp(o.test, "get") == 0 ? "get_lat"
                           : strcmp(o.test, "fadd") == 0 ? "fadd_lat" : "cswap_lat";
        for (size_t s = lo; s <= hi; s *= 2) {
            long n = bench_iters_for(&o, s);
            for (int b = -1; b < o.batches; b++) {
                shmem_barrier_all();
                if (me == 0) {
                    double t0 = bench_now();
                    one_sided(o.test, n, dst, src, s, o.window);
                    double t = bench_now() - t0;
                    if (b >= 0)
                        v[b] = is_bw ? (double)n * (double)s / t / 1e9
                               : is_rate ? (double)n / t / 1e6 : t / (double)n * 1e6;
                }
                expect += n;
                shmem_barrier_all();
            }
            if (me == 0)
                bench_emit(&o, name, s, npes, is_bw ? "GB/s" : is_rate ? "Mops" : "us", n, v,
                           o.batches);
        }
        /* Every add, fetch-add and successful compare-swap counted one. */
        if (me == 1 && strcmp(o.test, "get") != 0 && !is_bw && *counter != expect)
            fail("the atomic counter does not match the number of operations");
    }
    shmem_barrier_all();
    free(src);
    shmem_free(dst);
    shmem_free(counter);
    shmem_free(word);
    shmem_finalize();
    return 0;
}
