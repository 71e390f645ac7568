/* Datagram sockets shared by the carriers (net/sock.h). */
#include "net/sock.h"
#include "util/stages.h"
#include "util/util.h"
#include "shoal.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The datagram calls go to the kernel directly: libc's wrappers make each a
 * thread-cancellation point, which costs two calls around every system call
 * (8 % of a spinning poll's time in user space), and a poll is no place for
 * a thread to be cancelled (the transport's lock is held).  The sanitizer
 * builds keep libc's calls, which the sanitizers intercept to check the
 * buffers and order the descriptor's uses. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOCK_LIBC_CALLS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOCK_LIBC_CALLS 1
#endif
#endif

#ifdef SOCK_LIBC_CALLS
#define SOCK_CALL(name, ...) name(__VA_ARGS__)
#else
#define SOCK_CALL(name, ...) syscall(SYS_##name, __VA_ARGS__)
#endif

static int sys_sendto(int fd, const void *buf, size_t len, const struct sockaddr *to, socklen_t tolen)
{
    return (int)SOCK_CALL(sendto, fd, buf, len, 0, to, tolen);
}

static int sys_sendmsg(int fd, const struct msghdr *h)
{
    return (int)SOCK_CALL(sendmsg, fd, h, 0);
}

static int sys_sendmmsg(int fd, struct mmsghdr *m, unsigned n)
{
    return (int)SOCK_CALL(sendmmsg, fd, m, n, 0);
}

static ssize_t sys_recvfrom(int fd, void *buf, size_t cap, int flags, struct sockaddr *from, socklen_t *fromlen)
{
    return (ssize_t)SOCK_CALL(recvfrom, fd, buf, cap, flags, from, fromlen);
}

static int sys_recvmmsg(int fd, struct mmsghdr *m, unsigned n, int flags)
{
    return (int)SOCK_CALL(recvmmsg, fd, m, n, flags, NULL);
}

void sock_set_buffers(int fd, int bytes)
{
    if (bytes <= 0)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void sock_msg(struct mmsghdr *m, struct iovec *iov, const void *buf, size_t len, void *name, socklen_t namelen)
{
    *iov = (struct iovec){(void *)buf, len};
    *m = (struct mmsghdr){.msg_hdr = {.msg_name = name, .msg_namelen = name ? namelen : 0, .msg_iov = iov,
                                      .msg_iovlen = 1}};
}

/* Sends m[0..n-1] on fd: how many the kernel took, or -errno.  A lone
 * plain datagram goes through sendto(2), which copies no message header
 * in (one with several buffers or control data, through sendmsg).  ECONNREFUSED on a connected socket reports an ICMP error an
 * earlier datagram drew; the call that reports it sent nothing, and
 * reading the error cleared it, so the datagram is simply sent again. */
static int send_run(int fd, struct mmsghdr *m, unsigned n)
{
    UTIL_STAGE(UTIL_STAGE_SYSCALL);
    unsigned done = 0;
    while (done < n) {
        const struct msghdr *h = &m[done].msg_hdr;
        int sent;
        if (n - done == 1 && h->msg_iovlen == 1 && !h->msg_controllen)
            sent = sys_sendto(fd, h->msg_iov[0].iov_base, h->msg_iov[0].iov_len, h->msg_name, h->msg_namelen) < 0
                       ? -1 : 1;
        else if (n - done == 1)
            sent = sys_sendmsg(fd, h) < 0 ? -1 : 1;
        else
            sent = sys_sendmmsg(fd, m + done, n - done);
        if (sent >= 0)
            done += (unsigned)sent;
        else if (errno != EINTR && errno != ECONNREFUSED)
            return done ? (int)done : -errno;
    }
    return (int)done;
}

int sock_failed(int err, const char *what)
{
    LOG(LOG_ERROR, "sending on the %s socket: %s", what, strerror(-err));
    return SHOAL_ESYS;
}

int sock_send(unsigned n, sock_dgram_fn describe, const void *ctx)
{
    struct mmsghdr msgs[SOCK_BATCH];
    struct iovec iov[SOCK_BATCH];
    struct sockaddr_storage to[SOCK_BATCH];
    int fds[SOCK_BATCH];
    unsigned done = 0;
    while (done < n) {
        unsigned k = n - done < SOCK_BATCH ? n - done : SOCK_BATCH, taken = 0;
        for (unsigned i = 0; i < k; i++)
            fds[i] = describe(ctx, done + i, &msgs[i], &iov[i], &to[i]);
        while (taken < k) {
            unsigned run = 1;
            while (taken + run < k && fds[taken + run] == fds[taken])
                run++;
            int sent = send_run(fds[taken], msgs + taken, run);
            if (sent == -EAGAIN || sent == -ENOBUFS)
                return (int)(done + taken);
            if (sent < 0) /* what went before counts; the next call meets the error first */
                return done + taken ? (int)(done + taken) : sent;
            taken += (unsigned)sent;
            if ((unsigned)sent < run)
                return (int)(done + taken);
        }
        done += k;
    }
    return (int)done;
}

void sock_rx_set(struct sock_rx *rx, unsigned i, void *buf, size_t cap)
{
    sock_msg(&rx->m[i], &rx->iov[i], buf, cap, &rx->from[i], sizeof rx->from[i]);
    if (rx->with_ctl)
        rx->m[i].msg_hdr.msg_control = rx->ctl[i].buf;
}

/* What a receive that failed returns: nothing there, or an error. */
static int recv_failed(void)
{
    return errno == EAGAIN || errno == EINTR ? 0 : SHOAL_ESYS;
}

/* One datagram into entry 0 by recvfrom(2), which copies no message
 * header in.  MSG_TRUNC makes it return the datagram's real length, which
 * tells a truncated one as recvmmsg's msg_flags do. */
static int recv_one(int fd, struct sock_rx *rx, int want_from)
{
    struct mmsghdr *m = &rx->m[0];
    socklen_t fromlen = sizeof rx->from[0];
    ssize_t n = sys_recvfrom(fd, rx->iov[0].iov_base, rx->iov[0].iov_len, MSG_DONTWAIT | MSG_TRUNC,
                         want_from ? (struct sockaddr *)&rx->from[0] : NULL, want_from ? &fromlen : NULL);
    if (n < 0)
        return recv_failed();
    int trunc = (size_t)n > rx->iov[0].iov_len;
    m->msg_len = trunc ? (unsigned)rx->iov[0].iov_len : (unsigned)n;
    m->msg_hdr.msg_flags = trunc ? MSG_TRUNC : 0;
    return 1;
}

int sock_rx_recv(int fd, struct sock_rx *rx, int want_from)
{
    return sock_rx_recv_n(fd, rx, rx->batch ? rx->n : 1, want_from);
}

int sock_rx_recv_n(int fd, struct sock_rx *rx, unsigned want, int want_from)
{
    rx->ctl_read = rx->with_ctl && want > 1;
    for (unsigned i = 0; rx->ctl_read && i < want; i++) /* the last receive shrank them to what it wrote */
        rx->m[i].msg_hdr.msg_controllen = sizeof rx->ctl[i];
    int got;
    if (want == 1) {
        got = recv_one(fd, rx, want_from);
    } else {
        got = sys_recvmmsg(fd, rx->m, want, MSG_DONTWAIT);
        if (got < 0)
            got = recv_failed();
    }
    for (int i = 0; i < got; i++) /* the kernel shrank them to the sources' sizes */
        rx->m[i].msg_hdr.msg_namelen = sizeof rx->from[i];
    rx->batch = rx->n > 1 && got == (int)want;
    if (got > 0)
        UTIL_STAGE(UTIL_STAGE_RECEIVED);
    return got;
}
