/* Framing of launcher <-> rank messages (docs/BOOT.md). */
#include "proto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for the kernel's per-message maximum, so an oversized batch shows up
 * as a protocol error instead of silently lost descriptors. */
#define KERNEL_SCM_MAX_FD 253

ssize_t boot_proto_send(int sock, int flags, enum boot_msg_type type, uint32_t arg,
                        const void *payload, uint32_t len, const int *fds, int nfds)
{
    struct boot_msg_hdr h = {
        .magic = BOOT_PROTO_MAGIC, .version = BOOT_PROTO_VERSION,
        .type = (uint16_t)type, .len = len, .arg = arg,
    };
    struct iovec iov[2] = {{&h, sizeof h}, {(void *)payload, len}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * BOOT_PROTO_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (nfds > 0) {
        m.msg_control = ctl.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &m, flags | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

/* Moves the SCM_RIGHTS descriptors of m into fds; returns their count, or
 * -1 after closing them all when they do not fit in max. */
static int take_fds(struct msghdr *m, int *fds, int max)
{
    int n = 0, over = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < cnt; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof fd);
            if (n < max)
                fds[n++] = fd;
            else {
                close(fd);
                over = 1;
            }
        }
    }
    if (!over)
        return n;
    while (n > 0)
        close(fds[--n]);
    return -1;
}

static int check_header(const struct boot_msg_hdr *h, ssize_t got, int msg_flags)
{
    if (msg_flags & MSG_CTRUNC)
        return EMFILE;
    if ((size_t)got < sizeof *h || h->magic != BOOT_PROTO_MAGIC)
        return EPROTO;
    if (h->version != BOOT_PROTO_VERSION)
        return EPROTONOSUPPORT;
    if (msg_flags & MSG_TRUNC)
        return EMSGSIZE;
    return (size_t)got - sizeof *h == h->len ? 0 : EPROTO;
}

int boot_proto_recv(int sock, int flags, struct boot_msg_hdr *h, void *buf, size_t cap,
                    int *fds, int *nfds)
{
    struct iovec iov[2] = {{h, sizeof *h}, {buf, cap}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * KERNEL_SCM_MAX_FD)];
        struct cmsghdr align;
    } ctl;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2,
                       .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t got;
    do {
        got = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    if (got <= 0)
        return (int)got;
    int n = take_fds(&m, fds, fds ? BOOT_PROTO_MAX_FDS : 0);
    int err = n < 0 ? EPROTO : check_header(h, got, m.msg_flags);
    if (err) {
        while (n > 0)
            close(fds[--n]);
        errno = err;
        return -1;
    }
    if (nfds)
        *nfds = n;
    return 1;
}
