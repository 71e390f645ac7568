/* CRL's synthetic workload for interrupts against polling (Johnson's CRL
 * thesis §5.1.2, Tables B-1..B-3), over active messages:
 *
 *   shoalrun --bind -n P bench/synthetic --msgs 2|4 --work NS
 *                        [--mode null|none|poll] [--poll-log K] [--iters N] [--seed S]
 *
 * Every rank loops: useful work drawn from an exponential distribution of
 * mean NS nanoseconds (the thesis's cycles, read as ns), then one
 * synchronous communication event with random peers: 2 messages (request,
 * reply) or 4 (requests to two peers at once, both replies; with 2 ranks
 * both to the other).  The thesis's 3-message event (request, forwarded
 * request, reply from the third rank) is left out: shoal's handlers may not
 * send requests, so the forward would wait for the main program.  The work is
 * a loop of short passes; the variants are the thesis's:
 *   null  no events (the work alone)
 *   none  no explicit polls: requests wait for the target's next shoal call
 *         (its own event's send and wait)
 *   poll  shoal_poll every 2^K passes (K = --poll-log)
 * and `intr` is `none` with SHOAL_PROGRESS=thread: the target's progress
 * thread, woken by the arrival, serves requests while it computes.
 * Prints one line: the mean microseconds per iteration over the slowest
 * rank's loop, the work per poll in ns, and the events' messages per
 * second per rank. */
#include "shoal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { H_REQ = 1, H_REPLY };

static _Atomic uint64_t replies; /* handlers may run on the progress thread */
static int me, np;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "synthetic: rank %d: %s\n", me, what);
    exit(2);
}

static void ok(int rc, const char *what)
{
    if (rc != SHOAL_OK) {
        fprintf(stderr, "synthetic: rank %d: %s: %s\n", me, what, shoal_strerror(rc));
        exit(1);
    }
}

static void on_request(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf, (void)n, (void)a, (void)na;
    ok(shoal_am_reply_short(t, H_REPLY, 0, 0, NULL), "reply");
}

static void on_reply(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    atomic_fetch_add_explicit(&replies, 1, memory_order_release);
}

static volatile double sink;

/* One pass of useful work: a few dependent floating-point steps. */
static inline void pass(double *x)
{
    for (int i = 0; i < 4; i++)
        *x = *x * 1.0000001 + 1e-9;
}

/* Nanoseconds per pass on this rank's CPU: the fastest of 50 short
 * samples, since other jobs only ever lengthen one (a preempted sample
 * would make every later work period short). */
static double calibrate(void)
{
    double x = 1, best = 1e9;
    for (int s = 0; s < 50; s++) {
        double t0 = now();
        for (int i = 0; i < 20000; i++)
            pass(&x);
        best = fmin(best, (now() - t0) * 1e9 / 20000);
    }
    sink = x;
    return best;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* A random rank other than me and, with more than 2 ranks, `also`. */
static int peer(int also)
{
    int r;
    do
        r = (int)(uniform() * np);
    while (r == me || (np > 2 && r == also) || r >= np);
    return r;
}

static void work(long passes, long poll_mask, int polls)
{
    double x = 1;
    for (long i = 1; i <= passes; i++) {
        pass(&x);
        if (polls && (i & poll_mask) == 0)
            ok(shoal_poll(), "poll");
    }
    sink = x;
}

/* One event of msgs messages; returns when its replies are in. */
static void event(int msgs)
{
    int a = peer(me);
    ok(shoal_am_request_short(a, H_REQ, 0, 0, NULL), "request");
    if (msgs == 4)
        ok(shoal_am_request_short(peer(a), H_REQ, 0, 0, NULL), "second request");
    uint64_t want = msgs == 4 ? 2 : 1;
    while (atomic_load_explicit(&replies, memory_order_acquire) < want)
        ok(shoal_poll(), "wait");
    atomic_fetch_sub_explicit(&replies, want, memory_order_relaxed);
}

struct opts {
    int msgs, poll_log;
    double work_ns;
    long iters;
    const char *mode;
    uint64_t seed;
};

static struct opts parse(int argc, char **argv)
{
    struct opts o = {2, 6, 1000, 0, "none", 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--msgs"))
            o.msgs = atoi(v);
        else if (!strcmp(k, "--work"))
            o.work_ns = atof(v);
        else if (!strcmp(k, "--poll-log"))
            o.poll_log = atoi(v);
        else if (!strcmp(k, "--iters"))
            o.iters = atol(v);
        else if (!strcmp(k, "--mode"))
            o.mode = v;
        else if (!strcmp(k, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else
            die("usage: synthetic --msgs 2|4 --work NS [--mode null|none|poll] [--poll-log K] [--iters N] "
                "[--seed S]");
    }
    if ((argc - 1) % 2 || (o.msgs != 2 && o.msgs != 4) || !(o.work_ns > 0) || o.poll_log < 0 || o.poll_log > 20 ||
        (strcmp(o.mode, "null") && strcmp(o.mode, "none") && strcmp(o.mode, "poll")))
        die("bad arguments (--help lists them)");
    if (o.iters <= 0) /* about 0.1 s of work, at least 200 events */
        o.iters = (long)fmax(200, fmin(10000, 0.1e9 / (o.work_ns + 2000)));
    return o;
}

int main(int argc, char **argv)
{
    ok(shoal_init(&argc, &argv), "init");
    me = shoal_rank();
    np = shoal_size();
    struct opts o = parse(argc, argv);
    if (np < 2)
        die("needs 2 ranks");
    rng ^= o.seed * 0x9e3779b97f4a7c15ull + (uint64_t)me * 0xbf58476d1ce4e5b9ull;
    ok(shoal_am_register(H_REQ, on_request), "register");
    ok(shoal_am_register(H_REPLY, on_reply), "register");
    double ns_per_pass = calibrate();
    int events = strcmp(o.mode, "null") != 0, polls = !strcmp(o.mode, "poll");
    long mask = (1L << o.poll_log) - 1;
    ok(shoal_barrier(), "barrier");
    double t0 = now();
    for (long i = 0; i < o.iters; i++) {
        work(lround(-log(1 - uniform()) * o.work_ns / ns_per_pass), mask, polls);
        if (events)
            event(o.msgs);
    }
    double mine = now() - t0, slowest;
    /* the ranks serve each other until all are done */
    ok(shoal_allreduce(&mine, &slowest, 1, SHOAL_DOUBLE, SHOAL_ROP_MAX), "allreduce");
    if (me == 0)
        printf("synthetic msgs=%d mode=%s progress=%s work_ns=%g poll_ns=%.0f iters=%ld ranks=%d "
               "us_per_iter=%.3f msgs_per_s=%.0f\n",
               o.msgs, o.mode, shoal_progress_threaded() ? "thread" : "poll", o.work_ns,
               polls ? ns_per_pass * (double)(mask + 1) : 0.0, o.iters, np, slowest / (double)o.iters * 1e6,
               events ? (double)o.iters * o.msgs / slowest : 0.0);
    ok(shoal_finalize(), "finalize");
    return 0;
}
