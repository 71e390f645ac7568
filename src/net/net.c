/* The cluster transport: carrier + two reliability engines (net/net.h). */
#include "net/net.h"
#include "boot/boot.h"
#include "net/eth.h"
#include "net/faults.h"
#include "net/pool.h"
#include "net/rel.h"
#include "net/sock.h"
#include "net/udp.h"
#include "net/wire.h"
#include "util/stages.h"
#include "util/util.h"
#include "shoal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* What each rank publishes at start-up. */
struct net_addr {
    uint64_t secret[2];   /* random; rank 0's becomes the job's MAC key (it travels only through the launcher) */
    uint32_t incarnation;
    uint32_t max_payload; /* what its carrier's MTU allows */
    uint8_t has_eth;      /* it opened a raw socket */
    uint8_t mac[6];
    uint8_t pad;
    struct udp_endpoint udp;
    uint8_t bcast[4];     /* its interface's IPv4 broadcast address, or 0.0.0.0 */
    char ifname[16];      /* that interface, for messages */
};

enum carrier { CARRIER_UDP, CARRIER_ETH };

#define NET_BATCH SOCK_BATCH
#define NET_SPARE (2 * NET_BATCH) /* receive buffers kept for reuse; more go back to the allocator */
#define NET_DELIVER_BATCH 64u    /* messages per net_poll, so shm peers are not starved */
#define NET_LINGER_NS 1000000000ull
/* Bytes in flight to one peer: far above any LAN's bandwidth-delay product
 * (100 Gb/s for 80 us), and few enough that the packets in flight stay in
 * the caches of sender and receiver.  With 64 KB loopback packets, 1 MiB
 * (16 packets) streamed 4.8 GB/s where 8 MiB (128) streamed 3.7-4.3.
 * Small packets get the engines' whole window of 256. */
#define NET_WINDOW_BYTES (1u << 20)
#define NET_SEND_RX_NS 50000ull /* a send receives first when nothing was received for this long */
#define NET_THREAD_TICK_NS 10000000ull /* how often the progress thread looks */
#define NET_THREAD_AFTER_NS 5000000ull /* how long the application must be away first */

/* A receive buffer of several packets the engines hold some of
 * (engine_take): it goes back to the pool when the last is given back. */
struct net_lent {
    unsigned char *base;
    unsigned refs;
};
#define NET_LENT_MAX 64u

static int net_bcast_native(void);

static struct {
    int active;
    enum carrier carrier;
    int rank, nranks;
    struct udp_sock udp;
    struct udp_sock ubcast;       /* udp: the broadcast receiver, fd -1 if the job has none */
    int listening;                /* callers inside a collective that wait for broadcasts (ubcast is read) */
    unsigned bcast_turn;          /* receives since ubcast was last read outside a collective */
    int bcast_woke;               /* net_wait woke for ubcast: the next receive reads it */
    int waitset;                  /* epoll set of udp and ubcast, -1 without ubcast (net_wait_fd) */
    int bcast_native;             /* a broadcast is one packet (eth, or ubcast open), SHOAL_NET_BCAST 1 or 2 */
    struct eth_sock eth;
    struct net_addr *peers;
    struct udp_conn *conns;       /* per rank: the socket connected to it (udp) */
    int conns_left;               /* connected sockets still to be opened (SHOAL_NET_CONNECTED) */
    uint64_t last_rx;             /* when receive_batch last ran */
    int sockbuf;
    struct rel *rel[2];
    struct wire_key key;          /* the job's secret, which the engines tag packets with */
    struct faults fsend, frecv;
    int faulty;
    tp_deliver_fn deliver;
    size_t max_payload, pkt_cap;
    int gro;                      /* udp: the kernel may coalesce received datagrams (udp_gro_enable) */
    size_t rx_cap;                /* bytes per receive buffer: pkt_cap, or UDP_GRO_BYTES with gro */
    unsigned char *txbuf;         /* NET_BATCH packets of pkt_cap each */
    struct sock_rx rx;            /* receive headers over rx.n buffers of rx_cap bytes, described once */
    int rx_cur;                   /* the entry of rx whose packets the engines have, or -1 */
    const unsigned char *rx_base; /* its buffer (the entry may get a fresh one meanwhile) */
    size_t rx_fill;               /* bytes received into it */
    int rx_lent;                  /* its index in lent once the engines hold a packet of it, else -1 */
    struct net_lent lent[NET_LENT_MAX];
    unsigned nlent;
    struct pkt_pool spare;        /* receive buffers the engines gave back, for the next take */
    const void *txref[NET_BATCH]; /* a queued datagram referenced in place, or NULL: in txbuf */
    size_t txlen[NET_BATCH];
    uint32_t txdst[NET_BATCH];
    const void *xmit_stable;      /* the stable packet the send-side fault injector has */
    unsigned ntx;
    uint64_t now; /* time of the current net_poll, for the callbacks */
    unsigned polling; /* net_poll is running (nested: a handler waiting for room polls) */
    uint64_t accepted; /* packets the engines took */
    int closing;
    struct tp_stats stats;
    int thread_on;
    pthread_t thread;
    pthread_mutex_t lock;
    _Atomic int thread_stop;
    _Atomic uint64_t attended_until; /* the progress thread stays out until then */
} net = {.udp = {.fd = -1}, .ubcast = {.fd = -1}, .eth = {.fd = -1}, .waitset = -1};

/* ---- sending ------------------------------------------------------------ */

/* The datagram queued in batch slot i: referenced, or copied into the slot. */
static const void *tx_packet(unsigned i)
{
    return net.txref[i] ? net.txref[i] : net.txbuf + i * net.pkt_cap;
}

/* The socket connected to peer d, opened on the first send to it while
 * SHOAL_NET_CONNECTED allows; NULL: send from the receiving socket. */
static const struct udp_conn *connection_to(uint32_t d)
{
    struct udp_conn *c = &net.conns[d];
    if (c->fd < 0 && !c->tried) {
        if (net.conns_left == 0)
            return NULL;
        net.conns_left--;
    }
    return udp_conn_get(c, &net.udp, &net.peers[d].udp, net.sockbuf);
}

static void flush_tx(void)
{
    unsigned n = net.ntx, sent;
    if (!n)
        return;
    UTIL_STAGE(UTIL_STAGE_FLUSH);
    net.ntx = 0;
    if (net.carrier == CARRIER_ETH) {
        struct eth_frame f[NET_BATCH];
        for (unsigned i = 0; i < n; i++) {
            f[i] = (struct eth_frame){.buf = tx_packet(i), .len = net.txlen[i]};
            memcpy(f[i].peer.mac, net.txdst[i] == WIRE_BROADCAST ? eth_broadcast.mac : net.peers[net.txdst[i]].mac, 6);
        }
        int rc = eth_send(&net.eth, f, n);
        sent = rc < 0 ? 0 : (unsigned)rc;
    } else {
        struct udp_packet p[NET_BATCH];
        for (unsigned i = 0; i < n; i++) {
            uint32_t d = net.txdst[i];
            int all = d == WIRE_BROADCAST; /* to the broadcast receivers' address */
            p[i] = (struct udp_packet){.buf = tx_packet(i), .len = net.txlen[i],
                                       .peer = all ? net.ubcast.self : net.peers[d].udp,
                                       .conn = all ? NULL : connection_to(d)};
        }
        int rc = udp_send(&net.udp, p, n);
        sent = rc < 0 ? 0 : (unsigned)rc;
    }
    /* what the kernel did not take is lost; the engines resend it */
    net.stats.send_overflows += n - sent;
    net.stats.packets_sent += sent;
    net.stats.send_batches++;
}

/* Packets up to this size are copied into the batch even when they could
 * be referenced: copying them costs less than touching the engine's copy
 * again when the batch goes out. */
#define NET_COPY_MAX 1024u

/* Queues one datagram: referenced when it stays valid until the batch is
 * flushed (an engine's stored DATA packet: engine_input and run_timers
 * flush before an engine can free one), else copied. */
static void queue_one(uint32_t dst, const void *pkt, size_t len, int stable)
{
    if (net.ntx == NET_BATCH)
        flush_tx();
    int ref = stable && len > NET_COPY_MAX;
    if (!ref)
        memcpy(net.txbuf + net.ntx * net.pkt_cap, pkt, len);
    net.txref[net.ntx] = ref ? pkt : NULL;
    net.txlen[net.ntx] = len;
    net.txdst[net.ntx++] = dst;
    net.stats.bytes_sent += len;
}

/* A raw frame to ff:ff:ff:ff:ff:ff, or a datagram to the subnet's
 * broadcast address, reaches every rank at once; without either a
 * broadcast is one datagram per peer. */
static void queue_packet(uint32_t dst, const void *pkt, size_t len, int stable)
{
    if (dst != WIRE_BROADCAST || net_bcast_native()) {
        queue_one(dst, pkt, len, stable);
        return;
    }
    for (int r = 0; r < net.nranks; r++)
        if (r != net.rank)
            queue_one((uint32_t)r, pkt, len, stable);
}

/* A packet the send-side fault injector releases: the engine's own (stable
 * when the engine said so) when it passes straight through, else the
 * injector's copy, which is gone after this call. */
static void queue_faulted(void *ctx, uint32_t dst, const void *pkt, size_t len)
{
    (void)ctx;
    queue_packet(dst, pkt, len, pkt == net.xmit_stable);
}

static void engine_xmit(void *ctx, uint32_t dst, const void *pkt, size_t len, int stable)
{
    if (!net.faulty) {
        queue_packet(dst, pkt, len, stable);
        return;
    }
    net.xmit_stable = stable ? pkt : NULL;
    fault_pass(&net.fsend, net.now, dst, pkt, len, queue_faulted, ctx);
    net.xmit_stable = NULL;
}

static const char *net_carrier(void);
static void net_get_stats(struct tp_stats *out);

/* Where rank's packets go, as it published it: "10.0.0.2:4000 on eth0". */
static const char *where(uint32_t rank, char *buf, size_t cap)
{
    const struct net_addr *a = &net.peers[rank];
    char ep[64];
    if (net.carrier == CARRIER_ETH)
        snprintf(buf, cap, "%02x:%02x:%02x:%02x:%02x:%02x on %.16s", a->mac[0], a->mac[1], a->mac[2], a->mac[3],
                 a->mac[4], a->mac[5], a->ifname[0] ? a->ifname : "?");
    else
        snprintf(buf, cap, "%s on %.16s", udp_endpoint_str(&a->udp, ep, sizeof ep), a->ifname[0] ? a->ifname : "?");
    return buf;
}

static void engine_peer_dead(void *ctx, uint32_t peer, enum rel_dead_reason why)
{
    (void)ctx;
    if (net.closing)
        return; /* it finished the job with us and left */
    if (why == REL_DEAD_RESTARTED)
        util_peer_fatal((int)peer, "peer rank %u restarted (a new incarnation) during the job", peer);
    if (why == REL_DEAD_UNREACHED) {
        char mine[96], theirs[96];
        util_peer_fatal((int)peer,
                        "peer rank %u was never reached over %s at %s: no packet from it in %lld ms "
                        "(this rank uses %s); set SHOAL_IFACE to a network that joins both",
                        peer, net_carrier(), where(peer, theirs, sizeof theirs), util_config_int(CFG_NET_DEAD_MS),
                        where(net.rank, mine, sizeof mine));
    }
    util_peer_fatal((int)peer, "peer rank %u stopped answering over %s (no packet for %lld ms, SHOAL_NET_DEAD_MS)",
               peer, net_carrier(), util_config_int(CFG_NET_DEAD_MS));
}

/* The engines are not thread-safe: the progress thread and the
 * application take this (recursive: handlers run from net_poll send). */
static void lock(void)
{
    if (net.thread_on)
        pthread_mutex_lock(&net.lock);
}

static void unlock(void)
{
    if (net.thread_on)
        pthread_mutex_unlock(&net.lock);
}

/* The application attends to the transport until t: the thread stays out. */
static void attended_until(uint64_t t)
{
    atomic_store_explicit(&net.attended_until, t, memory_order_relaxed);
}

static void receive_batch(void);
static uint64_t net_idle_ns(void);

/* Before a send (the lock held): the time, and what arrived. */
static void send_prologue(void)
{
    /* a handler's reply takes the time of the poll that runs it: handlers
     * are short, and a clock read is a tenth of what sending a short
     * reply costs in user space */
    if (!net.polling)
        net.now = util_now_ns();
    /* A sender streaming large packets reads no ACKs until its window
     * fills; the acknowledgements its packets carry for the peer's replies
     * then grow so old that the peer's retransmission timer fires.  Taking
     * in what arrived (without running handlers) keeps them fresh. */
    if (net.now - net.last_rx > NET_SEND_RX_NS)
        receive_batch();
}

static int net_send(int dest, enum tp_channel ch, const void *head, size_t hlen, const void *body, size_t blen)
{
    UTIL_STAGE(UTIL_STAGE_SEND);
    lock();
    send_prologue();
    UTIL_STAGE(UTIL_STAGE_ENCODE);
    int rc = rel_send2(net.rel[ch], (uint32_t)dest, head, hlen, body, blen, net.now);
    unlock();
    return rc;
}

/* One MULTI packet (rel_send_all) where a broadcast is one packet. */
static int net_send_all(enum tp_channel ch, const void *head, size_t hlen, const void *body, size_t blen)
{
    if (!net_bcast_native())
        return SHOAL_EINVAL;
    lock();
    send_prologue();
    int rc = rel_send_all(net.rel[ch], head, hlen, body, blen, net.now);
    unlock();
    return rc;
}

static uint32_t net_room(int dest, enum tp_channel ch)
{
    lock();
    uint32_t room = rel_room(net.rel[ch], (uint32_t)dest);
    unlock();
    return room;
}

static int net_bcast(const void *head, size_t hlen, const void *body, size_t blen)
{
    lock();
    net.now = util_now_ns();
    int rc = rel_bcast(net.rel[TP_REQUEST], head, hlen, body, blen);
    unlock();
    return rc;
}

/* What handlers send leaves when their poll ends, all in one batch: a
 * poll that runs many requests' handlers sends their replies together. */
static void net_flush(void)
{
    lock();
    if (!net.polling)
        flush_tx();
    unlock();
}

/* ---- receiving ---------------------------------------------------------- */

static void count_drop(enum wire_verdict v)
{
    net.stats.dropped++;
    switch (v) {
    case WIRE_DROP_MAGIC: case WIRE_DROP_VERSION: case WIRE_DROP_JOB: case WIRE_DROP_AUTH:
        net.stats.dropped_foreign++;
        break;
    case WIRE_DROP_SHORT: case WIRE_DROP_LENGTH: case WIRE_DROP_CHECKSUM: case WIRE_DROP_TYPE: case WIRE_DROP_RANK:
        net.stats.dropped_malformed++;
        break;
    default:
        break;
    }
}

/* ---- receive buffers handed to the engines ----------------------------- */

/* An engine keeps the packet it is given (io.take), so that its payload
 * is copied only once, by the AM layer, when the receive filled at least a
 * quarter of its buffer (one large packet, or several the kernel
 * coalesced); a buffer holding less is cheaper to copy out of than to
 * hold.  A packet cut from a coalesced buffer is kept only if its payload
 * is 64-byte aligned, as the engines promise for payloads of 256 bytes or
 * more.  The receive batch's entry gets a fresh buffer at the first packet
 * kept.  A buffer that is one packet goes back to the pool when it is
 * given back; one of several is counted in net.lent (at most NET_LENT_MAX
 * of them: a packet's giving back searches it) and goes back with its
 * last.  Only packets in the buffer being handed over qualify (the fault
 * injector passes its own copies). */
static int engine_take(void *ctx, const void *pkt, size_t len)
{
    (void)ctx;
    const unsigned char *p = pkt;
    if (net.rx_cur < 0 || p < net.rx_base || p >= net.rx_base + net.rx_fill || 4 * net.rx_fill < net.rx_cap ||
        (p != net.rx_base && ((uintptr_t)p % 64 || len < WIRE_HEADER_BYTES + 256)))
        return 0;
    int alone = p == net.rx_base && len == net.rx_fill;
    if (net.rx_lent < 0) {
        void *fresh = alone || net.nlent < NET_LENT_MAX ? pool_take(&net.spare) : NULL;
        if (!fresh)
            return 0;
        sock_rx_set(&net.rx, (unsigned)net.rx_cur, fresh, net.rx_cap);
        if (alone)
            return 1;
        net.rx_lent = (int)net.nlent;
        net.lent[net.nlent++] = (struct net_lent){(unsigned char *)net.rx_base, 0};
    }
    net.lent[net.rx_lent].refs++;
    return 1;
}

/* Lent buffer i goes back to the pool when nothing in it is held any
 * more and it is not the one being handed over. */
static void lent_settle(unsigned i)
{
    if (net.lent[i].refs || (int)i == net.rx_lent)
        return;
    pool_give(&net.spare, net.lent[i].base);
    net.lent[i] = net.lent[--net.nlent];
    if (net.rx_lent == (int)net.nlent) /* the moved entry */
        net.rx_lent = (int)i;
}

static void engine_give_back(void *ctx, void *pkt)
{
    (void)ctx;
    unsigned char *p = pkt;
    unsigned i = 0;
    while (i < net.nlent && (p < net.lent[i].base || p >= net.lent[i].base + net.rx_cap))
        i++;
    if (i == net.nlent) { /* a buffer that was this one packet */
        pool_give(&net.spare, p);
        return;
    }
    net.lent[i].refs--;
    lent_settle(i);
}

static void engine_input(void *ctx, uint32_t src, const void *pkt, size_t len)
{
    (void)ctx, (void)src;
    flush_tx(); /* queued packets may point at payloads an ACK here frees */
    enum wire_verdict v = rel_input(net.rel[rel_packet_is_reply(pkt, len)], pkt, len, net.now);
    UTIL_STAGE(UTIL_STAGE_ACCEPTED);
    if (v != WIRE_OK)
        count_drop(v);
    else
        net.accepted++;
}

/* The source rank a packet claims (fault streams are per address). */
static uint32_t claimed_src(const unsigned char *pkt, size_t len)
{
    uint32_t src = 0;
    if (len >= WIRE_HEADER_BYTES)
        memcpy(&src, pkt + WIRE_OFF_SRC, 4);
    return src;
}

/* Whether this receive reads the broadcast receiver: in every one while a
 * collective waits for a broadcast, after a wait the receiver woke, and
 * when a unicast packet came beyond a hole (a broadcast sent before it may
 * hold its sender's missing sequence number: read in the same batch, it
 * fills the hole before an ACK reports one); else in one of
 * NET_BCAST_EVERY, so that a poll does not pay a second system call every
 * time (a unicast ping-pong: one in NET_BCAST_EVERY polls). */
#define NET_BCAST_EVERY 8u
#define NET_DRAIN_MAX 8 /* receive batches that empty the broadcast socket */
static int reading_bcast(int hole)
{
    int woke = net.bcast_woke;
    net.bcast_woke = 0;
    return net.ubcast.fd >= 0 && (net.listening || hole || woke || ++net.bcast_turn % NET_BCAST_EVERY == 0);
}

/* DATA packets the engines took beyond a hole so far. */
static uint64_t net_holes(void)
{
    return rel_stats(net.rel[0])->out_of_order + rel_stats(net.rel[1])->out_of_order;
}

static void take_packet(const unsigned char *pkt, size_t len)
{
    net.stats.packets_received++;
    net.stats.bytes_received += len;
    if (net.faulty)
        fault_pass(&net.frecv, net.now, claimed_src(pkt, len), pkt, len, engine_input, NULL);
    else
        engine_input(NULL, 0, pkt, len);
}

/* Where the datagrams in a buffer of n bytes begin, when a single receive
 * took no control message (seg 0, udp.h): a coalesced run's datagrams are
 * all as long as its first, and a first datagram the job's tag
 * authenticates says how long it is; otherwise (one datagram, or someone
 * else's) the buffer is one piece, one verdict. */
static size_t segment_unknown(const unsigned char *buf, size_t n)
{
    size_t first = wire_packet_bytes(buf, n);
    struct wire_header h;
    return first < n && wire_decode(buf, first, rel_expect(net.rel[0]), &h) == WIRE_OK ? first : n;
}

/* Hands the packets of one receive (got buffers, len bytes each) to the
 * engines.  Over UDP with net.gro a buffer may hold several datagrams the
 * kernel coalesced: it is cut every seg bytes, where the kernel says its
 * datagrams begin (or segment_unknown), never where an unauthenticated
 * length field points, so a datagram is one packet whatever it holds (seg
 * NULL: every buffer is one).  The engines may keep packets of it
 * (engine_take). */
static void take_received(int got, const size_t *len, const size_t *seg)
{
    for (int i = 0; i < got; i++) {
        const unsigned char *buf = net.rx.iov[i].iov_base;
        size_t at = 0, n = len[i];
        size_t cut = !seg ? n : seg[i] ? seg[i] : segment_unknown(buf, n);
        net.rx_cur = i;
        net.rx_base = buf;
        net.rx_fill = n;
        net.rx_lent = -1;
        net.stats.rx_coalesced += cut < n;
        do {
            size_t one = cut < n - at ? cut : n - at;
            take_packet(buf + at, one);
            at += one;
        } while (at < n);
        int lent = net.rx_lent;
        net.rx_lent = -1;
        if (lent >= 0)
            lent_settle((unsigned)lent);
    }
    net.rx_cur = -1;
}

/* n frames the receive ring spilled: the next n datagrams in the socket,
 * read into the receive buffers, which an engine may keep as it keeps a
 * recvmmsg's; how many were read. */
static unsigned take_spilled(unsigned n)
{
    size_t len[NET_BATCH];
    int got = eth_recv_spilled(&net.eth, &net.rx, n, len);
    take_received(got, len, NULL);
    return got > 0 ? (unsigned)got : 0;
}

/* Receives from s until it is empty (at most NET_DRAIN_MAX batches), and
 * says how many packets came.  A rank's broadcasts and unicast packets
 * take turns in its sequence numbers but arrive in two sockets: what one
 * poll reads of them must be all that arrived, or its ACKs report holes
 * that are only datagrams left in a socket, and their senders resend them
 * (a single receive reads one datagram). */
static int drain(struct udp_sock *s, size_t *len, size_t *seg)
{
    int got, all = 0, i = 0;
    do { /* until a receive takes less than it asked for (rx.batch 0) */
        got = udp_recv_batch(s, &net.rx, len, seg, NULL);
        take_received(got, len, seg);
        all += got > 0 ? got : 0;
    } while (net.rx.batch && ++i < NET_DRAIN_MAX);
    return all;
}

static void receive_batch(void)
{
    size_t len[NET_BATCH], seg[NET_BATCH];
    net.last_rx = net.now;
    if (net.carrier == CARRIER_ETH) {
        /* a packet read in the ring is copied by the engine that keeps it
         * (engine_take refuses it: rx_cur is -1), as its frame goes back at once */
        if (net.eth.ring.map)
            eth_ring_walk(&net.eth, NET_BATCH, take_packet, take_spilled, net.rx.n);
        else
            take_received(eth_recv_batch(&net.eth, &net.rx, len, NULL), len, NULL);
        return;
    }
    uint64_t holes = net_holes();
    take_received(udp_recv_batch(&net.udp, &net.rx, len, seg, NULL), len, seg);
    /* broadcasts taken, what their senders sent before them is taken too
     * (the kernel queued it earlier), and then the broadcasts sent after
     * that, which were interleaved with it */
    if (reading_bcast(net_holes() != holes) && drain(&net.ubcast, len, seg) && drain(&net.udp, len, seg))
        drain(&net.ubcast, len, seg);
}

static uint64_t next_deadline(void)
{
    uint64_t t = rel_next_deadline(net.rel[0]), t1 = rel_next_deadline(net.rel[1]), t2 = pool_deadline(&net.spare);
    t = t1 < t ? t1 : t;
    t = t2 < t ? t2 : t;
    if (net.faulty) {
        uint64_t a = fault_next_deadline(&net.fsend), b = fault_next_deadline(&net.frecv);
        t = a < t ? a : t;
        t = b < t ? b : t;
    }
    return t;
}

static void run_timers(void)
{
    if (net.now < next_deadline())
        return;
    if (net.faulty) {
        fault_flush(&net.frecv, net.now, engine_input, NULL);
        fault_flush(&net.fsend, net.now, queue_faulted, NULL);
    }
    flush_tx(); /* queued packets may point at what a peer declared dead frees */
    rel_tick(net.rel[0], net.now);
    rel_tick(net.rel[1], net.now);
    pool_tick(&net.spare, net.now);
}

static unsigned deliver_from(struct rel *r, enum tp_channel ch, unsigned budget)
{
    unsigned done = 0;
    struct rel_msg m;
    while (done < budget && rel_recv(r, &m) == SHOAL_OK) {
        struct tp_msg nm = {.peer = m.peer, .channel = ch, .bcast = m.bcast, .data = m.data, .len = m.len};
        UTIL_STAGE(UTIL_STAGE_HANDLER);
        net.deliver(&nm);
        rel_release(r, net.now);
        done++;
    }
    return done;
}

static unsigned net_poll(int replies_only)
{
    lock();
    net.now = util_now_ns();
    net.polling++;
    attended_until(net.now + NET_THREAD_AFTER_NS);
    uint64_t accepted = net.accepted;
    receive_batch();
    run_timers();
    /* a packet dropped (another job's, a frame of this rank looped back on
     * lo, a duplicate) is not news: counted, it would keep a waiter from
     * backing off for as long as someone else's traffic lasts */
    unsigned done = (unsigned)(net.accepted - accepted);
    done += deliver_from(net.rel[TP_REPLY], TP_REPLY, NET_DELIVER_BATCH);
    if (!replies_only)
        done += deliver_from(net.rel[TP_REQUEST], TP_REQUEST, NET_DELIVER_BATCH);
    flush_tx();
    net.polling--;
    unlock();
    return done;
}

static void net_wait(uint64_t max_ns)
{
    lock();
    flush_tx();
    uint64_t ns = net_idle_ns();
    ns = ns < max_ns ? ns : max_ns;
    /* a packet the thread took would not wake this sleep */
    attended_until(util_now_ns() + ns + NET_THREAD_AFTER_NS);
    unlock();
    struct pollfd pfd[2] = {{.fd = net.carrier == CARRIER_ETH ? net.eth.fd : net.udp.fd, .events = POLLIN},
                            {.fd = net.ubcast.fd, .events = POLLIN}};
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    if (ppoll(pfd, net.ubcast.fd >= 0 ? 2 : 1, &ts, NULL) > 0 && (pfd[1].revents & POLLIN)) {
        lock();
        net.bcast_woke = 1; /* the next receive reads it */
        unlock();
    }
}

/* Both sockets (an epoll set) when the job has a broadcast receiver. */
static int net_wait_fd(void)
{
    if (net.waitset >= 0)
        return net.waitset;
    return net.carrier == CARRIER_ETH ? net.eth.fd : net.udp.fd;
}

static const char *net_describe(char *buf, size_t cap)
{
    char ep[64];
    if (net.carrier == CARRIER_ETH)
        snprintf(buf, cap, "eth %s %02x:%02x:%02x:%02x:%02x:%02x%s", net.udp.ifname, net.eth.self.mac[0],
                 net.eth.self.mac[1], net.eth.self.mac[2], net.eth.self.mac[3], net.eth.self.mac[4],
                 net.eth.self.mac[5], net.eth.ring.map ? ", receive ring" : "");
    else if (net.ubcast.fd < 0)
        snprintf(buf, cap, "udp %s", udp_endpoint_str(&net.udp.self, ep, sizeof ep));
    else {
        char bc[64];
        snprintf(buf, cap, "udp %s, broadcast %s", udp_endpoint_str(&net.udp.self, ep, sizeof ep),
                 udp_endpoint_str(&net.ubcast.self, bc, sizeof bc));
    }
    return buf;
}

/* ---- the progress thread ----------------------------------------------- */

/* While the application computes, the engines still receive, acknowledge,
 * retransmit and answer keepalives: every NET_THREAD_TICK_NS the thread
 * looks, and works only if the application has not for NET_THREAD_AFTER_NS.
 * It never runs handlers: messages wait for the application's next poll
 * (and hold their credits meanwhile, which pushes back on senders). */

static void *progress_main(void *arg)
{
    (void)arg;
    struct timespec tick = {.tv_sec = 0, .tv_nsec = (long)NET_THREAD_TICK_NS};
    while (!atomic_load_explicit(&net.thread_stop, memory_order_acquire)) {
        nanosleep(&tick, NULL);
        uint64_t now = util_now_ns();
        if (now < atomic_load_explicit(&net.attended_until, memory_order_relaxed) ||
            pthread_mutex_trylock(&net.lock) != 0)
            continue;
        net.now = now;
        receive_batch();
        run_timers();
        flush_tx();
        net.stats.thread_runs++;
        pthread_mutex_unlock(&net.lock);
    }
    return NULL;
}

static int start_thread(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&net.lock, &a);
    pthread_mutexattr_destroy(&a);
    net.thread_on = 1;
    int err = pthread_create(&net.thread, NULL, progress_main, NULL);
    if (err) {
        LOG(LOG_ERROR, "cannot start the transport's progress thread: %s", strerror(err));
        net.thread_on = 0;
        pthread_mutex_destroy(&net.lock);
        return SHOAL_ESYS;
    }
    return SHOAL_OK;
}

static void stop_thread(void)
{
    if (!net.thread_on)
        return;
    atomic_store_explicit(&net.thread_stop, 1, memory_order_release);
    pthread_join(net.thread, NULL);
    net.thread_on = 0;
    pthread_mutex_destroy(&net.lock);
}

static uint64_t net_idle_ns(void)
{
    uint64_t t = next_deadline(), now = util_now_ns(), cap = 100000000ull;
    return t <= now ? 0 : t - now < cap ? t - now : cap;
}

/* ---- start-up and shut-down --------------------------------------------- */

static uint32_t new_incarnation(void)
{
    /* milliseconds of wall-clock time: a restarted rank's is larger (serial
     * comparison, so it wraps after 24 days without harm) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t inc = (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
    return inc ? inc : 1;
}

/* Largest payload a packet of the carrier's MTU carries. */
static uint32_t payload_for_mtu(unsigned mtu, unsigned ip_udp_overhead)
{
    long p = (long)mtu - (long)ip_udp_overhead - (long)WIRE_HEADER_BYTES;
    if (p > (long)WIRE_MAX_PAYLOAD)
        p = WIRE_MAX_PAYLOAD;
    return p < 256 ? 256u : (uint32_t)p;
}

static int open_carriers(const char *transport, struct net_addr *me)
{
    uint16_t lo = 0, hi = 0;
    util_port_range(util_config_str(CFG_PORT_RANGE), &lo, &hi);
    int sockbuf = net.sockbuf = (int)util_config_int(CFG_NET_SOCKBUF);
    const char *iface = util_config_str(CFG_IFACE);
    /* every rank has a UDP socket: it is the fallback every rank can take */
    int rc = udp_open(&net.udp, iface, lo, hi, sockbuf);
    if (rc)
        return rc;
    if (util_config_int(CFG_NET_GSO) == 1 && udp_gso_enable(&net.udp))
        net.gro = udp_gro_enable(&net.udp);
    me->udp = net.udp.self;
    memcpy(me->ifname, net.udp.ifname, sizeof me->ifname);
    memcpy(me->bcast, net.udp.bcast, 4);
    me->max_payload = payload_for_mtu(net.udp.mtu, net.udp.self.family == 4 ? 28 : 48);
    if (strcmp(transport, "eth") == 0) {
        const char *name = iface[0] ? iface : net.udp.ifname;
        const char *ring = util_config_str(CFG_ETH_RING);
        rc = eth_open(&net.eth, name, sockbuf,
                      strcmp(ring, "auto") == 0 ? ETH_RING_AUTO : strcmp(ring, "1") == 0 ? ETH_RING_ON : ETH_RING_OFF);
        if (rc == SHOAL_OK) {
            me->has_eth = 1;
            memcpy(me->mac, net.eth.self.mac, 6);
            uint32_t p = payload_for_mtu(net.eth.mtu, 0);
            me->max_payload = p < me->max_payload ? p : me->max_payload;
        } else if (rc != SHOAL_EACCES) {
            return rc;
        }
    }
    return SHOAL_OK;
}

static int start_engines(uint64_t job_id, const struct net_addr *me)
{
    struct rel_config c;
    rel_config_default(&c);
    c.self = (uint32_t)net.rank;
    c.nranks = (uint32_t)net.nranks;
    c.job = job_id;
    if (wire_key_init(&net.key, net.peers[0].secret[0], net.peers[0].secret[1],
                      strcmp(util_config_str(CFG_NET_AUTH), "header") == 0) != SHOAL_OK)
        return SHOAL_ENOMEM;
    c.key = net.key;
    c.incarnation = me->incarnation;
    c.max_payload = (uint32_t)net.max_payload;
    c.dead_after_ns = (uint64_t)util_config_int(CFG_NET_DEAD_MS) * 1000000ull;
    c.keepalive_ns = c.dead_after_ns / 6;
    /* the bytes in flight to one peer should fit the socket buffers, and
     * NET_WINDOW_BYTES; the packets, the whole window, however small */
    uint64_t bytes = (uint64_t)util_config_int(CFG_NET_SOCKBUF);
    c.window_bytes = bytes < NET_WINDOW_BYTES ? bytes : NET_WINDOW_BYTES;
    struct util_fault_spec fc;
    util_fault_parse(util_config_str(CFG_FAULTS), &fc, NULL, 0); /* validated when the config loaded */
    net.faulty = fault_active(&fc);
    c.need_checksum = net.carrier == CARRIER_ETH || fc.corrupt > 0;
    fault_init(&net.fsend, &fc, 2ull * (uint64_t)net.rank);
    fault_init(&net.frecv, &fc, 2ull * (uint64_t)net.rank + 1);
    static const struct rel_io io = {.xmit = engine_xmit, .peer_dead = engine_peer_dead, .take = engine_take,
                                     .give_back = engine_give_back};
    int rc = SHOAL_OK;
    for (int ch = 0; ch < 2 && rc == SHOAL_OK; ch++) {
        c.reply_channel = ch;
        rc = rel_create(&net.rel[ch], &c, &io, NULL);
    }
    if (rc == SHOAL_OK)
        rel_link(net.rel[TP_REQUEST], net.rel[TP_REPLY]);
    return rc;
}

/* A thread that sleeps on one descriptor (net_wait_fd) wakes for either
 * socket.  Without the set it wakes for unicast only, and a broadcast
 * waits for its next poll. */
static void open_waitset(void)
{
    int fds[2] = {net.udp.fd, net.ubcast.fd};
    net.waitset = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < 2 && net.waitset >= 0; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(net.waitset, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
            close(net.waitset);
            net.waitset = -1;
        }
    }
}

/* UDP broadcast, where the network allows it: when every rank's interface
 * has the same IPv4 broadcast address, each binds a receiver to it at rank
 * 0's port, and the job uses them only if every rank succeeded (a second
 * allgather; every rank sees the same table, so all take it or none). */
static int open_udp_bcast(void)
{
    static const uint8_t none[4];
    const uint8_t *b = net.peers[0].bcast;
    /* loopback's (127.255.255.255) only when asked for: one host's tests */
    long long want = util_config_int(CFG_NET_BCAST);
    int same = memcmp(b, none, 4) != 0 && (want == 2 || (want == 1 && b[0] != 127));
    for (int r = 1; r < net.nranks && same; r++)
        same = net.peers[r].udp.family == 4 && memcmp(net.peers[r].bcast, b, 4) == 0;
    if (!same)
        return SHOAL_OK;
    uint8_t ok = udp_bcast_open(&net.ubcast, &net.udp, net.peers[0].udp.port, net.sockbuf) == SHOAL_OK;
    uint8_t *all = malloc((size_t)net.nranks);
    if (!all)
        return SHOAL_ENOMEM;
    int rc = boot_allgather(&ok, 1, all);
    for (int r = 0; r < net.nranks && ok; r++)
        ok = all[r];
    free(all);
    if (!ok) {
        udp_close(&net.ubcast);
        if (net.rank == 0)
            LOG(LOG_INFO, "not every rank could receive UDP broadcasts: collectives use reliable messages");
    }
    if (net.ubcast.fd >= 0)
        open_waitset();
    return rc;
}

static int net_init(const struct tp_init *in)
{
    int rank = in->rank, nranks = in->nranks;
    uint64_t job_id = in->job_id;
    const char *transport = in->name;
    net.rank = rank;
    net.nranks = nranks;
    net.deliver = in->deliver;
    struct net_addr me = {.incarnation = new_incarnation()};
    int rc = SHOAL_OK;
    if (getrandom(me.secret, sizeof me.secret, 0) != sizeof me.secret) {
        LOG(LOG_ERROR, "no random numbers for the job's secret (getrandom: %s)", strerror(errno));
        rc = SHOAL_ESYS;
    }
    if (rc == SHOAL_OK)
        rc = open_carriers(transport, &me);
    /* everyone joins the exchange, so a rank that failed does not hang the
     * rest: its entry says so and all fail alike */
    if (rc)
        me.max_payload = 0;
    net.peers = calloc((size_t)nranks, sizeof *net.peers);
    net.conns = malloc((size_t)nranks * sizeof *net.conns);
    if (!net.peers || !net.conns)
        util_fatal("out of memory for the table of %d peer addresses", nranks);
    for (int r = 0; r < nranks; r++)
        net.conns[r] = (struct udp_conn){.fd = -1};
    net.conns_left = (int)util_config_int(CFG_NET_CONNECTED);
    int xrc = boot_allgather(&me, sizeof me, net.peers);
    if (rc || xrc)
        return rc ? rc : xrc;
    int all_eth = 1;
    net.max_payload = WIRE_MAX_PAYLOAD;
    for (int r = 0; r < nranks; r++) {
        if (!net.peers[r].max_payload) {
            LOG(LOG_ERROR, "rank %d could not open its %s socket", r, transport);
            return SHOAL_EBOOT;
        }
        all_eth &= net.peers[r].has_eth;
        if (net.peers[r].max_payload < net.max_payload)
            net.max_payload = net.peers[r].max_payload;
    }
    net.carrier = all_eth && strcmp(transport, "eth") == 0 ? CARRIER_ETH : CARRIER_UDP;
    if (strcmp(transport, "eth") == 0 && !all_eth && rank == 0)
        util_log(LOG_WARN, "SHOAL_TRANSPORT=eth needs CAP_NET_RAW on every rank; using udp");
    if (net.carrier == CARRIER_UDP) {
        eth_close(&net.eth);
        if ((rc = open_udp_bcast()) != SHOAL_OK)
            return rc;
    } else {
        eth_drop_own(&net.eth, job_id, (uint32_t)rank);
        net.gro = 0;
    }
    net.pkt_cap = net.max_payload + WIRE_HEADER_BYTES;
    net.rx_cap = net.gro && net.pkt_cap < UDP_GRO_BYTES ? UDP_GRO_BYTES : net.pkt_cap;
    net.txbuf = malloc(NET_BATCH * net.pkt_cap);
    /* buffers 64-byte aligned, as the AM layer expects payloads (after the 64-byte header) */
    if (!net.txbuf || pool_init(&net.spare, NET_SPARE, net.rx_cap))
        return SHOAL_ENOMEM;
    /* 64 KiB buffers (loopback's packets, or coalesced runs of up to 44
     * packets) need no more than 16 per receive: 1 MiB, the window; a
     * ring needs them only for the frames it spills */
    net.rx.n = net.eth.ring.map && !net.eth.ring.spill ? 0 : net.rx_cap >= (32u << 10) ? NET_BATCH / 4 : NET_BATCH;
    net.rx_cur = -1;
    net.rx.with_ctl = net.gro; /* the kernel's note of where coalesced datagrams begin */
    for (unsigned i = 0; i < net.rx.n; i++) {
        void *buf = pool_take(&net.spare);
        if (!buf)
            return SHOAL_ENOMEM;
        sock_rx_set(&net.rx, i, buf, net.rx_cap);
    }
    rc = start_engines(job_id, &me);
    if (rc)
        return rc;
    /* SHOAL_PROGRESS=thread's thread polls the transport itself, and must be
     * the one that reads the socket it sleeps on */
    int threaded = strcmp(util_config_str(CFG_PROGRESS), "thread") == 0;
    if (util_config_int(CFG_NET_THREAD) == 1 && !threaded && (rc = start_thread()) != SHOAL_OK)
        return rc;
    net.bcast_native = net.carrier == CARRIER_ETH ? util_config_int(CFG_NET_BCAST) >= 1 : net.ubcast.fd >= 0;
    net.active = 1;
    char what[128];
    LOG(LOG_INFO, "cluster transport %s, largest payload %zu, incarnation %u", net_describe(what, sizeof what),
        net.max_payload, me.incarnation);
    return SHOAL_OK;
}

static int net_settled(void)
{
    lock();
    int all = 1;
    for (int ch = 0; ch < 2; ch++)
        for (int r = 0; r < net.nranks; r++) {
            struct rel_peer_info info;
            rel_peer_info(net.rel[ch], (uint32_t)r, &info);
            all &= !(info.known && !info.dead && info.unacked);
        }
    unlock();
    return all;
}

static void net_fini(void)
{
    stop_thread();
    if (net.active) {
        net.closing = 1;
        uint64_t until = util_now_ns() + NET_LINGER_NS;
        do {
            net_poll(0);
            rel_flush_acks(net.rel[0]);
            rel_flush_acks(net.rel[1]);
            flush_tx();
        } while (!net_settled() && util_now_ns() < until);
    }
    if (net.active) {
        struct tp_stats st;
        net_get_stats(&st);
        LOG(LOG_INFO, "%s: %llu packets sent, %llu received, %llu retransmitted, %llu explicit acks, "
            "%llu lost to a full socket buffer, %llu dropped (%llu foreign, %llu malformed), %llu lost by SHOAL_FAULTS",
            net_carrier(), (unsigned long long)st.packets_sent, (unsigned long long)st.packets_received,
            (unsigned long long)st.retransmits, (unsigned long long)st.acks_sent,
            (unsigned long long)st.send_overflows, (unsigned long long)st.dropped,
            (unsigned long long)st.dropped_foreign, (unsigned long long)st.dropped_malformed,
            (unsigned long long)st.faults_dropped);
    }
    for (int ch = 0; ch < 2; ch++)
        if (net.rel[ch])
            rel_destroy(net.rel[ch]);
    wire_key_fini(&net.key);
    fault_fini(&net.fsend);
    fault_fini(&net.frecv);
    for (int r = 0; net.conns && r < net.nranks; r++)
        udp_conn_close(&net.conns[r]);
    udp_close(&net.udp);
    udp_close(&net.ubcast);
    if (net.waitset >= 0)
        close(net.waitset);
    eth_close(&net.eth);
    free(net.peers);
    free(net.conns);
    free(net.txbuf);
    for (unsigned i = 0; i < net.rx.n; i++)
        free(net.rx.iov[i].iov_base);
    pool_fini(&net.spare);
    memset(&net, 0, sizeof net);
    net.udp.fd = net.ubcast.fd = net.eth.fd = net.waitset = -1;
}

static const char *net_carrier(void)
{
    if (!net.active)
        return NULL;
    return net.carrier == CARRIER_ETH ? "eth" : "udp";
}

static int net_bcast_native(void)
{
    return net.active && net.bcast_native;
}

static void net_bcast_listen(int on)
{
    lock();
    net.listening += on ? 1 : -1;
    unlock();
}

static size_t net_max_payload(void)
{
    return net.max_payload;
}

static void net_get_stats(struct tp_stats *out)
{
    lock();
    *out = net.stats;
    for (int ch = 0; ch < 2 && net.rel[ch]; ch++) {
        const struct rel_stats *s = rel_stats(net.rel[ch]);
        out->retransmits += s->retransmits;
        out->acks_sent += s->acks_sent;
    }
    out->faults_dropped = net.fsend.stats.dropped + net.frecv.stats.dropped;
    unlock();
}

/* One table serves both carriers: init picks udp or eth from the name. */
const struct tp_ops net_transport = {
    .init = net_init,
    .fini = net_fini,
    .settled = net_settled,
    .max_payload = net_max_payload,
    .send = net_send,
    .room = net_room,
    .flush = net_flush,
    .poll = net_poll,
    .wait = net_wait,
    .describe = net_describe,
    .stats = net_get_stats,
    .send_all = net_send_all,
    .bcast = net_bcast,
    .bcast_native = net_bcast_native,
    .bcast_listen = net_bcast_listen,
    .wait_fd = net_wait_fd,
};
