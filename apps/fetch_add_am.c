/* fetch_add_am: fetch&add built from active messages (von Eicken's Active Messages thesis, §4.1.2).
 *
 * A counter lives on rank 0.  Every rank performs K fetch&adds on it: the
 * request carries the increment and the address of the requester's own
 * synchronization record; rank 0's request handler adds and replies with the
 * value the counter had before; the reply handler stores that value in the
 * record and bumps its flag, which the requester waits on.
 *
 * Check: the final counter is N*K*inc, and the N*K old values are exactly
 * 0, inc, 2*inc, ... (N*K-1)*inc, each once.  Every rank streams its old
 * values to rank 0 in medium messages, whose handler ticks them off in a
 * table.  fetch_add_rma does the same with one-sided commands and prints
 * the same lines, so the two can be compared.
 *
 *   shoalrun -n 4 build/apps/fetch_add_am [K [increment]] */
#include "example.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H_FADD = 1, H_FADD_REPLY = 2, H_OLDS = 3, H_SECS = 4 };

/* The requester's side of one fetch&add in flight: the reply handler fills
 * value, then increments flag, so whoever sees the flag sees the value. */
struct fadd_sync {
    volatile uint64_t flag;
    uint64_t value;
};

/* Rank 0 only.  Touched by handlers alone until the final barrier: handlers
 * run one at a time, so the read-modify-write needs no atomics. */
static uint64_t counter;
static unsigned char *seen;         /* seen[i]: old value i*inc has arrived */
static uint64_t total_ops, incr;    /* N*K and the increment, for the handler */
static volatile uint64_t olds_in;   /* old values received so far */
static volatile uint64_t olds_bad;  /* out of range, not a multiple, or repeated */
static volatile uint64_t secs_in;   /* time reports received */
static double secs_max;             /* the slowest rank's timed phase */

/* Request handler at rank 0: the fetch&add itself.  The reply goes last, as
 * the AM rules ask, after the counter is updated. */
static void on_fadd(shoal_token_t token, void *buf, size_t nbytes, const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)nbytes; (void)nargs;
    uint64_t old = counter;
    counter = old + args[0];
    int rc = shoal_am_reply_short(token, H_FADD_REPLY, 0, shoal_args(args[1], old));
    if (rc)
        shoal_abort(1, "fetch&add reply failed: %s", shoal_strerror(rc));
}

/* Reply handler at the requester: args[0] is the record's address, which
 * only means something here, where it came from. */
static void on_fadd_reply(shoal_token_t token, void *buf, size_t nbytes, const uint64_t *args,
                          unsigned nargs)
{
    (void)token; (void)buf; (void)nbytes; (void)nargs;
    struct fadd_sync *s = (struct fadd_sync *)(uintptr_t)args[0];
    s->value = args[1];
    s->flag++;
}

/* Request handler at rank 0: ticks off a batch of old values.  The payload
 * buffer has no alignment promise, hence memcpy. */
static void on_olds(shoal_token_t token, void *buf, size_t nbytes, const uint64_t *args, unsigned nargs)
{
    (void)token; (void)args; (void)nargs;
    size_t count = nbytes / sizeof(uint64_t);
    for (size_t i = 0; i < count; i++) {
        uint64_t v;
        memcpy(&v, (char *)buf + i * sizeof v, sizeof v);
        uint64_t slot = v / incr;
        if (v % incr || slot >= total_ops || seen[slot])
            olds_bad++;
        else
            seen[slot] = 1;
    }
    olds_in += count;
}

/* Request handler at rank 0: one rank's time for the timed phase, as the
 * bits of a double.  Each rank's barrier-to-barrier time covers its whole
 * loop, while rank 0's alone may not: with more ranks than cores, rank 0
 * can be scheduled out of the first barrier late, after its peers are done. */
static void on_secs(shoal_token_t token, void *buf, size_t nbytes, const uint64_t *args, unsigned nargs)
{
    (void)token; (void)buf; (void)nbytes; (void)nargs;
    double secs;
    memcpy(&secs, &args[0], sizeof secs);
    secs_max = secs > secs_max ? secs : secs_max;
    secs_in++;
}

/* Split-phase halves (as CMAM's fetch_add_initiate / _complete): a caller
 * could compute between them. */
static void fetch_add_initiate(int node, uint64_t inc, struct fadd_sync *s)
{
    check(shoal_am_request_short(node, H_FADD, 0, shoal_args(inc, (uint64_t)(uintptr_t)s)),
          "fetch&add request");
}

static uint64_t fetch_add_complete(struct fadd_sync *s)
{
    check(shoal_wait_until(&s->flag, 1), "waiting for the fetch&add reply");
    return s->value;
}

static uint64_t fetch_add(int node, uint64_t inc)
{
    struct fadd_sync s = {0, 0};
    fetch_add_initiate(node, inc, &s);
    return fetch_add_complete(&s);
}


/* The timed phase: K blocking fetch&adds, old values kept for the check.
 * A single requester sees its old values grow strictly, since the counter
 * only grows; checking that here catches a stale or repeated reply early. */
static void run(uint64_t k, uint64_t inc, uint64_t *olds)
{
    for (uint64_t i = 0; i < k; i++) {
        olds[i] = fetch_add(0, inc);
        if (i > 0 && olds[i] <= olds[i - 1])
            shoal_abort(1, "fetch&add %" PRIu64 " returned %" PRIu64 " after %" PRIu64, i, olds[i],
                        olds[i - 1]);
    }
}

/* Streams this rank's old values to rank 0 in the largest mediums allowed. */
static void send_olds(const uint64_t *olds, uint64_t k)
{
    size_t per = shoal_am_max_medium() / sizeof(uint64_t);
    for (uint64_t i = 0; i < k; i += per) {
        size_t count = k - i < per ? (size_t)(k - i) : per;
        check(shoal_am_request_medium(0, H_OLDS, 0, olds + i, count * sizeof *olds, shoal_noargs),
              "sending old values");
    }
}

/* Rank 0, after the barrier that ends the timed phase: no fetch&add is in
 * flight any more, so the counter can be read outside a handler. */
static void verify(int n, uint64_t k, uint64_t inc)
{
    check(shoal_wait_until(&olds_in, total_ops), "waiting for old values");
    if (counter != total_ops * inc)
        shoal_abort(1, "counter is %" PRIu64 ", expected %d x %" PRIu64 " x %" PRIu64 " = %" PRIu64,
                    counter, n, k, inc, total_ops * inc);
    if (olds_bad)
        shoal_abort(1, "%" PRIu64 " of %" PRIu64 " old values are out of range or repeated", olds_bad,
                    total_ops);
    printf("fetch_add_am: check ok: counter %" PRIu64 " = %d x %" PRIu64 " x %" PRIu64
           ", %" PRIu64 " old values distinct\n",
           counter, n, k, inc, total_ops);
}

/* Barrier to barrier around the loop, so every rank's time covers the
 * contended part; rank 0 later reports the slowest. */
static double timed_phase(uint64_t k, uint64_t *olds)
{
    check(shoal_barrier(), "barrier before the timed phase");
    double t0 = shoal_wtime();
    run(k, incr, olds);
    check(shoal_barrier(), "barrier after the timed phase");
    return shoal_wtime() - t0;
}

static void send_secs(double secs)
{
    uint64_t bits;
    memcpy(&bits, &secs, sizeof bits);
    check(shoal_am_request_short(0, H_SECS, 0, shoal_args(bits)), "sending the time");
}

/* The line fetch_add_rma prints too, with its own name. */
static void print_time(int n, uint64_t k, double secs)
{
    printf("fetch_add_am: %d ranks x %" PRIu64 " ops, increment %" PRIu64
           ": %.3f us per fetch&add per rank, %.3f Mops/s total\n",
           n, k, incr, secs / (double)k * 1e6, (double)total_ops / secs / 1e6);
}

int main(int argc, char **argv)
{
    /* Registered before init: peers may send as soon as their init returns. */
    check(shoal_am_register(H_FADD, on_fadd), "register H_FADD");
    check(shoal_am_register(H_FADD_REPLY, on_fadd_reply), "register H_FADD_REPLY");
    check(shoal_am_register(H_OLDS, on_olds), "register H_OLDS");
    check(shoal_am_register(H_SECS, on_secs), "register H_SECS");
    check(shoal_init(&argc, &argv), "shoal_init");

    int me = shoal_rank(), n = shoal_size();
    uint64_t k = parse_arg(argc, argv, 1, 10000, "K");
    incr = parse_arg(argc, argv, 2, 1, "increment");
    total_ops = (uint64_t)n * k;
    uint64_t *olds = malloc(k * sizeof *olds);
    /* The table exists before the first barrier, so before any batch can
     * arrive (batches are sent only after the second). */
    if (me == 0)
        seen = calloc(total_ops, 1);
    if (!olds || (me == 0 && !seen))
        shoal_abort(1, "out of memory for %" PRIu64 " operations", total_ops);

    send_secs(timed_phase(k, olds));
    send_olds(olds, k);
    if (me == 0) {
        check(shoal_wait_until(&secs_in, (uint64_t)n), "waiting for the times");
        print_time(n, k, secs_max);
        verify(n, k, incr);
        fflush(stdout);
    }
    check(shoal_barrier(), "final barrier");
    free(olds);
    free(seen);
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
