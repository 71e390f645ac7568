/* matmul_get: blocked C = A x B with remote block fetches (von Eicken's Active Messages thesis,
 * §4.2.6.1: split-phase get with double buffering).
 *
 * A, B and C are n x n doubles cut into bs x bs blocks; each rank owns a
 * contiguous range of block rows of all three.  Its rows of A and B live in
 * a segment, each block contiguous, so one shoal_get fetches one block.  A
 * rank computes its rows of C as the sum over K of A[I,K] x B[K,J]: it walks
 * every block B[K,J] once and applies it to all its block rows I.
 *
 *   prefetch (default): issue the get of the next block, then compute with
 *       the current one, so the transfer overlaps the arithmetic;
 *   --blocking: get a block, wait for it, compute, repeat;
 *   --compare: run both and print both times.
 *
 * Nobody gathers anything: every rank regenerates A and B from a function
 * of (i, j) and checks its rows against a plain triple loop.
 *
 *   shoalrun -n 4 build/apps/matmul_get [n [bs]] [--blocking | --compare] */
#include "example.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_BYTES 64 /* head of each segment: the owner's max error and time, read by rank 0 */
#define TOLERANCE 1e-9  /* summation order differs from the reference; errors are ~1e-14 */

enum mode { PREFETCH = 1, BLOCKING = 2, COMPARE = PREFETCH | BLOCKING };

struct job {
    int me, nranks;
    size_t n, bs, nb;      /* matrix size, block size, blocks per row */
    size_t first, rows;    /* my block rows: [first, first + rows) */
    size_t blk;            /* doubles per block */
    double *a, *b, *c;     /* my block rows, block-major; a and b in the segment */
    double *report;        /* my max error and seconds, in the segment */
    shoal_mem_t mem;       /* my segment */
    shoal_rmem_t *segs;    /* every rank's segment */
    double *buf[2];        /* fetched blocks of B (double buffer) */
};

/* Deterministic entries in [-1, 1): splitmix64 of the position, so every
 * rank can regenerate any element without communication. */
static double entry(uint64_t matrix, size_t i, size_t j)
{
    uint64_t x = matrix << 58 ^ (uint64_t)i << 29 ^ (uint64_t)j;
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-52 - 1.0;
}

/* Block rows are split as evenly as the count allows. */
static size_t first_block_row(size_t nb, int nranks, int r)
{
    return nb * (size_t)r / (size_t)nranks;
}

static int owner_of(const struct job *j, size_t krow)
{
    int r = 0;
    while (first_block_row(j->nb, j->nranks, r + 1) <= krow)
        r++;
    return r;
}

/* Address of block (local block row li, block column bj) in a block-major
 * array: blocks of one block row are consecutive. */
static double *block(const struct job *j, double *base, size_t li, size_t bj)
{
    return base + (li * j->nb + bj) * j->blk;
}

/* Writes my block rows of matrix m into base, block by block. */
static void fill(const struct job *j, double *base, uint64_t m)
{
    for (size_t li = 0; li < j->rows; li++)
        for (size_t bj = 0; bj < j->nb; bj++) {
            double *blkp = block(j, base, li, bj);
            for (size_t r = 0; r < j->bs; r++)
                for (size_t c = 0; c < j->bs; c++)
                    blkp[r * j->bs + c] = entry(m, (j->first + li) * j->bs + r, bj * j->bs + c);
        }
}

/* c += a x b on bs x bs row-major blocks; i-k-j order streams rows of b. */
static void block_madd(size_t bs, double *restrict c, const double *restrict a, const double *restrict b)
{
    for (size_t i = 0; i < bs; i++)
        for (size_t k = 0; k < bs; k++) {
            double aik = a[i * bs + k];
            for (size_t x = 0; x < bs; x++)
                c[i * bs + x] += aik * b[k * bs + x];
        }
}

/* Applies a fetched B[krow, bj] to every block row I that I own.  With
 * SHOAL_RMA_DIRECT=0 owners execute the gets peers send them, so poll
 * between blocks to serve peers while computing. */
static void apply(const struct job *j, const double *bblk, size_t krow, size_t bj)
{
    for (size_t li = 0; li < j->rows; li++) {
        block_madd(j->bs, block(j, j->c, li, bj), block(j, j->a, li, krow), bblk);
        check(shoal_poll(), "shoal_poll");
    }
}

/* Step s names block B[krow, bj]: ranks start at their own block rows and
 * wrap around (staggered, as in the thesis), so they do not all fetch from
 * rank 0 at once. */
static void step_block(const struct job *j, size_t s, size_t *krow, size_t *bj)
{
    *krow = (j->first + s / j->nb) % j->nb;
    *bj = s % j->nb;
}

static void issue_get(const struct job *j, size_t s, double *dst, shoal_handle_t *h)
{
    size_t krow, bj;
    step_block(j, s, &krow, &bj);
    int owner = owner_of(j, krow);
    size_t li = krow - first_block_row(j->nb, j->nranks, owner);
    size_t off = REPORT_BYTES + (li * j->nb + bj) * j->blk * sizeof(double);
    check(shoal_get(dst, j->segs[owner], off, j->blk * sizeof(double), 0, h), "shoal_get");
}

/* Split-phase: wait for block s, start fetching block s+1 into the other
 * buffer (whose block was consumed in step s-1), then compute with s. */
static void multiply_prefetch(struct job *j)
{
    size_t steps = j->rows ? j->nb * j->nb : 0;
    shoal_handle_t h[2];
    if (steps)
        issue_get(j, 0, j->buf[0], &h[0]);
    for (size_t s = 0; s < steps; s++) {
        check(shoal_wait(&h[s % 2]), "waiting for a block");
        if (s + 1 < steps)
            issue_get(j, s + 1, j->buf[(s + 1) % 2], &h[(s + 1) % 2]);
        size_t krow, bj;
        step_block(j, s, &krow, &bj);
        apply(j, j->buf[s % 2], krow, bj);
    }
}

/* The plain version: each fetch completes before any computing starts. */
static void multiply_blocking(struct job *j)
{
    size_t steps = j->rows ? j->nb * j->nb : 0;
    for (size_t s = 0; s < steps; s++) {
        issue_get(j, s, j->buf[0], NULL);
        size_t krow, bj;
        step_block(j, s, &krow, &bj);
        apply(j, j->buf[0], krow, bj);
    }
}

/* Max |C - reference| over my rows; the reference is a straightforward
 * row-major product of regenerated A rows and the whole of B. */
static double max_error(const struct job *j)
{
    size_t n = j->n, bs = j->bs;
    double *bfull = malloc(n * n * sizeof *bfull), *ref = malloc(n * sizeof *ref), err = 0;
    if (!bfull || !ref)
        shoal_abort(1, "out of memory for the reference");
    for (size_t k = 0; k < n; k++)
        for (size_t x = 0; x < n; x++)
            bfull[k * n + x] = entry(1, k, x);
    for (size_t i = j->first * bs; i < (j->first + j->rows) * bs; i++) {
        memset(ref, 0, n * sizeof *ref);
        for (size_t k = 0; k < n; k++) {
            double aik = entry(0, i, k);
            for (size_t x = 0; x < n; x++)
                ref[x] += aik * bfull[k * n + x];
        }
        size_t li = i / bs - j->first, r = i % bs;
        for (size_t x = 0; x < n; x++) {
            double d = fabs(block(j, j->c, li, x / bs)[r * bs + x % bs] - ref[x]);
            if (!(d <= err)) /* a NaN must fail the check, and fmax would drop it */
                err = isnan(d) ? INFINITY : d;
        }
    }
    free(bfull);
    free(ref);
    return err;
}

/* Rank 0 reads every owner's report (max error, seconds) from its
 * segment, after a barrier that follows their writing it.  The slowest
 * rank's barrier-to-barrier time is the run's: rank 0's own may miss most
 * of it when, with more ranks than cores, rank 0 leaves the first barrier
 * late, after its peers have done their work. */
static void gather_reports(const struct job *j, double *err, double *secs)
{
    double rep[2];
    *err = *secs = 0;
    for (int r = 0; r < j->nranks; r++) {
        check(shoal_get(rep, j->segs[r], 0, sizeof rep, 0, NULL), "shoal_get of a report");
        *err = fmax(*err, rep[0]);
        *secs = fmax(*secs, rep[1]);
    }
}

/* One timed run between barriers.  Returns the job's max error and time on
 * rank 0 (zeros elsewhere); aborts if the product is wrong. */
static void run(struct job *j, enum mode m, double *err, double *secs)
{
    memset(j->c, 0, j->rows * j->nb * j->blk * sizeof *j->c);
    check(shoal_barrier(), "barrier before a run");
    double t0 = shoal_wtime();
    if (m == PREFETCH)
        multiply_prefetch(j);
    else
        multiply_blocking(j);
    check(shoal_barrier(), "barrier after a run");
    j->report[1] = shoal_wtime() - t0;
    j->report[0] = max_error(j);
    check(shoal_barrier(), "barrier after the check");
    *err = *secs = 0;
    if (j->me == 0)
        gather_reports(j, err, secs);
    /* Owners serve rank 0's gets here when SHOAL_RMA_DIRECT=0. */
    check(shoal_barrier(), "barrier after the reports");
    if (j->me == 0 && !(*err <= TOLERANCE))
        shoal_abort(1, "%s product is wrong: max abs error %.3g > %.3g",
                    m == PREFETCH ? "prefetch" : "blocking", *err, TOLERANCE);
}

static size_t parse_size(const char *s, const char *name)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || v == 0 || s[0] == '-')
        shoal_abort(2, "%s must be a positive integer, got '%s'", name, s);
    return (size_t)v;
}

static enum mode parse_args(int argc, char **argv, size_t *n, size_t *bs)
{
    enum mode m = PREFETCH;
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--blocking"))
            m = BLOCKING;
        else if (!strcmp(argv[i], "--prefetch"))
            m = PREFETCH;
        else if (!strcmp(argv[i], "--compare"))
            m = COMPARE;
        else if (positional < 2) {
            size_t *dst = positional ? bs : n;
            *dst = parse_size(argv[i], positional ? "bs" : "n");
            positional++;
        } else
            shoal_abort(2, "usage: matmul_get [n [bs]] [--prefetch | --blocking | --compare]");
    }
    if (*bs > *n || *n % *bs)
        shoal_abort(2, "block size %zu must divide n = %zu", *bs, *n);
    return m;
}

/* Creates and fills my segment: report word, then my rows of B, then of A. */
static void setup(struct job *j)
{
    j->me = shoal_rank();
    j->nranks = shoal_size();
    j->nb = j->n / j->bs;
    j->blk = j->bs * j->bs;
    j->first = first_block_row(j->nb, j->nranks, j->me);
    j->rows = first_block_row(j->nb, j->nranks, j->me + 1) - j->first;
    size_t part = j->rows * j->nb * j->blk * sizeof(double);
    void *base;
    size_t size;
    check(shoal_mem_create(REPORT_BYTES + 2 * part, SHOAL_MEM_READ, &j->mem), "shoal_mem_create");
    check(shoal_mem_local(j->mem, &base, &size), "shoal_mem_local");
    j->report = base;
    j->b = (double *)((char *)base + REPORT_BYTES);
    j->a = (double *)((char *)base + REPORT_BYTES + part);
    j->c = malloc(part ? part : 1);
    j->segs = malloc((size_t)j->nranks * sizeof *j->segs);
    j->buf[0] = malloc(2 * j->blk * sizeof(double));
    if (!j->c || !j->segs || !j->buf[0])
        shoal_abort(1, "out of memory");
    j->buf[1] = j->buf[0] + j->blk;
    fill(j, j->a, 0);
    fill(j, j->b, 1);
    check(shoal_mem_exchange(j->mem, j->segs), "shoal_mem_exchange");
}

static void print_run(const struct job *j, const char *name, double secs, double err)
{
    double flops = 2.0 * (double)j->n * (double)j->n * (double)j->n;
    printf("matmul_get: n=%zu bs=%zu ranks=%d %-8s %9.3f ms %8.1f Mflop/s  max abs error %.3g\n", j->n,
           j->bs, j->nranks, name, secs * 1e3, flops / secs / 1e6, err);
}

int main(int argc, char **argv)
{
    check(shoal_init(&argc, &argv), "shoal_init");
    struct job j = {.n = 256, .bs = 32};
    enum mode m = parse_args(argc, argv, &j.n, &j.bs);
    setup(&j);

    double secs[2] = {0, 0}, err[2] = {0, 0};
    if (m & PREFETCH)
        run(&j, PREFETCH, &err[0], &secs[0]);
    if (m & BLOCKING)
        run(&j, BLOCKING, &err[1], &secs[1]);
    if (j.me == 0) {
        if (m & PREFETCH)
            print_run(&j, "prefetch", secs[0], err[0]);
        if (m & BLOCKING)
            print_run(&j, "blocking", secs[1], err[1]);
        if (m == COMPARE)
            printf("matmul_get: prefetch/blocking time ratio %.2f\n", secs[0] / secs[1]);
        fflush(stdout);
    }
    check(shoal_barrier(), "final barrier");
    check(shoal_mem_destroy(j.mem), "shoal_mem_destroy");
    free(j.c);
    free(j.segs);
    free(j.buf[0]);
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
