/* net layer: the raw Ethernet carrier.  One AF_PACKET datagram socket per
 * process on the interface SHOAL_IFACE names, receiving only frames of
 * shoal's EtherType (WIRE_ETHERTYPE); the kernel builds the 14-byte
 * Ethernet header from the destination MAC.  Needs CAP_NET_RAW: without
 * it eth_open fails with SHOAL_EACCES and the caller falls back to UDP. */
#ifndef SHOAL_NET_ETH_H
#define SHOAL_NET_ETH_H

#include <stddef.h>
#include <stdint.h>

struct eth_endpoint {
    uint8_t mac[6];
};

struct eth_sock {
    int fd;
    int ifindex;
    unsigned mtu; /* largest shoal packet (header and payload) one frame carries */
    int loopback; /* the interface is a loopback one */
    struct eth_endpoint self;
};

struct eth_frame {
    const void *buf; /* the shoal packet (no Ethernet header) */
    size_t len;
    struct eth_endpoint peer; /* destination */
};

extern const struct eth_endpoint eth_broadcast;

/* Opens the socket on interface `name` (an interface name only: raw frames
 * have no addresses to match). */
int eth_open(struct eth_sock *s, const char *name, int sockbuf);
void eth_close(struct eth_sock *s);
/* Drops in the kernel the frames this rank sent that come back in: on
 * loopback every frame enters again, to every socket on the interface, the
 * sender's own included (PACKET_IGNORE_OUTGOING, which eth_open requires,
 * drops only the copy taken on the way out), and a sender streaming 64 KB
 * frames would copy each one in again and count it as malformed.  Only
 * frames with shoal's magic, this job's id and this rank as their source
 * are dropped (the decoder would drop a frame claiming to be this rank's
 * anyway); it sees and counts everything else.  Other
 * interfaces send nothing back, and their frames skip the filter.
 * SHOAL_OK, or SHOAL_ESYS (logged; the frames then reach the decoder). */
int eth_drop_own(struct eth_sock *s, uint64_t job, uint32_t self);
/* As udp_send / udp_recv_batch.  Receiving: len[i] per frame (0 if
 * truncated, else trimmed to the packet's own length), from[i] its source
 * (from may be NULL). */
int eth_send(struct eth_sock *s, const struct eth_frame *f, unsigned n);
struct sock_rx;
int eth_recv_batch(struct eth_sock *s, struct sock_rx *rx, size_t *len, struct eth_endpoint *from);

#endif
