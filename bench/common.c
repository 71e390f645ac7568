/* See common.h. */
#include "common.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Noreturn void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    default: break;
    }
    if (*end != '\0')
        return -1;
    *out = (size_t)v;
    return 0;
}

/* Whether `word` is one of the space-separated words of `list`. */
static int is_word_of(const char *word, const char *list)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

int bench_parse(int argc, char **argv, struct bench_opts *o, const char *tests)
{
    int i;
    o->test = NULL;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t n;
        if (a[0] != '-') {
            if (o->test)
                goto usage;
            o->test = a;
            continue;
        }
        if (!v)
            goto usage;
        i++;
        if (strcmp(a, "--system") == 0) {
            o->system = v;
            continue;
        }
        if (parse_size(v, &n) < 0)
            goto usage;
        if (strcmp(a, "--batches") == 0 && n >= 1 && n <= BENCH_MAX_BATCHES)
            o->batches = (int)n;
        else if (strcmp(a, "--iters") == 0 && n >= 1)
            o->iters = (long)n;
        else if (strcmp(a, "--min") == 0)
            o->min_size = n;
        else if (strcmp(a, "--max") == 0)
            o->max_size = n;
        else if (strcmp(a, "--window") == 0 && n >= 1)
            o->window = (int)n;
        else
            goto usage;
    }
    if (o->test && o->min_size >= 1 && o->min_size <= o->max_size && is_word_of(o->test, tests))
        return 0;
usage:
    fprintf(stderr,
            "usage: %s TEST [--batches B (1..%d)] [--iters N] [--min BYTES] [--max BYTES]\n"
            "       [--window W] [--system NAME]\n"
            "TEST is one of: %s\n",
            argv[0], BENCH_MAX_BATCHES, tests);
    return -1;
}

long bench_iters_for(const struct bench_opts *o, size_t size)
{
    /* Small messages cost about the same whatever their size, so they all
     * get o->iters; above 8 KiB the time per message grows with the size,
     * so the count shrinks to keep each batch's duration roughly flat. */
    long n = o->iters;
    if (size > 8192)
        n = (long)((double)o->iters * 8192.0 / (double)size);
    return n < 64 ? 64 : n;
}


double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        bench_die("cannot pin to CPU %d: %s", cpu, strerror(errno));
}

void bench_pin_if_unpinned(int rank)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
        return;
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    bench_pin(rank % (int)(ncpus > 0 ? ncpus : 1));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)pos;
    if (lo >= n - 1)
        return sorted[n - 1];
    return sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]);
}

void bench_stats(double *v, int n, double *median, double *p10, double *p90)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *median = percentile(v, n, 0.5);
    *p10 = percentile(v, n, 0.1);
    *p90 = percentile(v, n, 0.9);
}

void bench_emit(const struct bench_opts *o, const char *name, size_t size, int ranks,
                const char *unit, long iters, double *v, int n)
{
    double med, p10, p90;
    bench_stats(v, n, &med, &p10, &p90);
    /* One printf per record: a line written by a single write() is never
     * interleaved with another process's output on the same pipe. */
    printf("{\"name\": \"%s\", \"system\": \"%s\", \"size\": %zu, \"ranks\": %d, "
           "\"median\": %.6g, \"p10\": %.6g, \"p90\": %.6g, \"unit\": \"%s\", "
           "\"iterations\": %ld, \"batches\": %d}\n",
           name, o->system, size, ranks, med, p10, p90, unit, iters, n);
    fflush(stdout);
}
