/* The UDP carrier (net/udp.h). */
#include "net/udp.h"
#include "net/sock.h"
#include "util/util.h"
#include "shoal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void endpoint_of(const struct sockaddr *sa, struct udp_endpoint *e)
{
    memset(e, 0, sizeof *e);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        e->family = 4;
        e->port = ntohs(in->sin_port);
        memcpy(e->addr, &in->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        e->family = 6;
        e->port = ntohs(in6->sin6_port);
        memcpy(e->addr, &in6->sin6_addr, 16);
    }
}

static socklen_t sockaddr_of(const struct udp_endpoint *e, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (e->family == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(e->port);
        memcpy(&in->sin_addr, e->addr, 4);
        return sizeof *in;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(e->port);
    memcpy(&in6->sin6_addr, e->addr, 16);
    return sizeof *in6;
}

const char *udp_endpoint_str(const struct udp_endpoint *e, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN] = "?";
    inet_ntop(e->family == 4 ? AF_INET : AF_INET6, e->addr, a, sizeof a);
    snprintf(buf, cap, e->family == 4 ? "%s:%u" : "[%s]:%u", a, (unsigned)e->port);
    return buf;
}

/* A CIDR block or a literal address: family, address bytes, prefix bits. */
static int parse_block(const char *spec, int *family, uint8_t addr[16], unsigned *bits)
{
    char text[INET6_ADDRSTRLEN + 8];
    if (strlen(spec) >= sizeof text)
        return 0;
    strcpy(text, spec);
    char *slash = strchr(text, '/');
    if (slash)
        *slash = '\0';
    *family = strchr(text, ':') ? 6 : 4;
    if (inet_pton(*family == 4 ? AF_INET : AF_INET6, text, addr) != 1)
        return 0;
    unsigned max = *family == 4 ? 32 : 128;
    *bits = max;
    if (slash) {
        char *end;
        unsigned long b = strtoul(slash + 1, &end, 10);
        if (end == slash + 1 || *end || b > max)
            return 0;
        *bits = (unsigned)b;
    }
    return 1;
}

static int prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    for (unsigned i = 0; i < bits; i++)
        if ((a[i / 8] ^ b[i / 8]) & (0x80u >> (i % 8)))
            return 0;
    return 1;
}

/* Whether interface address ifa is the one spec names. */
static int iface_matches(const struct ifaddrs *ifa, const char *spec, int is_block, int family,
                         const uint8_t *block, unsigned bits)
{
    struct udp_endpoint e;
    endpoint_of(ifa->ifa_addr, &e);
    if (!spec[0])
        return e.family == 4 && !(ifa->ifa_flags & IFF_LOOPBACK);
    if (!is_block)
        return strcmp(ifa->ifa_name, spec) == 0;
    return e.family == family && prefix_match(e.addr, block, bits);
}

int udp_resolve(const char *spec, struct udp_endpoint *out)
{
    int family = 0;
    uint8_t block[16] = {0};
    unsigned bits = 0;
    int is_block = spec[0] && (strchr(spec, '/') || strchr(spec, ':') || strspn(spec, "0123456789.") == strlen(spec));
    if (is_block && !parse_block(spec, &family, block, &bits)) {
        LOG(LOG_ERROR, "SHOAL_IFACE=%s is neither an interface name, a CIDR block nor an address", spec);
        return SHOAL_ECONFIG;
    }
    struct ifaddrs *list;
    if (getifaddrs(&list) != 0) {
        LOG(LOG_ERROR, "getifaddrs: %s", strerror(errno));
        return SHOAL_ESYS;
    }
    int found = 0;
    for (int pass = 0; pass < 2 && !found; pass++) /* pass 1: the default falls back to loopback */
        for (struct ifaddrs *ifa = list; ifa && !found; ifa = ifa->ifa_next) {
            if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP) ||
                (ifa->ifa_addr->sa_family != AF_INET && ifa->ifa_addr->sa_family != AF_INET6))
                continue;
            int hit = pass == 0 ? iface_matches(ifa, spec, is_block, family, block, bits)
                                : !spec[0] && ifa->ifa_addr->sa_family == AF_INET && (ifa->ifa_flags & IFF_LOOPBACK);
            if (hit) {
                endpoint_of(ifa->ifa_addr, out);
                found = 1;
            }
        }
    freeifaddrs(list);
    if (!found) {
        LOG(LOG_ERROR, "SHOAL_IFACE=%s matches no interface address that is up", spec[0] ? spec : "(unset)");
        return SHOAL_ECONFIG;
    }
    out->port = 0;
    return SHOAL_OK;
}

static int bind_in_range(int fd, struct udp_endpoint *e, uint16_t lo, uint16_t hi)
{
    for (uint32_t port = lo; port <= hi; port++) {
        struct sockaddr_storage ss;
        e->port = (uint16_t)port;
        socklen_t len = sockaddr_of(e, &ss);
        if (bind(fd, (struct sockaddr *)&ss, len) == 0)
            return SHOAL_OK;
        if (errno != EADDRINUSE && errno != EACCES) {
            LOG(LOG_ERROR, "bind: %s", strerror(errno));
            return SHOAL_ESYS;
        }
    }
    LOG(LOG_ERROR, "no free UDP port in SHOAL_PORT_RANGE %u-%u", (unsigned)lo, (unsigned)hi);
    return SHOAL_ESYS;
}

/* The interface that has address e, and its MTU. */
static void iface_of(int fd, const struct udp_endpoint *e, struct udp_sock *s)
{
    struct ifaddrs *list;
    s->mtu = 1500;
    if (getifaddrs(&list) != 0)
        return;
    for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        struct udp_endpoint a;
        if (!ifa->ifa_addr || (ifa->ifa_addr->sa_family != AF_INET && ifa->ifa_addr->sa_family != AF_INET6))
            continue;
        endpoint_of(ifa->ifa_addr, &a);
        if (a.family != e->family || memcmp(a.addr, e->addr, e->family == 4 ? 4 : 16))
            continue;
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifa->ifa_name);
        snprintf(s->ifname, sizeof s->ifname, "%s", ifa->ifa_name);
        if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
            s->mtu = (unsigned)ifr.ifr_mtu;
        /* only a configured broadcast address is one the kernel routes as
         * broadcast ("ip addr add A/24 brd +"); loopback has none, but the
         * kernel's local table routes 127.255.255.255 as broadcast on lo */
        if (e->family == 4 && (ifa->ifa_flags & IFF_BROADCAST) && ifa->ifa_broadaddr &&
            ifa->ifa_broadaddr->sa_family == AF_INET)
            memcpy(s->bcast, &((const struct sockaddr_in *)ifa->ifa_broadaddr)->sin_addr, 4);
        else if (e->family == 4 && (ifa->ifa_flags & IFF_LOOPBACK))
            memcpy(s->bcast, (const uint8_t[4]){127, 255, 255, 255}, 4);
        break;
    }
    freeifaddrs(list);
}

int udp_open(struct udp_sock *s, const char *iface, uint16_t port_lo, uint16_t port_hi, int sockbuf)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    int rc = udp_resolve(iface, &s->self);
    if (rc)
        return rc;
    s->fd = socket(s->self.family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        LOG(LOG_ERROR, "socket: %s", strerror(errno));
        return SHOAL_ESYS;
    }
    sock_set_buffers(s->fd, sockbuf);
    rc = bind_in_range(s->fd, &s->self, port_lo, port_lo || port_hi ? port_hi : 0);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (!rc && getsockname(s->fd, (struct sockaddr *)&ss, &len) == 0)
        endpoint_of((struct sockaddr *)&ss, &s->self);
    if (!rc)
        iface_of(s->fd, &s->self, s);
    if (rc)
        udp_close(s);
    return rc;
}

void udp_close(struct udp_sock *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

/* Makes the kernel drop, before fd receives them, datagrams from src (an
 * IPv4 address and port): a classic BPF filter on a UDP socket sees the
 * packet from its UDP header, and the IP header at SKF_NET_OFF. */
static int drop_from(int fd, const struct udp_endpoint *src)
{
    const uint8_t *a = src->addr;
    uint32_t addr = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
    /* jump offsets count the instructions skipped, here to the last one */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 0), /* the UDP source port */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, src->port, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 12)), /* the IPv4 source address */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, addr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0),           /* from src */
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu), /* the whole datagram, for the decoder */
    };
    struct sock_fprog prog = {.len = (unsigned short)(sizeof code / sizeof code[0]), .filter = code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
}

int udp_bcast_open(struct udp_sock *b, struct udp_sock *s, uint16_t port, int sockbuf)
{
    memset(b, 0, sizeof *b);
    b->self = (struct udp_endpoint){.family = 4, .port = port};
    memcpy(b->self.addr, s->bcast, 4);
    memcpy(b->bcast, s->bcast, 4);
    b->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_storage ss;
    socklen_t len = sockaddr_of(&b->self, &ss);
    if (b->fd < 0 || setsockopt(b->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        drop_from(b->fd, &s->self) != 0 || bind(b->fd, (struct sockaddr *)&ss, len) != 0 ||
        setsockopt(s->fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof one) != 0) {
        char ep[64];
        LOG(LOG_INFO, "no UDP broadcast receiver on %s: %s", udp_endpoint_str(&b->self, ep, sizeof ep),
            strerror(errno));
        udp_close(b);
        return SHOAL_ESYS;
    }
    sock_set_buffers(b->fd, sockbuf);
    return SHOAL_OK;
}

const struct udp_conn *udp_conn_get(struct udp_conn *c, const struct udp_sock *s, const struct udp_endpoint *peer,
                                    int sockbuf)
{
    if (c->fd >= 0 || c->tried)
        return c->fd >= 0 ? c : NULL;
    c->tried = 1;
    struct udp_endpoint local = s->self;
    struct sockaddr_storage ss;
    local.port = 0;
    int fd = socket(local.family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int ok = fd >= 0;
    if (ok) {
        sock_set_buffers(fd, sockbuf);
        socklen_t len = sockaddr_of(&local, &ss);
        ok = bind(fd, (struct sockaddr *)&ss, len) == 0;
        len = sockaddr_of(peer, &ss);
        ok = ok && connect(fd, (struct sockaddr *)&ss, len) == 0;
    }
    if (!ok) {
        char ep[64];
        LOG(LOG_INFO, "no connected socket for %s (%s); sending to it from the shared one",
            udp_endpoint_str(peer, ep, sizeof ep), strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    c->fd = fd;
    return c;
}

void udp_conn_close(struct udp_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    *c = (struct udp_conn){.fd = -1};
}

int udp_gso_enable(struct udp_sock *s)
{
    int zero = 0; /* no segmentation by default: only the sends that ask */
    s->gso = setsockopt(s->fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
    return s->gso;
}

int udp_gro_enable(struct udp_sock *s)
{
    int one = 1;
    return setsockopt(s->fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
}

/* UDP_SEGMENT's limits: segments per send (UDP_MAX_SEGMENTS, 64 until
 * Linux 6.9), and bytes, which one IP datagram must hold before it is cut. */
#define UDP_GSO_SEGMENTS 64u
#define UDP_GSO_BYTES 65000u

struct udp_batch {
    const struct udp_sock *s;
    const struct udp_packet *p;
    struct udp_run run[SOCK_BATCH];
    struct iovec iov[SOCK_BATCH];
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl[SOCK_BATCH];
};

static int same_destination(const struct udp_packet *a, const struct udp_packet *b)
{
    return a->conn == b->conn && (a->conn || !memcmp(&a->peer, &b->peer, sizeof a->peer));
}

unsigned udp_plan_runs(const struct udp_sock *s, const struct udp_packet *p, unsigned n, struct udp_run *run)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; k++) {
        size_t seg = p[i].len, bytes = seg;
        unsigned j = i + 1;
        while (s->gso && j < n && j - i < UDP_GSO_SEGMENTS && p[j - 1].len == seg && p[j].len <= seg &&
               bytes + p[j].len <= UDP_GSO_BYTES && same_destination(&p[i], &p[j]))
            bytes += p[j++].len;
        run[k] = (struct udp_run){i, j - i};
        i = j;
    }
    return k;
}

static int describe(const void *ctx, unsigned i, struct mmsghdr *m, struct iovec *iov, struct sockaddr_storage *to)
{
    struct udp_batch *b = (struct udp_batch *)ctx;
    const struct udp_run *r = &b->run[i];
    const struct udp_packet *p = &b->p[r->first];
    if (p->conn)
        sock_msg(m, iov, p->buf, p->len, NULL, 0);
    else
        sock_msg(m, iov, p->buf, p->len, to, sockaddr_of(&p->peer, to));
    if (r->count > 1) {
        struct iovec *v = &b->iov[r->first];
        for (unsigned j = 0; j < r->count; j++)
            v[j] = (struct iovec){(void *)p[j].buf, p[j].len};
        struct cmsghdr *c = &b->ctl[i].align;
        memset(b->ctl[i].buf, 0, sizeof b->ctl[i].buf);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = (uint16_t)p->len;
        memcpy(CMSG_DATA(c), &seg, sizeof seg);
        m->msg_hdr.msg_iov = v;
        m->msg_hdr.msg_iovlen = r->count;
        m->msg_hdr.msg_control = b->ctl[i].buf;
        m->msg_hdr.msg_controllen = sizeof b->ctl[i].buf;
    }
    return p->conn ? p->conn->fd : b->s->fd;
}

int udp_send(struct udp_sock *s, const struct udp_packet *pkts, unsigned n)
{
    struct udp_batch b; /* not zeroed: 3 KiB per send, and udp_plan_runs and describe write what is read */
    b.s = s;
    unsigned done = 0;
    while (done < n) {
        unsigned chunk = n - done < SOCK_BATCH ? n - done : SOCK_BATCH;
        b.p = pkts + done;
        unsigned runs = udp_plan_runs(s, b.p, chunk, b.run);
        int rc = sock_send(runs, describe, &b);
        if (rc < 0 && runs < chunk) {
            s->gso = 0;
            LOG(LOG_WARN, "UDP segmentation offload refused (%s): one datagram per message from now on",
                strerror(-rc));
            return (int)done;
        }
        if (rc < 0)
            return sock_failed(rc, "UDP");
        for (int r = 0; r < rc; r++)
            done += b.run[r].count;
        if ((unsigned)rc < runs)
            break;
    }
    return (int)done;
}

/* The size of the datagrams the kernel coalesced into the buffer h
 * received (its UDP_GRO note), or 0: the buffer is one datagram. */
static size_t gro_segment(const struct msghdr *h)
{
    for (const struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR((struct msghdr *)h, (struct cmsghdr *)c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int seg;
            memcpy(&seg, CMSG_DATA(c), sizeof seg);
            return seg > 0 ? (size_t)seg : 0;
        }
    return 0;
}

int udp_recv_batch(struct udp_sock *s, struct sock_rx *rx, size_t *len, size_t *seg, struct udp_endpoint *from)
{
    int got = sock_rx_recv(s->fd, rx, from != NULL);
    for (int i = 0; i < got; i++) {
        const struct msghdr *h = &rx->m[i].msg_hdr;
        len[i] = h->msg_flags & MSG_TRUNC ? 0 : rx->m[i].msg_len;
        size_t g = rx->ctl_read ? gro_segment(h) : 0;
        seg[i] = rx->with_ctl && !rx->ctl_read ? 0 : g && g < len[i] ? g : len[i];
        if (from)
            endpoint_of((struct sockaddr *)&rx->from[i], &from[i]);
    }
    return got;
}
