/* The raw Ethernet carrier on "lo": frames of shoal's EtherType reach
 * another socket whole, through recvmmsg and through the receive ring
 * (in order, round after round past the ring's end, waking a poll); a bad interface is SHOAL_ECONFIG; without
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
 * back.  The first round's first frame wakes a poll of c's socket.
 * Loopback's 64 KiB frames get a ring only when asked for. */
static void test_ring(struct eth_sock *a)
{
    struct eth_sock c;
    CHECK_RC(eth_open(&c, "lo", 1 << 16, ETH_RING_AUTO), SHOAL_OK);
    CHECK(!c.ring.map, "a ring of %u frames of %u bytes", c.ring.frames, c.ring.frame_size);
    eth_close(&c);
    CHECK_RC(eth_open(&c, "lo", 1 << 16, ETH_RING_ON), SHOAL_OK);
    CHECK(c.ring.map && c.ring.frames == 1024, "no ring of 1024 frames (%u)", c.ring.frames);
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
            eth_ring_walk(&c, 16, ring_take);
            TEST_DEADLINE(t0, 10, "a round's frames to arrive in the ring");
        }
    }
    eth_close(&c);
    CHECK(c.ring.map == NULL && c.fd == -1, "eth_close left the ring");
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
    eth_close(&a);
    eth_close(&b);
    return 0;
}
