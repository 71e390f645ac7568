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
/* As udp_send / udp_recv_batch; the kernel never hands back frames this
 * socket sent itself (PACKET_IGNORE_OUTGOING, which eth_open requires).
 * Receiving: len[i] per frame (0 if truncated, else trimmed to the
 * packet's own length), from[i] its source (from may be NULL). */
int eth_send(struct eth_sock *s, const struct eth_frame *f, unsigned n);
struct sock_rx;
int eth_recv_batch(struct eth_sock *s, struct sock_rx *rx, size_t *len, struct eth_endpoint *from);

#endif
