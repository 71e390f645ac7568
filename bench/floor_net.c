/* The network floor: what the kernel itself takes to move datagrams
 * between two processes, against which shoal's udp and eth transports are
 * read as ratios (docs/PERFORMANCE.md, "Cluster transport").
 *
 * Two processes (fork): the parent is pinned to CPU 0 and times, the child
 * is pinned to CPU 1 and answers.  Both spin on non-blocking sockets
 * (recv with MSG_DONTWAIT in a loop, no epoll, no sleeping), as shoal's
 * progress engine does in spin mode.  Tests:
 *   udp     UDP/IPv4 ping-pong on connected sockets; half round trip per
 *           size ("lat", system "floor-udp").
 *   udpbw   UDP streaming: the parent keeps at most --window (16) datagrams
 *           unacknowledged, every window/2-th asks for an acknowledgement;
 *           payload GB/s per size ("bw", system "floor-udp").
 *   eth     raw Ethernet ping-pong: AF_PACKET SOCK_DGRAM sockets bound to
 *           EtherType 0x88b5 (shoal's) on one interface, with
 *           PACKET_IGNORE_OUTGOING; half round trip per size ("lat",
 *           system "floor-eth").
 *   ethbw   the streaming test over those sockets ("bw", system "floor-eth").
 * Sizes double from --min to --max; a path that cannot carry --max in one
 * datagram (IPv4 UDP: 65507 bytes; a packet socket: the interface's MTU)
 * ends its sweep with the largest size it can carry, recorded as such.
 * The size is the whole datagram payload, including this program's 8-byte
 * header (a marker naming the sender and the kind, and a sequence number).
 *
 * A packet socket on `lo` receives every frame sent on it, the sender's own
 * included (as an incoming frame; the outgoing copy is what
 * PACKET_IGNORE_OUTGOING drops), so each side skips frames whose marker
 * names itself.
 *
 * Where the two sides live (options of this program only, taken out of the
 * command line before the common options are parsed):
 *   --netns A,B   the parent joins network namespace A, the child B
 *                 (/var/run/netns/NAME, as `ip netns add` makes them);
 *   --addr A[,B]  IPv4 addresses the two UDP sockets bind (127.0.0.1);
 *   --iface A[,B] interfaces of the two packet sockets (lo).
 * A second name defaults to the first. */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ETHERTYPE_SHOAL 0x88b5
#define UDP_MAX_PAYLOAD 65507       /* IPv4: 65535 - 20 (IP) - 8 (UDP) */
#define SOCKBUF_BYTES (8 << 20)     /* room for a window of 64 KiB datagrams */
#define SILENCE_LIMIT_S 5.0         /* a wait this long means a datagram was lost */

/* The header at the start of every datagram.  The tag names the run (the
 * parent's pid: other programs' frames of the same EtherType on the same
 * interface are skipped), the sending side and the kind. */
enum kind { PING = 1, DATA = 2, DATA_ACK_ME = 3, ACK = 4, STOP = 5 };
struct hdr {
    uint32_t tag; /* run << 16 | side << 8 | kind */
    uint32_t seq;
};

struct endpoint {
    int fd;
    int eth;                       /* packet socket: sendto() the peer */
    struct sockaddr_ll peer_ll;    /* eth: where frames go */
    int peer_known;                /* else learnt from the first datagram */
    size_t max_payload;            /* largest datagram this path carries */
    uint32_t run, side;            /* of the tag */
    unsigned char *buf;
};

/* Where each side lives: [0] the parent, [1] the child. */
struct placement {
    const char *netns[2];
    const char *addr[2];
    const char *iface[2];
};

static void join_netns(const char *name)
{
    char path[256];
    if (!name)
        return;
    snprintf(path, sizeof path, "/var/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
        bench_die("cannot join network namespace %s: %s", name, strerror(errno));
    close(fd);
}

static void set_buffers(int fd)
{
    int n = SOCKBUF_BYTES;
    /* FORCE passes net.core.[rw]mem_max when the process may (root). */
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &n, sizeof n) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof n);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &n, sizeof n) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof n);
}

/* What a side tells the other before any datagram: its UDP address, or
 * its interface's hardware address. */
struct announce {
    struct sockaddr_in in;
    unsigned char mac[ETH_ALEN];
};

static void open_udp(struct endpoint *e, const char *addr, struct announce *me)
{
    e->fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (e->fd < 0)
        bench_die("socket: %s", strerror(errno));
    set_buffers(e->fd);
    memset(&me->in, 0, sizeof me->in);
    me->in.sin_family = AF_INET;
    if (inet_pton(AF_INET, addr, &me->in.sin_addr) != 1)
        bench_die("not an IPv4 address: %s", addr);
    socklen_t len = sizeof me->in;
    if (bind(e->fd, (struct sockaddr *)&me->in, sizeof me->in) != 0 ||
        getsockname(e->fd, (struct sockaddr *)&me->in, &len) != 0)
        bench_die("cannot bind UDP to %s: %s", addr, strerror(errno));
    e->max_payload = UDP_MAX_PAYLOAD;
}

static void open_eth(struct endpoint *e, const char *iface, struct announce *me)
{
    struct ifreq ifr;
    int one = 1;
    e->eth = 1;
    e->fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETHERTYPE_SHOAL));
    if (e->fd < 0)
        bench_die("packet socket: %s (needs CAP_NET_RAW)", strerror(errno));
    set_buffers(e->fd);
    if (setsockopt(e->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0)
        bench_die("PACKET_IGNORE_OUTGOING: %s", strerror(errno));
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", iface);
    if (ioctl(e->fd, SIOCGIFMTU, &ifr) != 0)
        bench_die("no interface %s: %s", iface, strerror(errno));
    e->max_payload = (size_t)ifr.ifr_mtu;
    if (ioctl(e->fd, SIOCGIFHWADDR, &ifr) != 0)
        bench_die("SIOCGIFHWADDR %s: %s", iface, strerror(errno));
    memcpy(me->mac, ifr.ifr_hwaddr.sa_data, ETH_ALEN);
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETHERTYPE_SHOAL),
                             .sll_ifindex = (int)if_nametoindex(iface)};
    if (bind(e->fd, (struct sockaddr *)&ll, sizeof ll) != 0)
        bench_die("cannot bind packet socket to %s: %s", iface, strerror(errno));
    e->peer_ll = ll;
    e->peer_ll.sll_halen = ETH_ALEN;
}

static void send_datagram(struct endpoint *e, enum kind k, uint32_t seq, size_t size)
{
    struct hdr h = {e->run << 16 | e->side << 8 | (uint32_t)k, seq};
    memcpy(e->buf, &h, sizeof h);
    for (;;) {
        ssize_t n = e->eth ? sendto(e->fd, e->buf, size, 0, (struct sockaddr *)&e->peer_ll,
                                    sizeof e->peer_ll)
                           : send(e->fd, e->buf, size, 0);
        if (n == (ssize_t)size)
            return;
        if (n < 0 && errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
            bench_die("send of %zu bytes: %s", size, strerror(errno));
    }
}

static void learn_peer(struct endpoint *e, const struct sockaddr_storage *from, socklen_t len)
{
    if (e->eth)
        memcpy(e->peer_ll.sll_addr, ((const struct sockaddr_ll *)from)->sll_addr, ETH_ALEN);
    else if (connect(e->fd, (const struct sockaddr *)from, len) != 0)
        bench_die("connect: %s", strerror(errno));
    e->peer_known = 1;
}

/* Spins until a datagram from the other side arrives; returns its length
 * and fills *h with its header.  A silence of SILENCE_LIMIT_S ends the
 * program: on these paths that means a datagram was dropped. */
static size_t recv_datagram(struct endpoint *e, struct hdr *h)
{
    double since = 0;
    for (;;) {
        struct sockaddr_storage from;
        socklen_t fromlen = sizeof from;
        ssize_t n = e->peer_known ? recv(e->fd, e->buf, e->max_payload, MSG_DONTWAIT)
                                  : recvfrom(e->fd, e->buf, e->max_payload, MSG_DONTWAIT,
                                             (struct sockaddr *)&from, &fromlen);
        if (n >= (ssize_t)sizeof *h) {
            memcpy(h, e->buf, sizeof *h);
            /* Skipped: other runs' frames, and our own looped back on lo. */
            if (h->tag >> 16 != e->run || (h->tag >> 8 & 0xff) == e->side)
                continue;
            if (!e->peer_known)
                learn_peer(e, &from, fromlen);
            return (size_t)n;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            bench_die("recv: %s", strerror(errno));
        if (since == 0)
            since = bench_now();
        else if (bench_now() - since > SILENCE_LIMIT_S)
            bench_die("no datagram for %.0f s: one was dropped", SILENCE_LIMIT_S);
    }
}

static enum kind kind_of(const struct hdr *h)
{
    return (enum kind)(h->tag & 0xff);
}

/* The child: echoes pings with their size, acknowledges data that asks for
 * it, until STOP. */
static void child_serve(struct endpoint *e)
{
    for (;;) {
        struct hdr h;
        size_t len = recv_datagram(e, &h);
        switch (kind_of(&h)) {
        case PING:
            send_datagram(e, PING, h.seq, len);
            break;
        case DATA_ACK_ME:
            send_datagram(e, ACK, h.seq, sizeof h);
            break;
        case STOP:
            return;
        default:
            break;
        }
    }
}

/* n round trips of `size` bytes; seconds. */
static double pingpong(struct endpoint *e, size_t size, long n, uint32_t *seq)
{
    double t0 = bench_now();
    for (long i = 0; i < n; i++, (*seq)++) {
        struct hdr h;
        send_datagram(e, PING, *seq, size);
        while (recv_datagram(e, &h), kind_of(&h) != PING || h.seq != *seq)
            ;
    }
    return bench_now() - t0;
}

/* n datagrams of `size` bytes with at most w unacknowledged; every
 * (w/2)-th and the last ask for an acknowledgement, which covers every
 * datagram up to it.  Seconds until the last is acknowledged. */
static double stream(struct endpoint *e, size_t size, long n, int w, uint32_t *seq)
{
    long every = w > 1 ? w / 2 : 1;
    uint32_t first = *seq;
    long acked = 0; /* datagrams known to have arrived */
    double t0 = bench_now();
    for (long sent = 0; sent < n; sent++) {
        while (sent - acked >= w) {
            struct hdr h;
            recv_datagram(e, &h);
            if (kind_of(&h) == ACK && (long)(h.seq - first) + 1 > acked)
                acked = (long)(h.seq - first) + 1;
        }
        int ask = (sent + 1) % every == 0 || sent == n - 1;
        send_datagram(e, ask ? DATA_ACK_ME : DATA, (*seq)++, size);
    }
    while (acked < n) {
        struct hdr h;
        recv_datagram(e, &h);
        if (kind_of(&h) == ACK)
            acked = (long)(h.seq - first) + 1;
    }
    return bench_now() - t0;
}

/* Takes "--NAME A[,B]" out of argv into both sides' fields; returns the
 * new argc. */
static int take_pair_option(int argc, char **argv, const char *name, const char *pair[2])
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) != 0)
            continue;
        char *comma = strchr(argv[i + 1], ',');
        pair[0] = argv[i + 1];
        pair[1] = comma ? comma + 1 : argv[i + 1];
        if (comma)
            *comma = '\0';
        memmove(&argv[i], &argv[i + 2], sizeof *argv * (size_t)(argc - i - 1));
        return argc - 2;
    }
    return argc;
}

/* The sizes of a sweep: doubling from min while the path carries them,
 * then the largest it carries if that is below max. */
static size_t next_size(size_t s, const struct bench_opts *o, size_t path_max)
{
    size_t limit = path_max < o->max_size ? path_max : o->max_size;
    if (s * 2 <= limit)
        return s * 2;
    return s < limit && limit == path_max ? limit : 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .system = NULL, .batches = 7, .iters = 20000,
        .min_size = 8, .max_size = 64u << 10, .window = 16,
    };
    struct placement where = {{NULL, NULL}, {"127.0.0.1", "127.0.0.1"}, {"lo", "lo"}};
    double v[BENCH_MAX_BATCHES];
    int fds[2];

    argc = take_pair_option(argc, argv, "--netns", where.netns);
    argc = take_pair_option(argc, argv, "--addr", where.addr);
    argc = take_pair_option(argc, argv, "--iface", where.iface);
    if (bench_parse(argc, argv, &o, "udp udpbw eth ethbw") < 0) {
        fprintf(stderr, "       [--netns A,B] [--addr A[,B]] [--iface A[,B]]\n");
        return 2;
    }
    int eth = strncmp(o.test, "eth", 3) == 0;
    int bw = strstr(o.test, "bw") != NULL;
    if (!o.system)
        o.system = eth ? "floor-eth" : "floor-udp";
    if (o.min_size < sizeof(struct hdr))
        bench_die("--min must be at least %zu (the header)", sizeof(struct hdr));

    /* The child announces its address through a pipe before any datagram;
     * the parent's reaches the child with the first datagram. */
    if (pipe(fds) != 0)
        bench_die("pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0)
        bench_die("fork: %s", strerror(errno));
    int side = child == 0;
    bench_pin(side);
    join_netns(where.netns[side]);
    struct endpoint e = {.run = (uint32_t)parent & 0xffff, .side = (uint32_t)side,
                         .peer_known = side == 0};
    struct announce mine = {0}, theirs = {0};
    if (eth)
        open_eth(&e, where.iface[side], &mine);
    else
        open_udp(&e, where.addr[side], &mine);
    if (e.max_payload < o.min_size)
        bench_die("the path carries at most %zu bytes", e.max_payload);
    e.buf = calloc(1, e.max_payload);
    if (!e.buf)
        bench_die("out of memory");

    if (side == 1) {
        /* Dies with the parent, so a parent that fails leaves nothing behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        close(fds[0]);
        if (write(fds[1], &mine, sizeof mine) != (ssize_t)sizeof mine)
            bench_die("pipe write: %s", strerror(errno));
        close(fds[1]);
        child_serve(&e); /* the first datagram tells the parent's address */
        _exit(0);
    }

    close(fds[1]);
    if (read(fds[0], &theirs, sizeof theirs) != (ssize_t)sizeof theirs)
        bench_die("the answering process did not start");
    close(fds[0]);
    if (eth)
        memcpy(e.peer_ll.sll_addr, theirs.mac, ETH_ALEN);
    else if (connect(e.fd, (struct sockaddr *)&theirs.in, sizeof theirs.in) != 0)
        bench_die("connect: %s", strerror(errno));

    uint32_t seq = 1;
    for (size_t s = o.min_size; s; s = next_size(s, &o, e.max_payload)) {
        long n = bench_iters_for(&o, s);
        for (int b = -1; b < o.batches; b++) {
            double t = bw ? stream(&e, s, n, o.window, &seq) : pingpong(&e, s, n, &seq);
            if (b >= 0)
                v[b] = bw ? (double)s * (double)n / t / 1e9 : t / (double)n / 2 * 1e6;
        }
        bench_emit(&o, bw ? "bw" : "lat", s, 2, bw ? "GB/s" : "us", n, v, o.batches);
    }
    for (int i = 0; i < 3; i++) /* datagrams may be lost; STOP is idempotent */
        send_datagram(&e, STOP, seq, sizeof(struct hdr));
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bench_die("the answering process failed");
    free(e.buf);
    close(e.fd);
    return 0;
}
