/* The raw Ethernet carrier (net/eth.h). */
#include "net/eth.h"
#include "net/sock.h"
#include "net/wire.h"
#include "util/stages.h"
#include "util/util.h"
#include "shoal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

const struct eth_endpoint eth_broadcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

static int iface_info(int fd, const char *name, struct eth_sock *s)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    if (!name[0] || strlen(name) >= sizeof ifr.ifr_name) {
        LOG(LOG_ERROR, "SHOAL_IFACE=%s: the eth transport needs an interface name", name);
        return SHOAL_ECONFIG;
    }
    strcpy(ifr.ifr_name, name);
    if (ioctl(fd, SIOCGIFINDEX, &ifr) != 0) {
        LOG(LOG_ERROR, "SHOAL_IFACE=%s: no such interface", name);
        return SHOAL_ECONFIG;
    }
    s->ifindex = ifr.ifr_ifindex;
    if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0 || ioctl(fd, SIOCGIFMTU, &ifr) != 0) {
        LOG(LOG_ERROR, "interface %s: %s", name, strerror(errno));
        return SHOAL_ESYS;
    }
    s->mtu = (unsigned)ifr.ifr_mtu;
    ioctl(fd, SIOCGIFHWADDR, &ifr);
    memcpy(s->self.mac, ifr.ifr_hwaddr.sa_data, 6);
    s->loopback = ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_LOOPBACK);
    return SHOAL_OK;
}

/* A frame holds the kernel's header (tpacket2_hdr and the source's
 * sockaddr_ll), 16 bytes it leaves for a link header, and the largest
 * packet.  Blocks of at least ETH_RING_BLOCK (page multiples, which the
 * kernel allocates each in one piece) hold whole frames.  Every packet
 * takes a frame however small, so the ring holds about SHOAL_NET_SOCKBUF
 * bytes and at least ETH_RING_MIN_FRAMES frames.  ETH_RING_AUTO gives
 * frames the interface's largest size up to ETH_RING_FRAME_MAX (MTUs of
 * 1500 and 9000); above it (loopback's 64 KiB) frames for packets of up to
 * 8 KiB of payload, from which the kernel spills larger packets whole into
 * the socket's queue.  Whole 64 KiB frames would cost 68 MiB a rank for
 * 1024 of them, and 256 of them (17 MiB) lost up to 459 of 5,900 frames
 * to four ranks sharing two busy cores, where an 8 MiB socket buffer,
 * which counts a small frame as small, lost none.  A spilled packet costs
 * the kernel a ring frame as well as the queue (measured on loopback, round
 * trips against the plain receive's: a 4 KiB medium 1.17 x spilled from
 * 2 KiB frames and 0.84 x held whole in 8 KiB ones; a 16 KiB medium
 * 1.09-1.14 x), so the frames hold mediums of up to 8 KiB whole. */
#define ETH_RING_BLOCK (1u << 16)
#define ETH_RING_MIN_FRAMES 1024u
#define ETH_RING_FRAME_MAX (16u << 10)
#define ETH_RING_HEADROOM (TPACKET_ALIGN(TPACKET2_HDRLEN) + 16u)
#define ETH_RING_SPILL_FRAME TPACKET_ALIGN(ETH_RING_HEADROOM + WIRE_HEADER_BYTES + (8u << 10))

static struct tpacket2_hdr *ring_frame(const struct eth_ring *r, unsigned i)
{
    unsigned per = r->per_block;
    return (struct tpacket2_hdr *)(r->map + (size_t)(i / per) * r->block_size + (size_t)(i % per) * r->frame_size);
}

/* Sets up the receive ring, or leaves the socket as it was (logged). */
static void ring_open(struct eth_sock *s, int sockbuf, enum eth_ring_mode mode)
{
    struct eth_ring *r = &s->ring;
    unsigned page = (unsigned)sysconf(_SC_PAGESIZE);
    unsigned frame = TPACKET_ALIGN(ETH_RING_HEADROOM + s->mtu);
    int spill = mode == ETH_RING_AUTO && frame > ETH_RING_FRAME_MAX, one = 1;
    frame = spill ? ETH_RING_SPILL_FRAME : frame;
    unsigned block = frame <= ETH_RING_BLOCK ? ETH_RING_BLOCK : (frame + page - 1) / page * page;
    unsigned per = block / frame, want = sockbuf > 0 ? (unsigned)sockbuf / frame : 0;
    want = want > ETH_RING_MIN_FRAMES ? want : ETH_RING_MIN_FRAMES;
    struct tpacket_req req = {.tp_block_size = block, .tp_block_nr = (want + per - 1) / per, .tp_frame_size = frame};
    req.tp_frame_nr = req.tp_block_nr * per;
    int v = TPACKET_V2;
    if (setsockopt(s->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) != 0 ||
        (spill && setsockopt(s->fd, SOL_PACKET, PACKET_COPY_THRESH, &one, sizeof one) != 0) ||
        setsockopt(s->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0) {
        LOG(LOG_INFO, "raw Ethernet: no receive ring (%s); receiving with recvmmsg", strerror(errno));
        return;
    }
    size_t bytes = (size_t)req.tp_block_size * req.tp_block_nr;
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (map == MAP_FAILED) {
        LOG(LOG_INFO, "raw Ethernet: cannot map the receive ring of %zu bytes (%s); receiving with recvmmsg", bytes,
            strerror(errno));
        struct tpacket_req none = {0}; /* frames go to the socket's queue again */
        setsockopt(s->fd, SOL_PACKET, PACKET_RX_RING, &none, sizeof none);
        return;
    }
    *r = (struct eth_ring){.map = map, .bytes = bytes, .block_size = block, .per_block = per, .frame_size = frame,
                           .frames = req.tp_frame_nr, .spill = spill};
}

int eth_open(struct eth_sock *s, const char *name, int sockbuf, enum eth_ring_mode ring)
{
    memset(s, 0, sizeof *s);
    s->fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(WIRE_ETHERTYPE));
    if (s->fd < 0) {
        int perm = errno == EPERM || errno == EACCES;
        LOG(perm ? LOG_INFO : LOG_ERROR, "raw Ethernet socket: %s", strerror(errno));
        return perm ? SHOAL_EACCES : SHOAL_ESYS;
    }
    int rc = iface_info(s->fd, name, s);
    /* before bind; what reached the plain queue before the ring the kernel
     * purges when it sets the ring up, so the queue holds spilled packets
     * only */
    if (!rc && ring != ETH_RING_OFF)
        ring_open(s, sockbuf, ring);
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(WIRE_ETHERTYPE),
                              .sll_ifindex = s->ifindex};
    if (!rc && bind(s->fd, (struct sockaddr *)&sll, sizeof sll) != 0) {
        LOG(LOG_ERROR, "binding the raw socket to %s: %s", name, strerror(errno));
        rc = SHOAL_ESYS;
    }
    int one = 1; /* our own frames are not news (Linux 4.20 and later) */
    if (!rc && setsockopt(s->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
        LOG(LOG_ERROR, "the raw socket cannot ignore its own frames: %s", strerror(errno));
        rc = SHOAL_ESYS;
    }
    if (!rc)
        sock_set_buffers(s->fd, sockbuf);
    /* the frames go straight to the driver; one that finds its queue full
     * is lost (a send overflow the engines resend) instead of queued */
    if (!rc && setsockopt(s->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) != 0)
        LOG(LOG_DEBUG, "raw Ethernet: frames go through the queueing discipline: %s", strerror(errno));
    if (rc)
        eth_close(s);
    return rc;
}

void eth_close(struct eth_sock *s)
{
    struct tpacket_stats st; /* since the last read: the socket's whole life */
    socklen_t len = sizeof st;
    if (s->fd >= 0 && getsockopt(s->fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0 && st.tp_drops)
        LOG(LOG_INFO, "raw Ethernet: the kernel dropped %u of %u frames for want of room in the %s", st.tp_drops,
            st.tp_packets, s->ring.map ? "receive ring" : "socket buffer");
    if (s->ring.spill_lost)
        LOG(LOG_INFO, "raw Ethernet: %llu frames too large for the receive ring were lost (no room in the socket "
            "buffer, or their receive failed)", (unsigned long long)s->ring.spill_lost);
    if (s->ring.map)
        munmap(s->ring.map, s->ring.bytes);
    s->ring = (struct eth_ring){0};
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

/* A classic BPF load of the 32-bit wire word at `off` reads its bytes in
 * network order: the little-endian value v reads as bswap32(v). */
#define LOAD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define SAME(v, to_keep) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __builtin_bswap32((uint32_t)(v)), 0, (to_keep))

int eth_drop_own(struct eth_sock *s, uint64_t job, uint32_t self)
{
    if (!s->loopback)
        return SHOAL_OK;
    /* jump offsets count the instructions skipped, here to the last one */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, WIRE_HEADER_BYTES, 0, 9),
        LOAD(0), SAME(WIRE_MAGIC, 7),
        LOAD(WIRE_OFF_JOB), SAME(job, 5),
        LOAD(WIRE_OFF_JOB + 4), SAME(job >> 32, 3),
        LOAD(WIRE_OFF_SRC), SAME(self, 1),
        BPF_STMT(BPF_RET | BPF_K, 0),           /* this rank's own frame */
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu), /* the whole frame, for the decoder */
    };
    struct sock_fprog prog = {.len = (unsigned short)(sizeof code / sizeof code[0]), .filter = code};
    if (setsockopt(s->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0)
        return SHOAL_OK;
    LOG(LOG_INFO, "raw Ethernet: no socket filter for this rank's own frames: %s", strerror(errno));
    return SHOAL_ESYS;
}

struct eth_batch {
    const struct eth_sock *s;
    const struct eth_frame *f;
};

static int describe(const void *ctx, unsigned i, struct mmsghdr *m, struct iovec *iov, struct sockaddr_storage *to)
{
    const struct eth_batch *b = ctx;
    const struct eth_frame *f = &b->f[i];
    struct sockaddr_ll *ll = (struct sockaddr_ll *)to;
    *ll = (struct sockaddr_ll){.sll_family = AF_PACKET, .sll_protocol = htons(WIRE_ETHERTYPE),
                               .sll_ifindex = b->s->ifindex, .sll_halen = 6};
    memcpy(ll->sll_addr, f->peer.mac, 6);
    sock_msg(m, iov, f->buf, f->len, to, sizeof *ll);
    return b->s->fd;
}

int eth_send(struct eth_sock *s, const struct eth_frame *f, unsigned n)
{
    struct eth_batch b = {s, f};
    int rc = sock_send(n, describe, &b);
    return rc < 0 ? sock_failed(rc, "raw Ethernet") : rc;
}

/* What the got frames a receive put in rx hold of a packet each, and
 * (from not NULL) their sources; got. */
static int received(const struct sock_rx *rx, int got, size_t *len, struct eth_endpoint *from)
{
    for (int i = 0; i < got; i++) {
        /* a frame can carry bytes after the packet (a NIC that delivers
         * the FCS, padding to the minimum frame) */
        len[i] = rx->m[i].msg_hdr.msg_flags & MSG_TRUNC ? 0
                 : wire_packet_bytes(rx->m[i].msg_hdr.msg_iov[0].iov_base, rx->m[i].msg_len);
        if (from)
            memcpy(from[i].mac, ((const struct sockaddr_ll *)&rx->from[i])->sll_addr, 6);
    }
    return got;
}

int eth_recv_batch(struct eth_sock *s, struct sock_rx *rx, size_t *len, struct eth_endpoint *from)
{
    return received(rx, sock_rx_recv(s->fd, rx, from != NULL), len, from);
}

int eth_recv_spilled(struct eth_sock *s, struct sock_rx *rx, unsigned n, size_t *len)
{
    return received(rx, sock_rx_recv_n(s->fd, rx, n, 0), len, NULL);
}

static struct tpacket2_hdr *frame_ready(const struct eth_ring *r, unsigned i, uint32_t *status)
{
    struct tpacket2_hdr *h = ring_frame(r, i);
    /* the kernel queues a spilled frame, then writes its ring frame, then the status */
    *status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
    return *status & TP_STATUS_USER ? h : NULL;
}

static void frame_release(struct eth_ring *r, struct tpacket2_hdr *h)
{
    __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    r->next = r->next + 1 == r->frames ? 0 : r->next + 1;
}

/* How many frames from r->next (at most max) are spilled ones. */
static unsigned spilled_run(const struct eth_ring *r, unsigned max)
{
    unsigned n = 0, i = r->next;
    uint32_t status;
    while (n < max && frame_ready(r, i, &status) != NULL && (status & TP_STATUS_COPY)) {
        n++;
        i = i + 1 == r->frames ? 0 : i + 1;
    }
    return n;
}

/* A spilled frame whose packet cannot be read after this many polls
 * (the kernel queues it before it marks the frame, so only a failing
 * receive gets here) is given back as lost, so the ring does not stop. */
#define ETH_SPILL_TRIES 64u

/* Hands a run of spilled frames to take_spilled, which reads as many of
 * their packets as it can, in order, and says how many; those frames, and
 * only those, go back, so the socket's queue and the ring stay in step
 * when a receive fails.  How many frames it consumed. */
static unsigned take_run(struct eth_ring *r, unsigned run, unsigned (*take_spilled)(unsigned n))
{
    unsigned got = run && take_spilled ? take_spilled(run) : 0;
    got = got < run ? got : run;
    r->stalled = got ? 0 : r->stalled + 1;
    if (!got && r->stalled < ETH_SPILL_TRIES)
        return 0;
    if (!got) { /* given up: one frame lost */
        r->stalled = 0;
        r->spill_lost++;
        got = 1;
    }
    for (unsigned i = 0; i < got; i++)
        frame_release(r, ring_frame(r, r->next));
    return got;
}

unsigned eth_ring_walk(struct eth_sock *s, unsigned max, void (*take)(const unsigned char *pkt, size_t len),
                       unsigned (*take_spilled)(unsigned n), unsigned spills)
{
    struct eth_ring *r = &s->ring;
    unsigned n = 0;
    uint32_t status;
    struct tpacket2_hdr *h;
    while (n < max && (h = frame_ready(r, r->next, &status)) != NULL) {
        if (status & TP_STATUS_COPY) {
            unsigned run = spilled_run(r, spills < max - n ? spills : max - n), got = take_run(r, run, take_spilled);
            n += got;
            if (got < run || !got)
                break; /* the rest on the next poll */
            continue;
        }
        UTIL_STAGE(UTIL_STAGE_RECEIVED);
        const unsigned char *pkt = (const unsigned char *)h + h->tp_net;
        if (r->spill && h->tp_snaplen < h->tp_len)
            r->spill_lost++; /* not spilled (no room in the socket buffer, or no memory for the copy): lost */
        else
            take(pkt, h->tp_snaplen < h->tp_len ? 0 : wire_packet_bytes(pkt, h->tp_snaplen));
        frame_release(r, h);
        n++;
    }
    return n;
}
