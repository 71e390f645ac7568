/* Helpers the three CRL applications share: options, timing, rid exchange.
 *
 * Every application is two files.  X_sim.c is the algorithm written against
 * shoal/crl.h; CMake compiles it twice, once against CRL and once with
 * -DSHOAL_CRL_NULL, and SIM_ENTRY gives the two objects distinct entry
 * points (X_crl, X_seq).  X.c is the driver: it parses options, runs the
 * simulation and, with --check, reruns the same problem through the null
 * object on rank 0 (the sequential computation, in-process) and compares.
 * The null binary links only the null object, so it is the sequential
 * baseline of the thesis (§4.8) built from the same source. */
#ifndef CRL_APP_H
#define CRL_APP_H

#include <shoal/crl.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SHOAL_CRL_NULL
#define SIM_ENTRY(name) name##_seq
#define APP_BUILD "null"
#else
#define SIM_ENTRY(name) name##_crl
#define APP_BUILD "crl"
#endif

/* With SHOAL_PROGRESS=poll CRL runs its protocol only when a rank calls
 * into it (the thesis's machines took interrupts), so a rank computing
 * without CRL calls holds up every miss on the regions it is home to.
 * Computing loops call app_poll once per unit of work; it polls on every
 * `every`-th call, which the callers choose to be about a microsecond of
 * work: a miss waits half of that on average, and a poll (~10-20 ns) costs
 * a few percent of it.  With SHOAL_PROGRESS=thread shoal's progress thread
 * serves the misses as they arrive (the interrupt of the thesis's
 * machines), and app_poll never polls.  Alone, a rank has nobody to serve
 * and never polls (the thesis's interrupts cost nothing when no message
 * arrives). */
struct app_poll {
    unsigned ticks, every;
};

static inline struct app_poll app_poll_init(unsigned every)
{
#ifdef SHOAL_CRL_NULL
    (void)every;
    return (struct app_poll){0, UINT_MAX};
#else
    int serve = crl_num_nodes() > 1 && !shoal_progress_threaded();
    return (struct app_poll){0, serve ? every : UINT_MAX};
#endif
}

#ifndef SHOAL_CRL_NULL
/* Out of line and cold, so that the loops calling app_poll compile as they
 * would without it; it does not see the counter, so a caller's local copy
 * of its struct app_poll can live in registers. */
__attribute__((noinline, cold)) static void app_poll_now(void)
{
    shoal_poll();
}
#endif

static inline void app_poll(struct app_poll *p)
{
#ifndef SHOAL_CRL_NULL
    if (__builtin_expect(++p->ticks >= p->every, 0)) {
        p->ticks = 0;
        app_poll_now();
    }
#else
    (void)p;
#endif
}

/* Elapsed and CPU seconds.  On a shared machine the CPU time of one
 * process is the steadier measure of a 1-process overhead; speedups need
 * the elapsed time. */
struct app_time {
    double wall, cpu;
};

static inline double app_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline struct app_time app_clock(void)
{
    return (struct app_time){app_seconds(CLOCK_MONOTONIC), app_seconds(CLOCK_THREAD_CPUTIME_ID)};
}

/* Adds the time since start to *sum. */
static inline void app_add_since(struct app_time *sum, struct app_time start)
{
    struct app_time now = app_clock();
    sum->wall += now.wall - start.wall;
    sum->cpu += now.cpu - start.cpu;
}

/* One command-line option: "--name=value", or "--name" alone for value 1. */
struct app_option {
    const char *name;
    double value; /* the default until parsed */
    const char *help;
};

static inline void app_usage(const char *prog, const struct app_option *opts, int nopts)
{
    fprintf(stderr, "usage: %s [options]\n", prog);
    for (int i = 0; i < nopts; i++)
        fprintf(stderr, "  --%-8s %s (default %g)\n", opts[i].name, opts[i].help, opts[i].value);
}

/* Fills opts from argv; exits 2 naming the first unknown or malformed one. */
static inline void app_parse(int argc, char **argv, struct app_option *opts, int nopts)
{
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        int i = nopts;
        if (strncmp(arg, "--", 2) == 0)
            for (i = 0; i < nopts; i++) {
                size_t len = strlen(opts[i].name);
                if (strncmp(arg + 2, opts[i].name, len) == 0 && (arg[2 + len] == '=' || !arg[2 + len]))
                    break;
            }
        if (i == nopts) {
            fprintf(stderr, "%s: unknown option '%s'\n", argv[0], arg);
            app_usage(argv[0], opts, nopts);
            exit(2);
        }
        const char *eq = strchr(arg, '=');
        if (!eq) {
            opts[i].value = 1;
            continue;
        }
        char *end;
        errno = 0;
        opts[i].value = strtod(eq + 1, &end);
        if (errno || end == eq + 1 || *end) {
            fprintf(stderr, "%s: option --%s needs a number, got '%s'\n", argv[0], opts[i].name, eq + 1);
            exit(2);
        }
    }
}

/* Collective: every rank created rids[i] for the i with owner[i] == its
 * rank; afterwards every rank holds all count rids.  Each rank in turn
 * broadcasts its own rids in index order. */
static inline void app_share_rids(rid_t *rids, const unsigned *owner, size_t count)
{
    rid_t *packed = malloc(count * sizeof *packed + 1);
    if (!packed)
        abort();
    for (unsigned r = 0; r < crl_num_nodes(); r++) {
        size_t n = 0;
        for (size_t i = 0; i < count; i++)
            n += owner[i] == r;
        if (n == 0)
            continue;
        if (r == crl_self_addr()) {
            n = 0;
            for (size_t i = 0; i < count; i++)
                if (owner[i] == r)
                    packed[n++] = rids[i];
            rgn_bcast_send((int)(n * sizeof *packed), packed);
            continue;
        }
        rgn_bcast_recv((int)(n * sizeof *packed), packed);
        n = 0;
        for (size_t i = 0; i < count; i++)
            if (owner[i] == r)
                rids[i] = packed[n++];
    }
    free(packed);
}

/* The range [*first, *first + *count) of n items that rank gets when they
 * are cut into nranks contiguous, nearly equal parts. */
static inline void app_partition(size_t n, unsigned rank, unsigned nranks, size_t *first, size_t *count)
{
    *first = n * rank / nranks;
    *count = n * (rank + 1) / nranks - *first;
}

/* The rank whose app_partition range holds item k. */
static inline unsigned app_owner(size_t k, size_t n, unsigned nranks)
{
    return (unsigned)(((k + 1) * nranks - 1) / n);
}

static inline void *app_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

#endif
