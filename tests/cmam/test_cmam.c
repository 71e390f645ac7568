/* cmam.h tests, run through shoalrun (docs/CMAM.md): Fig. 4-18's
 * fetch&add blocking and split-phase, words of every kind, the polls and
 * CMAM_wait, segments (open, xfer, xfer_4i, reply xfers, end of transfer,
 * re-arm, shorten, 256 of them), and misuse: what the receiver drops and
 * counts, and what aborts at the sender.
 * Usage: test_cmam <test>   (see the table in main) */
#include <shoal/cmam.h>

#include "../common/check.h"
#include "cmam/cmam_int.h"
#include "am/am.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 64
static int me, np;
static volatile int *peer_counter[MAXP]; /* each rank's `counter`, at its address (ASLR) */
static volatile int counter;
static volatile int arrived;

/* Polls with a deadline until *flag >= value, then lets CMAM_wait subtract
 * (so a hang fails with a message, and CMAM_wait's rule is exercised). */
static void wait_flag(volatile int *flag, int value, const char *what)
{
    double t0 = test_now();
    while (*flag < value) {
        CMAM_poll();
        TEST_DEADLINE(t0, 30, what);
    }
    CMAM_wait(flag, value);
}

/* ---- addresses: each rank tells every other where its counter is -------- */
static void addr_h(int src, volatile int *where)
{
    peer_counter[src] = where;
    arrived++;
}

static void exchange_addresses(void)
{
    for (int p = 0; p < np; p++)
        CMAM_4(p, addr_h, MYPROC, &counter);
    wait_flag(&arrived, np, "every rank's address");
}

/* ---- Fig. 4-18, as printed (with the thesis's new-value semantics) ------ */
typedef struct { volatile int flag, value; } fetch_add_sync;
void fetch_add_h(int ret_node, void *sync, int *addr, int incr);
void fetch_add_rh(fetch_add_sync *sync, int value);

void fetch_add_initiate(int node, int *addr, int incr, fetch_add_sync *sync)
{
    sync->flag = 0;
    CMAM_4(node, fetch_add_h, MYPROC, sync, addr, incr);
}
int fetch_add_complete(fetch_add_sync *sync)
{
    CMAM_wait(&sync->flag, 1);
    return sync->value;
}
int fetch_add(int node, int *addr, int incr)
{
    fetch_add_sync sync;
    fetch_add_initiate(node, addr, incr, &sync);
    return fetch_add_complete(&sync);
}
void fetch_add_h(int ret_node, void *sync, int *addr, int incr)
{
    int value = *addr + incr;
    *addr = value;
    CMAM_reply_4(ret_node, fetch_add_rh, sync, value);
}
void fetch_add_rh(fetch_add_sync *sync, int value)
{
    sync->value = value;
    sync->flag = 1;
}

/* Rank 0 collects every value returned, which must be 1..P*K once each. */
static unsigned char *seen;
static volatile int marks;
static void mark_h(int value)
{
    CHECK(value >= 1 && value <= np * 200 && !seen[value], "fetch&add value %d returned twice or out of range",
          value);
    seen[value] = 1;
    marks++;
}

static void test_fetch_add(int split)
{
    enum { K = 200, W = 8 };
    counter = 0;
    shoal_barrier(); /* nobody's address message comes before the reset */
    exchange_addresses();
    seen = calloc((size_t)np * K + 1, 1);
    shoal_barrier();
    int *target = (int *)peer_counter[0];
    if (!split) {
        for (int k = 0; k < K; k++) {
            int v = fetch_add(0, target, 1);
            CMAM_4(0, mark_h, v);
        }
    } else { /* W in flight, each completed in order of issue */
        fetch_add_sync s[W];
        for (int k = 0; k < K + W; k++) {
            if (k >= W)
                CMAM_4(0, mark_h, fetch_add_complete(&s[k % W]));
            if (k < K)
                fetch_add_initiate(0, target, 1, &s[k % W]);
        }
    }
    if (me == 0) {
        wait_flag(&marks, np * K, "every fetch&add value at rank 0");
        CHECK(counter == np * K, "counter %d after %d fetch&adds", counter, np * K);
    }
    shoal_barrier();
    free(seen);
}

/* ---- words: ints, pointers, doubles and floats in any mix ---------------- */
static volatile int replies_ok, padded_ok;
static void words_rh(double d, int a, float f, void *p)
{
    CHECK(d == 2.5 && a == -7 && f == 0.25f && p == (void *)(uintptr_t)0x5678, "reply words %g %d %g %p", d, a,
          (double)f, p);
    replies_ok++;
}
static void words_h(int src, double d, void *p, float f)
{
    CHECK(d == -1.125 && f == 3.5f && p == (void *)(uintptr_t)0x1234, "request words %g %p %g", d, p, (double)f);
    CMAM_reply_4(src, words_rh, 2.5, -7, 0.25f, (void *)(uintptr_t)0x5678);
}
static void padded_h(int a, int b, int c, int d)
{
    CHECK(a == 41 && b == 0 && c == 0 && d == 0, "fewer words are sent as zeros: %d %d %d %d", a, b, c, d);
    padded_ok++;
}
static void no_words_rh(long a, long b, long c, long d)
{
    CHECK(!a && !b && !c && !d, "no words arrive as zeros");
    replies_ok++;
}
static void no_words_h(int src)
{
    CMAM_reply_4(src, no_words_rh);
}
static void test_words(void)
{
    int peer = (me + 1) % np;
    CMAM_4(peer, words_h, MYPROC, -1.125, (void *)(uintptr_t)0x1234, 3.5f);
    CMAM_4(peer, padded_h, 41);
    CMAM_4(peer, no_words_h, MYPROC);
    wait_flag(&replies_ok, 2, "the words replies");
    wait_flag(&padded_ok, 1, "the padded request");
    shoal_barrier();
}

/* ---- polls and CMAM_wait --------------------------------------------------- */
static volatile int bumps;
static void bump_h(void) { bumps++; }
static void test_poll(void)
{
    int peer = (me + 1) % np;
    for (int i = 0; i < 3; i++)
        CMAM_4(peer, bump_h);
    double t0 = test_now();
    while (bumps < 3) {
        CMAM_request_poll();
        CMAM_reply_poll(); /* from the computation: runs replies only, harmless */
        TEST_DEADLINE(t0, 30, "three requests");
    }
    CMAM_wait(&bumps, 2); /* subtracts */
    CHECK(bumps == 1, "CMAM_wait(&f, 2) at 3 left %d", bumps);
    CMAM_wait(&bumps, 0);
    CHECK(bumps == 1, "CMAM_wait(&f, 0) left %d", bumps);
    CHECK(MYPROC == shoal_rank() && PROCS == shoal_size(), "MYPROC/PROCS");
    shoal_barrier();
}

/* ---- segments -------------------------------------------------------------- */
#define SEG_BYTES 20000 /* several packets over the network */
static char inbox[MAXP][SEG_BYTES];
static volatile int eots, eot_info_sum;
static int rearm_left;

static int eot_close(void *base, int info)
{
    (void)base;
    eots++;
    eot_info_sum += info;
    return 0;
}
static int eot_rearm(void *base, int info)
{
    (void)base;
    (void)info;
    eots++;
    return rearm_left-- > 0 ? 16 : 0;
}
static unsigned char pat(int src, int i) { return (unsigned char)(src * 31 + i * 7 + (i >> 8)); }

static volatile int seg_ids_in;
static int peer_seg[MAXP];
static void seg_id_h(int src, int id)
{
    peer_seg[src] = id;
    seg_ids_in++;
}

/* A block read: the request handler replies with the block into the
 * requester's segment. */
static char readable[SEG_BYTES];
static void read_h(int src, int seg_addr, int n)
{
    CMAM_reply_xfer(src, seg_addr, readable, n);
}
static void read4_h(int src, int seg_id, int off)
{
    CMAM_reply_xfer_4i(src, seg_id, (unsigned)off, 1, 2, 3, 4 + MYPROC);
}

static void test_segment(void)
{
    /* 256 segments, the highest first; then none free */
    eots = eot_info_sum = 0; /* local so far: nobody sends before the ids are out */
    int ids[256];
    for (int i = 0; i < 256; i++) {
        ids[i] = CMAM_open_segment(inbox, 8, eot_close, 0);
        CHECK(ids[i] == (int)((unsigned)(255 - i) << 24), "segment %d got id %d", i, ids[i]);
    }
    CHECK(CMAM_open_segment(inbox, 8, eot_close, 0) == -1, "a 257th segment");
    for (int i = 0; i < 256; i++)
        CHECK(CMAM_shorten_segment(ids[i], 8) == 0, "shorten %d", i);
    CHECK(eots == 256 && eot_info_sum == 0, "shortening to 0 ran %d end-of-transfer functions", eots);
    CHECK(CMAM_shorten_segment(ids[0], 1) == -1, "shorten a closed segment");
    CHECK(CMAM_open_segment(NULL, 8, eot_close, 0) == -1 && CMAM_open_segment(inbox, 0, eot_close, 0) == -1 &&
              CMAM_open_segment(inbox, (1 << 24) + 1, eot_close, 0) == -1,
          "invalid opens");
    eots = 0;

    /* every rank sends SEG_BYTES to every rank (itself too) into one
     * segment per source; info names the source */
    for (int s = 0; s < np; s++) {
        int id = CMAM_open_segment(inbox[s], SEG_BYTES, eot_close, 1000 + s);
        CHECK(id != -1, "open");
        CMAM_4(s, seg_id_h, MYPROC, id);
    }
    wait_flag(&seg_ids_in, np, "segment ids");
    static char out[SEG_BYTES];
    for (int i = 0; i < SEG_BYTES; i++)
        out[i] = (char)pat(me, i);
    for (int k = 0; k < np; k++) {
        int d = (me + k) % np;
        /* in two pieces out of order: completion counts bytes */
        CMAM_xfer(d, peer_seg[d] + 5000, out + 5000, SEG_BYTES - 5000);
        CMAM_xfer(d, peer_seg[d], out, 5000);
    }
    wait_flag(&eots, np, "every block");
    int sum = 0;
    for (int s = 0; s < np; s++) {
        sum += 1000 + s;
        for (int i = 0; i < SEG_BYTES; i++)
            CHECK((unsigned char)inbox[s][i] == pat(s, i), "byte %d from rank %d", i, s);
    }
    CHECK(eot_info_sum == sum, "end-of-transfer info");
    shoal_barrier();

    /* xfer_4i into a re-arming segment: 3 rounds of 16 bytes, then closed */
    rearm_left = 2;
    int quad[4];
    int id = CMAM_open_segment(quad, 16, eot_rearm, 0);
    int peer = (me + np - 1) % np, to = (me + 1) % np;
    CMAM_4(peer, seg_id_h, MYPROC, id); /* peer writes into it */
    wait_flag(&seg_ids_in, 1, "the neighbour's segment");
    shoal_barrier();
    for (int r = 0; r < 3; r++) {
        CMAM_xfer_4i(to, peer_seg[to], 0, r, me, 7, -r);
        wait_flag(&eots, 1, "a 16-byte round");
        CHECK(quad[0] == r && quad[1] == peer && quad[2] == 7 && quad[3] == -r, "round %d: %d %d %d %d", r,
              quad[0], quad[1], quad[2], quad[3]);
        shoal_barrier(); /* the next round goes to a re-armed segment */
    }
    CHECK(CMAM_shorten_segment(id, 0) == -1, "the segment closed after two re-arms");

    /* reply xfers: read a block and 16 bytes from the neighbour */
    for (int i = 0; i < SEG_BYTES; i++)
        readable[i] = (char)pat(me + 100, i);
    shoal_barrier(); /* filled before anyone reads it */
    int rid = CMAM_open_segment(inbox[0], SEG_BYTES, eot_close, 0);
    CMAM_4(to, read_h, MYPROC, rid, SEG_BYTES);
    wait_flag(&eots, 1, "the block read");
    for (int i = 0; i < SEG_BYTES; i++)
        CHECK((unsigned char)inbox[0][i] == pat(to + 100, i), "read byte %d", i);
    rid = CMAM_open_segment(inbox[1], 32, eot_close, 0);
    CMAM_4(to, read4_h, MYPROC, rid, 16);
    CHECK(CMAM_shorten_segment(rid, 16) == 0, "shorten by the half not read");
    wait_flag(&eots, 1, "the 16-byte read");
    int got[4];
    memcpy(got, inbox[1] + 16, sizeof got);
    CHECK(got[0] == 1 && got[3] == 4 + to, "the 16-byte read: %d %d", got[0], got[3]);
    shoal_barrier();
}

/* ---- a handler in a shared library (cmam_lib.c) ------------------------- */
CMAM_fun cmam_lib_handler(void);
int cmam_lib_count(void);
static void test_library(void)
{
    CMAM_4((me + 1) % np, cmam_lib_handler(), 5);
    double t0 = test_now();
    while (cmam_lib_count() < 5) {
        CMAM_poll();
        TEST_DEADLINE(t0, 30, "the library's handler");
    }
    shoal_barrier();
    CHECK(cmam_lib_count() == 5, "the library's handler ran %d times", cmam_lib_count() / 5);
}

/* ---- misuse the receiver drops and counts ---------------------------------- */
static volatile int ran;
static void ok_h(void) { ran++; }

static void test_drops(void)
{
    int to = (me + 1) % np;
    static char small[64];
    int open_id = CMAM_open_segment(small, 64, eot_close, 0);
    int closed_id = CMAM_open_segment(small, 8, eot_close, 0);
    CHECK(CMAM_shorten_segment(closed_id, 8) == 0, "close by shortening");
    CMAM_4((me + np - 1) % np, seg_id_h, MYPROC, open_id); /* the rank before writes into it */
    wait_flag(&seg_ids_in, 1, "the neighbour's segment");
    struct CMAM_drop_counts d;
    CMAM_drops(&d);
    CHECK(!d.forged && !d.bad_segment && !d.closed && !d.overrun, "drops before misuse");
    shoal_barrier();
    char junk[100] = {0};
    int never = 3 << 24; /* ids are handed out from 255 down: 3 is never opened here */
    CMAM_xfer(to, never, junk, 8);                              /* bad segment */
    CMAM_xfer(to, closed_id, junk, 8);                          /* closed (same id at every rank) */
    CMAM_xfer(to, peer_seg[to] + 60, junk, 8);                  /* past the extent */
    CMAM_xfer(to, peer_seg[to], junk, 100);                     /* more than the count */
    CMAM_4(to, (CMAM_fun)(uintptr_t)((uintptr_t)ok_h + 1));    /* not a function's start */
    /* a reference no image of this program has: white-box, as a forger would */
    uint64_t forged[5] = {(uint64_t)0xbeef << CMAM_REF_IMAGE_SHIFT | 0x1000, 0, 0, 0, 0};
    CHECK_RC(am_request_internal(to, AM_LAYER_BASE(AM_BLOCK_CMAM) + CMAM_H_REQUEST, 0, NULL, 0, 5, forged),
             SHOAL_OK);
    uint64_t wild[5] = {CMAM_REF_OFFSET_MASK, 0, 0, 0, 0}; /* main image, far outside its code */
    CHECK_RC(am_request_internal(to, AM_LAYER_BASE(AM_BLOCK_CMAM) + CMAM_H_REQUEST, 0, NULL, 0, 5, wild),
             SHOAL_OK);
    CMAM_4(to, ok_h); /* after all that, a good message still runs */
    wait_flag(&ran, 1, "the good message after the bad ones");
    shoal_barrier();
    CMAM_poll();
    CMAM_drops(&d);
    CHECK(d.forged == 3 && d.bad_segment == 1 && d.closed == 1 && d.overrun == 2,
          "drops: forged %lu bad %lu closed %lu overrun %lu", d.forged, d.bad_segment, d.closed, d.overrun);
    CHECK(CMAM_shorten_segment(open_id, 64) == 0, "the segment kept its count through the overruns");
    shoal_barrier();
}

/* ---- misuse that aborts at the sender (each test expects its message) ----- */
static void reply_from_computation(void) { CMAM_reply_4(0, ok_h); }
static void request_in_handler_h(void) { CMAM_4(MYPROC, ok_h); }
static void two_replies_h(int src)
{
    CMAM_reply_4(src, ok_h);
    CMAM_reply_4(src, ok_h);
}
/* PROCS, not np: rank 0's request can arrive during rank 1's shoal_init, before main sets np */
static void reply_elsewhere_h(int src) { CMAM_reply_4((src + 1) % PROCS, ok_h); }
static void poll_in_handler_h(void) { CMAM_poll(); }
static void abort_case(const char *which)
{
    if (!strcmp(which, "bad_node"))
        CMAM_4(np, ok_h);
    else if (!strcmp(which, "reply_outside"))
        reply_from_computation();
    else if (!strcmp(which, "request_in_handler")) {
        CMAM_4(me, request_in_handler_h);
        CMAM_poll();
    } else if (!strcmp(which, "two_replies") || !strcmp(which, "reply_elsewhere") ||
               !strcmp(which, "poll_in_handler")) { /* rank 0's request makes rank 1's handler misbehave */
        CMAM_fun h = which[0] == 't' ? (CMAM_fun)two_replies_h
                     : which[0] == 'r' ? (CMAM_fun)reply_elsewhere_h
                                       : (CMAM_fun)poll_in_handler_h;
        if (me == 0)
            CMAM_4(1, h, me);
        wait_flag(&ran, 1, "the abort");
    } else if (!strcmp(which, "data_handler"))
        CMAM_4(me, (CMAM_fun)(uintptr_t)&counter);
    else if (!strcmp(which, "xfer_offset"))
        CMAM_xfer_4i(me, 0, 1u << 24, 0, 0, 0, 0);
    CHECK(0, "misuse %s did not abort", which);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_cmam fetch_add|split|words|poll|library|segment|drops|all|abort:<case>");
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = MYPROC;
    np = PROCS;
    CHECK(np <= MAXP, "at most %d ranks", MAXP);
    const char *t = argv[1];
    int all = !strcmp(t, "all");
    if (!strncmp(t, "abort:", 6))
        abort_case(t + 6);
    if (all || !strcmp(t, "fetch_add"))
        test_fetch_add(0);
    if (all || !strcmp(t, "split"))
        test_fetch_add(1);
    if (all || !strcmp(t, "words"))
        test_words();
    if (all || !strcmp(t, "poll"))
        test_poll();
    if (all || !strcmp(t, "library"))
        test_library();
    if (all || !strcmp(t, "drops")) /* first: it needs a segment never opened */
        test_drops();
    if (all || !strcmp(t, "segment"))
        test_segment();
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    if (me == 0)
        printf("test_cmam %s: %d ranks ok\n", t, np);
    return 0;
}
