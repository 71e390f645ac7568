/* The raw Ethernet carrier on "lo": frames of shoal's EtherType reach
 * another socket whole; a bad interface is SHOAL_ECONFIG; without
 * CAP_NET_RAW, eth_open says SHOAL_EACCES (what the UDP fallback keys on).
 * Bytes after a packet's own length are cut on receipt.
 * On loopback every socket also receives the frames it sent (they come back
 * in as received), so receivers pick theirs by content, as the protocol
 * does by rank. */
#include "../common/check.h"
#include "net/eth.h"
#include "net/sock.h"

#include <shoal.h>
#include <string.h>
#include <unistd.h>

#define N 100

int main(void)
{
    struct eth_sock a, b;
    int rc = eth_open(&a, "lo", 1 << 20);
    if (geteuid() != 0) {
        CHECK(rc == SHOAL_EACCES || rc == SHOAL_OK, "eth_open without root: %d", rc);
        if (rc)
            return 0;
    }
    CHECK_RC(rc, SHOAL_OK);
    CHECK(a.mtu >= 1500, "lo MTU %u", a.mtu);
    CHECK_RC(eth_open(&b, "shoal-no-such-if0", 0), SHOAL_ECONFIG);
    CHECK(b.fd == -1, "a failed open left a socket");
    CHECK_RC(eth_open(&b, "lo", 1 << 20), SHOAL_OK);
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
    eth_close(&a);
    eth_close(&b);
    return 0;
}
