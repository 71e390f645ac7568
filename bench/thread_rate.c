/* The AM short message rate with several threads per rank (issue 21 item 2):
 *   shoalrun --bind -n 2 thread_rate LEVEL THREADS SENDERS [N] [BATCHES]
 * LEVEL single|multiple (shoal_init_thread's level), THREADS sending threads
 * per sending rank, SENDERS one (rank 0 sends, rank 1 only receives) or
 * both (each rank's threads send to the other).  Each thread sends N short
 * requests back to back (the target's handler counts them); a batch ends when
 * every rank has run all it was sent.  Rank 0 prints the total rate over both
 * ranks, in million messages per second: median [min-max] of the batches
 * after a discarded warm-up.  LEVEL single with THREADS 1 is the
 * single-threaded path, the reference. */
#include "shoal.h"
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 8
enum { H_COUNT = 1 };

static volatile uint64_t received;
static long n_per_thread;
static int peer;

static void check(int rc, const char *what)
{
    if (rc != SHOAL_OK)
        shoal_abort(1, "%s: %s", what, shoal_strerror(rc));
}

static void h_count(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)t, (void)buf, (void)n, (void)args, (void)nargs;
    received++;
}

static void *sender(void *arg)
{
    (void)arg;
    for (long i = 0; i < n_per_thread; i++)
        check(shoal_am_request_short(peer, H_COUNT, 0, 1, (const uint64_t[]){(uint64_t)i}), "request_short");
    return NULL;
}

/* One batch: seconds from the barrier before to the barrier after. */
static double batch(int threads, int sends, uint64_t expect)
{
    pthread_t th[MAX_THREADS];
    check(shoal_barrier(), "barrier");
    double t0 = bench_now();
    if (sends && threads == 1) {
        sender(NULL);
    } else if (sends) {
        for (int t = 0; t < threads; t++)
            if (pthread_create(&th[t], NULL, sender, NULL) != 0)
                bench_die("pthread_create");
        for (int t = 0; t < threads; t++)
            pthread_join(th[t], NULL);
    }
    check(shoal_wait_until(&received, expect), "wait_until");
    check(shoal_barrier(), "barrier");
    return bench_now() - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 4)
        bench_die("usage: thread_rate single|multiple THREADS one|both [N] [BATCHES]");
    int multiple = strcmp(argv[1], "multiple") == 0, threads = atoi(argv[2]), both = strcmp(argv[3], "both") == 0;
    n_per_thread = argc > 4 ? atol(argv[4]) : 200000;
    int batches = argc > 5 ? atoi(argv[5]) : 7;
    if (threads < 1 || threads > MAX_THREADS || (!multiple && threads > 1) || batches < 1 || batches > 64)
        bench_die("THREADS 1..%d (1 at single), BATCHES 1..64", MAX_THREADS);
    int provided;
    check(shoal_init_thread(&argc, &argv, multiple ? SHOAL_THREAD_MULTIPLE : SHOAL_THREAD_SINGLE, &provided),
          "shoal_init_thread");
    int rank = shoal_rank();
    if (shoal_size() != 2)
        shoal_abort(2, "thread_rate runs on 2 ranks");
    peer = 1 - rank;
    check(shoal_am_register(H_COUNT, h_count), "am_register");
    int sends = both || rank == 0;
    uint64_t expect = both || rank == 1 ? (uint64_t)threads * (uint64_t)n_per_thread : 0;
    uint64_t total = (uint64_t)threads * (uint64_t)n_per_thread * (both ? 2u : 1u);
    double rate[64];
    batch(threads, sends, expect); /* warm-up */
    for (int b = 0; b < batches; b++)
        rate[b] = (double)total / batch(threads, sends, expect) / 1e6;
    qsort(rate, (size_t)batches, sizeof rate[0], cmp);
    if (rank == 0)
        printf("thread_rate level=%s threads=%d senders=%s: %.2f Mmsg/s [%.2f-%.2f] over both ranks\n", argv[1],
               threads, both ? "both" : "one", rate[batches / 2], rate[0], rate[batches - 1]);
    check(shoal_finalize(), "finalize");
    return 0;
}
