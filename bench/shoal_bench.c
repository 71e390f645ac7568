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
 *   ratemore, bwmore   rate and bw (the same records) with SHOAL_MORE on
 *            every request but the last before rank 0 waits: over the
 *            network a burst leaves in a few system calls.
 *   barrier  mean time of back-to-back shoal_barrier() calls over every rank
 *            of the job ("barrier_lat"); a barrier synchronizes, so the loop
 *            mean is Ciaccio's GAMMA thesis §5.4's already-synchronized case.
 *   bcast    back-to-back shoal_broadcast over every rank of the job, the
 *            root rotating (rank i mod N for the i-th): a root cannot
 *            start before the previous broadcast reached it, so the mean
 *            time per call is the latency to deliver to one rank, averaged
 *            over every root and every next root ("bcast_lat", per size).
 *   allreduce  back-to-back shoal_allreduce (sum of doubles) over every
 *            rank of the job: mean time per call ("allreduce_lat", per size
 *            in bytes, a multiple of 8).
 *   wake     (SHOAL_PROGRESS=thread) rank 1 sleeps outside shoal while its
 *            progress thread serves; rank 0 sends one short ping every
 *            millisecond, so each finds that thread asleep, and times each
 *            round trip: the isolated message's wake-up is this minus the
 *            polled round trip (2 x "am_short_lat") ("am_wake_rtt", us).
 *   wakerate (SHOAL_PROGRESS=thread) rate with rank 1 asleep outside shoal:
 *            its progress thread runs the flood's handlers, waking once per
 *            run of messages it finds ("am_short_rate_asleep", Mmsg/s).
 *   critical shoal_handlers_disable then shoal_handlers_enable, back to
 *            back on rank 0 with no handler pending: ns per pair
 *            ("handlers_critical").
 *   logp     LogP for short messages (Ciaccio's GAMMA thesis §2.2), each in microseconds:
 *            "logp_os" time per send call in a burst that fits the ring;
 *            "logp_or" time in shoal_poll per message, polling a burst that
 *            is already there; "logp_g" time per message of the flood;
 *            "logp_L" = half round trip - o_s - o_r, batch by batch.
 * One-sided (RMA) tests.  Each rank makes one segment with shoal_mem_create
 * (SHOAL_MEM_ALL) at the start, lays out its FIFO or signal structure in it
 * if the test has one, and shoal_mem_exchange hands every rank the peer's
 * descriptor; the segment serves every batch.  A probe get tells whether
 * commands to the peer run directly on mapped memory (SHOAL_RMA_DIRECT=1,
 * the default) or are executed by the peer's progress engine
 * (SHOAL_RMA_DIRECT=0).  On the direct path a rank waiting for a word
 * spins on plain (acquire) loads of its own segment with no library call;
 * on the other, the same loop also calls shoal_poll() so the peer's
 * commands get executed.  Every wait gives up after WAIT_LIMIT_S with a
 * message instead of hanging.  Blocking commands are flags 0, h NULL.
 *   put      ping-pong of blocking shoal_put: rank 0 puts S bytes at offset
 *            LANDING(1) of rank 1's segment, the last 8 bytes holding a
 *            sequence number that grows every iteration; rank 1 waits until
 *            that word of its segment holds it and puts S bytes back at
 *            LANDING(0) of rank 0's; half round trip ("put_lat").  The two
 *            landing offsets differ by a line so the word a rank stores to
 *            and the word it then polls are at different offsets in their
 *            pages (at the same offset every poll load waits on the store
 *            before it: 4 KiB aliasing, several ns per trip, which layouts
 *            like ucx_perftest's separately allocated buffers do not pay).  Size 8 unless --max is given,
 *            then the sweep --min..--max (multiples of 8).  For S > 8 only
 *            the last word is waited for ("the put is visible at the target"
 *            as OSU-style put latencies define it).
 *   putflag  the same ping-pong with shoal_put_flag: 8 bytes of data at
 *            LANDING(r), then the flag word 8 bytes on (same cache line, as a
 *            FIFO entry's data and sequence word); the receiver waits for the
 *            flag, then checks the data; half round trip ("putflag_lat", 8).
 *   get      back-to-back blocking 8-byte shoal_get from rank 1's segment;
 *            mean time per get, a full round trip, not halved ("get_lat").
 *   fadd     back-to-back shoal_fetch_add64(+1) on a word of rank 1; mean
 *            time per operation ("fadd_lat", 8).
 *   cswap    back-to-back blocking shoal_cas (cmp_off == swap_off) on a word
 *            of rank 1, each one succeeding (cur -> cur + 1); mean time per
 *            operation ("cswap_lat", 8).
 *   arate    N shoal_fetch_op(ADD, INT64, +1, no old value, SHOAL_COLOR(1))
 *            on one word of rank 1 back to back, then shoal_color_wait(1);
 *            million operations per second ("atomic_rate", 8, unit "Mops").
 *   putbw    shoal_put of S bytes with SHOAL_COLOR(1), --window (16) of them
 *            to the start of rank 1's segment, then shoal_color_wait(1),
 *            repeated (the batch ends with a wait); GB/s per size ("put_bw").
 *            One destination buffer, as ucx_perftest's ucp_put_bw writes one
 *            remote address: the same access pattern on both sides.
 *   fifo     each rank lays out a FIFO in its segment (shoal_fifo_init:
 *            64-byte entries, 256 of them, kind 0); ping-pong: rank 0
 *            shoal_fifo_enqueue()s (blocking) 8 bytes into rank 1's FIFO,
 *            rank 1 calls shoal_fifo_dequeue until it stops returning
 *            SHOAL_EAGAIN and enqueues the same 8 bytes into rank 0's FIFO;
 *            half round trip ("fifo_lat", 8).  Every dequeue is checked for
 *            the sender's rank, length and value.
 *   signal   each rank lays out a signal structure in its segment
 *            (SHOAL_SIG_STORE_NONE, SHOAL_SIG_EVERY, a registered handler that
 *            records the sender and datum and increments a counter);
 *            ping-pong: rank 0 shoal_signal()s 8 bytes to rank 1 fire and
 *            forget with SHOAL_STATUS_FAILURES (no reply on success, so the
 *            one way is one message and one handler, as the other tests'
 *            one way carries no acknowledgement; blocking would add the
 *            status reply), rank 1 polls until its handler has run and
 *            signals back the same way; half round trip ("signal_lat", 8).
 *            Every delivery is checked for sender and value, and a
 *            shoal_fence at the end reports any failed signal.
 *   fifo also measures the putflag ping-pong, batch for batch
 *   interleaved with its own, and prints it as "putflag_lat": the
 *   baseline from the same run.
 *   get, fadd, cswap, arate, putbw: rank 1 only waits in shoal_barrier()
 *   (which polls) while rank 0 works, and never touches the memory.  After
 *   the timing rank 0 reads the atomic word back with shoal_get and fails if
 *   it is not the number of operations done (fadd and cswap also check every
 *   old value); get checks every value read and putbw the last data moved. */
#include "common.h"

#include <shoal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* n isolated pings to a rank that sleeps outside shoal; rank 0 returns the
 * sum of the round trips, rank 1 sleeps until told the batch is over. */
static double wake_pings(long n)
{
    if (rank != 0) {
        uint64_t want = go + 1;
        while (go < want) /* set by a handler on the progress thread */
            nap_ms(1);
        return 0;
    }
    double sum = 0;
    for (long i = 0; i < n; i++) {
        nap_ms(1); /* the peer's progress thread is asleep again */
        double t0 = bench_now();
        check(shoal_am_request_short(1, H_PING_SHORT, 0, shoal_args((uint64_t)i)), "request");
        check(shoal_wait_until(&pongs, 1), "wait_until");
        sum += bench_now() - t0;
    }
    check(shoal_am_request_short(1, H_GO, 0, shoal_noargs), "request");
    return sum;
}

/* n critical sections with nothing in them; rank 0 returns the seconds. */
static double critical_sections(long n)
{
    if (rank != 0)
        return 0;
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        check(shoal_handlers_disable(), "handlers_disable");
        check(shoal_handlers_enable(), "handlers_enable");
    }
    return bench_now() - t0;
}

/* n short requests back to back, acknowledged once at the end. */
/* Flags of the requests of rate and bw that another follows at once
 * (SHOAL_MORE for ratemore and bwmore). */
static unsigned more;

/* 1: the flood's target sleeps outside shoal (wakerate). */
static int flood_asleep;

static void nap_ms(long ms);

static double flood(long n)
{
    flood_target = (uint64_t)n;
    check(shoal_barrier(), "barrier"); /* both ranks know the target now */
    if (rank != 0 && flood_asleep) {
        while (flood_done == 0) /* set by a handler on the progress thread */
            nap_ms(1);
        flood_done = 0;
        return 0;
    }
    if (rank != 0) {
        check(shoal_wait_until(&flood_done, 1), "wait_until");
        return 0;
    }
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        check(shoal_am_request_short(1, H_COUNT, i + 1 < n ? more : 0, shoal_args((uint64_t)i)), "request_short");
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
        unsigned flags = sent + 1 < n && (uint64_t)sent + 1 - acks < (uint64_t)w ? more : 0;
        check(shoal_am_request_long(1, H_SINK_LONG, flags, src, size, seg,
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

/* n broadcasts of size bytes, the root rotating over the ranks. */
static double broadcasts(unsigned char *buf, size_t size, long n)
{
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        check(shoal_broadcast(buf, size, (int)(i % shoal_size())), "broadcast");
    return bench_now() - t0;
}

/* n allreduces of size bytes of doubles, in place. */
static double allreduces(unsigned char *buf, size_t size, long n)
{
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        check(shoal_allreduce(buf, buf, size / 8, SHOAL_DOUBLE, SHOAL_ROP_SUM), "allreduce");
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

/* A size sweep of a collective that `calls` runs n times back to back:
 * microseconds per call. */
static void run_collective_sweep(const struct bench_opts *o, unsigned char *buf,
                                 double (*calls)(unsigned char *, size_t, long), const char *name)
{
    double v[BENCH_MAX_BATCHES];
    for (size_t s = o->min_size; s <= o->max_size; s *= 2) {
        long n = bench_iters_for(o, s) / 4 + 1;
        BATCHES(o, v, calls(buf, s, n));
        scale(v, o->batches, 1e6 / (double)n);
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

/* ---- one-sided (RMA) tests ------------------------------------------------ */

#define RMA_SEG_BYTES (64u << 10) /* tests without a sized payload */
#define LANDING(r) (64u * ((r) + 1)) /* put, putflag: where rank r is written */
#define PF_FLAG 8                 /* putflag: the flag word, after 8 data bytes */
#define ATOM_OFF 0                /* get, fadd, cswap, arate: the word */
#define STRUCT_OFF 4096           /* fifo, signal: the structure */
#define FIFO_ENTRY 64
#define FIFO_ENTRIES 256
#define SIG_HANDLER 0             /* signal handler index */
#define GET_PATTERN 0x0123456789abcdefull
#define WAIT_LIMIT_S 10.0         /* a wait longer than this is a hang */

static shoal_mem_t rmem;          /* this rank's segment */
static unsigned char *rbase;      /* its local view */
static shoal_rmem_t rpeer[2];     /* every rank's descriptor */
static int rdirect;               /* commands to the peer run here */
static uint64_t pp_seq;           /* put/putflag ping-pong sequence (they share a landing area) */
static uint64_t ff_seq, sig_seq;  /* fifo and signal ping-pong sequences */
static uint64_t atom_done;        /* rank 0: operations done on rank 1's word */
static volatile uint64_t sig_count, sig_value; /* handler runs so far, last datum */
static uint64_t sig_taken; /* of them consumed by signal_await (a barrier's polling can run
                              the handler for the next batch's first signal early) */
static volatile int sig_src;
static volatile size_t sig_len;

static void sig_handler(shoal_mem_t mem, size_t off, int src, const void *data, size_t n, size_t offset)
{
    (void)mem, (void)off, (void)offset;
    uint64_t v = 0;
    if (n == sizeof v)
        memcpy(&v, data, sizeof v);
    sig_src = src;
    sig_len = n;
    sig_value = v;
    sig_count++;
}

/* Called every 2^20 turns of a wait loop: ends the job with what it was
 * waiting for once the wait has lasted WAIT_LIMIT_S. */
static void wait_watchdog(double *since, const char *what, uint64_t want)
{
    double now = bench_now();
    if (*since == 0) {
        *since = now;
        return;
    }
    if (now - *since < WAIT_LIMIT_S)
        return;
    struct shoal_stats st;
    check(shoal_stats_get(&st), "shoal_stats_get");
    shoal_abort(1, "waited %.0f s for %s (value %llu) on the %s path; rma_failures %llu, "
                "rma_refused %llu, rma_executed %llu",
                now - *since, what, (unsigned long long)want,
                rdirect ? "direct" : "target-executed (SHOAL_RMA_DIRECT=0)",
                (unsigned long long)st.rma_failures, (unsigned long long)st.rma_refused,
                (unsigned long long)st.rma_executed);
}

/* Loops until cond, calling shoal_poll() each turn if poll_ is true. */
#define SPIN_UNTIL(cond, poll_, what, want)                            \
    do {                                                               \
        unsigned long spins_ = 0;                                      \
        double since_ = 0;                                             \
        while (!(cond)) {                                              \
            if (poll_)                                                 \
                check(shoal_poll(), "shoal_poll");                     \
            if ((++spins_ & 0xfffffu) == 0)                            \
                wait_watchdog(&since_, what, want);                    \
        }                                                              \
    } while (0)

/* Waits until the word at off of this rank's segment holds want. */
static void await_word(size_t off, uint64_t want, const char *what)
{
    const uint64_t *w = (const uint64_t *)(rbase + off);
    SPIN_UNTIL(__atomic_load_n(w, __ATOMIC_ACQUIRE) == want, !rdirect, what, want);
}

/* Makes this rank's segment of `bytes`, lays out the test's structure (so
 * it is ready before any peer has the descriptor), exchanges descriptors
 * and finds out which path commands to the peer take. */
static void rma_setup(const char *test, size_t bytes)
{
    int peer = 1 - rank;
    size_t size;
    void *base;
    check(shoal_mem_create(bytes, SHOAL_MEM_ALL, &rmem), "shoal_mem_create");
    check(shoal_mem_local(rmem, &base, &size), "shoal_mem_local");
    rbase = base;
    if (strcmp(test, "get") == 0)
        memcpy(rbase + ATOM_OFF, &(uint64_t){GET_PATTERN}, 8);
    if (strcmp(test, "fifo") == 0)
        check(shoal_fifo_init(rmem, STRUCT_OFF, FIFO_ENTRY, FIFO_ENTRIES, 0), "shoal_fifo_init");
    if (strcmp(test, "signal") == 0) {
        struct shoal_signal_config cfg = {
            .storage = SHOAL_SIG_STORE_NONE, .condition = SHOAL_SIG_EVERY, .handler = SIG_HANDLER};
        check(shoal_signal_register(SIG_HANDLER, sig_handler), "shoal_signal_register");
        check(shoal_signal_init(rmem, STRUCT_OFF, &cfg), "shoal_signal_init");
    }
    check(shoal_mem_exchange(rmem, rpeer), "shoal_mem_exchange");
    /* Both ranks probe at once; a blocking command's wait polls, so each
     * serves the other's probe on the target-executed path. */
    struct shoal_stats before, after;
    uint64_t probe;
    check(shoal_stats_get(&before), "shoal_stats_get");
    check(shoal_get(&probe, rpeer[peer], 0, sizeof probe, 0, NULL), "shoal_get (path probe)");
    check(shoal_stats_get(&after), "shoal_stats_get");
    rdirect = after.rma_direct != before.rma_direct;
    if (rdirect == (after.rma_remote != before.rma_remote))
        shoal_abort(1, "path probe: rma_direct +%llu, rma_remote +%llu for one get",
                    (unsigned long long)(after.rma_direct - before.rma_direct),
                    (unsigned long long)(after.rma_remote - before.rma_remote));
}

/* Completes everything (reporting fire-and-forget failures), then ends the
 * segment once the peer cannot be using it any more. */
static void rma_teardown(void)
{
    check(shoal_fence(), "shoal_fence");
    check(shoal_barrier(), "barrier");
    check(shoal_mem_destroy(rmem), "shoal_mem_destroy");
}

/* n round trips of a ping-pong: rank 0 sends first, rank 1 waits first,
 * each half carrying the next value of *seq (the same on both ranks);
 * rank 0 returns the elapsed seconds.  Inlined at every call, so the halves
 * are direct code, not calls through pointers, inside the timed loop. */
static inline __attribute__((always_inline)) double rma_pingpong(void (*await)(uint64_t v), void (*send)(uint64_t v), uint64_t *seq, long n)
{
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
        uint64_t v = ++*seq;
        for (int turn = 0; turn < 2; turn++) {
            if (turn == (rank == 0))
                await(v);
            else
                send(v);
        }
    }
    return rank == 0 ? bench_now() - t0 : 0;
}

/* Blocking puts of put_size bytes from put_src, the last word the value. */
static unsigned char *put_src;
static size_t put_size;

static void put_await(uint64_t v)
{
    await_word(LANDING((unsigned)rank) + put_size - 8, v, "the put's last word");
}

static void put_send(uint64_t v)
{
    memcpy(put_src + put_size - 8, &v, sizeof v);
    check(shoal_put(rpeer[1 - rank], LANDING((unsigned)(1 - rank)), put_src, put_size, 0, NULL), "shoal_put");
}

/* shoal_put_flag of 8 bytes, the flag after them; the data is checked. */
static void putflag_await(uint64_t v)
{
    size_t mine = LANDING((unsigned)rank);
    await_word(mine + PF_FLAG, v, "the put_flag's flag");
    uint64_t data = *(const volatile uint64_t *)(rbase + mine);
    if (data != v)
        shoal_abort(1, "putflag: flag %llu seen with data %llu", (unsigned long long)v, (unsigned long long)data);
}

static void putflag_send(uint64_t v)
{
    size_t theirs = LANDING((unsigned)(1 - rank));
    check(shoal_put_flag(rpeer[1 - rank], theirs, &v, sizeof v, theirs + PF_FLAG, v, 0, NULL), "shoal_put_flag");
}

/* 8-byte FIFO entries, each checked for sender, length and value. */
static void fifo_await(uint64_t v)
{
    uint64_t got = 0;
    size_t len = 0;
    int src = -1, rc, peer = 1 - rank;
    SPIN_UNTIL((rc = shoal_fifo_dequeue(rmem, STRUCT_OFF, &got, sizeof got, &len, &src)) != SHOAL_EAGAIN,
               !rdirect, "a FIFO entry", v);
    check(rc, "shoal_fifo_dequeue");
    if (src != peer || len != sizeof got || got != v)
        shoal_abort(1, "shoal_fifo_dequeue: entry from rank %d, %zu bytes, value %llu; "
                    "expected rank %d, 8 bytes, value %llu",
                    src, len, (unsigned long long)got, peer, (unsigned long long)v);
}

static void fifo_send(uint64_t v)
{
    check(shoal_fifo_enqueue(rpeer[1 - rank], STRUCT_OFF, &v, sizeof v, 0, NULL), "shoal_fifo_enqueue");
}

/* 8-byte signals; the handler runs in shoal_poll and records what came. */
static void signal_await(uint64_t v)
{
    int peer = 1 - rank;
    SPIN_UNTIL(sig_count != sig_taken, 1, "a signal", v);
    if (++sig_taken != sig_count || sig_src != peer || sig_len != sizeof v || sig_value != v)
        shoal_abort(1, "signal handler ran %llu times for one signal; last from rank %d, "
                    "%zu bytes, value %llu; expected rank %d, 8 bytes, value %llu",
                    (unsigned long long)(sig_count - sig_taken + 1), sig_src, (size_t)sig_len,
                    (unsigned long long)sig_value, peer, (unsigned long long)v);
}

static void signal_send(uint64_t v)
{
    check(shoal_signal(rpeer[1 - rank], STRUCT_OFF, &v, sizeof v, 0, SHOAL_STATUS_FAILURES, NULL), "shoal_signal");
}

/* n back-to-back operations of rank 0 on rank 1's memory (rank 1 returns
 * at once and waits in the next barrier); rank 0 returns the seconds. */
static double one_sided(const char *test, long n, const unsigned char *src, size_t size, int w)
{
    if (rank != 0)
        return 0;
    shoal_rmem_t m = rpeer[1];
    double t0 = bench_now();
    if (strcmp(test, "get") == 0) {
        for (long i = 0; i < n; i++) {
            uint64_t x = 0;
            check(shoal_get(&x, m, ATOM_OFF, sizeof x, 0, NULL), "shoal_get");
            if (x != GET_PATTERN)
                shoal_abort(1, "shoal_get read %#llx, expected %#llx", (unsigned long long)x, GET_PATTERN);
        }
    } else if (strcmp(test, "fadd") == 0) {
        for (long i = 0; i < n; i++) {
            int64_t old;
            check(shoal_fetch_add64(m, ATOM_OFF, 1, &old), "shoal_fetch_add64");
            if ((uint64_t)old != atom_done++)
                shoal_abort(1, "shoal_fetch_add64: old value %lld, expected %llu", (long long)old,
                            (unsigned long long)atom_done - 1);
        }
    } else if (strcmp(test, "cswap") == 0) {
        for (long i = 0; i < n; i++) {
            struct shoal_cas_result r;
            check(shoal_cas(m, ATOM_OFF, atom_done, ATOM_OFF, atom_done + 1, &r, 0, NULL), "shoal_cas");
            if (!r.swapped || r.observed != atom_done)
                shoal_abort(1, "shoal_cas(expected %llu): swapped %d, observed %llu",
                            (unsigned long long)atom_done, (int)r.swapped, (unsigned long long)r.observed);
            atom_done++;
        }
    } else if (strcmp(test, "arate") == 0) {
        static const int64_t one = 1;
        for (long i = 0; i < n; i++)
            check(shoal_fetch_op(m, ATOM_OFF, SHOAL_AOP_ADD, SHOAL_INT64, &one, NULL, 1,
                                 SHOAL_COLOR(1), NULL),
                  "shoal_fetch_op");
        check(shoal_color_wait(1), "shoal_color_wait");
        atom_done += (uint64_t)n;
    } else { /* putbw */
        for (long done = 0; done < n; done += w) {
            long k = n - done < w ? n - done : w;
            for (long j = 0; j < k; j++)
                check(shoal_put(m, 0, src, size, SHOAL_COLOR(1), NULL), "shoal_put");
            check(shoal_color_wait(1), "shoal_color_wait");
        }
    }
    return bench_now() - t0;
}

/* After the timing: rank 0 reads rank 1's word back (rank 1 polls in the
 * barrier meanwhile) and fails unless every operation counted. */
static void check_atomic_word(const char *test)
{
    if (rank == 0) {
        uint64_t x = 0;
        check(shoal_get(&x, rpeer[1], ATOM_OFF, sizeof x, 0, NULL), "shoal_get (result check)");
        if (x != atom_done)
            shoal_abort(1, "%s: rank 1's word is %llu after %llu operations", test, (unsigned long long)x,
                        (unsigned long long)atom_done);
    }
    check(shoal_barrier(), "barrier");
}

static void run_one_sided(const struct bench_opts *o, const unsigned char *src)
{
    double v[BENCH_MAX_BATCHES];
    int is_bw = strcmp(o->test, "putbw") == 0, is_rate = strcmp(o->test, "arate") == 0;
    const char *name = is_bw ? "put_bw" : is_rate ? "atomic_rate"
                       : strcmp(o->test, "get") == 0 ? "get_lat"
                       : strcmp(o->test, "fadd") == 0 ? "fadd_lat" : "cswap_lat";
    size_t lo = is_bw ? o->min_size : 8, hi = is_bw ? o->max_size : 8;
    for (size_t s = lo; s <= hi; s *= 2) {
        long n = is_bw ? bench_iters_for(o, s) : o->iters;
        BATCHES(o, v, one_sided(o->test, n, src, s, o->window));
        for (int b = 0; b < o->batches; b++)
            v[b] = is_bw ? (double)n * (double)s / v[b] / 1e9
                   : is_rate ? (double)n / v[b] / 1e6 : v[b] / (double)n * 1e6;
        check(shoal_barrier(), "barrier"); /* rank 1 polls until rank 0 is done */
        emit(o, name, s, is_bw ? "GB/s" : is_rate ? "Mops" : "us", n, v);
    }
    if (is_bw) {
        /* The destination holds the last size's bytes. */
        size_t last = lo;
        while (last * 2 <= hi)
            last *= 2;
        if (rank == 1 && memcmp(rbase, src, last) != 0)
            shoal_abort(1, "putbw: rank 1's segment does not hold the data put");
        check(shoal_barrier(), "barrier");
    } else if (strcmp(o->test, "get") != 0) {
        check_atomic_word(o->test);
    }
}

/* put / putflag: the ping-pong alone; fifo / signal: the putflag baseline
 * and the test's own ping-pong, batch by batch. */
static void run_notify(const struct bench_opts *o, unsigned char *src)
{
    double v[BENCH_MAX_BATCHES], base[BENCH_MAX_BATCHES];
    long n = o->iters;
    if (strcmp(o->test, "put") == 0) {
        for (size_t s = o->min_size; s <= o->max_size; s *= 2) {
            long ns = bench_iters_for(o, s);
            put_src = src;
            put_size = s;
            BATCHES(o, v, rma_pingpong(put_await, put_send, &pp_seq, ns));
            scale(v, o->batches, 1e6 / (double)ns / 2);
            emit(o, "put_lat", s, "us", ns, v);
        }
        return;
    }
    if (strcmp(o->test, "putflag") == 0) {
        BATCHES(o, v, rma_pingpong(putflag_await, putflag_send, &pp_seq, n));
        scale(v, o->batches, 1e6 / (double)n / 2);
        emit(o, "putflag_lat", 8, "us", n, v);
        return;
    }
    int fifo = strcmp(o->test, "fifo") == 0;
    for (int b = -1; b < o->batches; b++) {
        check(shoal_barrier(), "barrier");
        double tb = fifo ? rma_pingpong(putflag_await, putflag_send, &pp_seq, n) : 0; /* one baseline per round */
        check(shoal_barrier(), "barrier");
        double t = fifo ? rma_pingpong(fifo_await, fifo_send, &ff_seq, n) : rma_pingpong(signal_await, signal_send, &sig_seq, n);
        if (b >= 0) {
            base[b] = tb;
            v[b] = t;
        }
    }
    scale(base, o->batches, 1e6 / (double)n / 2);
    scale(v, o->batches, 1e6 / (double)n / 2);
    if (fifo)
        emit(o, "putflag_lat", 8, "us", n, base);
    emit(o, fifo ? "fifo_lat" : "signal_lat", 8, "us", n, v);
}

/* Whether argv has option opt (to tell a default from a given value). */
static int has_option(int argc, char **argv, const char *opt)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], opt) == 0)
            return 1;
    return 0;
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
    if (bench_parse(argc, argv, &o,
                    "short medium long rate bw ratemore bwmore barrier bcast allreduce logp "
                    "put putflag get fadd cswap arate putbw fifo signal wake wakerate critical") < 0)
        shoal_abort(2, "bad command line");
    if (strcmp(o.test, "ratemore") == 0 || strcmp(o.test, "bwmore") == 0) {
        more = SHOAL_MORE;
        o.test = o.test[0] == 'r' ? "rate" : "bw";
    }
    /* A flood message, or a blocking get or atomic, costs a fraction of a
     * round trip: more of them per batch. */
    int is_rma_op = strcmp(o.test, "get") == 0 || strcmp(o.test, "fadd") == 0 ||
                    strcmp(o.test, "cswap") == 0 || strcmp(o.test, "arate") == 0;
    if (o.iters == 0)
        o.iters = strcmp(o.test, "rate") == 0 || strcmp(o.test, "wakerate") == 0 || is_rma_op ? 200000 : 20000;
    int is_collective = strcmp(o.test, "barrier") == 0 || strcmp(o.test, "bcast") == 0 ||
                        strcmp(o.test, "allreduce") == 0;
    if (shoal_size() != 2 && !is_collective)
        shoal_abort(2, "test %s needs exactly 2 ranks, not %d", o.test, shoal_size());
    bench_pin_if_unpinned(rank);

    /* Long tests: a private source buffer, and a segment with one slot of
     * the largest size per message in flight. */
    int is_long = strcmp(o.test, "long") == 0 || strcmp(o.test, "bw") == 0;
    unsigned char *src = NULL;
    if (is_long || strcmp(o.test, "medium") == 0 || strcmp(o.test, "bcast") == 0) {
        if (!(src = malloc(o.max_size)))
            shoal_abort(1, "out of memory");
        memset(src, 0x5a, o.max_size);
    }
    if (strcmp(o.test, "allreduce") == 0) { /* zeros: the sums stay finite */
        if (o.min_size % 8 != 0)
            shoal_abort(2, "allreduce: --min must be a multiple of 8 (doubles)");
        if (!(src = calloc(1, o.max_size)))
            shoal_abort(1, "out of memory");
    }
    if (is_long)
        check(shoal_seg_create(o.max_size * (size_t)o.window, &seg), "seg_create");

    /* One-sided tests: put sweeps only when --max is given; its payloads
     * end in an aligned 8-byte word. */
    int is_put = strcmp(o.test, "put") == 0, is_putbw = strcmp(o.test, "putbw") == 0;
    int is_notify = is_put || strcmp(o.test, "putflag") == 0 || strcmp(o.test, "fifo") == 0 ||
                    strcmp(o.test, "signal") == 0;
    if (is_put && !has_option(argc, argv, "--max"))
        o.max_size = o.min_size;
    if (is_put && o.min_size % 8 != 0)
        shoal_abort(2, "put: --min must be a multiple of 8 (the payload ends in the 8-byte word waited on)");
    if (is_put || is_putbw) {
        if (!(src = malloc(o.max_size)))
            shoal_abort(1, "out of memory");
        for (size_t i = 0; i < o.max_size; i++) /* the same bytes on both ranks */
            src[i] = (unsigned char)(i * 7 + 1);
    }
    if (is_notify || is_rma_op || is_putbw)
        rma_setup(o.test, is_put ? o.max_size + LANDING(1u) : is_putbw ? o.max_size : RMA_SEG_BYTES);

    if (strcmp(o.test, "wake") == 0 || strcmp(o.test, "wakerate") == 0) {
        const char *mode = getenv("SHOAL_PROGRESS");
        if (!mode || strcmp(mode, "thread") != 0)
            shoal_abort(2, "%s needs SHOAL_PROGRESS=thread: rank 1 never calls shoal while it sleeps", o.test);
    }
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
    } else if (strcmp(o.test, "wakerate") == 0) {
        flood_asleep = 1;
        BATCHES(&o, v, flood(o.iters));
        for (int b = 0; b < o.batches; b++)
            v[b] = (double)o.iters / v[b] / 1e6;
        emit(&o, "am_short_rate_asleep", 8, "Mmsg/s", o.iters, v);
    } else if (strcmp(o.test, "wake") == 0) {
        long n = has_option(argc, argv, "--iters") ? o.iters : 200;
        BATCHES(&o, v, wake_pings(n));
        scale(v, o.batches, 1e6 / (double)n);
        emit(&o, "am_wake_rtt", 8, "us", n, v);
    } else if (strcmp(o.test, "critical") == 0) {
        long n = has_option(argc, argv, "--iters") ? o.iters : 1000000;
        BATCHES(&o, v, critical_sections(n));
        scale(v, o.batches, 1e9 / (double)n);
        emit(&o, "handlers_critical", 0, "ns", n, v);
    } else if (strcmp(o.test, "barrier") == 0) {
        BATCHES(&o, v, barriers(o.iters));
        scale(v, o.batches, 1e6 / (double)o.iters);
        emit(&o, "barrier_lat", 0, "us", o.iters, v);
    } else if (strcmp(o.test, "bcast") == 0) {
        run_collective_sweep(&o, src, broadcasts, "bcast_lat");
    } else if (strcmp(o.test, "allreduce") == 0) {
        run_collective_sweep(&o, src, allreduces, "allreduce_lat");
    } else if (is_notify) {
        run_notify(&o, src);
        rma_teardown();
    } else if (is_rma_op || is_putbw) {
        run_one_sided(&o, src);
        rma_teardown();
    } else {
        run_logp(&o);
    }
    free(src);
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
