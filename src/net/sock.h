/* net layer: what both carriers (udp.c, eth.c) do with their datagram
 * sockets: buffer sizes, and batches of datagrams through
 * sendmmsg/recvmmsg. */
#ifndef SHOAL_NET_SOCK_H
#define SHOAL_NET_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

#define SOCK_BATCH 64u /* datagrams per system call */

/* Send and receive buffers of `bytes` (0: the kernel's default); past the
 * sysctl caps when the process may. */
void sock_set_buffers(int fd, int bytes);

/* Points m at one datagram: buf/len, then tail/tail_len (tail NULL: none),
 * through iov[0..1], and its address. */
void sock_msg(struct mmsghdr *m, struct iovec iov[2], void *buf, size_t len, const void *tail, size_t tail_len,
              void *name, socklen_t namelen);

/* Describes datagram i of a send: points m at it with sock_msg (iov and to
 * are its room for the parts and the address). */
typedef void (*sock_dgram_fn)(const void *ctx, unsigned i, struct mmsghdr *m, struct iovec iov[2],
                              struct sockaddr_storage *to);

/* Sends n datagrams, SOCK_BATCH per system call: how many the kernel took
 * (fewer when its buffer filled), or SHOAL_ESYS on another error (logged,
 * `what` naming the socket). */
int sock_send(int fd, unsigned n, sock_dgram_fn describe, const void *ctx, const char *what);

/* Receives up to n prepared datagrams without blocking: how many arrived,
 * or SHOAL_ESYS. */
int sock_recv(int fd, struct mmsghdr *m, unsigned n);

/* A batch of receive buffers described once and reused by every receive:
 * setting up SOCK_BATCH headers per poll showed as 15 % of a ping-pong. */
struct sock_rx {
    struct mmsghdr m[SOCK_BATCH];
    struct iovec iov[SOCK_BATCH][2];
    struct sockaddr_storage from[SOCK_BATCH];
    unsigned n;
};
/* Entry i receives into buf (cap bytes); n entries are used. */
void sock_rx_set(struct sock_rx *rx, unsigned i, void *buf, size_t cap);
/* Receives without blocking into rx's first rx->n entries: how many
 * arrived (each entry's msg_len, msg_flags and from filled), or
 * SHOAL_ESYS. */
int sock_rx_recv(int fd, struct sock_rx *rx);

#endif
