/* CMAM's micro-benchmarks (von Eicken's thesis §4.3.4, Tables 4-7 and 4-8)
 * through <shoal/cmam.h>, and CMAM_4's round trip against shoal's own
 * short AM, batches of the two interleaved.  Two ranks: rank 0 sends or
 * requests, rank 1 receives or serves.
 *
 *   shoalrun --bind -n 2 build/bench/cmam_bench TEST [--batches B] [--iters N] [--max BYTES]
 *   shoalrun -n 1 build/bench/cmam_bench rtt    (round trips to itself: the
 *       software's cost alone, which another process's scheduling cannot blur)
 *
 * TEST: rtt (cmam_rtt and am_rtt with four words each way, interleaved, and
 * their ratio per pair of batches), send (request send,
 * reply send), handle (handle a request; an xfer into 1 and into 2
 * segments), poll (empty CMAM_poll, CMAM_reply_poll), segment (open and
 * close), xfer4 (CMAM_xfer_4i request and reply), xfern (CMAM_xfer
 * bandwidth, 16 bytes to --max), fetch_add (Table 4-8), all.
 *
 * Overheads are per message in microseconds, at the rank that pays them:
 * a sender's timed loop of sends while its peer drains; a handler's cost
 * as the time to drain a backlog the peer sent while this rank slept
 * (the messages are all there, so it is dispatch plus handler); a reply's
 * cost timed around the call inside the handler, less the clock's own
 * cost.  Each record is one JSON line (bench/common.h). */
#include <shoal/cmam.h>

#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BACKLOG 256 /* messages sent while the receiver sleeps: they fit its ring */
#define H_PING 1
#define H_PONG 2

static int me, peer; /* peer: 1, or 0 itself when alone (rtt only: the software's own cost) */
static struct bench_opts opts;
static volatile int count, pong, eots;
static double clock_cost; /* one bench_now() */

static void inc_h(void) { count++; }

static void sleep_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs handlers until count reaches n, then takes n off it. */
static void drain(int n)
{
    while (count < n)
        CMAM_poll();
    count -= n;
}

static void emit(const char *name, size_t size, const char *unit, long iters, double *v)
{
    bench_emit(&opts, name, size, 2, unit, iters, v, opts.batches);
}

/* ---- round trip: CMAM_4 / CMAM_reply_4 against shoal's short AM ------------ */
static void ping_h(int src) { CMAM_reply_4(src, inc_h); }
static void am_ping(shoal_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)b, (void)n, (void)a, (void)na;
    shoal_am_reply_short(t, H_PONG, 0, 4, a); /* four words back, as CMAM's reply carries */
}
static volatile uint64_t am_pongs;
static void am_pong(shoal_token_t t, void *b, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)n, (void)a, (void)na;
    am_pongs++;
}

static double rtt_batch(int cmam, long iters)
{
    shoal_barrier();
    double t0 = bench_now();
    if (me == 0) {
        for (long i = 0; i < iters; i++) {
            if (cmam) {
                CMAM_4(peer, ping_h, 0);
                CMAM_wait(&count, 1);
            } else {
                shoal_am_request_short(peer, H_PING, 0, shoal_args(0, 0, 0, 0));
                shoal_wait_until(&am_pongs, 1);
            }
        }
    }
    double t = bench_now() - t0;
    shoal_barrier(); /* rank 1 serves inside it */
    return t / (double)iters * 1e6;
}

/* The ratio of each pair of adjacent batches is the figure the machine's
 * load disturbs least: both halves of a pair see about the same load. */
static void bench_rtt(void)
{
    double a[BENCH_MAX_BATCHES], b[BENCH_MAX_BATCHES], r[BENCH_MAX_BATCHES];
    rtt_batch(1, opts.iters / 4); /* warm-up */
    rtt_batch(0, opts.iters / 4);
    for (int i = 0; i < opts.batches; i++) { /* interleaved, alternating which goes first */
        int first = i & 1;
        double x = rtt_batch(first, opts.iters), y = rtt_batch(!first, opts.iters);
        a[i] = first ? x : y;
        b[i] = first ? y : x;
        r[i] = a[i] / b[i];
    }
    if (me == 0) {
        emit("cmam_rtt", 16, "us", opts.iters, a);
        emit("am_rtt", 16, "us", opts.iters, b);
        emit("cmam_rtt_over_am_rtt", 16, "ratio", opts.iters, r);
    }
}

/* ---- send overheads ---------------------------------------------------------- */
static double reply_time; /* summed inside the handler */
static void timed_reply_h(int src)
{
    double t0 = bench_now();
    CMAM_reply_4(src, inc_h);
    reply_time += bench_now() - t0 - clock_cost;
}

static void bench_send(void)
{
    double req[BENCH_MAX_BATCHES], rep[BENCH_MAX_BATCHES];
    long n = opts.iters;
    for (int i = -1; i < opts.batches; i++) {
        shoal_barrier();
        double t0 = bench_now();
        if (me == 0)
            for (long k = 0; k < n; k++)
                CMAM_4(1, inc_h);
        else
            drain((int)n);
        double t = bench_now() - t0;
        shoal_barrier();
        reply_time = 0;
        if (me == 0) { /* requests one at a time: the reply is timed at rank 1 */
            for (long k = 0; k < n; k++) {
                CMAM_4(1, timed_reply_h, 0);
                CMAM_wait(&count, 1);
            }
        }
        shoal_barrier();
        if (i >= 0) {
            req[i] = t / (double)n * 1e6;
            rep[i] = reply_time / (double)n * 1e6;
        }
    }
    if (me == 0)
        emit("cmam_send_request", 16, "us", n, req);
    else
        emit("cmam_send_reply", 16, "us", n, rep);
}

/* ---- handling a backlog ---------------------------------------------------------- */
static char seg_mem[2][BACKLOG * 16];
static int peer_ids[2];
static volatile int ids_in;
static void id_h(int which, int id)
{
    peer_ids[which] = id;
    ids_in++;
}
static int eot_count(void *base, int info)
{
    (void)base, (void)info;
    eots++;
    return 0;
}

/* Rank 1's segments for rank 0 to write: opened fresh for each batch. */
static void open_for_peer(int nsegs, int bytes)
{
    shoal_barrier();
    if (me == 1)
        for (int s = 0; s < nsegs; s++)
            CMAM_4(0, id_h, s, CMAM_open_segment(seg_mem[s], bytes, eot_count, 0));
    else
        CMAM_wait(&ids_in, nsegs);
    shoal_barrier();
}

/* Rank 0 sends a backlog of kind (0: CMAM_4, 1: xfer_4i into one segment,
 * 2: into two alternately) while rank 1 sleeps; rank 1 times the drain. */
static double handle_batch(int kind)
{
    if (kind)
        open_for_peer(kind, BACKLOG / kind * 16);
    shoal_barrier();
    double t = 0;
    if (me == 0) {
        for (int k = 0; k < BACKLOG; k++) {
            if (kind == 0)
                CMAM_4(1, inc_h);
            else
                CMAM_xfer_4i(1, peer_ids[k % kind], (unsigned)(k / kind * 16), k, k, k, k);
        }
    } else {
        sleep_ms(20); /* the backlog arrives meanwhile */
        double t0 = bench_now();
        if (kind == 0)
            drain(BACKLOG);
        else
            while (eots < kind)
                CMAM_poll();
        t = bench_now() - t0;
        eots = 0;
    }
    shoal_barrier();
    return t / BACKLOG * 1e6;
}

static void bench_handle(void)
{
    static const char *names[] = {"cmam_handle", "cmam_handle_xfer_1seg", "cmam_handle_xfer_2seg"};
    for (int kind = 0; kind < 3; kind++) {
        double v[BENCH_MAX_BATCHES];
        handle_batch(kind);
        for (int i = 0; i < opts.batches; i++)
            v[i] = handle_batch(kind);
        if (me == 1)
            emit(names[kind], 16, "us", BACKLOG, v);
    }
}

/* ---- empty polls, segment open/close ----------------------------------------- */
static void bench_local(int which)
{
    double v[BENCH_MAX_BATCHES], w[BENCH_MAX_BATCHES];
    long n = opts.iters * 10;
    for (int i = -1; i < opts.batches; i++) {
        double t0 = bench_now();
        for (long k = 0; k < n; k++) {
            if (which == 0) {
                CMAM_poll();
            } else {
                int id = CMAM_open_segment(seg_mem[0], 16, eot_count, 0);
                CMAM_shorten_segment(id, 16); /* reaches 0: the eot function closes it */
            }
        }
        double t1 = bench_now();
        if (which == 0)
            for (long k = 0; k < n; k++)
                CMAM_reply_poll();
        double t2 = bench_now();
        if (i >= 0) {
            v[i] = (t1 - t0) / (double)n * 1e6;
            w[i] = (t2 - t1) / (double)n * 1e6;
        }
    }
    eots = 0;
    if (me == 0 && which == 0) {
        emit("cmam_poll_empty", 0, "us", n, v);
        emit("cmam_reply_poll_empty", 0, "us", n, w);
    } else if (me == 0) {
        emit("cmam_segment_open_close", 0, "us", n, v);
    }
    shoal_barrier();
}

/* ---- xfer_4i: request and reply overheads --------------------------------------- */
static double reply_xfer_time;
static void xfer4_reply_h(int src, int id, int off)
{
    double t0 = bench_now();
    CMAM_reply_xfer_4i(src, id, (unsigned)off, 1, 2, 3, 4);
    reply_xfer_time += bench_now() - t0 - clock_cost;
}

static void bench_xfer4(void)
{
    double req[BENCH_MAX_BATCHES], rep[BENCH_MAX_BATCHES];
    for (int i = -1; i < opts.batches; i++) {
        open_for_peer(1, BACKLOG * 16);
        double t0 = bench_now();
        if (me == 0)
            for (int k = 0; k < BACKLOG; k++)
                CMAM_xfer_4i(1, peer_ids[0], (unsigned)k * 16, k, k, k, k);
        else
            while (eots < 1)
                CMAM_poll();
        double t = bench_now() - t0;
        eots = 0;
        shoal_barrier();
        /* replies: rank 0 asks, rank 1's handler replies 16 bytes into rank 0's segment */
        reply_xfer_time = 0;
        if (me == 0) {
            int id = CMAM_open_segment(seg_mem[1], BACKLOG * 16, eot_count, 0);
            for (int k = 0; k < BACKLOG; k++)
                CMAM_4(1, xfer4_reply_h, 0, id, k * 16);
            while (eots < 1)
                CMAM_poll();
            eots = 0;
        }
        shoal_barrier();
        if (i >= 0) {
            req[i] = t / BACKLOG * 1e6;
            rep[i] = reply_xfer_time / BACKLOG * 1e6;
        }
    }
    if (me == 0)
        emit("cmam_xfer4_request", 16, "us", BACKLOG, req);
    else
        emit("cmam_xfer4_reply", 16, "us", BACKLOG, rep);
}

/* ---- CMAM_xfer bandwidth ---------------------------------------------------------- */
static char *big_in, *big_out;
static int rearm;
static int eot_rearm(void *base, int info)
{
    (void)base;
    eots++;
    return --rearm > 0 ? info : 0;
}
static void done_h(void) { pong++; }

static void bench_xfern(void)
{
    size_t max = opts.max_size > (1u << 24) ? (1u << 24) : opts.max_size;
    big_in = calloc(1, max);
    big_out = calloc(1, max);
    if (!big_in || !big_out)
        bench_die("no memory for %zu bytes", max);
    for (size_t n = 16; n <= max; n *= 4) {
        long reps = bench_iters_for(&opts, n) / 8 + 1;
        double v[BENCH_MAX_BATCHES];
        for (int i = -1; i < opts.batches; i++) {
            shoal_barrier();
            if (me == 1) {
                rearm = (int)reps;
                CMAM_4(0, id_h, 0, CMAM_open_segment(big_in, (int)n, eot_rearm, (int)n));
            } else {
                CMAM_wait(&ids_in, 1);
            }
            shoal_barrier();
            double t0 = bench_now();
            if (me == 0) {
                for (long r = 0; r < reps; r++)
                    CMAM_xfer(1, peer_ids[0], big_out, (int)n);
                CMAM_wait(&pong, 1);
            } else {
                while (eots < reps)
                    CMAM_poll();
                eots = 0;
                CMAM_4(0, done_h);
            }
            double t = bench_now() - t0;
            shoal_barrier();
            if (i >= 0)
                v[i] = (double)n * (double)reps / t / 1e6;
        }
        if (me == 0)
            emit("cmam_xfer_bandwidth", n, "MB/s", reps, v);
    }
    free(big_in);
    free(big_out);
}

/* ---- Table 4-8: fetch&add (Fig. 4-18) ---------------------------------------------- */
typedef struct { volatile int flag, value; } fetch_add_sync;
static int fa_counter;
static volatile int have_addr;
static int *fa_target;
static void fetch_add_rh(fetch_add_sync *sync, int value)
{
    sync->value = value;
    sync->flag = 1;
}
static void fetch_add_h(int ret_node, void *sync, int *addr, int incr)
{
    int value = *addr + incr;
    *addr = value;
    CMAM_reply_4(ret_node, fetch_add_rh, sync, value);
    count++; /* lets the server's drain count what it served */
}
static void addr_rh(int *where)
{
    fa_target = where;
    have_addr = 1;
}
static void addr_h(int src) { CMAM_reply_4(src, addr_rh, &fa_counter); }

static void bench_fetch_add(void)
{
    double rtt[BENCH_MAX_BATCHES], req[BENCH_MAX_BATCHES], srv[BENCH_MAX_BATCHES];
    static fetch_add_sync sync[BACKLOG];
    if (me == 0) {
        CMAM_4(1, addr_h, 0);
        CMAM_wait(&have_addr, 1);
    }
    long n = opts.iters;
    for (int i = -1; i < opts.batches; i++) {
        shoal_barrier();
        double t0 = bench_now(), t = 0, ti = 0, tc = 0, ts = 0;
        if (me == 0) {
            for (long k = 0; k < n; k++) { /* blocking: the round trip */
                sync[0].flag = 0;
                CMAM_4(1, fetch_add_h, 0, &sync[0], fa_target, 1);
                CMAM_wait(&sync[0].flag, 1);
            }
            t = bench_now() - t0;
        }
        shoal_barrier();
        count = 0;
        shoal_barrier();
        /* requester: initiate a backlog while the server sleeps, then sleep
         * (no polls) until the server has drained it, and complete the
         * replies, which are all there; server: drain the backlog */
        if (me == 0) {
            double a = bench_now();
            for (int k = 0; k < BACKLOG; k++) {
                sync[k].flag = 0;
                CMAM_4(1, fetch_add_h, 0, &sync[k], fa_target, 1);
            }
            ti = bench_now() - a;
            sleep_ms(60);
            a = bench_now();
            for (int k = 0; k < BACKLOG; k++)
                CMAM_wait(&sync[k].flag, 1);
            tc = bench_now() - a;
        } else {
            sleep_ms(20);
            double a = bench_now();
            drain(BACKLOG);
            ts = bench_now() - a;
        }
        shoal_barrier();
        if (i >= 0) {
            rtt[i] = t / (double)n * 1e6;
            req[i] = (ti + tc) / BACKLOG * 1e6;
            srv[i] = ts / BACKLOG * 1e6;
        }
    }
    if (me == 0) {
        emit("fetch_add_rtt", 16, "us", n, rtt);
        emit("fetch_add_requester_overhead", 16, "us", BACKLOG, req);
    } else {
        emit("fetch_add_server_overhead", 16, "us", BACKLOG, srv);
    }
}

int main(int argc, char **argv)
{
    opts = (struct bench_opts){.system = "shoal", .batches = 9, .iters = 20000, .min_size = 16,
                               .max_size = 1 << 20, .window = 1};
    if (bench_parse(argc, argv, &opts, "rtt send handle poll segment xfer4 xfern fetch_add all") != 0)
        return 2;
    if (shoal_init(&argc, &argv) != SHOAL_OK)
        bench_die("shoal_init failed");
    me = MYPROC;
    const char *t = opts.test;
    if (PROCS != 2 && !(PROCS == 1 && !strcmp(t, "rtt")))
        bench_die("run with 2 ranks (shoalrun --bind -n 2), or rtt alone (-n 1: round trips to itself)");
    peer = PROCS - 1;
    bench_pin_if_unpinned(me);
    shoal_am_register(H_PING, am_ping);
    shoal_am_register(H_PONG, am_pong);
    double t0 = bench_now();
    for (int i = 0; i < 1000; i++)
        bench_now();
    clock_cost = (bench_now() - t0) / 1000;
    shoal_barrier();
    int all = !strcmp(t, "all");
    if (all || !strcmp(t, "rtt"))
        bench_rtt();
    if (all || !strcmp(t, "send"))
        bench_send();
    if (all || !strcmp(t, "handle"))
        bench_handle();
    if (all || !strcmp(t, "poll"))
        bench_local(0);
    if (all || !strcmp(t, "segment"))
        bench_local(1);
    if (all || !strcmp(t, "xfer4"))
        bench_xfer4();
    if (all || !strcmp(t, "xfern"))
        bench_xfern();
    if (all || !strcmp(t, "fetch_add"))
        bench_fetch_add();
    shoal_finalize();
    return 0;
}
