/* Node-local descriptor rendezvous, for bootstraps whose server cannot pass
 * descriptors (PMIx).  At the first exchange the lowest local rank (the
 * leader) binds a SOCK_SEQPACKET socket in a private per-job directory and
 * accepts one connection from every other local rank; then it removes the
 * socket and the directory, so nothing is left behind even if the job
 * dies.  Each exchange is shoalrun's FD/FDS messages over those
 * connections: every rank sends its descriptor, the leader hands the set
 * back in local-rank order.  docs/BOOT.md, "Descriptor rendezvous". */
#include "impl.h"
#include "shoal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Local ranks start within this of each other (it bounds only the
 * connection at the first exchange, which shoal_init makes). */
#define RDV_CONNECT_S 60

struct rdv_path {
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path) - 8];
    struct sockaddr_un addr;
};

static int rdv_path(const struct boot_rdv *r, struct rdv_path *p)
{
    int n = snprintf(p->dir, sizeof p->dir, "%s/shoal-%u-%016llx", r->base, (unsigned)getuid(),
                     (unsigned long long)r->job_id);
    p->addr = (struct sockaddr_un){.sun_family = AF_UNIX};
    if (n < 0 || (size_t)n >= sizeof p->dir) {
        LOG(LOG_ERROR, "descriptor rendezvous: directory name under %s is too long for a socket", r->base);
        return SHOAL_EBOOT;
    }
    snprintf(p->addr.sun_path, sizeof p->addr.sun_path, "%s/fdx", p->dir);
    return SHOAL_OK;
}

/* A directory of this uid only: others must neither connect nor plant a
 * socket of their own there. */
static int rdv_mkdir(const char *dir)
{
    struct stat sb;
    if (mkdir(dir, 0700) && errno != EEXIST) {
        LOG(LOG_ERROR, "descriptor rendezvous: cannot create %s: %s", dir, strerror(errno));
        return SHOAL_EBOOT;
    }
    if (lstat(dir, &sb) || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid() || (sb.st_mode & 0777) != 0700) {
        LOG(LOG_ERROR, "descriptor rendezvous: %s is not a directory of uid %u with mode 0700", dir,
            (unsigned)getuid());
        return SHOAL_EBOOT;
    }
    return SHOAL_OK;
}

static int rdv_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        LOG(LOG_ERROR, "descriptor rendezvous: socket: %s", strerror(errno));
    return fd;
}

static int rdv_local_index(const struct boot_rdv *r, int rank)
{
    for (int i = 0; i < r->nlocal; i++)
        if (r->local[i] == rank)
            return i;
    return -1;
}

static void rdv_say_missing(const struct boot_rdv *r, const struct rdv_path *p)
{
    char list[256] = "";
    size_t n = 0;
    for (int i = 1; i < r->nlocal && n + 16 < sizeof list; i++)
        if (r->conn[i] < 0)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? ", " : "", r->local[i]);
    LOG(LOG_ERROR, "descriptor rendezvous at %s: local ranks %s did not connect within %d s",
        p->addr.sun_path, list, RDV_CONNECT_S);
}

/* Takes one connection and its HELLO, which names a local rank. */
static int rdv_accept_one(struct boot_rdv *r, int lfd, uint64_t deadline)
{
    int rc = boot_wait(lfd, NULL, deadline);
    if (rc)
        return rc;
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0 && (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED))
        return SHOAL_OK;
    if (c < 0) {
        LOG(LOG_ERROR, "descriptor rendezvous: accept: %s", strerror(errno));
        return SHOAL_ESYS;
    }
    struct boot_msg_hdr h;
    struct boot_hello hello;
    int i = -1;
    rc = boot_wait(c, NULL, deadline);
    if (rc == SHOAL_OK)
        rc = boot_recv_msg(c, "a local rank", BOOT_MSG_HELLO, &h, &hello, sizeof hello, NULL, NULL);
    if (rc == SHOAL_OK && (h.len != sizeof hello || hello.job_id != r->job_id ||
                           (i = rdv_local_index(r, (int)hello.rank)) < 1 || r->conn[i] >= 0)) {
        LOG(LOG_ERROR, "descriptor rendezvous: a connection that is not a local rank of this job "
                       "(rank %u, job %016llx)", hello.rank, (unsigned long long)hello.job_id);
        rc = SHOAL_EBOOT;
    }
    if (rc) {
        close(c);
        return rc;
    }
    r->conn[i] = c;
    return SHOAL_OK;
}

static int rdv_lead(struct boot_rdv *r, const struct rdv_path *p)
{
    int rc = rdv_mkdir(p->dir);
    int lfd = rc ? -1 : rdv_socket();
    if (lfd < 0)
        return rc ? rc : SHOAL_ESYS;
    unlink(p->addr.sun_path); /* one left by a job that died with this id */
    if (bind(lfd, (const struct sockaddr *)&p->addr, sizeof p->addr) || listen(lfd, r->nlocal)) {
        LOG(LOG_ERROR, "descriptor rendezvous: cannot listen at %s: %s", p->addr.sun_path, strerror(errno));
        rc = SHOAL_EBOOT;
    }
    uint64_t deadline = util_now_ns() + RDV_CONNECT_S * 1000000000ull;
    for (int got = 1; rc == SHOAL_OK && got < r->nlocal;) {
        rc = rdv_accept_one(r, lfd, deadline);
        got = 1;
        for (int i = 1; i < r->nlocal; i++)
            got += r->conn[i] >= 0;
    }
    if (rc == SHOAL_ETIMEDOUT)
        rdv_say_missing(r, p);
    close(lfd);
    unlink(p->addr.sun_path);
    rmdir(p->dir);
    return rc;
}

static int rdv_join(struct boot_rdv *r, const struct rdv_path *p)
{
    uint64_t deadline = util_now_ns() + RDV_CONNECT_S * 1000000000ull;
    int fd = rdv_socket();
    if (fd < 0)
        return SHOAL_ESYS;
    /* The leader may not be listening yet: retry, serving meanwhile. */
    while (connect(fd, (const struct sockaddr *)&p->addr, sizeof p->addr)) {
        int err = errno;
        if ((err != ENOENT && err != ECONNREFUSED) || util_now_ns() >= deadline) {
            LOG(LOG_ERROR, "descriptor rendezvous: cannot reach local rank %d at %s within %d s: %s",
                r->local[0], p->addr.sun_path, RDV_CONNECT_S, strerror(err));
            close(fd);
            return SHOAL_EBOOT;
        }
        int rc = boot_wait(-1, NULL, util_now_ns() + 1000000);
        if (rc != SHOAL_ETIMEDOUT) {
            close(fd);
            return rc;
        }
    }
    struct boot_hello hello = {.job_id = r->job_id, .rank = (uint32_t)r->rank, .pid = (uint32_t)getpid()};
    int rc = boot_send_msg(fd, BOOT_MSG_HELLO, 0, &hello, sizeof hello, NULL, 0);
    if (rc) {
        close(fd);
        return rc;
    }
    r->conn[0] = fd;
    return SHOAL_OK;
}

static int rdv_connect(struct boot_rdv *r)
{
    struct rdv_path p;
    int rc = rdv_path(r, &p);
    if (rc)
        return rc;
    r->conn = malloc((size_t)r->nlocal * sizeof *r->conn);
    if (!r->conn)
        return SHOAL_ENOMEM;
    for (int i = 0; i < r->nlocal; i++)
        r->conn[i] = -1;
    rc = r->local[0] == r->rank ? rdv_lead(r, &p) : rdv_join(r, &p);
    if (rc) {
        boot_rdv_close(r);
        return rc;
    }
    r->connected = 1;
    LOG(LOG_DEBUG, "descriptors between the %d ranks of this host: through %s, led by rank %d", r->nlocal,
        p.addr.sun_path, r->local[0]);
    return SHOAL_OK;
}

static void rdv_peer_name(const struct boot_rdv *r, int i, char *buf, size_t n)
{
    snprintf(buf, n, "local rank %d (descriptor rendezvous)", r->local[i]);
}

/* Leader: every other local rank's descriptor, then the set to each. */
static int rdv_collect_and_hand_out(struct boot_rdv *r, int my_fd, int *fds)
{
    for (int q = 0; q < r->size; q++)
        fds[q] = -1;
    int *set = malloc((size_t)r->nlocal * sizeof *set);
    if (!set)
        return SHOAL_ENOMEM;
    int rc = (set[0] = fcntl(my_fd, F_DUPFD_CLOEXEC, 0)) < 0 ? SHOAL_ESYS : SHOAL_OK;
    int have = rc ? 0 : 1;
    while (rc == SHOAL_OK && have < r->nlocal) {
        char peer[64];
        struct boot_msg_hdr h;
        int got[BOOT_PROTO_MAX_FDS], n = 0;
        rdv_peer_name(r, have, peer, sizeof peer);
        rc = boot_recv_msg(r->conn[have], peer, BOOT_MSG_FD, &h, NULL, 0, got, &n);
        if (rc == SHOAL_OK && n != 1) {
            LOG(LOG_ERROR, "%s sent %d descriptors, expected 1", peer, n);
            rc = SHOAL_EBOOT;
        }
        for (int i = 0; i < n; i++) {
            if (rc == SHOAL_OK)
                set[have++] = got[i];
            else
                close(got[i]);
        }
    }
    for (int i = 1; rc == SHOAL_OK && i < r->nlocal; i++)
        for (int off = 0; rc == SHOAL_OK && off < r->nlocal; off += BOOT_PROTO_MAX_FDS) {
            int n = r->nlocal - off < BOOT_PROTO_MAX_FDS ? r->nlocal - off : BOOT_PROTO_MAX_FDS;
            rc = boot_send_msg(r->conn[i], BOOT_MSG_FDS, (uint32_t)off, NULL, 0, &set[off], n);
        }
    for (int i = 0; i < have; i++) {
        if (rc == SHOAL_OK)
            fds[r->local[i]] = set[i];
        else
            close(set[i]);
    }
    free(set);
    return rc;
}

int boot_rdv_exchange(struct boot_rdv *r, int my_fd, int *fds)
{
    boot_reserve_fds(r->nlocal);
    /* alone on the host: nothing to meet */
    int rc = r->connected || r->nlocal == 1 ? SHOAL_OK : rdv_connect(r);
    if (rc)
        return rc;
    if (r->local[0] == r->rank)
        return rdv_collect_and_hand_out(r, my_fd, fds);
    char peer[64];
    rdv_peer_name(r, 0, peer, sizeof peer);
    rc = boot_send_msg(r->conn[0], BOOT_MSG_FD, 0, NULL, 0, &my_fd, 1);
    return rc ? rc : boot_recv_fds(r->conn[0], peer, r->local, r->nlocal, r->size, fds);
}

void boot_rdv_close(struct boot_rdv *r)
{
    for (int i = 0; r->conn && i < r->nlocal; i++)
        if (r->conn[i] >= 0)
            close(r->conn[i]);
    free(r->conn);
    r->conn = NULL;
    r->connected = 0;
}
