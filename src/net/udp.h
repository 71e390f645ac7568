/* net layer: the UDP carrier.  One non-blocking datagram socket per
 * process, bound to the address of the interface SHOAL_IFACE names (an
 * interface name, a CIDR block, or an address; IPv4 or IPv6) on the first
 * free port of SHOAL_PORT_RANGE, which receives everything and can send
 * anywhere; and, for sending only, a socket connected to each peer
 * (udp_conn), because a connected socket keeps its route while an
 * unconnected send looks it up for every datagram (a tenth of a
 * loopback ping-pong).  It moves packets; reliability is rel's. */
#ifndef SHOAL_NET_UDP_H
#define SHOAL_NET_UDP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An endpoint in the fixed form ranks exchange at start-up (20 bytes). */
struct udp_endpoint {
    uint8_t family; /* 4 or 6 */
    uint8_t pad;
    uint16_t port;  /* host order */
    uint8_t addr[16]; /* IPv4 in the first 4 bytes */
};

struct udp_sock {
    int fd;
    struct udp_endpoint self;
    char ifname[16]; /* the interface that has self's address */
    unsigned mtu;    /* its MTU: the largest IP packet one datagram may take unfragmented */
    uint8_t bcast[4]; /* its IPv4 broadcast address, if it has one configured; else 0.0.0.0 */
    int gso;          /* udp_send may hand the kernel runs of datagrams to cut (udp_gso_enable) */
};

/* A send-only socket connected to one peer, from the carrier's own
 * address and an ephemeral port (receivers identify ranks by the shoal
 * header, not by the source address). */
struct udp_conn {
    int fd;    /* -1: not open */
    int tried; /* an open was attempted (a failure is not retried) */
};

/* A datagram to send. */
struct udp_packet {
    const void *buf;
    size_t len;
    struct udp_endpoint peer;
    const struct udp_conn *conn; /* open and connected to peer, or NULL: s's own socket, addressed */
};

/* Finds the local address that spec names: "" (the first interface that is
 * up, not loopback, with an IPv4 address; loopback if there is none), an
 * interface name ("eth0"), a CIDR block ("10.1.0.0/16", "fd00::/8"), or a
 * literal address.  SHOAL_ECONFIG, with a log line naming the spec, when
 * it is malformed or no interface matches. */
int udp_resolve(const char *spec, struct udp_endpoint *out);

/* Opens the socket on the first free port of [port_lo, port_hi] (0, 0: any
 * port the kernel picks), with sockbuf bytes of send and receive buffer
 * (0: the kernel's default). */
int udp_open(struct udp_sock *s, const char *iface, uint16_t port_lo, uint16_t port_hi, int sockbuf);
void udp_close(struct udp_sock *s);

/* The job's broadcast receiver: b bound to s's broadcast address at port
 * (shared with the other ranks of the host: SO_REUSEADDR, so each gets a
 * copy of every broadcast), and s allowed to send to that address.  What s
 * broadcasts comes back to b, and is dropped by a socket filter before b
 * sees it.  SHOAL_ESYS (logged at info level) when any of it fails. */
int udp_bcast_open(struct udp_sock *b, struct udp_sock *s, uint16_t port, int sockbuf);

/* c, opened and connected to peer on first use (sockbuf bytes of send
 * buffer), or NULL when that failed (logged once; the caller then sends
 * from the carrier's own socket).  c starts as {.fd = -1}. */
const struct udp_conn *udp_conn_get(struct udp_conn *c, const struct udp_sock *s, const struct udp_endpoint *peer,
                                    int sockbuf);
void udp_conn_close(struct udp_conn *c);

/* Lets udp_send pass a run of equal-sized datagrams for one destination
 * (the last may be shorter) as one buffer list that the kernel cuts into
 * datagrams (UDP_SEGMENT): one system call and one trip down the stack for
 * up to 64 of a large message's fragments.  0 if this kernel cannot. */
int udp_gso_enable(struct udp_sock *s);
/* Lets the kernel coalesce datagrams that arrive for s from one source
 * (UDP_GRO): a run sent whole through a veth pair or loopback stays one
 * buffer up to s's receive, and a NIC's GRO may merge a stream's
 * datagrams.  The receive buffers must then hold UDP_GRO_BYTES and take
 * control messages (sock_rx.with_ctl), which say where the receiver cuts
 * what arrives into datagrams again (udp_recv_batch).  0 if this kernel
 * cannot. */
#define UDP_GRO_BYTES 65536u
int udp_gro_enable(struct udp_sock *s);

/* A run of datagrams that leaves in one message. */
struct udp_run {
    unsigned first, count;
};
/* How udp_send cuts p[0..n-1] into runs (at most n): with s->gso each as
 * long as the kernel takes whole (one destination, every datagram but the
 * last of the first one's size, the last no larger, 64 and 65,000 bytes at
 * most); without, one datagram each. */
unsigned udp_plan_runs(const struct udp_sock *s, const struct udp_packet *p, unsigned n, struct udp_run *run);

/* Sends n datagrams; returns how many the kernel took (0 when its buffer is
 * full), or a negative SHOAL_E* code on an error other than a full buffer.
 * A run sent whole (s->gso) is taken or refused as a whole; if the kernel
 * refuses segmentation itself, s->gso is turned off (logged) and the run
 * counts as not taken. */
int udp_send(struct udp_sock *s, const struct udp_packet *pkts, unsigned n);

/* Receives, without blocking, into the buffers rx describes (sock.h): how
 * many buffers arrived; len[i] the bytes of buffer i (0 if truncated),
 * seg[i] the size of the datagrams in it, from[i] their source (from may
 * be NULL).  A buffer is one datagram (seg[i] = len[i]) unless the kernel
 * coalesced several of one size there and said so (UDP_GRO control
 * message, read when rx->ctl_read): then every seg[i] bytes from its
 * start begin a datagram, the last possibly shorter.  seg[i] = 0: not
 * known (rx->with_ctl, but a single receive, which takes no control
 * message: sock.h): the caller may cut only where an authenticated first
 * datagram says it ends (net.c, take_received).  Never the lengths that
 * unauthenticated contents claim. */
struct sock_rx;
int udp_recv_batch(struct udp_sock *s, struct sock_rx *rx, size_t *len, size_t *seg, struct udp_endpoint *from);
/* Text form "1.2.3.4:5000" / "[fd00::1]:5000" for messages. */
const char *udp_endpoint_str(const struct udp_endpoint *e, char *buf, size_t cap);

#endif
