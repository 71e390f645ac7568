/* shoal's side of the comparison.  Run through the launcher, one rank per
 * core:  shoalrun --bind -n 2 shoal_bench TEST [options]   (see common.h).
 * Rank 0 times and prints one JSON record per line.  Tests:
 *   short    AM short ping-pong, one 8-byte argument each way, the request
 *            handler replies; half round trip ("am_short_lat", size 8).
 *   medium   AM medium ping-pong, the handler echoes the payload with a
 *            medium reply; half round trip per size from --min up to
 *            min(--max, shoal_am_max_medium()) ("am_medium_lat").
 *   long     AM long ping-pong: the payload goes into the peer's segment and
 *            the handler replies with a long of the same size into the
 *            requester's segment; half round trip per size ("am_long_lat").
 *   rate     one-way flood: rank 0 sends N short requests back to back, rank
 *            1 counts them in the handler and replies once to the last;
 *            million messages per second ("am_short_rate").
 *   bw       streaming: rank 0 keeps --window long requests in flight, each
 *            to its own slot of the peer's segment, and the handler at the
 *            target acknowledges each with a short reply; GB/s ("am_long_bw").
 *   barrier  mean time of back-to-back shoal_barrier() calls over every rank
 *            of the job ("barrier_lat"); a barrier synchronizes, so the loop
 *            mean is seed 001 §5.4's already-synchronized case.
 *   logp     LogP for short messages (seed 001 §2.2), each in microseconds:
 *            "logp_os" time per send call in a burst that fits the ring;
 *            "logp_or" time in shoal_poll per message, polling a burst that
 *            is already there; "logp_g" time per message of the flood;
 *            "logp_L" = half round trip - o_s - o_r, batch by batch. */
#include "common.h"

#include <shoal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    H_PING_SHORT, H_PING_MEDIUM, H_PING_LONG, /* request handlers that echo */
    H_PONG,                                    /* reply: one round trip done */
    H_COUNT,                                   /* flood sink, acks the last */
    H_SINK_LONG,                               /* bw sink, acks each */
    H_ACK,                                     /* reply to H_COUNT/H_SINK_LONG */
    H_SINK_SHORT,                              /* logp burst sink, no reply */
    H_GO,                                      /* logp: receiver ready */
    H_RESULT,                                  /* rank 1's batch values */
};

/* A LogP burst: small enough to sit in one ring without a send stalling
 * (checked with the send_stalls statistic), large enough that the clock
 * reads around it are a small part of the time. */
#define BURST 32
/* How long the logp receiver stays away from the library after asking for
 * a burst, so the whole burst is waiting when it starts polling. */
#define BURST_QUIET_S 50e-6

static volatile uint64_t pongs, served, acks, flood_done, sunk, go, results_in;
static uint64_t flood_count, flood_target;
static double results[BENCH_MAX_BATCHES];
static shoal_seg_t seg;
static int rank;

static void check(int rc, const char *what)
{
    if (rc != SHOAL_OK)
        shoal_abort(1, "%s: %s", what, shoal_strerror(rc));
}

static void h_ping_short(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    served++;
    check(shoal_am_reply_short(t, H_PONG, 0, nargs, args), "reply_short");
}

static void h_ping_medium(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)args, (void)nargs;
    served++;
    check(shoal_am_reply_medium(t, H_PONG, 0, buf, n, shoal_noargs), "reply_medium");
}

static void h_ping_long(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)args, (void)nargs;
    served++;
    check(shoal_am_reply_long(t, H_PONG, 0, buf, n, seg, 0, shoal_noargs), "reply_long");
}

static void h_count(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n, (void)args, (void)nargs;
    if (++flood_count == flood_target) {
        flood_count = 0;
        flood_done++;
        check(shoal_am_reply_short(t, H_ACK, 0, shoal_noargs), "reply_short");
    }
}

static void h_sink_long(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n, (void)args, (void)nargs;
    served++;
    check(shoal_am_reply_short(t, H_ACK, 0, shoal_noargs), "reply_short");
}

static void h_result(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)t, (void)args, (void)nargs;
    memcpy(results, buf, n < sizeof results ? n : sizeof results);
    results_in++;
}

/* Handlers whose only job is to count. */
#define COUNTER_HANDLER(fn, counter)                                                    \
    static void fn(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na) \
    {                                                                                    \
        (void)t, (void)buf, (void)n, (void)a, (void)na;                                  \
        counter++;                                                                       \
    }
COUNTER_HANDLER(h_pong, pongs)
COUNTER_HANDLER(h_ack, acks)
COUNTER_HANDLER(h_sink_short, sunk)
COUNTER_HANDLER(h_go, go)

enum ping_kind { PING_SHORT, PING_MEDIUM, PING_LONG };

/* n round trips of `size` bytes each way; rank 0 returns the elapsed
 * seconds, rank 1 serves and returns 0. */
static double pingpong(enum ping_kind kind, const void *src, size_t size, long n)
{
    if (rank != 0) {
        check(shoal_wait_until(&served, (uint64_t)n), "wait_until");
        return 0;
    }
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        int rc;
        if (kind == PING_SHORT)
            rc = shoal_am_request_short(1, H_PING_SHORT, 0, shoal_args((uint64_t)i));
        else if (kind == PING_MEDIUM)
            rc = shoal_am_request_medium(1, H_PING_MEDIUM, 0, src, size, shoal_noargs);
        else
            rc = shoal_am_request_long(1, H_PING_LONG, 0, src, size, seg, 0, shoal_noargs);
        check(rc, "request");
        check(shoal_wait_until(&pongs, 1), "wait_until");
    }
    return bench_now() - t0;
}

/* n short requests back to back, acknowledged once at the end. */
static double flood(long n)
{
    flood_target = (uint64_t)n;
    check(shoal_barrier(), "barrier"); /* both ranks know the target now */
    if (rank != 0) {
        check(shoal_wait_until(&flood_done, 1), "wait_until");
        return 0;
    }
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        check(shoal_am_request_short(1, H_COUNT, 0, shoal_args((uint64_t)i)), "request_short");
    check(shoal_wait_until(&acks, 1), "wait_until");
    return bench_now() - t0;
}

/* n long requests of `size` bytes with at most w unacknowledged; message i
 * lands in slot i % w of the peer's segment, which is free again once
 * message i - w has been acknowledged. */
static double stream(const void *src, size_t size, long n, int w)
{
    if (rank != 0) {
        check(shoal_wait_until(&served, (uint64_t)n), "wait_until");
        return 0;
    }
    double t0 = bench_now();
    for (long sent = 0; sent < n; sent++) {
        while ((uint64_t)sent - acks >= (uint64_t)w)
            check(shoal_poll(), "poll");
        check(shoal_am_request_long(1, H_SINK_LONG, 0, src, size, seg,
                                    (size_t)(sent % w) * size, shoal_noargs),
              "request_long");
    }
    check(shoal_wait_until(&acks, (uint64_t)n), "wait_until");
    return bench_now() - t0;
}

static double barriers(long n)
{
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        check(shoal_barrier(), "barrier");
    return bench_now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One LogP batch of `rounds` bursts.  Rank 0 returns o_s, rank 1 o_r, in
 * microseconds per message: the median over the batch's bursts, so a burst
 * that met a descheduled peer does not pull the batch. */
static double logp_overheads(long rounds)
{
    double *per = malloc(sizeof *per * (size_t)rounds);
    if (!per)
        shoal_abort(1, "out of memory");
    for (long r = 0; r < rounds; r++) {
        double t0;
        if (rank == 0) {
            check(shoal_wait_until(&go, 1), "wait_until");
            t0 = bench_now();
            for (int j = 0; j < BURST; j++)
                check(shoal_am_request_short(1, H_SINK_SHORT, 0, shoal_args((uint64_t)j)),
                      "request_short");
        } else {
            check(shoal_am_request_short(0, H_GO, 0, shoal_noargs), "request_short");
            for (double q = bench_now(); bench_now() - q < BURST_QUIET_S;)
                ;
            t0 = bench_now();
            while (sunk < BURST)
                check(shoal_poll(), "poll");
            sunk = 0;
        }
        per[r] = (bench_now() - t0) / BURST * 1e6;
    }
    qsort(per, (size_t)rounds, sizeof *per, cmp_double);
    double med = per[rounds / 2];
    free(per);
    return med;
}

/* Rank 1's batch values to rank 0 (into `results`). */
static void gather_from_rank1(const double *v, int n)
{
    if (rank == 1)
        check(shoal_am_request_medium(0, H_RESULT, 0, v, sizeof *v * (size_t)n, shoal_noargs),
              "request_medium");
    else
        check(shoal_wait_until(&results_in, 1), "wait_until");
}

static void emit(const struct bench_opts *o, const char *name, size_t size, const char *unit,
                 long iters, double *v)
{
    if (rank == 0)
        bench_emit(o, name, size, shoal_size(), unit, iters, v, o->batches);
}

/* Runs `what` for one warm-up batch and o->batches measured ones, each
 * after a barrier; v[b] gets the seconds rank 0 measured. */
#define BATCHES(o, v, what)                                 \
    for (int b_ = -1; b_ < (o)->batches; b_++) {            \
        check(shoal_barrier(), "barrier");                  \
        double t_ = (what);                                 \
        if (b_ >= 0)                                        \
            (v)[b_] = t_;                                   \
    }

static void scale(double *v, int n, double factor)
{
    for (int i = 0; i < n; i++)
        v[i] *= factor;
}

static void run_pingpong_sweep(const struct bench_opts *o, enum ping_kind kind, size_t max,
                               const char *name, const void *src)
{
    double v[BENCH_MAX_BATCHES];
    for (size_t s = o->min_size; s <= max; s *= 2) {
        long n = bench_iters_for(o, s);
        BATCHES(o, v, pingpong(kind, src, s, n));
        scale(v, o->batches, 1e6 / (double)n / 2);
        emit(o, name, s, "us", n, v);
    }
}

static void run_logp(const struct bench_opts *o)
{
    double lat[BENCH_MAX_BATCHES], g[BENCH_MAX_BATCHES], ov[BENCH_MAX_BATCHES];
    double L[BENCH_MAX_BATCHES];
    long rounds = o->iters / BURST > 0 ? o->iters / BURST : 1;
    long nflood = o->iters * 10;
    struct shoal_stats before, after;

    BATCHES(o, lat, pingpong(PING_SHORT, NULL, 8, o->iters));
    scale(lat, o->batches, 1e6 / (double)o->iters / 2);
    BATCHES(o, g, flood(nflood));
    scale(g, o->batches, 1e6 / (double)nflood);
    check(shoal_stats_get(&before), "stats_get");
    BATCHES(o, ov, logp_overheads(rounds));
    check(shoal_stats_get(&after), "stats_get");
    if (rank == 0 && after.send_stalls != before.send_stalls)
        fprintf(stderr, "shoal_bench: %llu LogP burst sends stalled; o_s includes waiting\n",
                (unsigned long long)(after.send_stalls - before.send_stalls));
    gather_from_rank1(ov, o->batches);
    if (rank != 0)
        return;
    for (int b = 0; b < o->batches; b++)
        L[b] = lat[b] - ov[b] - results[b];
    /* bench_emit sorts its input: L is computed before any emit. */
    emit(o, "logp_L", 8, "us", o->iters, L);
    emit(o, "logp_os", 8, "us", rounds * BURST, ov);
    emit(o, "logp_or", 8, "us", rounds * BURST, results);
    emit(o, "logp_g", 8, "us", nflood, g);
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .system = "shoal", .batches = 7, .iters = 0,
        .min_size = 8, .max_size = 1u << 20, .window = 16,
    };
    double v[BENCH_MAX_BATCHES];
    static const shoal_handler_t handlers[] = {
        [H_PING_SHORT] = h_ping_short, [H_PING_MEDIUM] = h_ping_medium,
        [H_PING_LONG] = h_ping_long,   [H_PONG] = h_pong,
        [H_COUNT] = h_count,           [H_SINK_LONG] = h_sink_long,
        [H_ACK] = h_ack,               [H_SINK_SHORT] = h_sink_short,
        [H_GO] = h_go,                 [H_RESULT] = h_result,
    };

    check(shoal_init(&argc, &argv), "shoal_init");
    rank = shoal_rank();
    for (unsigned h = 0; h < sizeof handlers / sizeof handlers[0]; h++)
        check(shoal_am_register(h, handlers[h]), "am_register");
    if (bench_parse(argc, argv, &o, "short medium long rate bw barrier logp") < 0)
        shoal_abort(2, "bad command line");
    if (o.iters == 0) /* a flood message costs a fraction of a round trip */
        o.iters = strcmp(o.test, "rate") == 0 ? 200000 : 20000;
    if (shoal_size() != 2 && strcmp(o.test, "barrier") != 0)
        shoal_abort(2, "test %s needs exactly 2 ranks, not %d", o.test, shoal_size());
    bench_pin_if_unpinned(rank);

    /* Long tests: a private source buffer, and a segment with one slot of
     * the largest size per message in flight. */
    int is_long = strcmp(o.test, "long") == 0 || strcmp(o.test, "bw") == 0;
    unsigned char *src = NULL;
    if (is_long || strcmp(o.test, "medium") == 0) {
        if (!(src = malloc(o.max_size)))
            shoal_abort(1, "out of memory");
        memset(src, 0x5a, o.max_size);
    }
    if (is_long)
        check(shoal_seg_create(o.max_size * (size_t)o.window, &seg), "seg_create");

    if (strcmp(o.test, "short") == 0) {
        BATCHES(&o, v, pingpong(PING_SHORT, NULL, 8, o.iters));
        scale(v, o.batches, 1e6 / (double)o.iters / 2);
        emit(&o, "am_short_lat", 8, "us", o.iters, v);
    } else if (strcmp(o.test, "medium") == 0) {
        size_t max = shoal_am_max_medium() < o.max_size ? shoal_am_max_medium() : o.max_size;
        run_pingpong_sweep(&o, PING_MEDIUM, max, "am_medium_lat", src);
    } else if (strcmp(o.test, "long") == 0) {
        run_pingpong_sweep(&o, PING_LONG, o.max_size, "am_long_lat", src);
    } else if (strcmp(o.test, "rate") == 0) {
        BATCHES(&o, v, flood(o.iters));
        for (int b = 0; b < o.batches; b++)
            v[b] = (double)o.iters / v[b] / 1e6;
        emit(&o, "am_short_rate", 8, "Mmsg/s", o.iters, v);
    } else if (strcmp(o.test, "bw") == 0) {
        for (size_t s = o.min_size; s <= o.max_size; s *= 2) {
            long n = bench_iters_for(&o, s);
            BATCHES(&o, v, stream(src, s, n, o.window));
            for (int b = 0; b < o.batches; b++)
                v[b] = (double)n * (double)s / v[b] / 1e9;
            emit(&o, "am_long_bw", s, "GB/s", n, v);
        }
    } else if (strcmp(o.test, "barrier") == 0) {
        BATCHES(&o, v, barriers(o.iters));
        scale(v, o.batches, 1e6 / (double)o.iters);
        emit(&o, "barrier_lat", 0, "us", o.iters, v);
    } else {
        run_logp(&o);
    }
    free(src);
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
