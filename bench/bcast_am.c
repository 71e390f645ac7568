/* shoal_am_bcast_short: the time for every other rank to receive a
 * broadcast (Ciaccio's GAMMA thesis §6.2: direct against emulated), and the
 * packets the root sends for it.
 *
 *   shoalrun -n N bench_bcast_am [ROUNDS]
 *
 * Rank 0 broadcasts; every other rank's handler answers with a reply; a
 * round ends when rank 0 has all N - 1.  Prints one JSON line: the median
 * and 10th/90th percentiles of the round time in us, rank 0's packets per
 * round (broadcast, acknowledgements and all; exact) and of them the
 * retransmissions, and how many
 * broadcasts left as one frame (shoal_stats.am_bcast_frames).  Which form
 * is used comes from the environment (SHOAL_NET_BCAST, docs/API.md). */
#include "common.h"

#include <shoal.h>

#include <stdio.h>
#include <stdlib.h>

enum { H_PING = 1, H_ACK = 2 };
#define WARMUP 50

static volatile uint64_t acks;

static void on_ping(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n, (void)nargs;
    if (shoal_am_reply_short(tok, H_ACK, 0, shoal_args(args[0])) != SHOAL_OK)
        bench_die("a reply failed");
}

static void on_ack(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)tok, (void)buf, (void)n, (void)args, (void)nargs;
    acks++;
}

int main(int argc, char **argv)
{
    shoal_am_register(H_PING, on_ping);
    shoal_am_register(H_ACK, on_ack);
    if (shoal_init(&argc, &argv) != SHOAL_OK)
        bench_die("shoal_init failed");
    int me = shoal_rank(), np = shoal_size();
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    if (np < 2 || rounds < 1)
        bench_die("needs 2 ranks or more and a positive round count");
    double *t = malloc(sizeof *t * (size_t)rounds);
    if (!t)
        bench_die("out of memory");
    shoal_barrier();
    if (me == 0) {
        struct shoal_stats s0, s1;
        for (int r = -WARMUP; r < rounds; r++) {
            if (r == 0)
                shoal_stats_get(&s0);
            uint64_t want = acks + (uint64_t)(np - 1);
            double a = bench_now();
            if (shoal_am_bcast_short(H_PING, 0, shoal_args((uint64_t)r)) != SHOAL_OK)
                bench_die("shoal_am_bcast_short failed");
            while (acks < want)
                shoal_poll();
            if (r >= 0)
                t[r] = (bench_now() - a) * 1e6;
        }
        shoal_stats_get(&s1);
        double med, p10, p90;
        bench_stats(t, rounds, &med, &p10, &p90);
        printf("{\"bench\":\"bcast_am\",\"ranks\":%d,\"rounds\":%d,\"us_median\":%.2f,\"us_p10\":%.2f,"
               "\"us_p90\":%.2f,\"root_packets_per_round\":%.3f,\"root_resent_per_round\":%.3f,\"one_frame\":%llu}\n",
               np, rounds, med, p10, p90, (double)(s1.net_packets_sent - s0.net_packets_sent) / rounds,
               (double)(s1.net_retransmits - s0.net_retransmits) / rounds,
               (unsigned long long)(s1.am_bcast_frames - s0.am_bcast_frames));
    }
    shoal_barrier(); /* the others run the handlers while they wait here */
    free(t);
    shoal_finalize();
    return 0;
}
