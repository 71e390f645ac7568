/* Many ranks on one host (issue 23, item 1): start-up to the first AM,
 * shared memory and resident size per rank, the empty poll, the AM short
 * half round trip between two pinned ranks while the others idle, and an
 * all-to-all.  Run by bench/many_ranks, which sets MANY_RANKS_T0 (the
 * CLOCK_REALTIME seconds at which it started shoalrun); rank 0 prints one
 * line of key=value pairs.  Definitions: bench/README.md, "many_ranks". */
#include "common.h"
#include "shoal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { H_FIRST, H_REPORT, H_RELEASE, H_PING, H_PONG, H_A2A };
enum { REP_FIRST, REP_RSS0, REP_RSS1, REP_KINDS };

static int me, n;
static double deadline_s = 120; /* every wait's bound */
static volatile uint64_t first_ns, released, pongs, a2a_got;
static uint64_t *reports[REP_KINDS]; /* at rank 0: [kind][rank] */
static volatile uint64_t nreports[REP_KINDS];

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_first(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)a, (void)na;
    if (!first_ns)
        first_ns = realtime_ns();
}

static void on_report(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)na;
    reports[a[0]][a[1]] = a[2];
    nreports[a[0]]++;
}

static void on_release(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)na;
    released = a[0];
}

static void on_ping(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)b, (void)nb, (void)a, (void)na;
    shoal_am_reply_short(t, H_PONG, 0, 0, NULL);
}

static void on_pong(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)a, (void)na;
    pongs++;
}

static void on_a2a(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)a, (void)na;
    a2a_got++;
}

static void check(int rc, const char *what)
{
    if (rc != SHOAL_OK)
        bench_die("rank %d: %s failed: %d", me, what, rc);
}

/* Polls until *v >= want; `idle` ranks sleep 10 ms between polls (at 256 ranks on 2 cores, 1 ms
 * sleeps would keep the CPUs busy with wake-ups). */
static void wait_for(volatile uint64_t *v, uint64_t want, int idle, const char *what)
{
    double end = bench_now() + deadline_s;
    while (*v < want) {
        shoal_poll();
        if (idle)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        if (bench_now() > end)
            bench_die("rank %d: timed out after %.0f s waiting for %s (%" PRIu64 " of %" PRIu64 ")", me,
                      deadline_s, what, (uint64_t)*v, want);
    }
}

static void report(unsigned kind, uint64_t value)
{
    check(shoal_am_request_short(0, H_REPORT, 0, shoal_args(kind, (uint64_t)me, value)), "report");
}

/* Rank 0 lets the others go past phase `phase`. */
static void release_all(uint64_t phase)
{
    for (int r = 1; r < n; r++)
        check(shoal_am_request_short(r, H_RELEASE, 0, shoal_args(phase)), "release");
}

static uint64_t vmrss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %" SCNu64, &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void max_median(uint64_t *v, int k, uint64_t *max, uint64_t *median)
{
    qsort(v, (size_t)k, sizeof *v, cmp_u64);
    *max = v[k - 1];
    *median = v[k / 2];
}

/* Allocated pages (mincore: in the page cache, which for a memfd is its
 * tmpfs pages) of every mapping of a shoal memfd named `kind` this
 * process has, one value per mapping: rank 0 maps every rank's inbox, so
 * these are the ranks' own inboxes.  Returns how many. */
static int memfd_kib(const char *kind, uint64_t *out, int cap)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int k = 0;
    long page = sysconf(_SC_PAGESIZE);
    while (f && fgets(line, sizeof line, f) && k < cap) {
        uintptr_t lo, hi;
        char *name = strstr(line, "/memfd:");
        if (!name || strncmp(name + 7, kind, strlen(kind)) != 0 || sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) != 2)
            continue;
        size_t pages = (hi - lo) / (size_t)page;
        unsigned char *vec = malloc(pages);
        if (!vec || mincore((void *)lo, hi - lo, vec) != 0)
            bench_die("mincore of %s: failed", kind);
        uint64_t in = 0;
        for (size_t i = 0; i < pages; i++)
            in += vec[i] & 1;
        free(vec);
        out[k++] = in * (uint64_t)page / 1024;
    }
    if (f)
        fclose(f);
    return k;
}

/* Median of the batches; *low: their 10th percentile (the CPU's own cost,
 * least disturbed by the other ranks' wake-ups). */
static double empty_poll_ns(double *low)
{
    const long iters = 200000;
    double v[7];
    for (int b = 0; b < 7; b++) {
        double t = bench_now();
        for (long i = 0; i < iters; i++)
            shoal_poll();
        v[b] = (bench_now() - t) * 1e9 / (double)iters;
    }
    double med, p90;
    bench_stats(v, 7, &med, low, &p90);
    return med;
}

static double half_rtt_us(void)
{
    const long iters = 2000;
    double v[7];
    for (int b = 0; b < 7; b++) {
        double t = bench_now();
        for (long i = 0; i < iters; i++) {
            uint64_t want = pongs + 1;
            check(shoal_am_request_short(1, H_PING, 0, 0, NULL), "ping");
            wait_for(&pongs, want, 0, "a pong from rank 1");
        }
        v[b] = (bench_now() - t) * 1e6 / (double)iters / 2;
    }
    double med, p10, p90;
    bench_stats(v, 7, &med, &p10, &p90);
    return med;
}

/* Every rank sends one AM short to every other and waits for the N-1 it
 * is sent; rank 0 times barrier exit to barrier exit around it. */
static double all_to_all_us(void)
{
    const int reps = 5;
    double v[5];
    for (int k = 0; k < reps; k++) {
        check(shoal_barrier(), "barrier");
        double t = bench_now();
        for (int d = 1; d < n; d++)
            check(shoal_am_request_short((me + d) % n, H_A2A, 0, 0, NULL), "all-to-all send");
        wait_for(&a2a_got, (uint64_t)(k + 1) * (uint64_t)(n - 1), 0, "the all-to-all's messages");
        check(shoal_barrier(), "barrier");
        v[k] = (bench_now() - t) * 1e6;
    }
    double med, p10, p90;
    bench_stats(v, reps, &med, &p10, &p90);
    return med;
}

static void print_row(double t0, double poll_ns, double poll_low, double rtt_us, double a2a_us)
{
    uint64_t first_max = 0, rss0_max, rss0_med, rss1_max, rss1_med, shm_max, shm_med, shm_total = 0;
    for (int r = 0; r < n; r++)
        first_max = reports[REP_FIRST][r] > first_max ? reports[REP_FIRST][r] : first_max;
    max_median(reports[REP_RSS0], n, &rss0_max, &rss0_med);
    max_median(reports[REP_RSS1], n, &rss1_max, &rss1_med);
    uint64_t *inbox = calloc((size_t)n * 4, sizeof *inbox);
    int k = inbox ? memfd_kib("shoal-inbox", inbox, n * 4) : 0;
    if (k != n)
        bench_die("rank 0 maps %d inboxes, expected %d", k, n);
    for (int i = 0; i < k; i++)
        shm_total += inbox[i];
    max_median(inbox, k, &shm_max, &shm_med);
    printf("ranks=%d cpus=%ld startup_s=%.3f inbox_kib_max=%" PRIu64 " inbox_kib_median=%" PRIu64
           " inbox_kib_total=%" PRIu64 " rss0_kib_max=%" PRIu64 " rss0_kib_median=%" PRIu64 " rss1_kib_max=%" PRIu64
           " rss1_kib_median=%" PRIu64 " empty_poll_ns=%.1f empty_poll_p10_ns=%.1f half_rtt_us=%.3f a2a_us=%.1f\n",
           n, sysconf(_SC_NPROCESSORS_ONLN), (double)first_max / 1e9 - t0, shm_max, shm_med, shm_total, rss0_max,
           rss0_med, rss1_max, rss1_med, poll_ns, poll_low, rtt_us, a2a_us);
    free(inbox);
}

int main(int argc, char **argv)
{
    check(shoal_init(&argc, &argv), "shoal_init");
    me = shoal_rank();
    n = shoal_size();
    const char *t0s = getenv("MANY_RANKS_T0"), *dl = getenv("MANY_RANKS_DEADLINE");
    double t0 = t0s ? atof(t0s) : 0;
    if (dl)
        deadline_s = atof(dl);
    if (n < 2)
        bench_die("many_ranks needs at least 2 ranks");
    if (me < 2)
        bench_pin(me); /* the ping-pong pair on cores 0 and 1 */
    shoal_handler_t hs[] = {on_first, on_report, on_release, on_ping, on_pong, on_a2a};
    for (unsigned h = 0; h < sizeof hs / sizeof hs[0]; h++)
        check(shoal_am_register(h, hs[h]), "shoal_am_register");
    for (int kind = 0; me == 0 && kind < REP_KINDS; kind++)
        if (!(reports[kind] = calloc((size_t)n, sizeof *reports[kind])))
            bench_die("out of memory");

    /* start-up to the first AM: from the left neighbour, once every rank
     * has registered its handlers */
    check(shoal_barrier(), "barrier");
    check(shoal_am_request_short((me + 1) % n, H_FIRST, 0, 0, NULL), "first AM");
    double end = bench_now() + deadline_s;
    while (!first_ns) {
        shoal_poll();
        if (bench_now() > end)
            bench_die("rank %d: no AM from rank %d after %.0f s", me, (me + n - 1) % n, deadline_s);
    }
    report(REP_FIRST, first_ns);
    check(shoal_barrier(), "barrier");
    report(REP_RSS0, vmrss_kib());

    double poll_ns = 0, poll_low = 0, rtt_us = 0;
    if (me == 0) {
        wait_for(&nreports[REP_RSS0], (uint64_t)n, 0, "every rank's start-up report");
        poll_ns = empty_poll_ns(&poll_low); /* every other rank sleeps */
        release_all(1);
        rtt_us = half_rtt_us(); /* rank 1 serves, the others sleep */
        release_all(2);
    } else {
        wait_for(&released, 1, 1, "rank 0's end of the empty-poll phase");
        wait_for(&released, 2, me != 1, "rank 0's end of the ping-pong phase");
    }
    double a2a_us = all_to_all_us();
    report(REP_RSS1, vmrss_kib());
    if (me == 0) {
        wait_for(&nreports[REP_RSS1], (uint64_t)n, 0, "every rank's resident size");
        print_row(t0, poll_ns, poll_low, rtt_us, a2a_us);
    }
    check(shoal_barrier(), "barrier");
    return shoal_finalize() == SHOAL_OK ? 0 : 1;
}
