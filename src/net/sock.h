/* net layer: what both carriers (udp.c, eth.c) do with their datagram
 * sockets: buffer sizes, and sends and receives that take as few and as
 * cheap system calls as the traffic allows (send/recv for one datagram,
 * sendmmsg/recvmmsg for batches). */
#ifndef SHOAL_NET_SOCK_H
#define SHOAL_NET_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

#define SOCK_BATCH 64u /* datagrams per system call */

/* Send and receive buffers of `bytes` (0: the kernel's default); past the
 * sysctl caps when the process may. */
void sock_set_buffers(int fd, int bytes);

/* Points m at one datagram, buf/len, through iov, and its address (name
 * NULL: a connected socket). */
void sock_msg(struct mmsghdr *m, struct iovec *iov, const void *buf, size_t len, void *name, socklen_t namelen);

/* Describes datagram i of a send: points m at it with sock_msg (iov and to
 * are its room for the buffer and the address) and returns the socket it
 * goes out on. */
typedef int (*sock_dgram_fn)(const void *ctx, unsigned i, struct mmsghdr *m, struct iovec *iov,
                             struct sockaddr_storage *to);

/* Sends n datagrams, each run of datagrams for one socket in system calls
 * of up to SOCK_BATCH: how many the kernel took (fewer when a buffer
 * filled or a later datagram failed), or -errno when the first one failed
 * other than for room, which the carrier handles or reports with
 * sock_failed. */
int sock_send(unsigned n, sock_dgram_fn describe, const void *ctx);
/* Logs that sending on the `what` socket failed with -err; SHOAL_ESYS. */
int sock_failed(int err, const char *what);

/* Room for one control message carrying an int (UDP_GRO's segment size). */
union sock_ctl {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
};

/* A batch of receive buffers described once and reused by every receive:
 * setting up SOCK_BATCH headers per poll showed as 15 % of a ping-pong. */
struct sock_rx {
    struct mmsghdr m[SOCK_BATCH];
    struct iovec iov[SOCK_BATCH];
    struct sockaddr_storage from[SOCK_BATCH];
    union sock_ctl ctl[SOCK_BATCH];
    unsigned n;
    int with_ctl; /* entries receive control messages (set before sock_rx_set) */
    int ctl_read; /* the last receive took them (a batch; a single datagram is taken without) */
    int batch;    /* the last receive filled what it asked for: ask for a batch next */
};
/* Entry i receives into buf (cap bytes), and with rx->with_ctl its
 * control message into ctl[i]; n entries are used. */
void sock_rx_set(struct sock_rx *rx, unsigned i, void *buf, size_t cap);
/* Receives without blocking into rx's first rx->n entries: how many
 * arrived (each entry's msg_len and msg_flags filled, with want_from its
 * `from`, with rx->with_ctl and rx->ctl_read its msg_control and
 * msg_controllen), or SHOAL_ESYS.  One datagram is taken with recvfrom(2)
 * unless the previous call found a backlog: recvmmsg looks for a second
 * datagram after the first, which in a ping-pong is a wasted attempt per
 * packet; and recvmsg(2), which a control message needs, cost 4-5 % of a
 * udp half round trip more than recvfrom (measured 2026-11-27), so a
 * single receive goes without (ctl_read 0). */
int sock_rx_recv(int fd, struct sock_rx *rx, int want_from);
/* As sock_rx_recv, asking for exactly want (1 to rx->n) datagrams. */
int sock_rx_recv_n(int fd, struct sock_rx *rx, unsigned want, int want_from);

#endif
