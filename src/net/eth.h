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

/* The receive ring (PACKET_RX_RING, TPACKET_V2): frames of one size, each
 * holding one packet, that the kernel fills in turn and hands over by its
 * status word; the receiver reads a packet where it lies and hands the
 * frame back, so a receive is no system call and no copy to user space.
 * Where the interface's frames are larger than the ring's (spill), the
 * kernel also queues such a frame whole on the socket (PACKET_COPY_THRESH)
 * and marks its ring frame, which says to read it from there. */
struct eth_ring {
    unsigned char *map; /* NULL: no ring, receives use recvmmsg */
    size_t bytes;
    unsigned block_size, per_block, frame_size, frames;
    unsigned next;      /* the next frame to read */
    int spill;           /* frames too large for the ring come whole through the socket */
    unsigned stalled;    /* polls in a row whose receive of a spilled packet failed */
    uint64_t spill_lost; /* such frames lost: cut short for want of room, or unreadable */
};

struct eth_sock {
    int fd;
    int ifindex;
    unsigned mtu; /* largest shoal packet (header and payload) one frame carries */
    int loopback; /* the interface is a loopback one */
    struct eth_endpoint self;
    struct eth_ring ring;
};

struct eth_frame {
    const void *buf; /* the shoal packet (no Ethernet header) */
    size_t len;
    struct eth_endpoint peer; /* destination */
};

extern const struct eth_endpoint eth_broadcast;

/* SHOAL_ETH_RING: 0; auto (the interface's frames whole where they are at
 * most 16 KiB, else in small frames that larger ones spill from); 1 (every
 * frame whole, whatever its size). */
enum eth_ring_mode { ETH_RING_OFF, ETH_RING_AUTO, ETH_RING_ON };

/* Opens the socket on interface `name` (an interface name only: raw frames
 * have no addresses to match); as `ring` says, receives through a ring of
 * about sockbuf bytes, else, or where the kernel refuses one (logged), by
 * recvmmsg.  Frames leave without the interface's queueing discipline
 * (PACKET_QDISC_BYPASS, where the kernel has it). */
int eth_open(struct eth_sock *s, const char *name, int sockbuf, enum eth_ring_mode ring);
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
/* As eth_recv_batch, for the n (1 to rx->n) frames the ring spilled. */
int eth_recv_spilled(struct eth_sock *s, struct sock_rx *rx, unsigned n, size_t *len);
/* With the ring: calls take(pkt, len) for each of up to max frames that
 * arrived, in order, with the packet where it lies (valid only during the
 * call: the frame goes back to the kernel after it) and len trimmed as
 * eth_recv_batch's (0 if truncated), and take_spilled(n) for a run of n
 * (at most `spills`) frames whose whole packets wait in the socket, in
 * order: it reads them with eth_recv_spilled and returns how many it took
 * (those frames go back; the walk stops at the first it could not take).
 * How many frames. */
unsigned eth_ring_walk(struct eth_sock *s, unsigned max, void (*take)(const unsigned char *pkt, size_t len),
                       unsigned (*take_spilled)(unsigned n), unsigned spills);

#endif
