/* net layer: the cluster reliability protocol, independent of the carrier.
 *
 * One engine per rank gives reliable, in-order, exactly-once delivery of
 * DATA packets to each peer over an unreliable datagram service (UDP or
 * raw Ethernet), plus unsequenced best-effort broadcasts.  It does no I/O
 * and reads no clock: the carrier passes the time (ns, any monotonic
 * origin) to every call, hands it each received packet (rel_input), sends
 * what it asks for (io.xmit), and calls rel_tick at rel_next_deadline.  A
 * carrier's loop should be: rel_input for what arrived, then let the AM
 * layer run (its sends carry the acks), then rel_tick.  Calls on one engine
 * must not run concurrently, and the io callbacks must not call it.
 *
 * Protocol (packet format: wire.h, docs/WIRE.md):
 *  - Per ordered pair of ranks, DATA packets carry sequence numbers from
 *    cfg.first_seq on (32-bit, compared as serial numbers so they wrap).
 *  - Every packet to a peer carries the cumulative ack, a 64-bit SACK of
 *    the 64 packets after the first missing one, and credits: how many
 *    packets beyond the ack the receiver can still hold.  A sender never
 *    has more than `window` packets in flight (neither acknowledged nor
 *    SACKed: the ones beyond a hole wait at the receiver, and stalling on
 *    them would cost a round trip per loss), nor sends while
 *    `window_bytes` of payload are in flight (so small packets get the
 *    whole window, and large ones what fits the socket buffers), nor more than 4 windows
 *    (rcv_buf, if less) unacknowledged, nor sends beyond ack + credits;
 *    rel_send says SHOAL_EAGAIN instead and never drops.
 *  - Retransmission is selective.  A packet is resent when an ACK shows it
 *    lost: a packet sent after it arrived (not a copy the timer resent,
 *    whose ACK may be for the first copy), and it has been out longer than
 *    that one's round trip plus a reordering allowance (min_rtt/4, more
 *    after spurious resends) or 3 packets above it are SACKed (RACK, RFC
 *    8985, simplified; packets beyond the SACK's reach are not judged).  The retransmission timer restarts whenever an ACK brings
 *    news (TCP's rule: queueing in a flowing stream never fires it); on
 *    expiry the oldest unacknowledged packet and the holes below the
 *    highest SACKed one are resent and the RTO doubles (up to rto_max)
 *    until an ACK brings news again.  RTT samples come from packets sent
 *    once (Karn) that the previous ACK could already have reported;
 *    RTO = SRTT + max(4 RTTVAR, rto_min) (Jacobson/Karels, with Linux's
 *    floor on the variance term), rto_init before the first sample.
 *  - Acknowledgements ride on every outgoing packet: the channel's own,
 *    or, on DATA of two linked channels (rel_link), the other channel's
 *    when it owes one sooner.  An explicit ACK goes
 *    out ack_delay after data when no packet carried one, and at once (at
 *    the next rel_tick) for packets with WIRE_F_ACK_NOW, KEEPALIVEs,
 *    duplicates, overruns, the packet that opens a hole, the DUPTHRESH'th
 *    beyond it and the one that fills it.  A sender sets ACK_NOW when half
 *    of its window (or of the receive buffer, or of window_bytes) is in
 *    flight, once per ACK, when a packet uses up its window or credits, and on every
 *    retransmission (MBCF/Ether's TH1 ack request).
 *  - Flow control: received packets wait in a per-peer buffer of rcv_buf
 *    packets until the AM layer takes them (rel_recv/rel_release); credits
 *    are its free slots.  When the sender was left less than half the
 *    buffer and taking messages freed half of it, an ACK announces it.  A
 *    sender blocked by credits with nothing in flight probes with
 *    KEEPALIVEs (RTO, doubling to rto_max), so a lost window update cannot
 *    deadlock it.
 *  - Liveness: after keepalive_ns without a packet from a peer it has
 *    heard from or sent to (on either channel, when linked), the engine
 *    sends a KEEPALIVE (answered by an ACK); while none is answered it
 *    probes again every RTO, doubling up to keepalive_ns / 32, so a
 *    deadline means silence, not lost packets (at 30 % loss at each end,
 *    a round trip fails 3 times in 4: 0.76^160 over a deadline of six
 *    intervals).  After dead_after_ns of silence, once a KEEPALIVE has had
 *    keepalive_ns to be answered, the peer is dead: io.peer_dead is called
 *    once, and rel_send to it fails.  An engine that was not run for 8
 *    probe intervals (a stopped process, an overloaded host) missed its
 *    probes and may not have read the answers: it asks afresh, so the
 *    peer has keepalive_ns from then on to answer.
 *  - Incarnations: a peer's first packet tells its incarnation.  A packet
 *    with a later one means the peer restarted: it is dead for this job
 *    (peer_dead, REL_DEAD_RESTARTED).  Packets from an earlier incarnation,
 *    to an incarnation of this rank other than cfg.incarnation (0 is
 *    accepted: the sender has not heard from us yet), or from a peer
 *    declared dead are dropped as WIRE_DROP_INCARNATION.  Incarnations are
 *    compared as serial numbers: a restarted rank must use a larger one
 *    (e.g. from a clock).
 *  - Broadcasts (rel_bcast) are single unsequenced BCAST packets; received
 *    ones wait in a queue of rcv_buf (beyond: WIRE_DROP_WINDOW) and reach
 *    the AM layer through rel_recv marked bcast.  They may be lost,
 *    duplicated or reordered.
 *  - A MULTI packet (rel_send_all) is one DATA packet to every other rank
 *    at once: its payload's vector gives each receiver its sequence number
 *    (and incarnation as the sender knows it), and each receiver takes it
 *    as the DATA packet of that number.  It carries no acknowledgements.
 *    The sender keeps one stored copy per receiver, so a loss is repaired
 *    by the ordinary unicast retransmission of that number.
 *  - Every rank of a job uses the same rcv_buf and first_seq: a sender
 *    assumes rcv_buf credits before it first hears from a peer. */
#ifndef SHOAL_NET_REL_H
#define SHOAL_NET_REL_H

#include "net/wire.h"

#include <stddef.h>
#include <stdint.h>

#define REL_NEVER UINT64_MAX /* no deadline */

struct rel_config {
    uint32_t self, nranks;     /* this rank, job size */
    uint64_t job;              /* what every packet of the job carries */
    struct wire_key key;       /* the job's secret: every packet's tag is made with it */
    uint32_t incarnation;      /* this rank's, nonzero, larger after a restart */
    uint32_t max_payload;      /* largest DATA/BCAST payload, <= WIRE_MAX_PAYLOAD */
    uint32_t window;           /* DATA packets in flight per peer (not yet acknowledged nor SACKed): power of two */
    uint64_t window_bytes;     /* and at most about this many payload bytes (one packet more); 0: no limit */
    uint32_t rcv_buf;          /* DATA packets held per peer: power of two <= 32768 */
    uint64_t rto_min_ns;       /* RTO floor (LAN) */
    uint64_t rto_init_ns;      /* RTO before the first RTT sample */
    uint64_t rto_max_ns;       /* RTO ceiling, backoff included */
    uint64_t ack_delay_ns;     /* longest wait for a piggyback before an explicit ACK */
    uint64_t keepalive_ns;     /* silence before a KEEPALIVE; the time one has to be answered */
    uint64_t dead_after_ns;    /* silence after which a peer is dead (> keepalive_ns) */
    int need_checksum;         /* 1: send and require header CRCs (raw frames) */
    int reply_channel;         /* 1: this engine is the reply channel (WIRE_F_REPLY on every packet) */
    uint32_t first_seq;        /* first DATA sequence number; 1 except in tests of wrap-around */
};

/* Fills the defaults: window 256, rcv_buf 256, max_payload 1408 (a
 * 1500-byte MTU less IPv4, UDP and shoal headers), RTO min 200 us / initial
 * 1 ms / max 250 ms, ack delay 50 us, keepalive 500 ms, dead after 3 s,
 * first_seq 1, no checksums; identity fields zero. */
void rel_config_default(struct rel_config *c);

enum rel_dead_reason {
    REL_DEAD_SILENT = 1, /* no packet for dead_after_ns */
    REL_DEAD_RESTARTED,  /* it came back with a new incarnation */
    REL_DEAD_UNREACHED,  /* silent, and never heard from at all (a wrong address or interface) */
};

struct rel_io {
    /* Sends one packet of len bytes to dst (a rank or WIRE_BROADCAST).  pkt
     * is valid only during the call unless `stable`: a DATA packet is the
     * engine's stored copy, which stays valid until the carrier's next
     * rel_input or rel_tick, or rel_destroy (an ACK, or a peer declared
     * dead, frees it), so a carrier may queue it without copying until
     * then (a retransmission meanwhile rewrites its header, which sends the
     * queued copy with the newer one).  A failed send is a lost packet. */
    void (*xmit)(void *ctx, uint32_t dst, const void *pkt, size_t len, int stable);
    /* peer is dead for this job; called once per peer, from rel_input or
     * rel_tick. */
    void (*peer_dead)(void *ctx, uint32_t peer, enum rel_dead_reason why);
    /* Optional.  During rel_input(pkt, len): 1 if the engine may keep the
     * buffer pkt lies in (from pkt on) until it calls give_back(pkt), so a
     * payload it holds for the AM layer is not copied; 0 and the engine
     * copies the payload. */
    int (*take)(void *ctx, const void *pkt, size_t len);
    void (*give_back)(void *ctx, void *pkt);
};

struct rel_stats {
    uint64_t sent;             /* DATA packets, first transmissions */
    uint64_t retransmits;      /* DATA retransmissions, all causes */
    uint64_t fast_retransmits; /* of which found lost from ACKs, not by the timer */
    uint64_t spurious_retransmits; /* ACKs showing a packet resent from ACKs had arrived the first time */
    uint64_t timeouts;         /* retransmission timer expiries (each may resend several) */
    uint64_t acks_sent;        /* explicit ACK packets */
    uint64_t keepalives_sent;  /* KEEPALIVEs for liveness */
    uint64_t probes_sent;      /* KEEPALIVEs probing a closed receive window */
    uint64_t bcasts_sent;
    uint64_t multis_sent;      /* MULTI packets (rel_send_all), each counted in `sent` once per receiver */
    uint64_t rtt_samples;
    uint64_t received;         /* packets accepted by rel_input */
    uint64_t out_of_order;     /* of which DATA beyond a hole (what came before it is missing) */
    uint64_t delivered;        /* messages released by the AM layer (DATA and BCAST) */
    uint64_t eagain_window;    /* rel_send refusals: window full */
    uint64_t eagain_credits;   /* rel_send refusals: receiver's buffer full */
    uint64_t nomem;            /* sends refused, or packets dropped (as WIRE_DROP_WINDOW), for lack of memory */
    uint64_t peers_dead;
    uint64_t dropped[WIRE_VERDICTS]; /* packets rel_input dropped, by reason ([WIRE_OK] unused) */
};

/* A message for the AM layer, valid until rel_release; data is 64-byte
 * aligned when len >= 256. */
struct rel_msg {
    uint32_t peer;    /* sender */
    int bcast;        /* 1: a best-effort broadcast, 0: reliable DATA */
    const void *data;
    size_t len;
};

/* What a peer's state looks like (tests, diagnostics). */
struct rel_peer_info {
    int known, dead;
    uint32_t incarnation;
    uint32_t unacked;          /* DATA packets in flight to it */
    uint32_t held;             /* packets from it waiting for the AM layer or for a hole */
    uint64_t srtt_ns, rttvar_ns, rto_ns; /* rto_ns includes the backoff */
};

struct rel;

/* Returns SHOAL_OK, SHOAL_EINVAL for a bad configuration (logged), or
 * SHOAL_ENOMEM.  io and ctx must outlive the engine. */
int rel_create(struct rel **out, const struct rel_config *cfg, const struct rel_io *io, void *ctx);
/* Joins a rank's two channels (the same configuration but reply_channel),
 * so that each one's DATA packets can carry the other's acknowledgements
 * (WIRE_F_ACK_REPLY).  The two are then one engine as far as concurrency
 * goes: no call may run on either while one runs on the other. */
void rel_link(struct rel *request, struct rel *reply);
void rel_destroy(struct rel *r);

/* Queues payload for reliable delivery to peer and sends it if allowed.
 * SHOAL_OK; SHOAL_EAGAIN (window or credits exhausted: retry after
 * rel_input or rel_tick); SHOAL_EPEERDEAD; SHOAL_EINVAL (peer is self
 * or out of range, len > max_payload); SHOAL_ENOMEM. */
int rel_send(struct rel *r, uint32_t peer, const void *payload, size_t len, uint64_t now);
/* How many DATA packets rel_send would take for peer right now (window
 * and credits), so a caller can send a multi-packet message all or none. */
uint32_t rel_room(const struct rel *r, uint32_t peer);
/* The same, for a payload in two parts (head, then body), stored as one. */
int rel_send2(struct rel *r, uint32_t peer, const void *head, size_t hlen, const void *body, size_t blen,
              uint64_t now);

/* Queues payload for reliable delivery to every other rank, in order with
 * what rel_send sends each, as ONE packet (MULTI) that tells each receiver
 * the sequence number it takes in that receiver's stream; a receiver that
 * misses it gets that sequence number again by the ordinary retransmission
 * (a DATA packet to it alone).  All or none: SHOAL_OK; SHOAL_EAGAIN (some
 * peer's window or credits full: retry after rel_input or rel_tick);
 * SHOAL_EPEERDEAD; SHOAL_EINVAL (more than WIRE_MULTI_MAX_RANKS ranks, one
 * rank, or len above max_payload less the vector); SHOAL_ENOMEM. */
int rel_send_all(struct rel *r, const void *head, size_t hlen, const void *body, size_t blen, uint64_t now);

/* Sends payload to every other rank, once, unsequenced. SHOAL_OK,
 * SHOAL_EINVAL (len > max_payload) or SHOAL_ENOMEM. */
int rel_bcast(struct rel *r, const void *head, size_t hlen, const void *body, size_t blen);

/* Handles one received packet; returns WIRE_OK or why it was dropped
 * (also counted in stats.dropped).  A packet of the other channel is
 * WIRE_DROP_TYPE: the carrier hands each engine its own
 * (rel_packet_is_reply); the engine passes acknowledgements for the
 * other channel to it (WIRE_DROP_TYPE when it has none linked). */
enum wire_verdict rel_input(struct rel *r, const void *pkt, size_t len, uint64_t now);

/* Runs the timers due at now: retransmissions, delayed ACKs, keepalives,
 * window probes, dead-peer detection. */
void rel_tick(struct rel *r, uint64_t now);

/* Sends every delayed ACK now (a rank about to leave owes them). */
void rel_flush_acks(struct rel *r);
/* The earliest time rel_tick has something to do (REL_NEVER if none);
 * it may be early, never late. */
uint64_t rel_next_deadline(const struct rel *r);

/* The next message for the AM layer: SHOAL_OK and *m, or SHOAL_EAGAIN.
 * Broadcasts first, then each peer's in-order DATA round-robin.  The same
 * message is returned until rel_release. */
int rel_recv(struct rel *r, struct rel_msg *m);

/* Frees the message rel_recv returned (nothing if none), which gives its
 * sender a credit. */
void rel_release(struct rel *r, uint64_t now);

const struct rel_stats *rel_stats(const struct rel *r);
/* What rel_input accepts (job, secret, ranks, checksum rule), for a
 * carrier that must judge a packet before handing it over. */
const struct wire_expect *rel_expect(const struct rel *r);
/* 1 if a packet of len bytes is on the reply channel (its WIRE_F_REPLY
 * bit; 0 for anything too short to tell). */
int rel_packet_is_reply(const void *pkt, size_t len);
void rel_peer_info(const struct rel *r, uint32_t peer, struct rel_peer_info *info);

#endif
