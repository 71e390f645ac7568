/* The raw-frame transmit floor (issue 23 item 2): how fast one process can
 * push Ethernet frames of one size out of a packet socket, by sendmmsg of 64
 * frames a call (what the eth carrier does) or through a PACKET_TX_RING (the
 * frames written into a ring shared with the kernel, one send() for each 64),
 * both with PACKET_QDISC_BYPASS.  Run the receiver first on the far side:
 *
 *   ip netns exec shoal-b eth_tx shoal-veth recv
 *   ip netns exec shoal-a eth_tx shoal-veth mmsg|ring SIZE FRAMES
 *
 * (bench/netns_pair's veth pair).  The sender prints its frames, seconds,
 * GB/s and microseconds per frame; the receiver, which counts frames of
 * EtherType 0x88b6 with recvmmsg until half a second passes without one,
 * prints what arrived.  Frames go to the broadcast address, so no address
 * needs exchanging; each side is one process pinned by the caller if wanted
 * (taskset). */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define ETX_TYPE 0x88b6 /* not shoal's 0x88b5: a running job never sees these */
#define ETX_BATCH 64
#define ETX_FRAME 2048u /* ring slot: the kernel's header and a 1500-byte frame */
#define ETX_MAX 1500

static void die(const char *what)
{
    fprintf(stderr, "eth_tx: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int open_socket(const char *iface, struct sockaddr_ll *to)
{
    int fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETX_TYPE));
    if (fd < 0)
        die("packet socket (root or CAP_NET_RAW needed)");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", iface);
    if (ioctl(fd, SIOCGIFINDEX, &ifr) != 0)
        die(iface);
    *to = (struct sockaddr_ll){.sll_family = AF_PACKET, .sll_protocol = htons(ETX_TYPE),
                               .sll_ifindex = ifr.ifr_ifindex, .sll_halen = 6};
    memset(to->sll_addr, 0xff, 6);
    int one = 1, buf = 8 << 20;
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
    return fd;
}

static void receive(int fd, const struct sockaddr_ll *at)
{
    if (bind(fd, (const struct sockaddr *)at, sizeof *at) != 0)
        die("bind");
    static unsigned char bufs[ETX_BATCH][ETX_MAX];
    struct mmsghdr m[ETX_BATCH];
    struct iovec iov[ETX_BATCH];
    for (int i = 0; i < ETX_BATCH; i++) {
        iov[i] = (struct iovec){bufs[i], sizeof bufs[i]};
        m[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
    }
    long frames = 0;
    double bytes = 0, first = 0, last = bench_now();
    while (frames ? bench_now() - last < 0.5 : bench_now() - last < 30) {
        int n = recvmmsg(fd, m, ETX_BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            continue;
        first = frames ? first : bench_now();
        frames += n;
        for (int i = 0; i < n; i++)
            bytes += m[i].msg_len;
        last = bench_now();
    }
    printf("recv: %ld frames, %.3f GB/s\n", frames, frames > 1 ? bytes / (last - first) / 1e9 : 0.0);
}

static void send_mmsg(int fd, struct sockaddr_ll *to, const unsigned char *pay, size_t size, long total)
{
    struct mmsghdr m[ETX_BATCH];
    struct iovec iov[ETX_BATCH];
    for (int i = 0; i < ETX_BATCH; i++) {
        iov[i] = (struct iovec){(void *)pay, size};
        m[i] = (struct mmsghdr){.msg_hdr = {.msg_name = to, .msg_namelen = sizeof *to, .msg_iov = &iov[i],
                                            .msg_iovlen = 1}};
    }
    for (long sent = 0; sent < total;) {
        int n = sendmmsg(fd, m, (unsigned)(total - sent < ETX_BATCH ? total - sent : ETX_BATCH), 0);
        if (n > 0)
            sent += n;
        else if (errno != ENOBUFS && errno != EAGAIN)
            die("sendmmsg");
    }
}

static void send_ring(int fd, struct sockaddr_ll *to, const unsigned char *pay, size_t size, long total)
{
    int v = TPACKET_V2;
    struct tpacket_req req = {.tp_block_size = 1u << 16, .tp_block_nr = 64, .tp_frame_size = ETX_FRAME};
    req.tp_frame_nr = req.tp_block_nr * (req.tp_block_size / req.tp_frame_size);
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) != 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) != 0)
        die("PACKET_TX_RING");
    size_t bytes = (size_t)req.tp_block_size * req.tp_block_nr;
    unsigned char *ring = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring == MAP_FAILED)
        die("mmap");
    if (bind(fd, (struct sockaddr *)to, sizeof *to) != 0)
        die("bind");
    unsigned cur = 0, outstanding = 0;
    for (long sent = 0; sent < total || outstanding;) {
        unsigned queued = 0;
        while (queued < ETX_BATCH && sent + queued < total) {
            struct tpacket2_hdr *h = (struct tpacket2_hdr *)(ring + (size_t)cur * ETX_FRAME);
            if (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE)
                break;
            /* SOCK_DGRAM: the frame's payload starts where a SOCK_RAW frame's
             * link header would, after the kernel's header */
            memcpy((unsigned char *)h + TPACKET2_HDRLEN - sizeof(struct sockaddr_ll), pay, size);
            h->tp_len = (uint32_t)size;
            __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
            cur = (cur + 1) % req.tp_frame_nr;
            queued++;
        }
        if (sendto(fd, NULL, 0, 0, (struct sockaddr *)to, sizeof *to) < 0 && errno != ENOBUFS && errno != EAGAIN)
            die("send");
        sent += queued;
        outstanding = 0;
        for (unsigned i = 0; sent >= total && i < req.tp_frame_nr; i++)
            outstanding += __atomic_load_n(&((struct tpacket2_hdr *)(ring + (size_t)i * ETX_FRAME))->tp_status,
                                           __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE;
    }
    munmap(ring, bytes);
}

int main(int argc, char **argv)
{
    int sending = argc == 5 && (!strcmp(argv[2], "mmsg") || !strcmp(argv[2], "ring"));
    if (!sending && !(argc == 3 && !strcmp(argv[2], "recv"))) {
        fprintf(stderr, "usage: eth_tx IFACE recv | eth_tx IFACE mmsg|ring SIZE FRAMES\n");
        return 2;
    }
    struct sockaddr_ll to;
    int fd = open_socket(argv[1], &to);
    if (!sending) {
        receive(fd, &to);
        return 0;
    }
    long size = atol(argv[3]), total = atol(argv[4]);
    if (size < 1 || size > ETX_MAX || total < 1) {
        fprintf(stderr, "eth_tx: SIZE 1-%d bytes, FRAMES at least 1\n", ETX_MAX);
        return 2;
    }
    static unsigned char pay[ETX_MAX];
    memset(pay, 7, sizeof pay);
    usleep(200000); /* the receiver's socket is bound */
    double t0 = bench_now();
    if (!strcmp(argv[2], "mmsg"))
        send_mmsg(fd, &to, pay, (size_t)size, total);
    else
        send_ring(fd, &to, pay, (size_t)size, total);
    double t = bench_now() - t0;
    printf("%s: %ld frames of %ld bytes in %.3f s: %.3f GB/s, %.2f us a frame\n", argv[2], total, size, t,
           (double)total * (double)size / t / 1e9, t / (double)total * 1e6);
    return 0;
}
