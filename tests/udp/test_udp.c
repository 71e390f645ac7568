/* The UDP carrier on loopback: interface specs resolve (or fail with
 * SHOAL_ECONFIG), a taken port range fails, batches of datagrams arrive
 * whole, in any order the kernel keeps, with their source, and so do
 * datagrams sent through a connected per-peer socket, which keeps sending
 * after the peer's port closed, and so do runs of datagrams sent as one
 * (UDP segmentation offload), coalesced or not at the receiver (UDP_GRO:
 * cut where the kernel says, and a datagram the kernel did not coalesce is
 * never cut). */
#include "../common/check.h"
#include "net/sock.h"
#include "net/udp.h"

#include <shoal.h>
#include <string.h>

#define N 200

static void check_specs(void)
{
    struct udp_endpoint e;
    char buf[64];
    CHECK_RC(udp_resolve("lo", &e), SHOAL_OK);
    CHECK(strcmp(udp_endpoint_str(&e, buf, sizeof buf), "127.0.0.1:0") == 0, "lo resolved to %s", buf);
    CHECK_RC(udp_resolve("127.0.0.0/8", &e), SHOAL_OK);
    CHECK(e.family == 4 && e.addr[0] == 127, "127.0.0.0/8 resolved to %s", udp_endpoint_str(&e, buf, sizeof buf));
    CHECK_RC(udp_resolve("127.0.0.1", &e), SHOAL_OK);
    CHECK_RC(udp_resolve("", &e), SHOAL_OK); /* some address, loopback at worst */
    CHECK_RC(udp_resolve("shoal-no-such-if0", &e), SHOAL_ECONFIG);
    CHECK_RC(udp_resolve("10.0.0.0/33", &e), SHOAL_ECONFIG);
    CHECK_RC(udp_resolve("300.1.1.1", &e), SHOAL_ECONFIG);
    CHECK_RC(udp_resolve("0.0.0.0/32", &e), SHOAL_ECONFIG); /* never an interface's address */
    CHECK_RC(udp_resolve("::/128", &e), SHOAL_ECONFIG);
    int rc = udp_resolve("::1", &e); /* IPv6 loopback, where the host has it */
    CHECK(rc == SHOAL_ECONFIG || (rc == SHOAL_OK && e.family == 6 && e.addr[15] == 1), "::1 resolved: %d", rc);
    if (rc == SHOAL_OK)
        CHECK(strcmp(udp_endpoint_str(&e, buf, sizeof buf), "[::1]:0") == 0, "::1 printed as %s", buf);
}

static void check_ports(void)
{
    struct udp_sock a, b;
    CHECK_RC(udp_open(&a, "lo", 0, 0, 0), SHOAL_OK);
    CHECK(a.self.port != 0, "no port picked");
    uint16_t p = a.self.port;
    CHECK_RC(udp_open(&b, "lo", p, p, 0), SHOAL_ESYS); /* the only port of the range is taken */
    CHECK(b.fd == -1, "a failed open left a socket");
    CHECK_RC(udp_open(&b, "lo", p, (uint16_t)(p + 50), 0), SHOAL_OK);
    CHECK(b.self.port > p && b.self.port <= p + 50, "port %u outside the range", (unsigned)b.self.port);
    udp_close(&a);
    udp_close(&b);
}

/* Hands pk[first..N) to a's carrier as it takes them. */
static void send_all(struct udp_sock *a, struct udp_packet *pk, int first, double t0)
{
    for (int sent = first; sent < N;) {
        int k = udp_send(a, pk + sent, (unsigned)(N - sent));
        CHECK(k >= 0, "udp_send: %d", k);
        sent += k;
        TEST_DEADLINE(t0, 10, "the kernel to take the datagrams");
    }
}

/* Receives the N datagrams of pk on b (datagram i is filled with byte i),
 * each exactly once and of its length; check_from judges where one came
 * from (a: the sender's socket). */
static void receive_all(struct udp_sock *b, const struct udp_packet *pk, const struct udp_sock *a, double t0,
                        void (*check_from)(const struct udp_sock *a, const struct udp_endpoint *from, int id))
{
    static char in[16][128];
    int seen[N] = {0}, got = 0;
    struct sock_rx rx = {.n = 16};
    for (unsigned i = 0; i < rx.n; i++)
        sock_rx_set(&rx, i, in[i], sizeof in[i]);
    while (got < N) {
        size_t len[16];
        struct udp_endpoint from[16];
        size_t seg[16];
        int k = udp_recv_batch(b, &rx, len, seg, from);
        CHECK(k >= 0, "udp_recv_batch: %d", k);
        for (int i = 0; i < k; i++) {
            int id = (unsigned char)in[i][0];
            CHECK(id < N && len[i] == pk[id].len && !seen[id], "datagram %d of %zu bytes", id, len[i]);
            for (size_t j = 0; j < len[i]; j++)
                CHECK((unsigned char)in[i][j] == id, "byte %zu of datagram %d", j, id);
            check_from(a, &from[i], id);
            seen[id] = 1;
            got++;
        }
        TEST_DEADLINE(t0, 10, "the datagrams to arrive");
    }
}

/* Packets to `to` of 1 + i % modulus bytes, each filled with its index. */
static void fill_packets(struct udp_packet *pk, const struct udp_endpoint *to, size_t modulus,
                         const struct udp_conn *conn)
{
    static char out[N][100];
    for (int i = 0; i < N; i++) {
        memset(out[i], i, sizeof out[i]);
        pk[i] = (struct udp_packet){.buf = out[i], .len = 1 + (size_t)i % modulus, .peer = *to, .conn = conn};
    }
}

static void from_carrier(const struct udp_sock *a, const struct udp_endpoint *from, int id)
{
    CHECK(from->port == a->self.port, "datagram %d from port %u", id, (unsigned)from->port);
}

/* a connected socket: a's address, another port */
static void from_connected(const struct udp_sock *a, const struct udp_endpoint *from, int id)
{
    CHECK(!memcmp(from->addr, a->self.addr, 4) && from->port != a->self.port, "datagram %d from port %u", id,
          (unsigned)from->port);
}

static void from_either(const struct udp_sock *a, const struct udp_endpoint *from, int id)
{
    if (id / 50 % 2)
        from_connected(a, from, id);
    else
        from_carrier(a, from, id);
}

static void check_traffic(void)
{
    struct udp_sock a, b;
    CHECK_RC(udp_open(&a, "lo", 0, 0, 1 << 20), SHOAL_OK);
    CHECK_RC(udp_open(&b, "lo", 0, 0, 1 << 20), SHOAL_OK);
    struct udp_packet pk[N];
    fill_packets(pk, &b.self, 100, NULL);
    double t0 = test_now();
    send_all(&a, pk, 0, t0);
    receive_all(&b, pk, &a, t0, from_carrier);
    /* a datagram larger than the receive buffer is reported with length 0 */
    struct udp_packet big = {.buf = pk[N - 1].buf, .len = 100, .peer = b.self};
    CHECK(udp_send(&a, &big, 1) == 1, "send");
    char small[10];
    struct sock_rx one = {.n = 1};
    sock_rx_set(&one, 0, small, sizeof small);
    size_t len;
    int k;
    size_t seg;
    while ((k = udp_recv_batch(&b, &one, &len, &seg, NULL)) == 0)
        TEST_DEADLINE(t0, 10, "the large datagram");
    CHECK(k == 1 && len == 0, "truncated datagram reported as %zu bytes", len);
    udp_close(&a);
    udp_close(&b);
}

/* Through a udp_conn: one datagram alone (sendto) and a batch (sendmmsg),
 * from the carrier's address and another port. */
static void check_connected(void)
{
    struct udp_sock a, b;
    CHECK_RC(udp_open(&a, "lo", 0, 0, 1 << 20), SHOAL_OK);
    CHECK_RC(udp_open(&b, "lo", 0, 0, 1 << 20), SHOAL_OK);
    struct udp_conn c = {.fd = -1};
    const struct udp_conn *conn = udp_conn_get(&c, &a, &b.self, 1 << 20);
    CHECK(conn && conn->fd >= 0, "no connected socket");
    CHECK(udp_conn_get(&c, &a, &b.self, 1 << 20) == conn, "a second socket for the same peer");
    struct udp_packet pk[N];
    fill_packets(pk, &b.self, 90, conn);
    double t0 = test_now();
    CHECK(udp_send(&a, &pk[0], 1) == 1, "the lone datagram");
    send_all(&a, pk, 1, t0);
    receive_all(&b, pk, &a, t0, from_connected);
    /* the peer's port closes: its ICMP errors surface as ECONNREFUSED on
     * the connected socket, which must not fail later sends */
    udp_close(&b);
    for (int i = 0; i < 4; i++)
        CHECK(udp_send(&a, &pk[0], 1) == 1, "send %d after the peer closed", i);
    udp_conn_close(&c);
    CHECK(c.fd == -1, "closed connection kept its socket");
    udp_close(&a);
}

/* Receives into buffers of UDP_GRO_BYTES that take the kernel's note of
 * where coalesced datagrams begin. */
static char gro_in[4][UDP_GRO_BYTES];
static void gro_rx(struct sock_rx *rx)
{
    *rx = (struct sock_rx){.n = 4, .with_ctl = 1};
    for (unsigned i = 0; i < rx->n; i++)
        sock_rx_set(rx, i, gro_in[i], sizeof gro_in[i]);
}

/* With UDP_GRO at the receiver, a run sent whole arrives as one buffer of
 * its datagrams back to back, in order (over loopback the kernel never
 * cuts it), and the buffer says their size: cut there, each piece is one
 * datagram of its length. */
static void receive_coalesced(struct udp_sock *a, struct udp_sock *b, struct udp_packet *pk, double t0)
{
    CHECK(udp_gro_enable(b), "this kernel refuses UDP_GRO (Linux 5.0 has it)");
    send_all(a, pk, 0, t0);
    struct sock_rx rx;
    gro_rx(&rx);
    int got = 0, buffers = 0;
    while (got < N) {
        size_t len[4], seg[4];
        rx.batch = 1; /* a batch receive, which reads the kernel's note (a single one does not: below) */
        int k = udp_recv_batch(b, &rx, len, seg, NULL);
        CHECK(k >= 0, "udp_recv_batch: %d", k);
        for (int i = 0; i < k; i++, buffers++)
            for (size_t at = 0, one; at < len[i]; got++, at += one) {
                one = len[i] - at < seg[i] ? len[i] - at : seg[i];
                int id = (unsigned char)gro_in[i][at];
                CHECK(id == got && one == pk[id].len, "datagram %d at %zu of a %zu-byte buffer cut every %zu", id, at,
                      len[i], seg[i]);
                for (size_t j = 0; j < one; j++)
                    CHECK((unsigned char)gro_in[i][at + j] == id, "byte %zu of datagram %d", j, id);
            }
        TEST_DEADLINE(t0, 10, "the coalesced datagrams to arrive");
    }
    /* the 32 runs, three of them cut where udp_send's batches of 64 end */
    CHECK(buffers == 35, "%d datagrams in %d buffers, not one per run", got, buffers);
}

/* A datagram that is not a run the kernel coalesced is one datagram, on a
 * socket with UDP_GRO too, whatever it holds: ten 64-byte pieces sent as
 * one datagram come back as one buffer cut nowhere. */
static void receive_uncut(struct udp_sock *a, struct udp_sock *b, double t0)
{
    static char ten[10 * 64];
    memset(ten, 7, sizeof ten);
    struct udp_packet p = {.buf = ten, .len = sizeof ten, .peer = b->self};
    CHECK(udp_send(a, &p, 1) == 1, "send");
    struct sock_rx rx;
    gro_rx(&rx);
    size_t len[4], seg[4];
    int k;
    while ((rx.batch = 1, k = udp_recv_batch(b, &rx, len, seg, NULL)) == 0)
        TEST_DEADLINE(t0, 10, "the datagram of ten pieces");
    CHECK(k == 1 && len[0] == sizeof ten && seg[0] == len[0], "%d buffers, the first of %zu bytes cut every %zu", k,
          len[0], seg[0]);
    /* a single receive (no backlog before it) takes no control message:
     * it says it does not know (0), never a size of its own */
    CHECK(udp_send(a, &p, 1) == 1, "send");
    while ((rx.batch = 0, k = udp_recv_batch(b, &rx, len, seg, NULL)) == 0)
        TEST_DEADLINE(t0, 10, "the datagram of ten pieces, again");
    CHECK(k == 1 && len[0] == sizeof ten && seg[0] == 0, "single receive: %d buffers, the first of %zu bytes, seg %zu",
          k, len[0], seg[0]);
}

/* Runs of equal datagrams leave in one system call each and still arrive
 * as separate datagrams of their own lengths: lengths 100, every 7th 37
 * (it ends a run), the destination switching between the carrier's socket
 * and a connected one every 50 (which ends a run too). */
static void check_segmentation(void)
{
    struct udp_sock a, b;
    CHECK_RC(udp_open(&a, "lo", 0, 0, 1 << 20), SHOAL_OK);
    CHECK_RC(udp_open(&b, "lo", 0, 0, 1 << 20), SHOAL_OK);
    CHECK(udp_gso_enable(&a), "this kernel refuses UDP_SEGMENT (Linux 4.18 has it)");
    struct udp_conn c = {.fd = -1};
    const struct udp_conn *conn = udp_conn_get(&c, &a, &b.self, 1 << 20);
    CHECK(conn != NULL, "no connected socket");
    struct udp_packet pk[N];
    fill_packets(pk, &b.self, 100, NULL);
    for (int i = 0; i < N; i++) {
        pk[i].len = i % 7 == 6 ? 37 : 100;
        pk[i].conn = i / 50 % 2 ? conn : NULL;
    }
    struct udp_run run[N];
    unsigned runs = udp_plan_runs(&a, pk, N, run);
    CHECK(runs == 32 && run[0].count == 7 && run[7].first == 49 && run[7].count == 1 && run[8].first == 50,
          "%u runs, the first of %u, the eighth at %u", runs, run[0].count, run[7].first);
    double t0 = test_now();
    send_all(&a, pk, 0, t0);
    receive_all(&b, pk, &a, t0, from_either);
    receive_coalesced(&a, &b, pk, t0);
    receive_uncut(&a, &b, t0);
    a.gso = 0;
    CHECK(udp_plan_runs(&a, pk, N, run) == N, "runs without segmentation");
    udp_conn_close(&c);
    udp_close(&a);
    udp_close(&b);
}

/* IPv6, where the host has a loopback address for it. */
static void check_ipv6(void)
{
    struct udp_endpoint e;
    struct udp_sock a, b;
    if (udp_resolve("::1", &e) != SHOAL_OK)
        return;
    CHECK_RC(udp_open(&a, "::1", 0, 0, 0), SHOAL_OK);
    CHECK_RC(udp_open(&b, "::1/128", 0, 0, 0), SHOAL_OK);
    char msg[] = "over six", got[16];
    struct udp_packet tx = {.buf = msg, .len = sizeof msg, .peer = b.self};
    struct sock_rx rx = {.n = 1};
    sock_rx_set(&rx, 0, got, sizeof got);
    size_t len, seg;
    struct udp_endpoint from;
    CHECK(udp_send(&a, &tx, 1) == 1, "send over IPv6");
    double t0 = test_now();
    while (udp_recv_batch(&b, &rx, &len, &seg, &from) == 0)
        TEST_DEADLINE(t0, 10, "the IPv6 datagram");
    CHECK(len == sizeof msg && !memcmp(got, msg, sizeof msg) && from.family == 6 && from.port == a.self.port,
          "IPv6 datagram of %zu bytes", len);
    udp_close(&a);
    udp_close(&b);
}

int main(void)
{
    check_ipv6();
    check_specs();
    check_ports();
    check_traffic();
    check_connected();
    check_segmentation();
    return 0;
}
