/* The cluster reliability protocol (rel.h): windows, acknowledgements,
 * retransmission, credits, keepalives and incarnations, with no I/O. */
#include "net/rel.h"
#include "net/pool.h"

#include "shoal.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

#define DUPTHRESH 3u     /* packets SACKed above a hole that make it lost */
#define MAX_BACKOFF 20u  /* doublings of the RTO; rto_max caps it long before */
#define REO_MULT_MAX 64u /* reordering allowance: at most this many min_rtt/4 (and srtt) */
#define REO_RESET 16u    /* loss recoveries without a spurious retransmission that reset it */
/* Liveness probes after an unanswered KEEPALIVE come at least this many
 * times per keepalive interval: at loss p on each of the four fault points
 * of a round trip (p = 0.3: 76 % of round trips fail), the asking window
 * alone makes a false death 0.76^32 ~ 1e-4 likely, a whole deadline (five
 * intervals at SHOAL_NET_DEAD_MS's ratio) 1e-19. */
#define KA_PROBES 32u
/* An engine not run for this many probe intervals missed its probes: it
 * asks afresh before it concludes. */
#define KA_GAP_PROBES 8u

enum tx_state { TX_FREE, TX_INFLIGHT, TX_SACKED };

/* One DATA packet sent and not yet cumulatively acknowledged. */
struct tx_slot {
    unsigned char *pkt; /* the whole packet: its header (rewritten at every transmission), then the payload */
    uint32_t seq, len;  /* len: of the payload */
    uint32_t tx_count;  /* transmissions; RTT samples need exactly 1 (Karn) */
    uint8_t by_timer;   /* the last one was the retransmission timer's */
    uint64_t xmit_ts;   /* time of the last transmission: the RTO runs from it */
    uint64_t tx_order;  /* the peer's transmission counter then: orders "sent after" exactly */
    int32_t prev, next; /* transmission-order list of in-flight slots (indices) */
    uint8_t state;      /* enum tx_state */
};

/* One received DATA packet, in order (waiting for the AM layer) or not. */
struct rx_slot {
    void *data;
    void *taken; /* the carrier's packet buffer data lies in (io.take), or NULL: data is a copy */
    uint32_t len;
    int present;
};

struct peer {
    uint32_t rank, inc;  /* inc 0: not heard from yet */
    int dead;
    /* sending */
    uint32_t una, nxt;   /* oldest unacknowledged, next new sequence number */
    uint32_t limit;      /* highest seq the peer has room for (its ack + credits) */
    uint32_t acknow_seq; /* last new packet that asked for an ACK ... */
    int acknow_out;      /* ... and whether it is still unacknowledged */
    struct tx_slot *tx;  /* tx_slots slots, by seq */
    uint32_t sacked;     /* slots between una and nxt SACKed */
    uint64_t flight_bytes; /* payload of the packets in flight (in_flight) */
    int32_t tx_head, tx_tail; /* in-flight slots, oldest transmission first */
    uint64_t tx_order;
    uint32_t sack_hi;    /* highest seq SACKed; una - 1 when none is above una */
    uint64_t rto_due;    /* retransmission timer: REL_NEVER with nothing in flight */
    uint64_t srtt, rttvar, min_rtt;
    uint32_t reo_mult;   /* reordering allowance, in min_rtt/4: grows when a resend was spurious */
    uint32_t recoveries; /* losses found since the last spurious resend */
    int has_rtt;
    unsigned backoff;    /* RTO doublings since the last progress */
    uint64_t probe_due;  /* window probe, while blocked by credits with nothing in flight */
    unsigned probe_backoff;
    int blocked;         /* a send was refused for credits since the window last opened */
    /* receiving */
    uint32_t rcv_ack;    /* every seq <= rcv_ack arrived */
    uint32_t consumed;   /* every seq <= consumed was released by the AM layer */
    uint32_t adv_limit;  /* consumed + rcv_buf as last advertised */
    uint32_t ooo;        /* packets held beyond a hole */
    struct rx_slot *rx;  /* receive buffer slots, by seq */
    uint64_t ack_due;    /* explicit ACK, unless a packet carries the ack first */
    /* liveness */
    uint64_t last_rx, ka_due;
    uint64_t ka_first;   /* first KEEPALIVE since last_rx, REL_NEVER if none */
    unsigned ka_backoff; /* liveness probes since last_rx: the probe RTO's doublings */
    struct peer *next_active, *next_ready;
    int ready;           /* on the ready list: in-order packets for the AM layer */
};

struct bcast_msg {
    uint32_t src, len;
    void *data, *taken; /* as in rx_slot */
};

enum cur_msg { CUR_NONE, CUR_BCAST, CUR_DATA }; /* what rel_recv handed out */

struct rel {
    struct rel_config cfg;
    struct rel_io io;
    void *ctx;
    struct wire_expect expect;
    struct peer **peers;               /* by rank; NULL until first contact */
    struct peer *active;               /* every peer with state */
    struct peer *ready_head, *ready_tail;
    struct bcast_msg *bq;              /* received broadcasts, rcv_buf of them */
    uint32_t bq_head, bq_len;
    enum cur_msg cur;
    uint32_t tx_slots;                 /* sent packets kept per peer (tx_slots_for) */
    struct rel *other;                 /* this rank's other channel (rel_link), or NULL */
    uint64_t next_due;                 /* no peer timer is due before this */
    uint64_t last_run;                 /* the latest time rel_input or rel_tick ran */
    struct pkt_pool pool;              /* full-size buffers for the stored copies of large DATA packets */
    struct rel_stats stats;
};

/* ---- serial-number arithmetic (RFC 1982) ----------------------------------- */

static int seq_lt(uint32_t a, uint32_t b)
{
    return (uint32_t)(a - b) >= 0x80000000u;
}

static int seq_le(uint32_t a, uint32_t b)
{
    return a == b || seq_lt(a, b);
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a + b < a ? REL_NEVER : a + b;
}

/* ---- configuration -------------------------------------------------------- */

void rel_config_default(struct rel_config *c)
{
    *c = (struct rel_config){
        .max_payload = 1408, /* 1500-byte MTU - IPv4 20 - UDP 8 - shoal 64 */
        .window = 256,
        .rcv_buf = 256,
        .rto_min_ns = 200000,
        .rto_init_ns = 1000000,
        .rto_max_ns = 250000000,
        .ack_delay_ns = 50000,
        .keepalive_ns = 500000000,
        .dead_after_ns = 3000000000ull,
        .first_seq = 1,
    };
}

static int pow2(uint32_t x)
{
    return x && !(x & (x - 1));
}

static const char *config_error(const struct rel_config *c)
{
    if (c->nranks == 0 || c->self >= c->nranks || c->nranks > WIRE_BROADCAST)
        return "self must be a rank of nranks";
    if (c->incarnation == 0)
        return "incarnation must be nonzero";
    if (c->max_payload == 0 || c->max_payload > WIRE_MAX_PAYLOAD)
        return "max_payload must be in [1, WIRE_MAX_PAYLOAD]";
    if (!pow2(c->window) || c->window > (1u << 30) || !pow2(c->rcv_buf) || c->rcv_buf > 32768)
        return "window and rcv_buf must be powers of two (rcv_buf <= 32768)";
    if (c->rto_min_ns == 0 || c->rto_init_ns < c->rto_min_ns || c->rto_max_ns < c->rto_init_ns)
        return "need 0 < rto_min <= rto_init <= rto_max";
    if (c->keepalive_ns == 0 || c->dead_after_ns <= c->keepalive_ns)
        return "need 0 < keepalive < dead_after";
    return NULL;
}

/* Sent packets kept per peer: room for the window's worth beyond a hole
 * several times over (a loss is found within about a round trip, a
 * window's worth), bounded by what the receiver can hold; not rcv_buf
 * itself, which for a window of 16 large packets would cost every peer
 * 12 KB more of slots that are never used. */
static uint32_t tx_slots_for(const struct rel_config *c)
{
    uint32_t most = c->window > c->rcv_buf ? c->window : c->rcv_buf;
    return 4 * (uint64_t)c->window < most ? 4 * c->window : most;
}

/* Freed full-size stored copies kept for reuse: as many as can be in
 * flight to a peer. */
static uint32_t pool_cap(const struct rel_config *c)
{
    uint64_t fit = c->window_bytes / (WIRE_HEADER_BYTES + c->max_payload) + 1;
    return c->window_bytes && fit < c->window ? (uint32_t)fit : c->window;
}

/* ---- peers ------------------------------------------------------------------- */

static struct peer *peer_new(struct rel *r, uint32_t rank, uint64_t now)
{
    struct peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->tx = calloc(r->tx_slots, sizeof *p->tx);
    p->rx = calloc(r->cfg.rcv_buf, sizeof *p->rx);
    if (!p->tx || !p->rx) {
        free(p->tx);
        free(p->rx);
        free(p);
        return NULL;
    }
    uint32_t s0 = r->cfg.first_seq;
    p->rank = rank;
    p->una = p->nxt = s0;
    p->sack_hi = s0 - 1;
    p->limit = s0 - 1 + r->cfg.rcv_buf; /* every rank has the same buffer */
    p->tx_head = p->tx_tail = -1;
    p->reo_mult = 1;
    p->rto_due = p->probe_due = p->ack_due = REL_NEVER;
    p->rcv_ack = p->consumed = s0 - 1;
    p->adv_limit = s0 - 1 + r->cfg.rcv_buf;
    p->last_rx = now;
    p->ka_due = add_sat(now, r->cfg.keepalive_ns);
    p->ka_first = REL_NEVER;
    p->next_active = r->active;
    r->active = p;
    return p;
}

/* The peer's state, created on first contact; NULL when out of memory. */
static struct peer *peer_get(struct rel *r, uint32_t rank, uint64_t now)
{
    if (!r->peers[rank])
        r->peers[rank] = peer_new(r, rank, now);
    return r->peers[rank];
}

/* RTO = SRTT + 4 max(RTTVAR, rto_min / 4), as Linux computes it (RFC 6298's
 * clock-granularity term G = rto_min): never below rto_min, and a round
 * trip that barely varies (a steadily full queue) cannot bring the RTO
 * down to SRTT, where any hiccup would fire it. */
static uint64_t rto_of(const struct rel *r, const struct peer *p, unsigned backoff)
{
    uint64_t var = p->rttvar > r->cfg.rto_min_ns / 4 ? p->rttvar : r->cfg.rto_min_ns / 4;
    uint64_t rto = p->has_rtt ? p->srtt + 4 * var : r->cfg.rto_init_ns;
    for (unsigned i = 0; i < backoff && rto < r->cfg.rto_max_ns; i++)
        rto *= 2;
    return min64(rto, r->cfg.rto_max_ns);
}

/* A peer is dead after dead_after of silence, if a KEEPALIVE has had a
 * keepalive interval to be answered (with probes every RTO meanwhile): an
 * engine that was not run for a while (a stopped process, an overloaded
 * host) asks before it concludes (engine_ran). */
static uint64_t dead_due(const struct rel *r, const struct peer *p)
{
    if (p->ka_first == REL_NEVER)
        return REL_NEVER;
    uint64_t silent = add_sat(p->last_rx, r->cfg.dead_after_ns), asked = add_sat(p->ka_first, r->cfg.keepalive_ns);
    return silent > asked ? silent : asked;
}

static uint64_t peer_deadline(const struct rel *r, const struct peer *p)
{
    if (p->dead)
        return REL_NEVER;
    return min64(min64(min64(p->ack_due, p->probe_due), p->rto_due), min64(p->ka_due, dead_due(r, p)));
}

/* After anything that may have moved one of p's timers earlier. */
static void note_deadline(struct rel *r, const struct peer *p)
{
    r->next_due = min64(r->next_due, peer_deadline(r, p));
}

/* The retransmission timer runs from the last progress (TCP's rule): in a
 * flowing stream only the tail can time out; holes are found from ACKs. */
static void arm_rto(struct rel *r, struct peer *p, uint64_t now)
{
    p->rto_due = p->tx_head >= 0 ? add_sat(now, rto_of(r, p, p->backoff)) : REL_NEVER;
}

static void want_ack(struct peer *p, uint64_t when)
{
    p->ack_due = min64(p->ack_due, when);
}

/* ---- stored packets -------------------------------------------------------- */

/* The stored copy of a sent DATA packet lives until it is acknowledged:
 * in a full-size buffer from the pool when it fills a quarter of one or
 * holds 4 KiB (a small MTU's fragments: malloc per packet showed as 7 % of
 * a sender streaming over veth), else from malloc (a 64 KiB buffer per
 * short message would be waste). */
#define POOL_MIN_LEN 4096u

static int pkt_pooled(const struct rel *r, uint32_t len)
{
    return len >= POOL_MIN_LEN || 4 * (WIRE_HEADER_BYTES + (size_t)len) >= r->pool.size;
}

static unsigned char *pkt_alloc(struct rel *r, uint32_t len)
{
    return pkt_pooled(r, len) ? pool_take(&r->pool) : malloc(WIRE_HEADER_BYTES + len);
}

static void pkt_free(struct rel *r, unsigned char *pkt, uint32_t len)
{
    if (pkt_pooled(r, len))
        pool_give(&r->pool, pkt);
    else
        free(pkt);
}

/* The payload after a packet's header: head, then body. */
static void put_payload(unsigned char *pkt, const void *head, size_t hlen, const void *body, size_t blen)
{
    if (hlen)
        memcpy(pkt + WIRE_HEADER_BYTES, head, hlen);
    if (blen)
        memcpy(pkt + WIRE_HEADER_BYTES + hlen, body, blen);
}

/* ---- the transmission-order list ------------------------------------------- */

static void txl_remove(struct peer *p, struct tx_slot *t)
{
    if (t->prev >= 0)
        p->tx[t->prev].next = t->next;
    else
        p->tx_head = t->next;
    if (t->next >= 0)
        p->tx[t->next].prev = t->prev;
    else
        p->tx_tail = t->prev;
}

/* Stamps a (re)transmission of t at now and moves it to the list's end. */
static void txl_stamp(struct peer *p, struct tx_slot *t, uint64_t now)
{
    int32_t i = (int32_t)(t - p->tx);
    t->xmit_ts = now;
    t->tx_order = ++p->tx_order;
    t->tx_count++;
    t->prev = p->tx_tail;
    t->next = -1;
    if (p->tx_tail >= 0)
        p->tx[p->tx_tail].next = i;
    else
        p->tx_head = i;
    p->tx_tail = i;
}

/* ---- sending packets -------------------------------------------------------------- */

static uint64_t sack_bits(const struct rel *r, const struct peer *p)
{
    uint64_t s = 0;
    uint32_t end = p->consumed + r->cfg.rcv_buf;
    for (uint32_t i = 0; p->ooo && i < 64 && seq_le(p->rcv_ack + 2 + i, end); i++)
        if (p->rx[(p->rcv_ack + 2 + i) & (r->cfg.rcv_buf - 1)].present)
            s |= 1ull << i;
    return s;
}

/* Whose receive state a packet of r to p carries (*q: that channel's state
 * for p): r's own, unless the packet is DATA and the other channel owes p
 * an acknowledgement sooner.  In a request/reply exchange each direction
 * carries one channel's data and owes the other's acks (requests one way,
 * replies the other), so only this keeps it free of explicit ACKs. */
static struct rel *ack_channel(struct rel *r, struct peer *p, uint8_t type, struct peer **q)
{
    struct peer *o = r->other && type == WIRE_DATA ? r->other->peers[p->rank] : NULL;
    if (o && !o->dead && o->ack_due < p->ack_due) {
        *q = o;
        return r->other;
    }
    *q = p;
    return r;
}

/* Encodes and sends one packet to p with an ack, SACK and credits (of
 * ack_channel's choice), which makes that channel's pending explicit ACK
 * unnecessary.  pkt: a DATA packet's stored copy, whose first
 * WIRE_HEADER_BYTES take the header (the carrier then sends one piece of
 * memory and may keep a reference to it); NULL for the other types. */
static void send_packet(struct rel *r, struct peer *p, uint8_t type, uint16_t flags, uint32_t seq,
                        unsigned char *pkt, uint32_t len)
{
    struct peer *q;
    struct rel *a = ack_channel(r, p, type, &q);
    uint32_t credits = q->consumed + a->cfg.rcv_buf - q->rcv_ack;
    flags |= (r->cfg.reply_channel ? WIRE_F_REPLY : 0) | (a->cfg.reply_channel ? WIRE_F_ACK_REPLY : 0);
    struct wire_header h = {
        .type = type, .flags = flags, .job = r->cfg.job, .src = r->cfg.self, .dst = p->rank,
        .src_inc = r->cfg.incarnation, .dst_inc = p->inc, .seq = seq, .ack = q->rcv_ack, .sack = sack_bits(a, q),
        .credits = (uint16_t)credits, .len = (uint16_t)len};
    unsigned char hdr[WIRE_HEADER_BYTES];
    wire_encode_header(pkt ? pkt : hdr, &h, &r->cfg.key, r->cfg.need_checksum);
    q->adv_limit = q->rcv_ack + credits;
    q->ack_due = REL_NEVER;
    r->io.xmit(r->ctx, p->rank, pkt ? pkt : hdr, WIRE_HEADER_BYTES + (size_t)len, pkt != NULL);
}

static void retransmit(struct rel *r, struct peer *p, struct tx_slot *t, int by_timer, uint64_t now)
{
    txl_remove(p, t);
    txl_stamp(p, t, now);
    t->by_timer = (uint8_t)by_timer;
    r->stats.retransmits++;
    /* ACK_NOW: the receiver's answer tells at once what else is missing */
    send_packet(r, p, WIRE_DATA, WIRE_F_ACK_NOW, t->seq, t->pkt, t->len);
}

/* Packets sent and neither acknowledged nor SACKed: what the window
 * limits.  SACKed ones wait at the receiver for a hole to fill; counting
 * them would stall a sender for a round trip after every loss. */
static uint32_t in_flight(const struct peer *p)
{
    return p->nxt - p->una - p->sacked;
}

/* Whether at least `bytes` of payload are in flight to p; never without a
 * byte limit. */
static int flight_reaches(const struct rel *r, const struct peer *p, uint64_t bytes)
{
    return r->cfg.window_bytes && p->flight_bytes >= bytes;
}

/* The byte window is used up: a send waits, and the packet that used it
 * up asks for an ACK. */
static int bytes_full(const struct rel *r, const struct peer *p)
{
    return flight_reaches(r, p, r->cfg.window_bytes);
}

/* TH1: ask for an ACK when half the usable window is in flight, in packets
 * or bytes (once per ACK), and when this packet uses the window or the
 * credits up. */
static uint16_t ack_request(const struct rel *r, struct peer *p, uint32_t seq)
{
    uint32_t inflight = in_flight(p);
    uint32_t thresh = (r->cfg.window < r->cfg.rcv_buf ? r->cfg.window : r->cfg.rcv_buf) / 2;
    int last = inflight == r->cfg.window || seq == p->limit || bytes_full(r, p);
    int half = inflight >= thresh || flight_reaches(r, p, (r->cfg.window_bytes + 1) / 2);
    if (!last && (!half || (p->acknow_out && !seq_lt(p->acknow_seq, p->una))))
        return 0;
    p->acknow_seq = seq;
    p->acknow_out = 1;
    return WIRE_F_ACK_NOW;
}

static void send_keepalive(struct rel *r, struct peer *p, uint64_t now)
{
    p->ka_first = min64(p->ka_first, now);
    send_packet(r, p, WIRE_KEEPALIVE, 0, 0, NULL, 0);
}

/* The longest wait between liveness probes once one went unanswered. */
static uint64_t ka_probe_cap(const struct rel *r)
{
    uint64_t cap = r->cfg.keepalive_ns / KA_PROBES;
    return cap > r->cfg.rto_min_ns ? cap : r->cfg.rto_min_ns;
}

/* A KEEPALIVE for liveness: the first after keepalive_ns of silence, then
 * one every RTO (backing off up to ka_probe_cap) until an answer or the
 * deadline, so that only silence, not a few lost packets, kills a peer. */
static void probe_liveness(struct rel *r, struct peer *p, uint64_t now)
{
    r->stats.keepalives_sent++;
    send_keepalive(r, p, now);
    p->ka_due = add_sat(now, min64(rto_of(r, p, p->ka_backoff), ka_probe_cap(r)));
    p->ka_backoff += p->ka_backoff < MAX_BACKOFF;
}

/* After a gap of several probe intervals in which the engine did not run,
 * what a peer sent may still wait in the socket and the probes due meanwhile
 * never went: every peer being asked gets a whole asking window again. */
static void engine_ran(struct rel *r, uint64_t now)
{
    if (now > r->last_run + KA_GAP_PROBES * ka_probe_cap(r))
        for (struct peer *p = r->active; p; p = p->next_active)
            if (p->ka_first != REL_NEVER) {
                p->ka_first = REL_NEVER;
                p->ka_backoff = 0;
                p->ka_due = now;
                r->next_due = now;
            }
    r->last_run = now > r->last_run ? now : r->last_run;
}

static void declare_dead(struct rel *r, struct peer *p, enum rel_dead_reason why)
{
    /* In-order data already received stays deliverable; what we sent is lost. */
    for (uint32_t s = p->una; s != p->nxt; s++) {
        struct tx_slot *t = &p->tx[s & (r->tx_slots - 1)];
        pkt_free(r, t->pkt, t->len);
        t->pkt = NULL;
    }
    p->una = p->nxt;
    p->sacked = 0;
    p->flight_bytes = 0;
    p->tx_head = p->tx_tail = -1;
    p->rto_due = p->probe_due = p->ack_due = REL_NEVER;
    p->dead = 1;
    r->stats.peers_dead++;
    LOG(LOG_INFO, "net: rank %u is dead (%s)", p->rank, why == REL_DEAD_SILENT ? "silent" : why == REL_DEAD_UNREACHED ? "never reached" : "restarted");
    r->io.peer_dead(r->ctx, p->rank, why);
}

/* ---- acknowledgements received ------------------------------------------------ */

#define SACK_SPAN 65u /* an ACK reports on seq ack+1 .. ack+SACK_SPAN */

/* What one ACK newly acknowledged. */
struct acked {
    uint32_t horizon;         /* the last seq the previous ACK could report */
    int progress;             /* anything */
    int have_newest;          /* loss detection's reference: the packet transmitted last, */
    uint64_t newest_order;    /* ... its transmission number */
    uint64_t newest_ts;       /* ... and time */
    int have_sample;          /* the latest transmission usable as an RTT sample */
    uint64_t sample_ts;
    int spurious;             /* a packet resent on the SACKs' word arrived the first time */
};

static void ack_slot(struct rel *r, struct peer *p, struct tx_slot *t, enum tx_state to, struct acked *a, uint64_t now)
{
    if (t->state == TX_INFLIGHT) {
        txl_remove(p, t);
        a->progress = 1;
        /* an RTT sample needs a packet sent once (Karn) that the previous
         * ACK could have reported: one beyond it may have waited at the
         * receiver, unreported, until a hole filled */
        if (t->tx_count == 1 && seq_le(t->seq, a->horizon) && (!a->have_sample || t->xmit_ts > a->sample_ts)) {
            a->sample_ts = t->xmit_ts;
            a->have_sample = 1;
        }
        /* an ACK of a retransmitted packet may be for an earlier copy, and
         * then says nothing about what was sent before the resend: so when
         * it comes sooner than min_rtt after it (and without a sample,
         * nobody knows what soon is), and always after a resend by the
         * timer, which fires on a copy that is late rather than lost as
         * often as not (a receiver that was not scheduled, with a queue
         * far longer than min_rtt) */
        int soon = p->has_rtt && now - t->xmit_ts < p->min_rtt;
        int ambiguous = t->tx_count > 1 && (t->by_timer || !p->has_rtt || soon);
        /* acknowledged sooner than any resend could be: the first copy was
         * only late (reordered) */
        a->spurious |= t->tx_count > 1 && !t->by_timer && soon;
        if (!ambiguous && (!a->have_newest || t->tx_order > a->newest_order)) {
            a->newest_order = t->tx_order;
            a->newest_ts = t->xmit_ts;
            a->have_newest = 1;
        }
        pkt_free(r, t->pkt, t->len); /* our receivers never discard a SACKed packet */
        t->pkt = NULL;
        p->sacked += to == TX_SACKED;
        p->flight_bytes -= t->len;
    } else if (t->state == TX_SACKED && to == TX_FREE) {
        p->sacked--;
    }
    t->state = (uint8_t)to;
}

/* Jacobson/Karels. */
static void rtt_sample(struct rel *r, struct peer *p, uint64_t rtt)
{
    if (!p->has_rtt) {
        p->srtt = p->min_rtt = rtt;
        p->rttvar = rtt / 2;
        p->has_rtt = 1;
    } else {
        p->min_rtt = rtt < p->min_rtt ? rtt : p->min_rtt;
        uint64_t delta = rtt > p->srtt ? rtt - p->srtt : p->srtt - rtt;
        p->rttvar = (3 * p->rttvar + delta) / 4;
        p->srtt = (7 * p->srtt + rtt) / 8;
    }
    r->stats.rtt_samples++;
}

/* Loss detection in the manner of RACK (RFC 8985): a packet last sent
 * before the newest one this ACK reports (unambiguously: see ack_slot) is
 * lost if it has been out longer than that one's round trip plus a
 * reordering allowance, or if DUPTHRESH packets above it are SACKed.  The
 * allowance is reo_mult x min_rtt/4, at most srtt; reo_mult grows by one
 * with every spurious resend found and is back to 1 after REO_RESET losses
 * without one (RFC 8985's reo_wnd, with the too-early ACK of a resent
 * packet standing in for D-SACK: reordering on a path with big packets
 * easily exceeds min_rtt/4, and a spurious resend of a 64 KB packet is
 * costly).  Packets beyond what a SACK can report are not judged.  Walks
 * the in-flight list in transmission order up to the reference: normally
 * just the holes. */
static void detect_losses(struct rel *r, struct peer *p, const struct wire_header *h, const struct acked *a,
                          uint64_t now)
{
    uint64_t reo = p->reo_mult * p->min_rtt / 4, allowance = now - a->newest_ts + (reo < p->srtt ? reo : p->srtt);
    int found = 0;
    uint32_t hi = h->sack ? h->ack + 2 + (63 - (uint32_t)__builtin_clzll(h->sack)) : h->ack;
    for (int32_t i = p->tx_head; i >= 0 && p->tx[i].tx_order < a->newest_order;) {
        struct tx_slot *t = &p->tx[i];
        i = t->next; /* before retransmit moves t to the end */
        if (seq_le(t->seq, h->ack + SACK_SPAN) &&
            (t->xmit_ts + allowance <= now || seq_le(t->seq + DUPTHRESH, hi))) {
            r->stats.fast_retransmits++;
            retransmit(r, p, t, 0, now);
            found = 1;
        }
    }
    if (found && ++p->recoveries >= REO_RESET) {
        p->reo_mult = 1;
        p->recoveries = 0;
    }
}

/* Probing starts when credits block a sender that has nothing in flight:
 * then no ACK would come to reopen the window if the update was lost. */
static void update_probe(struct rel *r, struct peer *p, uint64_t now)
{
    if (seq_le(p->nxt, p->limit)) {
        p->blocked = 0;
        p->probe_due = REL_NEVER;
    } else if (p->blocked && p->una == p->nxt && p->probe_due == REL_NEVER) {
        p->probe_backoff = 0;
        p->probe_due = add_sat(now, rto_of(r, p, 0));
    }
}

/* Applies the ack, SACK and credits of h; -1 if it acknowledges packets
 * never sent (a confused or forged peer). */
static int rx_ack(struct rel *r, struct peer *p, const struct wire_header *h, uint64_t now)
{
    if (!seq_lt(h->ack, p->nxt))
        return -1;
    if (seq_lt(p->limit, h->ack + h->credits)) /* a window never shrinks: reordered headers */
        p->limit = h->ack + h->credits;
    struct acked a = {.horizon = p->una - 1 + SACK_SPAN};
    if (!seq_lt(h->ack + 1, p->una)) { /* else an old header, already superseded */
        for (; seq_le(p->una, h->ack); p->una++)
            ack_slot(r, p, &p->tx[p->una & (r->tx_slots - 1)], TX_FREE, &a, now);
        for (uint64_t bits = h->sack; bits; bits &= bits - 1) {
            uint32_t s = h->ack + 2 + (uint32_t)__builtin_ctzll(bits);
            if (seq_lt(s, p->nxt)) {
                ack_slot(r, p, &p->tx[s & (r->tx_slots - 1)], TX_SACKED, &a, now);
                p->sack_hi = seq_lt(p->sack_hi, s) ? s : p->sack_hi;
            }
        }
    }
    if (seq_lt(p->sack_hi, p->una)) /* kept within 2^31 of una, where serial comparison holds */
        p->sack_hi = p->una - 1;
    if (a.have_sample)
        rtt_sample(r, p, now - a.sample_ts);
    if (a.spurious) {
        r->stats.spurious_retransmits++;
        p->reo_mult += p->reo_mult < REO_MULT_MAX;
        p->recoveries = 0;
    }
    if (p->acknow_out && seq_lt(p->acknow_seq, p->una))
        p->acknow_out = 0;
    if (a.have_newest)
        detect_losses(r, p, h, &a, now);
    if (a.progress) { /* the peer is there: the RTO need not stay backed off */
        p->backoff = 0;
        arm_rto(r, p, now);
    }
    update_probe(r, p, now);
    return 0;
}

/* ---- data received ------------------------------------------------------------- */

static void ready_push(struct rel *r, struct peer *p)
{
    p->ready = 1;
    p->next_ready = NULL;
    if (r->ready_tail)
        r->ready_tail->next_ready = p;
    else
        r->ready_head = p;
    r->ready_tail = p;
}

/* Keeps the payload of the received packet pkt (at pkt + at: after the
 * header, and a MULTI's vector) until the AM layer takes
 * it (*data, NULL when empty): in the carrier's buffer when the carrier
 * hands it over (*taken = pkt), so that a large payload is copied only
 * once, from there to where the AM layer puts it; else in a copy.  0 when
 * memory ran out, counted (the packet is dropped as if beyond the window,
 * and the sender will resend it). */
static int keep_payload(struct rel *r, const struct wire_header *h, const void *pkt, size_t at, void **data,
                        void **taken)
{
    *data = *taken = NULL;
    if (!h->len)
        return 1;
    if (r->io.take && r->io.take(r->ctx, pkt, at + (size_t)h->len)) {
        *taken = (void *)pkt;
        *data = (unsigned char *)*taken + at;
        return 1;
    }
    /* 64-byte aligned, as the carrier's buffers keep payloads: the AM
     * layer aligns medium payloads of 256 bytes or more in the packet
     * (am_net.c) and hands them to handlers in place.  A shorter packet
     * holds no aligned payload, and malloc is 4 times quicker than
     * aligned_alloc, which a short message pays on every hop. */
    size_t len = h->len;
    if (!(*data = len < 256 ? malloc(len) : aligned_alloc(64, (len + 63u) & ~(size_t)63u))) {
        r->stats.nomem++;
        return 0;
    }
    memcpy(*data, (const unsigned char *)pkt + at, h->len);
    return 1;
}

static void drop_payload(struct rel *r, void *data, void *taken)
{
    if (taken)
        r->io.give_back(r->ctx, taken);
    else
        free(data);
}

/* A DATA packet, or this rank's part of a MULTI one: its payload at pkt + at. */
static enum wire_verdict rx_data(struct rel *r, struct peer *p, const struct wire_header *h,
                                 const void *pkt, size_t at, uint64_t now)
{
    uint32_t mask = r->cfg.rcv_buf - 1, end = p->consumed + r->cfg.rcv_buf;
    if (seq_le(h->seq, p->rcv_ack) || (seq_le(h->seq, end) && p->rx[h->seq & mask].present)) {
        want_ack(p, now); /* the ACK that would have stopped it was lost */
        return WIRE_DROP_DUPLICATE;
    }
    if (seq_lt(end, h->seq)) {
        want_ack(p, now); /* tell the sender its credits again */
        return WIRE_DROP_WINDOW;
    }
    struct rx_slot *s = &p->rx[h->seq & mask];
    if (!keep_payload(r, h, pkt, at, &s->data, &s->taken))
        return WIRE_DROP_WINDOW;
    s->len = h->len;
    s->present = 1;
    if (h->seq != p->rcv_ack + 1) {
        /* SACK at once when a hole opens and when DUPTHRESH packets are
         * beyond it (the sender's loss detection needs no more), then at
         * the pace of in-order data */
        p->ooo++;
        r->stats.out_of_order++;
        want_ack(p, p->ooo == 1 || p->ooo == DUPTHRESH ? now : add_sat(now, r->cfg.ack_delay_ns));
        return WIRE_OK;
    }
    int filled_hole = p->ooo > 0;
    for (p->rcv_ack++; seq_le(p->rcv_ack + 1, end) && p->rx[(p->rcv_ack + 1) & mask].present; p->rcv_ack++)
        p->ooo--;
    if (!p->ready)
        ready_push(r, p);
    /* in order: wait a little for a packet to carry the ack, unless asked */
    int urgent = filled_hole || (h->flags & WIRE_F_ACK_NOW);
    want_ack(p, urgent ? now : add_sat(now, r->cfg.ack_delay_ns));
    return WIRE_OK;
}

static enum wire_verdict rx_bcast(struct rel *r, const struct wire_header *h, const void *pkt)
{
    if (r->bq_len == r->cfg.rcv_buf)
        return WIRE_DROP_WINDOW;
    struct bcast_msg *b = &r->bq[(r->bq_head + r->bq_len) & (r->cfg.rcv_buf - 1)];
    if (!keep_payload(r, h, pkt, WIRE_HEADER_BYTES, &b->data, &b->taken))
        return WIRE_DROP_WINDOW;
    b->src = h->src;
    b->len = h->len;
    r->bq_len++;
    return WIRE_OK;
}

static enum wire_verdict check_incarnation(struct rel *r, struct peer *p, const struct wire_header *h)
{
    if (p->dead || (h->dst_inc && h->dst_inc != r->cfg.incarnation))
        return WIRE_DROP_INCARNATION;
    if (!p->inc)
        p->inc = h->src_inc;
    if (h->src_inc == p->inc)
        return WIRE_OK;
    if (seq_lt(p->inc, h->src_inc))
        declare_dead(r, p, REL_DEAD_RESTARTED);
    return WIRE_DROP_INCARNATION;
}

/* A packet from p arrived: p is alive. */
static void heard(struct rel *r, struct peer *p, uint64_t now)
{
    p->last_rx = now;
    p->ka_due = add_sat(now, r->cfg.keepalive_ns);
    p->ka_first = REL_NEVER;
    p->ka_backoff = 0;
}

/* The ack fields of h (when it is DATA of the other channel's: see
 * ack_channel) go to engine a's state for the sender, q; the rest to r's,
 * p.  Both pass the incarnation checks before either changes. */
static enum wire_verdict accept(struct rel *r, const struct wire_header *h, const void *pkt, size_t at,
                                uint64_t now)
{
    struct rel *a = r;
    engine_ran(r, now);
    if (h->type == WIRE_DATA && !(h->flags & WIRE_F_ACK_REPLY) != !r->cfg.reply_channel && !(a = r->other))
        return WIRE_DROP_TYPE; /* an engine without a linked channel cannot take its acks */
    struct peer *p = peer_get(r, h->src, now), *q = a == r ? p : peer_get(a, h->src, now);
    if (!p || !q) {
        r->stats.nomem++;
        return WIRE_DROP_WINDOW;
    }
    enum wire_verdict v = check_incarnation(r, p, h);
    if (v == WIRE_OK && q != p)
        v = check_incarnation(a, q, h);
    if (v != WIRE_OK)
        return v;
    if (h->type != WIRE_BCAST && h->type != WIRE_MULTI && rx_ack(a, q, h, now)) /* those carry none */
        return WIRE_DROP_WINDOW;
    heard(r, p, now);
    if (r->other && r->other->peers[h->src]) /* a packet on either channel shows the peer alive to both */
        heard(r->other, r->other->peers[h->src], now);
    if (q != p)
        note_deadline(a, q);
    if (h->type == WIRE_DATA || h->type == WIRE_MULTI)
        v = rx_data(r, p, h, pkt, at, now);
    else if (h->type == WIRE_KEEPALIVE)
        want_ack(p, now);
    else if (h->type == WIRE_BCAST)
        v = rx_bcast(r, h, pkt);
    note_deadline(r, p);
    return v;
}

/* ---- the API ---------------------------------------------------------------------- */

int rel_create(struct rel **out, const struct rel_config *cfg, const struct rel_io *io, void *ctx)
{
    const char *bad = config_error(cfg);
    if (bad) {
        LOG(LOG_ERROR, "net: bad reliability configuration: %s", bad);
        return SHOAL_EINVAL;
    }
    struct rel *r = calloc(1, sizeof *r);
    if (!r)
        return SHOAL_ENOMEM;
    *r = (struct rel){.cfg = *cfg, .io = *io, .ctx = ctx, .next_due = REL_NEVER,
                      .tx_slots = tx_slots_for(cfg),
                      .expect = {.job = cfg->job, .key = cfg->key, .self = cfg->self, .nranks = cfg->nranks,
                                 .need_checksum = cfg->need_checksum}};
    r->peers = calloc(cfg->nranks, sizeof *r->peers);
    r->bq = calloc(cfg->rcv_buf, sizeof *r->bq);
    int pool_rc = pool_init(&r->pool, pool_cap(cfg), WIRE_HEADER_BYTES + cfg->max_payload);
    if (!r->peers || !r->bq || pool_rc) {
        rel_destroy(r);
        return SHOAL_ENOMEM;
    }
    *out = r;
    return SHOAL_OK;
}

void rel_link(struct rel *request, struct rel *reply)
{
    request->other = reply;
    reply->other = request;
}

void rel_destroy(struct rel *r)
{
    if (!r)
        return;
    if (r->other)
        r->other->other = NULL;
    for (struct peer *p = r->active, *next; p; p = next) {
        next = p->next_active;
        for (uint32_t i = 0; i < r->tx_slots; i++)
            free(p->tx[i].pkt);
        for (uint32_t i = 0; i < r->cfg.rcv_buf; i++)
            drop_payload(r, p->rx[i].data, p->rx[i].taken);
        free(p->tx);
        free(p->rx);
        free(p);
    }
    for (uint32_t i = 0; i < r->bq_len; i++) {
        struct bcast_msg *b = &r->bq[(r->bq_head + i) & (r->cfg.rcv_buf - 1)];
        drop_payload(r, b->data, b->taken);
    }
    free(r->bq);
    pool_fini(&r->pool);
    free(r->peers);
    free(r);
}

/* Whether p can take one more packet now. */
static int admit(struct rel *r, struct peer *p, uint64_t now)
{
    if (p->dead)
        return SHOAL_EPEERDEAD;
    if (in_flight(p) >= r->cfg.window || bytes_full(r, p) || p->nxt - p->una >= r->tx_slots) {
        r->stats.eagain_window++;
        return SHOAL_EAGAIN;
    }
    if (seq_lt(p->limit, p->nxt)) {
        r->stats.eagain_credits++;
        p->blocked = 1;
        update_probe(r, p, now);
        note_deadline(r, p);
        return SHOAL_EAGAIN;
    }
    return SHOAL_OK;
}

/* Packets of the largest size window_bytes still lets in with `flight`
 * bytes in flight, at most `most`. */
static uint32_t bytes_room(const struct rel *r, uint64_t flight, uint32_t most)
{
    if (!r->cfg.window_bytes)
        return most;
    uint64_t left = flight >= r->cfg.window_bytes ? 0 : r->cfg.window_bytes - flight;
    uint64_t big = (left + r->cfg.max_payload - 1) / r->cfg.max_payload;
    return big < most ? (uint32_t)big : most;
}

uint32_t rel_room(const struct rel *r, uint32_t peer)
{
    if (peer >= r->cfg.nranks || peer == r->cfg.self)
        return 0;
    const struct peer *p = r->peers[peer];
    if (!p) /* credits before first contact: a whole receive buffer */
        return bytes_room(r, 0, r->cfg.window < r->cfg.rcv_buf ? r->cfg.window : r->cfg.rcv_buf);
    if (p->dead || seq_lt(p->limit, p->nxt))
        return 0;
    uint32_t window = bytes_room(r, p->flight_bytes, r->cfg.window - in_flight(p));
    uint32_t slots = r->tx_slots - (p->nxt - p->una);
    uint32_t credits = p->limit - p->nxt + 1, room = window < slots ? window : slots;
    return room < credits ? room : credits;
}

int rel_send(struct rel *r, uint32_t peer, const void *payload, size_t len, uint64_t now)
{
    return rel_send2(r, peer, payload, len, NULL, 0, now);
}

static struct tx_slot *store_data(struct rel *r, struct peer *p, unsigned char *copy, uint32_t len, uint64_t now);

int rel_send2(struct rel *r, uint32_t peer, const void *head, size_t hlen, const void *body, size_t blen,
              uint64_t now)
{
    size_t len = hlen + blen;
    if (peer >= r->cfg.nranks || peer == r->cfg.self || len > r->cfg.max_payload)
        return SHOAL_EINVAL;
    struct peer *p = peer_get(r, peer, now);
    int rc = p ? admit(r, p, now) : SHOAL_ENOMEM;
    unsigned char *copy = rc == SHOAL_OK ? pkt_alloc(r, (uint32_t)len) : NULL;
    if (rc == SHOAL_OK && !copy)
        rc = SHOAL_ENOMEM;
    if (rc == SHOAL_ENOMEM)
        r->stats.nomem++;
    if (rc != SHOAL_OK)
        return rc;
    put_payload(copy, head, hlen, body, blen);
    struct tx_slot *t = store_data(r, p, copy, (uint32_t)len, now);
    send_packet(r, p, WIRE_DATA, ack_request(r, p, t->seq), t->seq, t->pkt, t->len);
    note_deadline(r, p);
    return SHOAL_OK;
}

/* The packet whose payload is in copy (len bytes) takes p's next sequence
 * number and is in flight from now: what the retransmissions resend. */
static struct tx_slot *store_data(struct rel *r, struct peer *p, unsigned char *copy, uint32_t len, uint64_t now)
{
    uint32_t seq = p->nxt++;
    struct tx_slot *t = &p->tx[seq & (r->tx_slots - 1)];
    *t = (struct tx_slot){.pkt = copy, .seq = seq, .len = len, .state = TX_INFLIGHT};
    p->flight_bytes += len;
    txl_stamp(p, t, now);
    if (p->rto_due == REL_NEVER)
        arm_rto(r, p, now);
    r->stats.sent++;
    return t;
}

/* Every other rank's state, all or none: SHOAL_OK when each takes one more
 * packet now, and each's stored copy of the payload (len bytes) in
 * copies[rank]. */
static int admit_all(struct rel *r, struct peer **peers, unsigned char **copies, uint32_t len, uint64_t now)
{
    int rc = SHOAL_OK;
    memset(copies, 0, r->cfg.nranks * sizeof *copies);
    for (uint32_t i = 0; i < r->cfg.nranks && rc == SHOAL_OK; i++) {
        if (i == r->cfg.self)
            continue;
        peers[i] = peer_get(r, i, now);
        rc = peers[i] ? admit(r, peers[i], now) : SHOAL_ENOMEM;
        if (rc == SHOAL_OK && !(copies[i] = pkt_alloc(r, len)))
            rc = SHOAL_ENOMEM;
    }
    if (rc == SHOAL_OK)
        return rc;
    for (uint32_t i = 0; i < r->cfg.nranks; i++)
        if (copies[i])
            pkt_free(r, copies[i], len);
    if (rc == SHOAL_ENOMEM)
        r->stats.nomem++;
    return rc;
}

int rel_send_all(struct rel *r, const void *head, size_t hlen, const void *body, size_t blen, uint64_t now)
{
    size_t len = hlen + blen, vec = wire_multi_vector_bytes(r->cfg.nranks);
    if (r->cfg.nranks > WIRE_MULTI_MAX_RANKS || r->cfg.nranks < 2 || vec + len > r->cfg.max_payload)
        return SHOAL_EINVAL;
    struct peer *peers[WIRE_MULTI_MAX_RANKS];
    unsigned char *copies[WIRE_MULTI_MAX_RANKS];
    unsigned char *frame = malloc(WIRE_HEADER_BYTES + vec + len);
    int rc = frame ? admit_all(r, peers, copies, (uint32_t)len, now) : SHOAL_ENOMEM;
    if (rc != SHOAL_OK) {
        r->stats.nomem += !frame;
        free(frame);
        return rc;
    }
    memset(frame + WIRE_HEADER_BYTES, 0, vec);
    put_payload(frame + vec, head, hlen, body, blen);
    uint16_t flags = r->cfg.reply_channel ? WIRE_F_REPLY | WIRE_F_ACK_REPLY : 0;
    for (uint32_t i = 0; i < r->cfg.nranks; i++) {
        if (i == r->cfg.self)
            continue;
        struct peer *p = peers[i];
        memcpy(copies[i] + WIRE_HEADER_BYTES, frame + vec + WIRE_HEADER_BYTES, len);
        struct tx_slot *t = store_data(r, p, copies[i], (uint32_t)len, now);
        flags |= ack_request(r, p, t->seq); /* one receiver's need makes every one answer at once */
        wire_multi_put(frame + WIRE_HEADER_BYTES, i, t->seq, p->inc);
        note_deadline(r, p);
    }
    struct wire_header h = {.type = WIRE_MULTI, .flags = flags, .job = r->cfg.job, .src = r->cfg.self,
                            .dst = WIRE_BROADCAST, .src_inc = r->cfg.incarnation, .len = (uint16_t)(vec + len)};
    wire_encode_header(frame, &h, &r->cfg.key, r->cfg.need_checksum);
    r->stats.multis_sent++;
    r->io.xmit(r->ctx, WIRE_BROADCAST, frame, WIRE_HEADER_BYTES + vec + len, 0);
    free(frame);
    return SHOAL_OK;
}

int rel_bcast(struct rel *r, const void *head, size_t hlen, const void *body, size_t blen)
{
    size_t len = hlen + blen;
    if (len > r->cfg.max_payload)
        return SHOAL_EINVAL;
    struct wire_header h = {.type = WIRE_BCAST, .job = r->cfg.job, .src = r->cfg.self,
                            .dst = WIRE_BROADCAST, .src_inc = r->cfg.incarnation, .len = (uint16_t)len};
    unsigned char *pkt = malloc(WIRE_HEADER_BYTES + len);
    if (!pkt) {
        r->stats.nomem++;
        return SHOAL_ENOMEM;
    }
    put_payload(pkt, head, hlen, body, blen);
    wire_encode_header(pkt, &h, &r->cfg.key, r->cfg.need_checksum);
    r->stats.bcasts_sent++;
    r->io.xmit(r->ctx, WIRE_BROADCAST, pkt, WIRE_HEADER_BYTES + len, 0);
    free(pkt);
    return SHOAL_OK;
}

enum wire_verdict rel_input(struct rel *r, const void *pkt, size_t len, uint64_t now)
{
    struct wire_header h;
    enum wire_verdict v = wire_decode(pkt, len, &r->expect, &h);
    if (v == WIRE_OK && !(h.flags & WIRE_F_REPLY) != !r->cfg.reply_channel)
        v = WIRE_DROP_TYPE;
    size_t at = WIRE_HEADER_BYTES;
    if (v == WIRE_OK && h.type == WIRE_MULTI) { /* this rank's DATA packet: its entry and the message */
        size_t vec = wire_multi_vector_bytes(r->cfg.nranks);
        wire_multi_get((const unsigned char *)pkt + at, r->cfg.self, &h.seq, &h.dst_inc);
        h.len = (uint16_t)(h.len - vec);
        at += vec;
    }
    if (v == WIRE_OK)
        v = accept(r, &h, pkt, at, now);
    if (v == WIRE_OK)
        r->stats.received++;
    else
        r->stats.dropped[v]++;
    return v;
}

int rel_packet_is_reply(const void *pkt, size_t len)
{
    return len >= WIRE_HEADER_BYTES && (((const unsigned char *)pkt)[6] & WIRE_F_REPLY);
}

/* RTO expiry: nothing was acknowledged for an RTO.  Resend the oldest
 * unacknowledged packet, and the holes below the highest SACKed packet (a
 * retransmission that was lost again: only an ACK of something sent after
 * it could reveal that), then double the RTO.  A silent peer thus gets one
 * packet per RTO. */
static void on_rto(struct rel *r, struct peer *p, uint64_t now)
{
    uint32_t last = seq_lt(p->una, p->sack_hi) ? p->sack_hi - 1 : p->una;
    if (seq_lt(p->una - 1 + SACK_SPAN, last))
        last = p->una - 1 + SACK_SPAN;
    int sent = 0;
    r->stats.timeouts++;
    p->backoff += p->backoff < MAX_BACKOFF;
    for (uint32_t s = p->una; seq_le(s, last); s++) {
        struct tx_slot *t = &p->tx[s & (r->tx_slots - 1)];
        if (t->state == TX_INFLIGHT) {
            retransmit(r, p, t, 1, now);
            sent = 1;
        }
    }
    if (!sent) /* a peer SACKed the oldest packets, then lost them */
        retransmit(r, p, &p->tx[p->tx_head], 1, now);
    arm_rto(r, p, now);
}

static void service(struct rel *r, struct peer *p, uint64_t now)
{
    if (now >= dead_due(r, p)) {
        declare_dead(r, p, p->inc ? REL_DEAD_SILENT : REL_DEAD_UNREACHED);
        return;
    }
    if (now >= p->rto_due)
        on_rto(r, p, now);
    if (now >= p->probe_due) {
        r->stats.probes_sent++;
        p->probe_backoff += p->probe_backoff < MAX_BACKOFF;
        p->probe_due = add_sat(now, rto_of(r, p, p->probe_backoff));
        send_keepalive(r, p, now);
    }
    if (now >= p->ka_due)
        probe_liveness(r, p, now);
    if (now >= p->ack_due) { /* last: the packets above carried the ack if they went */
        r->stats.acks_sent++;
        send_packet(r, p, WIRE_ACK, 0, 0, NULL, 0);
    }
}

void rel_flush_acks(struct rel *r)
{
    for (struct peer *p = r->active; p; p = p->next_active)
        if (!p->dead && p->ack_due != REL_NEVER) {
            r->stats.acks_sent++;
            send_packet(r, p, WIRE_ACK, 0, 0, NULL, 0);
        }
}

void rel_tick(struct rel *r, uint64_t now)
{
    pool_tick(&r->pool, now);
    engine_ran(r, now);
    if (now < r->next_due)
        return;
    uint64_t next = REL_NEVER;
    for (struct peer *p = r->active; p; p = p->next_active) {
        if (!p->dead)
            service(r, p, now);
        next = min64(next, peer_deadline(r, p));
    }
    r->next_due = next;
}

uint64_t rel_next_deadline(const struct rel *r)
{
    return min64(r->next_due, pool_deadline(&r->pool));
}

int rel_recv(struct rel *r, struct rel_msg *m)
{
    if (r->cur != CUR_DATA && r->bq_len) {
        const struct bcast_msg *b = &r->bq[r->bq_head];
        *m = (struct rel_msg){.peer = b->src, .bcast = 1, .data = b->data, .len = b->len};
        r->cur = CUR_BCAST;
        return SHOAL_OK;
    }
    struct peer *p = r->ready_head;
    if (!p)
        return SHOAL_EAGAIN;
    const struct rx_slot *s = &p->rx[(p->consumed + 1) & (r->cfg.rcv_buf - 1)];
    *m = (struct rel_msg){.peer = p->rank, .data = s->data, .len = s->len};
    r->cur = CUR_DATA;
    return SHOAL_OK;
}

static void release_bcast(struct rel *r)
{
    drop_payload(r, r->bq[r->bq_head].data, r->bq[r->bq_head].taken);
    r->bq_head = (r->bq_head + 1) & (r->cfg.rcv_buf - 1);
    r->bq_len--;
}

/* Takes the head peer's oldest in-order packet; the peer goes to the back
 * of the list if it has more (round-robin).  Announces the freed room when
 * the sender may be short of credits (less than half the buffer left as
 * last advertised) and half the buffer opened since. */
static void release_data(struct rel *r, uint64_t now)
{
    struct peer *p = r->ready_head;
    struct rx_slot *s = &p->rx[++p->consumed & (r->cfg.rcv_buf - 1)];
    drop_payload(r, s->data, s->taken);
    *s = (struct rx_slot){0};
    r->ready_head = p->next_ready;
    if (!r->ready_head)
        r->ready_tail = NULL;
    p->ready = 0;
    if (p->consumed != p->rcv_ack)
        ready_push(r, p);
    uint32_t half = r->cfg.rcv_buf / 2;
    if (!p->dead && p->adv_limit - p->rcv_ack < half && p->consumed + r->cfg.rcv_buf - p->adv_limit >= half) {
        want_ack(p, now);
        note_deadline(r, p);
    }
}

void rel_release(struct rel *r, uint64_t now)
{
    if (r->cur == CUR_BCAST)
        release_bcast(r);
    else if (r->cur == CUR_DATA)
        release_data(r, now);
    else
        return;
    r->cur = CUR_NONE;
    r->stats.delivered++;
}

const struct wire_expect *rel_expect(const struct rel *r)
{
    return &r->expect;
}

const struct rel_stats *rel_stats(const struct rel *r)
{
    return &r->stats;
}

void rel_peer_info(const struct rel *r, uint32_t peer, struct rel_peer_info *info)
{
    const struct peer *p = peer < r->cfg.nranks ? r->peers[peer] : NULL;
    *info = (struct rel_peer_info){0};
    if (!p)
        return;
    *info = (struct rel_peer_info){
        .known = 1, .dead = p->dead, .incarnation = p->inc, .unacked = p->nxt - p->una,
        .held = p->rcv_ack - p->consumed + p->ooo, .srtt_ns = p->srtt, .rttvar_ns = p->rttvar,
        .rto_ns = rto_of(r, p, p->backoff)};
}
