/* gamma.h measured with the GAMMA thesis's own methods (Ciaccio, Ch. 2 and
 * §5.4), run as `shoalrun -n N build/bench/gamma_bench TEST`:
 *   pingpong  instance 0 sends S bytes through a port, instance 1's receiver
 *             handler sends them back from the handler; half the round trip
 *             ("gamma_lat", us) for S = 0, then from --min doubling to
 *             --max, and its throughput S / half RTT ("gamma_bw", MB/s).
 *   barrier   §5.4: 104 trials of gamma_sync (pre-synchronizing), time,
 *             the barrier, time; each trial's time is the slowest rank's;
 *             the first 2 and the worst 2 dropped, the mean of 100
 *             ("gamma_barrier", us, in "median"; p10/p90 of the 100), with
 *             the barrier gamma_sync with K = --window chains.
 *   concurrent  the same with K = N - 1 (§5.2.1's concurrent protocol).
 *   shoal     the same with shoal_barrier (dissemination on one host).
 * Records are bench/common.h's JSON lines. */
#include "common.h"

#include <shoal/gamma.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PORT 0
static unsigned char *buf;
static size_t cap;

static void pong(void)
{
    if (gamma_my_node() == 1)
        gamma_send(PORT, buf, gamma_active_len);
    gamma_signal(PORT);
}

static void must(int rc, const char *what)
{
    if (rc < 0)
        bench_die("%s: %s", what, shoal_strerror(rc));
}

static double pingpong_batch(size_t size, long iters)
{
    must(gamma_sync(), "gamma_sync");
    double t0 = bench_now();
    for (long i = 0; i < iters; i++) {
        if (gamma_my_node() == 0)
            must(gamma_send(PORT, buf, size), "gamma_send");
        must(gamma_wait(PORT, 1), "gamma_wait");
    }
    return (bench_now() - t0) / (double)iters / 2 * 1e6;
}

static void pingpong(const struct bench_opts *o)
{
    unsigned char other = (unsigned char)(1 - gamma_my_node());
    for (size_t size = 0;; size = size ? size * 2 : o->min_size) {
        must(gamma_setport(PORT, other, (unsigned char)gamma_my_par_pid(), PORT, pong, NULL, buf, size), "setport");
        long iters = bench_iters_for(o, size);
        double lat[BENCH_MAX_BATCHES], bw[BENCH_MAX_BATCHES];
        pingpong_batch(size, iters / 4 + 1); /* warm-up */
        for (int b = 0; b < o->batches; b++) {
            lat[b] = pingpong_batch(size, iters);
            bw[b] = (double)size / lat[b];
        }
        if (gamma_my_node() == 0) {
            bench_emit(o, "gamma_lat", size, 2, "us", iters, lat, o->batches);
            if (size)
                bench_emit(o, "gamma_bw", size, 2, "MB/s", iters, bw, o->batches);
        }
        if (size >= o->max_size)
            break;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void barrier(const struct bench_opts *o)
{
    enum { TRIALS = 104 };
    int k = !strcmp(o->test, "shoal") ? 0 : !strcmp(o->test, "concurrent") ? gamma_how_many_nodes() - 1 : o->window;
    if (k > 0)
        must(gamma_sync_chains(k), "gamma_sync_chains");
    double t[TRIALS], worst[TRIALS];
    for (int i = 0; i < TRIALS; i++) {
        must(gamma_sync(), "gamma_sync");
        double t0 = bench_now();
        must(k > 0 ? gamma_sync() : shoal_barrier(), "barrier");
        t[i] = (bench_now() - t0) * 1e6;
    }
    must(shoal_allreduce(t, worst, TRIALS, SHOAL_DOUBLE, SHOAL_ROP_MAX), "allreduce");
    qsort(worst + 2, TRIALS - 2, sizeof *worst, cmp_double);
    double sum = 0;
    for (int i = 2; i < TRIALS - 2; i++)
        sum += worst[i];
    double mean = sum / (TRIALS - 4), p10 = worst[2 + 10], p90 = worst[2 + 90];
    if (gamma_my_node() == 0)
        printf("{\"name\": \"gamma_barrier\", \"system\": \"%s\", \"size\": %d, \"ranks\": %d, \"median\": %.3f, "
               "\"p10\": %.3f, \"p90\": %.3f, \"unit\": \"us\", \"iterations\": 100, \"batches\": 1, "
               "\"barrier\": \"%s\", \"chains\": %d}\n",
               o->system, 0, gamma_how_many_nodes(), mean, p10, p90, o->test, k);
}

int main(int argc, char **argv)
{
    struct bench_opts o = {.system = "shoal-gamma", .batches = 7, .iters = 20000, .min_size = 1,
                           .max_size = 1 << 20, .window = 2};
    if (bench_parse(argc, argv, &o, "pingpong barrier concurrent shoal"))
        return 2;
    must(gamma_init(0, argc, argv), "gamma_init");
    bench_pin_if_unpinned(gamma_my_node());
    cap = o.max_size ? o.max_size : 1;
    buf = calloc(1, cap);
    if (!buf)
        bench_die("out of memory");
    if (!strcmp(o.test, "pingpong")) {
        if (gamma_how_many_nodes() != 2)
            bench_die("pingpong runs on 2 instances");
        pingpong(&o);
    } else {
        barrier(&o);
    }
    must(gamma_exit(), "gamma_exit");
    return 0;
}
