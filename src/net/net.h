/* net layer: the cluster transport as the AM layer sees it.
 *
 * One process-wide instance joins the job's ranks through a carrier (UDP
 * socket or raw Ethernet frames, SHOAL_TRANSPORT) and two reliability
 * engines (rel.h): the request channel and the reply channel, each with
 * its own sequence numbers and credits, so a reply never waits for
 * credits only the peer's request handlers free; linked, so that each
 * one's data carries the other's acknowledgements (rel_link).  It moves opaque
 * messages of up to net_max_payload() bytes, reliably and in order per
 * (peer, channel); framing active messages is the AM layer's.
 *
 * Start-up is collective (boot_allgather): every rank opens its socket and
 * publishes its address, incarnation and MTU; rank 0's random key becomes
 * the job's.  eth is used only if every rank could open a raw socket;
 * otherwise all use udp (with a one-line notice).  SHOAL_FAULTS applies to
 * every packet sent and received.  With SHOAL_NET_THREAD=1 a progress
 * thread keeps the engines going (acks, retransmissions, keepalives) while
 * the application computes; handlers still run only in net_poll. */
#ifndef SHOAL_NET_NET_H
#define SHOAL_NET_NET_H

#include <stddef.h>
#include <stdint.h>

enum net_channel { NET_REQUEST = 0, NET_REPLY = 1 };

struct net_msg {
    uint32_t peer;
    enum net_channel channel;
    int bcast; /* a best-effort broadcast (request channel) */
    const void *data;
    size_t len;
};

/* Runs one delivered message; it may call net_send (a reply). */
typedef void (*net_deliver_fn)(const struct net_msg *m);

/* What the transport did (shoal-info, tests). */
struct net_stats {
    uint64_t packets_sent, packets_received, bytes_sent, bytes_received;
    uint64_t retransmits, acks_sent, send_overflows; /* send_overflows: the socket buffer was full */
    uint64_t dropped;          /* packets the decoder or the engines refused, all reasons */
    uint64_t dropped_foreign;  /* of which not this job's (magic, job, key, version) */
    uint64_t dropped_malformed;/* of which damaged (length, checksum, type, rank) */
    uint64_t faults_dropped;   /* lost on purpose by SHOAL_FAULTS */
    uint64_t thread_runs;      /* times the progress thread worked for an absent application */
    uint64_t send_batches;     /* flushes of the send queue that had packets */
    uint64_t rx_coalesced;     /* udp: receive buffers that held several datagrams the kernel coalesced */
};

/* Collective.  transport is "udp" or "eth"; deliver runs every message. */
int net_init(int rank, int nranks, uint64_t job_id, const char *transport, net_deliver_fn deliver);
/* Waits (bounded) until what this rank sent is acknowledged, so peers
 * finishing with it do not retransmit to a closed socket, then closes. */
void net_fini(void);
/* 1 when every packet this rank sent to a live peer, on both channels, is
 * acknowledged. */
int net_settled(void);
/* The carrier in use: "udp", "eth", or NULL before net_init. */
const char *net_carrier(void);
size_t net_max_payload(void);

/* Queues one message for dest: head then body (copied; either may be
 * empty).  SHOAL_OK, SHOAL_EAGAIN (window or credits: poll and retry),
 * SHOAL_EPEERDEAD. */
int net_send(int dest, enum net_channel ch, const void *head, size_t hlen, const void *body, size_t blen);
/* Messages net_send to dest would take right now without SHOAL_EAGAIN. */
uint32_t net_room(int dest, enum net_channel ch);
/* Best-effort datagram to every other rank, head then body (SHOAL_OK,
 * SHOAL_EINVAL above net_max_payload, SHOAL_ENOMEM). */
int net_bcast(const void *head, size_t hlen, const void *body, size_t blen);
/* 1 when net_bcast is one transmission that every other host receives (a
 * raw frame to the broadcast address, or a UDP datagram to the subnet's),
 * 0 when it is one packet per peer (or SHOAL_NET_BCAST=0). */
int net_bcast_native(void);
/* A collective starts (on 1) or stops (0) waiting for broadcasts: over UDP
 * the broadcast socket is read only meanwhile (nests). */
void net_bcast_listen(int on);
/* Hands queued packets to the kernel, unless a poll is running (its end
 * does it). */
void net_flush(void);
/* Receives, runs the timers and delivers messages (only replies when
 * replies_only); returns packets the engines accepted plus messages
 * delivered (0: nothing happened, so a waiter may back off). */
unsigned net_poll(int replies_only);
/* Sleeps until a packet arrives, a timer is due, or max_ns pass. */
void net_wait(uint64_t max_ns);
/* Nanoseconds until the engines next need to run (timers), capped. */
uint64_t net_idle_ns(void);
/* "udp 10.0.0.2:40001" / "eth eth0 02:..": this rank's endpoint. */
const char *net_describe(char *buf, size_t cap);

void net_get_stats(struct net_stats *out);

#endif
