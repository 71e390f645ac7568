/* fetch_add_rma: the fetch&add of fetch_add_am in one-sided form.
 *
 * No handler code at all: rank 0 exposes a segment whose first word is the
 * counter, and every rank applies shoal_fetch_add64 to it K times.  Direct
 * (SHOAL_RMA_DIRECT=1, the default on one host) each one is a CPU atomic on
 * rank 0's memory; with SHOAL_RMA_DIRECT=0 each is a command that rank 0's
 * progress engine executes, so rank 0 must keep calling into the library
 * (its own fetch&adds and the barriers do).
 *
 * Check, as in fetch_add_am: the counter ends at N*K*inc and the N*K old
 * values are 0, inc, ... (N*K-1)*inc, each once.  Every rank keeps its old
 * values in its own segment, and rank 0 reads them all with shoal_get.
 *
 *   shoalrun -n 4 build/apps/fetch_add_rma [K [increment]] */
#include "example.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Segment layout, the same on every rank (only rank 0's counter is used):
 * the counter alone in a cache line, the owner's timed-phase seconds, then
 * the K old values. */
#define COUNTER_OFF 0
#define SECS_OFF 64
#define OLDS_OFF 128


/* The timed phase: K blocking fetch&adds on rank 0's counter.  Old values
 * of one requester grow strictly, which is checked on the way. */
static void run(shoal_rmem_t ctr, uint64_t k, uint64_t inc, uint64_t *olds)
{
    for (uint64_t i = 0; i < k; i++) {
        int64_t old;
        check(shoal_fetch_add64(ctr, COUNTER_OFF, (int64_t)inc, &old), "shoal_fetch_add64");
        olds[i] = (uint64_t)old;
        if (i > 0 && olds[i] <= olds[i - 1])
            shoal_abort(1, "fetch&add %" PRIu64 " returned %" PRIu64 " after %" PRIu64, i, olds[i],
                        olds[i - 1]);
    }
}

/* Rank 0: the slowest rank's time.  Each rank's barrier-to-barrier time
 * covers its whole loop, while rank 0's alone may not: with more ranks than
 * cores, rank 0 can be scheduled out of the first barrier late, after its
 * peers are done. */
static double slowest(const shoal_rmem_t *all, int n)
{
    double worst = 0, secs;
    for (int r = 0; r < n; r++) {
        check(shoal_get(&secs, all[r], SECS_OFF, sizeof secs, 0, NULL), "shoal_get of a time");
        worst = secs > worst ? secs : worst;
    }
    return worst;
}

/* Ticks off one rank's old values; returns how many were out of range, not
 * a multiple of inc, or already seen. */
static uint64_t tick_off(const uint64_t *olds, uint64_t k, uint64_t inc, uint64_t total,
                         unsigned char *seen)
{
    uint64_t bad = 0;
    for (uint64_t i = 0; i < k; i++) {
        uint64_t slot = olds[i] / inc;
        if (olds[i] % inc || slot >= total || seen[slot])
            bad++;
        else
            seen[slot] = 1;
    }
    return bad;
}

/* Rank 0, after the barrier that ends the timed phase: reads every rank's
 * old values from its segment (its own included, through the same call) and
 * the counter from local memory, where all fetch&adds have completed. */
static void verify(const shoal_rmem_t *all, int n, uint64_t k, uint64_t inc, const uint64_t *counter)
{
    uint64_t total = (uint64_t)n * k, bad = 0;
    uint64_t *buf = malloc(k * sizeof *buf);
    unsigned char *seen = calloc(total, 1);
    if (!buf || !seen)
        shoal_abort(1, "out of memory for %" PRIu64 " operations", total);
    for (int r = 0; r < n; r++) {
        check(shoal_get(buf, all[r], OLDS_OFF, k * sizeof *buf, 0, NULL), "shoal_get of old values");
        bad += tick_off(buf, k, inc, total, seen);
    }
    free(buf);
    free(seen);
    if (*counter != total * inc)
        shoal_abort(1, "counter is %" PRIu64 ", expected %d x %" PRIu64 " x %" PRIu64 " = %" PRIu64,
                    *counter, n, k, inc, total * inc);
    if (bad)
        shoal_abort(1, "%" PRIu64 " of %" PRIu64 " old values are out of range or repeated", bad, total);
    printf("fetch_add_rma: check ok: counter %" PRIu64 " = %d x %" PRIu64 " x %" PRIu64
           ", %" PRIu64 " old values distinct\n",
           *counter, n, k, inc, total);
}

/* Every rank creates the same segment: shoal_mem_exchange is collective
 * and needs one from each, and each rank's holds its own old values. */
static void *setup(uint64_t k, shoal_mem_t *mem, shoal_rmem_t *all)
{
    void *base;
    size_t size;
    check(shoal_mem_create(OLDS_OFF + k * sizeof(uint64_t), SHOAL_MEM_ATOMIC | SHOAL_MEM_READ, mem),
          "shoal_mem_create");
    check(shoal_mem_local(*mem, &base, &size), "shoal_mem_local");
    check(shoal_mem_exchange(*mem, all), "shoal_mem_exchange");
    return base;
}

/* Barrier to barrier around the loop, so every rank's time covers the
 * contended part; each leaves it in its segment for rank 0. */
static void timed_phase(shoal_rmem_t ctr, uint64_t k, uint64_t inc, char *base)
{
    check(shoal_barrier(), "barrier before the timed phase");
    double t0 = shoal_wtime();
    run(ctr, k, inc, (uint64_t *)(base + OLDS_OFF));
    check(shoal_barrier(), "barrier after the timed phase");
    *(double *)(base + SECS_OFF) = shoal_wtime() - t0;
}

/* The line fetch_add_am prints too, with its own name. */
static void print_time(int n, uint64_t k, uint64_t inc, double secs)
{
    printf("fetch_add_rma: %d ranks x %" PRIu64 " ops, increment %" PRIu64
           ": %.3f us per fetch&add per rank, %.3f Mops/s total\n",
           n, k, inc, secs / (double)k * 1e6, (double)n * (double)k / secs / 1e6);
}

int main(int argc, char **argv)
{
    check(shoal_init(&argc, &argv), "shoal_init");
    int me = shoal_rank(), n = shoal_size();
    uint64_t k = parse_arg(argc, argv, 1, 10000, "K");
    uint64_t inc = parse_arg(argc, argv, 2, 1, "increment");
    shoal_rmem_t *all = malloc((size_t)n * sizeof *all);
    if (!all)
        shoal_abort(1, "out of memory");
    shoal_mem_t mem;
    char *base = setup(k, &mem, all);

    timed_phase(all[0], k, inc, base);
    check(shoal_barrier(), "barrier after the time reports");
    if (me == 0) {
        print_time(n, k, inc, slowest(all, n));
        verify(all, n, k, inc, (const uint64_t *)(base + COUNTER_OFF));
        fflush(stdout);
    }
    /* With SHOAL_RMA_DIRECT=0 rank 0's gets are executed by their owners,
     * which serve them while they wait here. */
    check(shoal_barrier(), "final barrier");
    check(shoal_mem_destroy(mem), "shoal_mem_destroy");
    free(all);
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
