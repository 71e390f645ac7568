/* Shared by every benchmark program (the cache-line floor, shoal_bench and
 * the MPI ping-pong): option parsing, the clock, CPU pinning, batch
 * statistics and the one output format that bench/compare reads.
 *
 * Every measurement is repeated in batches; a batch yields one number
 * (for example the mean half round trip over its iterations) and a record
 * reports the median and the 10th/90th percentiles of the batch numbers.
 * Output is one JSON object per line on stdout:
 *   {"name":..., "system":..., "size":..., "ranks":..., "median":...,
 *    "p10":..., "p90":..., "unit":..., "iterations":..., "batches":...}
 * where "iterations" counts the operations timed in one batch. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>

#define BENCH_MAX_BATCHES 64

struct bench_opts {
    const char *test;   /* first positional argument: which measurement */
    const char *system; /* "system" field of the records (--system) */
    int batches;        /* measured batches, after one discarded warm-up batch */
    long iters;         /* operations per batch for small messages */
    size_t min_size;    /* smallest payload of a size sweep */
    size_t max_size;    /* largest payload of a size sweep */
    int window;         /* messages in flight in streaming tests */
};

/* Fills *o from argv: "<test> [--batches B] [--iters N] [--min BYTES]
 * [--max BYTES] [--window W] [--system NAME]" (sizes accept K/M suffixes;
 * a sweep doubles the size from --min, which must be at least 1, to --max).
 * Defaults come from *o; TEST must be one of the space-separated words of
 * `tests`.  Prints usage and returns -1 on a bad command line. */
int bench_parse(int argc, char **argv, struct bench_opts *o, const char *tests);

/* Operations per batch for payload `size`: o->iters for small payloads,
 * fewer for large ones so a batch moves at most about 256 MiB (a batch of
 * 1 MiB messages stays tens of milliseconds), but never fewer than 64. */
long bench_iters_for(const struct bench_opts *o, size_t size);

/* Monotonic wall clock in seconds. */
double bench_now(void);

/* Pins the calling process to CPU rank % ncpus unless something (the
 * launcher's binding option) already restricted it to a single CPU. */
void bench_pin_if_unpinned(int rank);

/* Pins the calling process to `cpu`; exits with a message on failure. */
void bench_pin(int cpu);

/* Median and 10th/90th percentiles (linear interpolation between order
 * statistics) of v[0..n-1]; v is sorted in place. */
void bench_stats(double *v, int n, double *median, double *p10, double *p90);

/* Prints one record for the batch values v[0..n-1] (sorted in place). */
void bench_emit(const struct bench_opts *o, const char *name, size_t size, int ranks,
                const char *unit, long iters, double *v, int n);

/* Exits with status 1 after printing "bench: <message>" to stderr. */
_Noreturn void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
