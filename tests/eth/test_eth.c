/* The raw Ethernet carrier on "lo": frames of shoal's EtherType reach
 * another socket whole, through recvmmsg and through the receive ring
 * (in order, round after round past the ring's end, waking a poll), and
 * through a ring whose frames are smaller than loopback's, which spills
 * the larger ones whole in order (and counts those the socket buffer had
 * no room for); a bad interface is SHOAL_ECONFIG; without
 * CAP_NET_RAW, eth_open says SHOAL_EACCES (what the UDP fallback keys on).
 * Bytes after a packet's own length are cut on receipt.
 * On loopback every socket also receives the frames it sent (they come back
 * in as received), so receivers pick theirs by content, as the protocol
 * does by rank; eth_drop_own stops a rank's own in the kernel, and only
 * those. */
#include "../common/check.h"
#include "net/eth.h"
#include "net/sock.h"
#include "net/wire.h"

#include <poll.h>
#include <shoal.h>
#include <string.h>
#include <unistd.h>

#define N 100

enum { KINDS = 3, EACH = 20 };

/* Receives what is waiting on s; counts[k] frames equal to pkt[k]. */
static void count_kinds(struct eth_sock *s, unsigned char pkt[KINDS][WIRE_HEADER_BYTES], int counts[KINDS])
{
    static char in[16][256];
    struct sock_rx rx = {.n = 16};
    for (unsigned i = 0; i < rx.n; i++)
        sock_rx_set(&rx, i, in[i], sizeof in[i]);
    size_t len[16];
    int k;
    while ((k = eth_recv_batch(s, &rx, len, NULL)) > 0)
        for (int i = 0; i < k; i++)
            for (int j = 0; j < KINDS; j++)
                counts[j] += len[i] == WIRE_HEADER_BYTES && memcmp(in[i], pkt[j], WIRE_HEADER_BYTES) == 0;
    CHECK(k == 0, "eth_recv_batch: %d", k);
}

/* With eth_drop_own(job, rank 1), a stops its own frames (this job and
 * rank as source) but receives rank 2's and another job's rank 1's; b,
 * without the filter, receives all three kinds. */
static void test_drop_own(struct eth_sock *a, struct eth_sock *b)
{
    const uint64_t job = 0x1234567890abcdefull;
    struct wire_key key;
    CHECK_RC(wire_key_init(&key, 0xfedcba0987654321ull, 0x0123456789abcdefull, 0), SHOAL_OK);
    CHECK(a->loopback && b->loopback, "lo is not a loopback interface");
    CHECK_RC(eth_drop_own(a, job, 1), SHOAL_OK);
    unsigned char pkt[KINDS][WIRE_HEADER_BYTES];
    struct wire_header h = {.type = WIRE_KEEPALIVE, .job = job, .src = 1, .dst = 2, .src_inc = 7};
    wire_encode_header(pkt[0], &h, &key, 1); /* a's own */
    h.src = 2, h.dst = 1;
    wire_encode_header(pkt[1], &h, &key, 1); /* another rank's */
    h.src = 1, h.dst = 2, h.job = job + 1;
    wire_encode_header(pkt[2], &h, &key, 1); /* another job's */
    wire_key_fini(&key);
    int at_a[KINDS] = {0}, at_b[KINDS] = {0};
    count_kinds(a, pkt, at_a); /* empties a of the test above's frames */
    struct eth_frame tx[KINDS * EACH];
    for (int i = 0; i < KINDS * EACH; i++)
        tx[i] = (struct eth_frame){.buf = pkt[i % KINDS], .len = WIRE_HEADER_BYTES, .peer = eth_broadcast};
    /* Other tests' frames on lo reach these sockets too and may fill one for
     * a moment, and the kernel then drops what comes next: so both are read
     * all along, and the frames sent again (every 0.2 s) until each kind
     * has arrived EACH times where it should. */
    double t0 = test_now(), round = 0;
    while (at_b[0] < EACH || at_b[1] < EACH || at_b[2] < EACH || at_a[1] < EACH || at_a[2] < EACH) {
        if (test_now() >= round) {
            for (int sent = 0; sent < KINDS * EACH;) {
                int k = eth_send(a, tx + sent, (unsigned)(KINDS * EACH - sent));
                CHECK(k >= 0, "eth_send: %d", k);
                sent += k;
                TEST_DEADLINE(t0, 10, "the kernel to take the frames");
            }
            round = test_now() + 0.2;
        }
        count_kinds(a, pkt, at_a);
        count_kinds(b, pkt, at_b);
        TEST_DEADLINE(t0, 10, "the frames to reach both sockets");
    }
    count_kinds(a, pkt, at_a); /* loopback delivers a frame to every socket at once */
    CHECK(at_a[0] == 0, "with the filter %d of this rank's own frames arrived", at_a[0]);
}

/* What the ring walk saw of the round being received: frames of the
 * round, in order (the content tells them from other programs' frames). */
static struct {
    int round, next;
} ring_seen;

static void ring_take(const unsigned char *pkt, size_t len)
{
    if (len < 16 || memcmp(pkt, "shoal-eth-ring", 14) != 0 || pkt[14] != ring_seen.round)
        return;
    CHECK(pkt[15] == ring_seen.next && len == 64 + (size_t)pkt[15] % 7,
          "round %d: frame %d of %zu bytes where frame %d was next", ring_seen.round, pkt[15], len, ring_seen.next);
    ring_seen.next++;
}

/* Rounds of N frames from a reach c's ring whole and in order; c's ring has
 * 1024 frames, so the later rounds use the frames the earlier ones gave
 * back.  The first round's first frame wakes a poll of c's socket.  Asked
 * for, the ring holds loopback's 64 KiB frames whole. */
static void test_ring(struct eth_sock *a)
{
    struct eth_sock c;
    CHECK_RC(eth_open(&c, "lo", 1 << 16, ETH_RING_ON), SHOAL_OK);
    CHECK(c.ring.map && c.ring.frames == 1024 && !c.ring.spill, "no ring of 1024 whole frames (%u)", c.ring.frames);
    static unsigned char out[N][128];
    struct eth_frame tx[N];
    for (int round = 0; round < 24; round++) {
        for (int i = 0; i < N; i++) {
            memset(out[i], 0, sizeof out[i]);
            memcpy(out[i], "shoal-eth-ring", 14);
            out[i][14] = (unsigned char)round;
            out[i][15] = (unsigned char)i;
            out[i][58] = (unsigned char)(i % 7); /* the packet's length: i % 7 payload bytes, then 2 trailing */
            tx[i] = (struct eth_frame){.buf = out[i], .len = 64 + (size_t)(i % 7) + 2, .peer = eth_broadcast};
        }
        ring_seen.round = round;
        ring_seen.next = 0;
        double t0 = test_now();
        for (int sent = 0; sent < N;) {
            int k = eth_send(a, tx + sent, round ? (unsigned)(N - sent) : 1);
            CHECK(k >= 0, "eth_send: %d", k);
            if (!round && k) { /* the first frame alone: the socket is readable */
                struct pollfd p = {.fd = c.fd, .events = POLLIN};
                CHECK(poll(&p, 1, 2000) == 1 && (p.revents & POLLIN), "a frame in the ring did not wake poll");
            }
            sent += k;
            TEST_DEADLINE(t0, 10, "the kernel to take the frames");
        }
        while (ring_seen.next < N) {
            eth_ring_walk(&c, 16, ring_take, NULL, 0);
            TEST_DEADLINE(t0, 10, "a round's frames to arrive in the ring");
        }
    }
    eth_close(&c);
    CHECK(c.ring.map == NULL && c.fd == -1, "eth_close left the ring");
}

/* A spilling ring (loopback's frames are larger than it holds): rounds of
 * small frames and frames too large for it arrive whole and in order
 * through take and take_spilled, alternating (runs of one, recvfrom) and
 * back to back (runs cut at `spills`, recvmmsg); with a socket buffer too
 * small for them, large frames are lost and counted, and the rest still
 * comes in order. */
enum { SPILL_N = 40, SPILL_BIG = 60000, SPILL_SMALL = 100 };
static struct {
    struct eth_sock *c;
    struct sock_rx rx;
    int round, next, spilled, longest_run;
    int lossy, skipped; /* large frames may be lost (skipped: how many were) */
    int all_big;        /* every frame of the round is large */
} spill_seen;

static size_t spill_len(int i)
{
    return i % 2 || spill_seen.all_big ? SPILL_BIG + (size_t)i : SPILL_SMALL + (size_t)i;
}

/* Checks a frame of the round (others' frames on lo are skipped); says
 * whether it was one. */
static int spill_check_one(const unsigned char *pkt, size_t len)
{
    if (len < 16 || memcmp(pkt, "shoal-eth-spill", 15) != 0 || pkt[15] != spill_seen.round)
        return 0;
    int i = spill_seen.next, at = -1;
    if (len > 64 + sizeof at)
        memcpy(&at, pkt + 64, sizeof at);
    for (; spill_seen.lossy && i % 2 && at > i; i++) /* lost large frames, only */
        spill_seen.skipped++;
    spill_seen.next = i;
    CHECK(i < SPILL_N && len == spill_len(i) && at == i,
          "round %d: a frame of %zu bytes where frame %d (%zu bytes) was next", spill_seen.round, len, i,
          spill_len(i < SPILL_N ? i : 0));
    spill_seen.next++;
    return 1;
}

static void spill_check(const unsigned char *pkt, size_t len)
{
    spill_check_one(pkt, len);
}

static unsigned spill_take(unsigned n)
{
    size_t len[16];
    CHECK(n >= 1 && n <= spill_seen.rx.n, "a run of %u spilled frames for %u buffers", n, spill_seen.rx.n);
    int got = eth_recv_spilled(spill_seen.c, &spill_seen.rx, n, len);
    CHECK(got == (int)n, "%u frames spilled, %d waited in the socket", n, got);
    for (int i = 0; i < got; i++)
        spill_seen.spilled += spill_check_one(spill_seen.rx.iov[i].iov_base, len[i]) && len[i] >= SPILL_BIG;
    spill_seen.longest_run = (int)n > spill_seen.longest_run ? (int)n : spill_seen.longest_run;
    return (unsigned)got;
}

static void send_all(struct eth_sock *a, struct eth_frame *tx, int n)
{
    double t0 = test_now();
    for (int sent = 0; sent < n;) {
        int k = eth_send(a, tx + sent, (unsigned)(n - sent));
        CHECK(k >= 0, "eth_send: %d", k);
        sent += k;
        TEST_DEADLINE(t0, 10, "the kernel to take the frames");
    }
}

static unsigned char spill_out[SPILL_N][SPILL_BIG + SPILL_N];
static struct eth_frame spill_tx[SPILL_N];

static void spill_round(int round)
{
    spill_seen.round = round;
    spill_seen.next = spill_seen.spilled = spill_seen.skipped = spill_seen.longest_run = 0;
    for (int i = 0; i < SPILL_N; i++) {
        size_t len = spill_len(i);
        memcpy(spill_out[i], "shoal-eth-spill", 15);
        spill_out[i][15] = (unsigned char)round;
        spill_out[i][58] = (unsigned char)((len - 64) & 0xff); /* the packet's length field */
        spill_out[i][59] = (unsigned char)((len - 64) >> 8);
        memcpy(spill_out[i] + 64, &i, sizeof i);
        spill_tx[i] = (struct eth_frame){.buf = spill_out[i], .len = len, .peer = eth_broadcast};
    }
}

/* Sends the round `chunk` frames at a time, each chunk received before
 * the next goes (walks of up to 16 frames, runs of up to `spills`). */
static void spill_exchange(struct eth_sock *a, int chunk, unsigned spills)
{
    double t0 = test_now();
    for (int from = 0; from < SPILL_N; from += chunk) {
        int k = SPILL_N - from < chunk ? SPILL_N - from : chunk;
        send_all(a, spill_tx + from, k);
        while (spill_seen.next < from + k) {
            eth_ring_walk(spill_seen.c, 16, spill_check, spill_take, spills);
            TEST_DEADLINE(t0, 10, "a round's frames to arrive through the spilling ring");
        }
    }
}

static int rcvbuf_of(int fd)
{
    int v = 0;
    socklen_t l = sizeof v;
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &l);
    return v;
}

static void test_spill(struct eth_sock *a)
{
    struct eth_sock c;
    CHECK_RC(eth_open(&c, "lo", 8 << 20, ETH_RING_AUTO), SHOAL_OK);
    CHECK(c.ring.map && c.ring.spill && c.ring.frame_size == 8336 && c.ring.frames == 1029,
          "not the spilling ring of WIRE.md 5.2 (%u frames of %u bytes)", c.ring.frames, c.ring.frame_size);
    static unsigned char in[16][1 << 16];
    spill_seen.c = &c;
    spill_seen.rx.n = 16;
    for (unsigned i = 0; i < 16; i++)
        sock_rx_set(&spill_seen.rx, i, in[i], sizeof in[i]);
    /* four frames at a time fit any socket buffer a process without
     * CAP_NET_ADMIN gets (twice net.core.rmem_max, 416 KiB by default) */
    for (int round = 0; round < 3; round++) {
        spill_round(round);
        spill_exchange(a, 4, 16);
        CHECK(spill_seen.spilled == SPILL_N / 2, "%d of the %d large frames came spilled", spill_seen.spilled,
              SPILL_N / 2);
    }
    if (rcvbuf_of(c.fd) >= 4 << 20) { /* back to back: runs of several, cut at 4 */
        spill_seen.all_big = 1;
        spill_round(3);
        spill_exchange(a, SPILL_N, 4);
        CHECK(spill_seen.spilled == SPILL_N && spill_seen.longest_run >= 2 && spill_seen.longest_run <= 4,
              "%d large frames spilled back to back, runs of up to %d", spill_seen.spilled, spill_seen.longest_run);
        spill_seen.all_big = 0;
    } else {
        printf("back-to-back large frames skipped: a socket buffer of %d bytes\n", rcvbuf_of(c.fd));
    }
    CHECK(c.ring.spill_lost == 0, "%llu frames lost with room to spare", (unsigned long long)c.ring.spill_lost);
    eth_close(&c);
    /* a socket buffer of 64 KiB (the kernel makes it 128 KiB) holds two or
     * three large frames: the others are cut short in the ring and counted
     * as lost; the small ones and the large ones that spill still come
     * whole and in order */
    CHECK_RC(eth_open(&c, "lo", 1 << 16, ETH_RING_AUTO), SHOAL_OK);
    CHECK(c.ring.spill, "no spilling ring");
    spill_seen.c = &c;
    spill_seen.lossy = 1;
    spill_round(4);
    send_all(a, spill_tx, SPILL_N);
    double t0 = test_now();
    while (spill_seen.next < SPILL_N - 1) { /* frame 38, the last small one, seen: the round is in */
        eth_ring_walk(&c, 16, spill_check, spill_take, 16);
        TEST_DEADLINE(t0, 10, "the small frames of a round with a small socket buffer");
    }
    CHECK(c.ring.spill_lost >= (uint64_t)spill_seen.skipped && spill_seen.skipped > 0,
          "%d large frames missing, %llu counted lost", spill_seen.skipped, (unsigned long long)c.ring.spill_lost);
    spill_seen.lossy = 0;
    eth_close(&c);
}

int main(void)
{
    struct eth_sock a, b;
    int rc = eth_open(&a, "lo", 1 << 20, ETH_RING_OFF);
    if (geteuid() != 0) {
        CHECK(rc == SHOAL_EACCES || rc == SHOAL_OK, "eth_open without root: %d", rc);
        if (rc) { /* the error the fallback keys on is right; the rest needs the socket */
            printf("skipped: no CAP_NET_RAW (eth_open said SHOAL_EACCES, as it should)\n");
            return 77;
        }
    }
    CHECK_RC(rc, SHOAL_OK);
    CHECK(a.mtu >= 1500, "lo MTU %u", a.mtu);
    CHECK_RC(eth_open(&b, "shoal-no-such-if0", 0, ETH_RING_ON), SHOAL_ECONFIG);
    CHECK(b.fd == -1, "a failed open left a socket");
    CHECK_RC(eth_open(&b, "lo", 1 << 20, ETH_RING_OFF), SHOAL_OK);
    static char out[N][200];
    struct eth_frame tx[N];
    for (int i = 0; i < N; i++) {
        memset(out[i], 0, sizeof out[i]);
        memcpy(out[i], "shoal-eth-test", 14);
        out[i][14] = (char)i;
        out[i][58] = (char)i; /* the packet's length field: i payload bytes ... */
        tx[i] = (struct eth_frame){.buf = out[i], .len = 64 + (size_t)i + (size_t)(i % 3) * 2,
                                   .peer = eth_broadcast}; /* ... and up to 4 trailing bytes, cut on receipt */
    }
    double t0 = test_now();
    int sent = 0;
    while (sent < N) {
        int k = eth_send(&a, tx + sent, (unsigned)(N - sent));
        CHECK(k >= 0, "eth_send: %d", k);
        sent += k;
        TEST_DEADLINE(t0, 10, "the kernel to take the frames");
    }
    int seen[N] = {0}, got = 0;
    static char in[16][256];
    struct sock_rx rx = {.n = 16};
    for (unsigned i = 0; i < rx.n; i++)
        sock_rx_set(&rx, i, in[i], sizeof in[i]);
    while (got < N) {
        size_t len[16];
        int k = eth_recv_batch(&b, &rx, len, NULL);
        CHECK(k >= 0, "eth_recv_batch: %d", k);
        for (int i = 0; i < k; i++) {
            if (memcmp(in[i], "shoal-eth-test", 14) != 0)
                continue; /* another program's frame of this EtherType */
            int id = (unsigned char)in[i][14];
            CHECK(id < N && len[i] == 64 + (size_t)id && !seen[id], "frame %d of %zu bytes", id, len[i]);
            seen[id] = 1;
            got++;
        }
        TEST_DEADLINE(t0, 10, "the frames to arrive");
    }
    test_drop_own(&a, &b);
    test_ring(&a);
    test_spill(&a);
    eth_close(&a);
    eth_close(&b);
    return 0;
}
