/* The tail of shoal's AM short round trip, which shoal_bench's batch means
 * cannot show: every round trip is timed on its own.  Run like shoal_bench,
 * typically over the cluster transport with fault injection:
 *   SHOAL_TRANSPORT=udp SHOAL_NET_LOCAL=1 SHOAL_IFACE=lo \
 *   SHOAL_FAULTS=loss=0.01,reorder=0.01,dup=0.001 \
 *   shoalrun --bind -n 2 net_p99 rtt [--batches B] [--iters N]
 * Test:
 *   rtt   rank 0 sends an AM short request with one 8-byte argument, the
 *         handler at rank 1 replies short, and rank 0 waits for the reply;
 *         each round trip is timed by itself (the clock read costs tens of
 *         nanoseconds against microseconds).  A batch of N round trips
 *         yields its 50th and 99th percentile (linear interpolation between
 *         order statistics, as everywhere in bench/); the records
 *         "am_short_rtt_p50" and "am_short_rtt_p99" (size 8, us, full round
 *         trip, not halved) give the median and 10th/90th percentiles of
 *         those per-batch figures over the batches. */
#include "common.h"

#include <shoal.h>
#include <stdlib.h>

enum { H_PING, H_PONG };

static volatile uint64_t pongs, served;

static void check(int rc, const char *what)
{
    if (rc != SHOAL_OK)
        shoal_abort(1, "%s: %s", what, shoal_strerror(rc));
}

static void h_ping(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    served++;
    check(shoal_am_reply_short(t, H_PONG, 0, nargs, args), "reply_short");
}

static void h_pong(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)t, (void)buf, (void)n, (void)args, (void)nargs;
    pongs++;
}

/* The q-quantile of sorted v[0..n-1] by bench_stats's rule (linear
 * interpolation between order statistics), which common.h offers only for
 * the median and the 10th and 90th percentiles. */
static double sorted_percentile(const double *v, long n, double q)
{
    double pos = q * (double)(n - 1);
    long lo = (long)pos;
    return lo + 1 < n ? v[lo] + (pos - (double)lo) * (v[lo + 1] - v[lo]) : v[n - 1];
}

/* n round trips; rank 0 fills rtt[0..n-1] in microseconds, rank 1 serves.
 * The counters are waited for by what is due (shoal_wait_until takes it
 * off): a ping of the next batch can run in rank 1's barrier, in the poll
 * that delivers rank 0's barrier flag, and must count for that batch. */
static void round_trips(long n, double *rtt)
{
    if (shoal_rank() != 0) {
        check(shoal_wait_until(&served, (uint64_t)n), "wait_until");
        return;
    }
    for (long i = 0; i < n; i++) {
        double t0 = bench_now();
        check(shoal_am_request_short(1, H_PING, 0, shoal_args((uint64_t)i)), "request_short");
        check(shoal_wait_until(&pongs, 1), "wait_until");
        rtt[i] = (bench_now() - t0) * 1e6;
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .system = "shoal", .batches = 7, .iters = 20000,
        .min_size = 8, .max_size = 8, .window = 1,
    };
    double p50[BENCH_MAX_BATCHES], p99[BENCH_MAX_BATCHES];

    check(shoal_init(&argc, &argv), "shoal_init");
    check(shoal_am_register(H_PING, h_ping), "am_register");
    check(shoal_am_register(H_PONG, h_pong), "am_register");
    if (bench_parse(argc, argv, &o, "rtt") < 0)
        shoal_abort(2, "bad command line");
    if (shoal_size() != 2)
        shoal_abort(2, "needs exactly 2 ranks, not %d", shoal_size());
    bench_pin_if_unpinned(shoal_rank());
    double *rtt = malloc(sizeof *rtt * (size_t)o.iters);
    if (!rtt)
        shoal_abort(1, "out of memory");
    for (int b = -1; b < o.batches; b++) { /* batch -1 warms up */
        check(shoal_barrier(), "barrier");
        round_trips(o.iters, rtt);
        if (b >= 0 && shoal_rank() == 0) {
            double p10, p90;
            bench_stats(rtt, (int)o.iters, &p50[b], &p10, &p90); /* sorts rtt */
            p99[b] = sorted_percentile(rtt, o.iters, 0.99);
        }
    }
    if (shoal_rank() == 0) {
        bench_emit(&o, "am_short_rtt_p50", 8, 2, "us", o.iters, p50, o.batches);
        bench_emit(&o, "am_short_rtt_p99", 8, 2, "us", o.iters, p99, o.batches);
    }
    free(rtt);
    check(shoal_finalize(), "finalize");
    return 0;
}
