/* Datagram sockets shared by the carriers (net/sock.h). */
#include "net/sock.h"
#include "util/util.h"
#include "shoal.h"

#include <errno.h>
#include <string.h>

void sock_set_buffers(int fd, int bytes)
{
    if (bytes <= 0)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void sock_msg(struct mmsghdr *m, struct iovec iov[2], void *buf, size_t len, const void *tail, size_t tail_len,
              void *name, socklen_t namelen)
{
    iov[0] = (struct iovec){buf, len};
    iov[1] = (struct iovec){(void *)tail, tail_len};
    *m = (struct mmsghdr){.msg_hdr = {.msg_name = name, .msg_namelen = namelen, .msg_iov = iov,
                                      .msg_iovlen = tail ? 2 : 1}};
}

/* One batch: how many of the n the kernel took. */
static int send_batch(int fd, struct mmsghdr *m, unsigned n, const char *what)
{
    unsigned done = 0;
    while (done < n) {
        int sent = sendmmsg(fd, m + done, n - done, 0);
        if (sent >= 0) {
            done += (unsigned)sent;
            continue;
        }
        if (errno == EAGAIN || errno == ENOBUFS)
            break;
        if (errno != EINTR) {
            LOG(LOG_ERROR, "sendmmsg on the %s socket: %s", what, strerror(errno));
            return SHOAL_ESYS;
        }
    }
    return (int)done;
}

int sock_send(int fd, unsigned n, sock_dgram_fn describe, const void *ctx, const char *what)
{
    struct mmsghdr msgs[SOCK_BATCH];
    struct iovec iov[SOCK_BATCH][2];
    struct sockaddr_storage to[SOCK_BATCH];
    unsigned done = 0;
    while (done < n) {
        unsigned k = n - done < SOCK_BATCH ? n - done : SOCK_BATCH;
        for (unsigned i = 0; i < k; i++)
            describe(ctx, done + i, &msgs[i], iov[i], &to[i]);
        int sent = send_batch(fd, msgs, k, what);
        if (sent < 0)
            return sent;
        done += (unsigned)sent;
        if ((unsigned)sent < k)
            break;
    }
    return (int)done;
}

int sock_recv(int fd, struct mmsghdr *m, unsigned n)
{
    int got = recvmmsg(fd, m, n, MSG_DONTWAIT, NULL);
    if (got >= 0)
        return got;
    return errno == EAGAIN || errno == EINTR ? 0 : SHOAL_ESYS;
}

void sock_rx_set(struct sock_rx *rx, unsigned i, void *buf, size_t cap)
{
    sock_msg(&rx->m[i], rx->iov[i], buf, cap, NULL, 0, &rx->from[i], sizeof rx->from[i]);
}

int sock_rx_recv(int fd, struct sock_rx *rx)
{
    int got = sock_recv(fd, rx->m, rx->n);
    for (int i = 0; i < got; i++) /* the kernel shrank them to the sources' sizes */
        rx->m[i].msg_hdr.msg_namelen = sizeof rx->from[i];
    return got;
}
