/* Rank side of the launcher protocol: joins the job shoalrun started, or
 * runs as a singleton when started alone.  docs/BOOT.md is the protocol. */
#include "boot.h"
#include "proto.h"
#include "shoal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* How long a wait on the launcher sleeps before it looks at the failed flag
 * again; the launcher also closes our socket on failure, so this only
 * bounds the delay if that notice is somehow missed. */
#define BOOT_POLL_MS 100
/* Descriptors kept free beyond an exchange's peers for the caller's use. */
#define BOOT_FD_HEADROOM 256
#define BOOT_ABORT_TEXT_MAX 1024

static struct {
    int inited;
    int hang_ready;                    /* boot_hang_ready was called */
    int net_local;                     /* SHOAL_NET_LOCAL=1: every rank its own host for shm */
    int sock;                          /* -1 for a singleton */
    int rank, size;
    const struct boot_job_block *job;  /* NULL for a singleton */
} st = {.sock = -1};

static const char *var_name(enum util_cfg_id id)
{
    size_t n;
    return util_config_table(&n)[id].name;
}

static int launched_by_shoalrun(void)
{
    return util_config_is_set(CFG_RANK) || util_config_is_set(CFG_SIZE) ||
           util_config_is_set(CFG_BOOT_FD) || util_config_is_set(CFG_JOB_FD) ||
           util_config_is_set(CFG_JOB_ID);
}

/* Reads one launcher variable as an integer in [lo, hi]; every launcher
 * variable must be present once any of them is. */
static int env_value(enum util_cfg_id id, unsigned long long lo, unsigned long long hi,
                     unsigned long long *out)
{
    const char *s = util_config_str(id);
    if (!util_config_is_set(id) || !*s) {
        LOG(LOG_ERROR, "%s is not set but other shoalrun variables are; start the "
                       "program with shoalrun or unset the SHOAL_RANK/SIZE/BOOT_FD/JOB_FD/JOB_ID variables",
            var_name(id));
        return SHOAL_EBOOT;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        LOG(LOG_ERROR, "%s=\"%s\" is not a number in [%llu, %llu]", var_name(id), s, lo, hi);
        return SHOAL_EBOOT;
    }
    *out = v;
    return SHOAL_OK;
}

static int check_socket(int fd)
{
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_SEQPACKET) {
        LOG(LOG_ERROR, "%s=%d is not the launcher's socket (%s)", var_name(CFG_BOOT_FD), fd,
            errno == EBADF ? "descriptor not open" : "wrong descriptor type");
        return SHOAL_EBOOT;
    }
    /* Programs the rank starts must not hold the job's connection open. */
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return SHOAL_OK;
}

static int map_job(int fd, uint64_t size, uint64_t job_id, const struct boot_job_block **out)
{
    struct stat sb;
    if (fstat(fd, &sb) || (size_t)sb.st_size < sizeof(struct boot_job_block)) {
        LOG(LOG_ERROR, "%s=%d is not a job control block (%s)", var_name(CFG_JOB_FD), fd,
            errno == EBADF ? "descriptor not open" : "too small");
        return SHOAL_EBOOT;
    }
    const struct boot_job_block *j = mmap(NULL, sizeof *j, PROT_READ, MAP_SHARED, fd, 0);
    if (j == MAP_FAILED) {
        LOG(LOG_ERROR, "cannot map the job control block: %s", strerror(errno));
        return SHOAL_EBOOT;
    }
    int bad_host = j->nhosts == 0 || j->nhosts > size;
    for (uint64_t r = 0; r < size && !bad_host && j->version == BOOT_JOB_VERSION; r++)
        bad_host = j->host[r] >= j->nhosts;
    if (j->magic != BOOT_JOB_MAGIC || j->version != BOOT_JOB_VERSION || j->size != size ||
        j->job_id != job_id || bad_host) {
        LOG(LOG_ERROR, "job control block does not match this job (version %u, expected %u; "
                       "%u ranks, expected %llu)", j->version, BOOT_JOB_VERSION, j->size,
            (unsigned long long)size);
        munmap((void *)j, sizeof *j);
        return SHOAL_EBOOT;
    }
    *out = j;
    return SHOAL_OK;
}

int boot_peer_failed(int *rank, const char **reason)
{
    const struct boot_job_block *j = st.job;
    if (!j || !atomic_load_explicit(&j->failed, memory_order_acquire))
        return 0;
    if (rank)
        *rank = j->failed_rank;
    if (reason)
        *reason = j->failed_reason;
    return 1;
}

static int peer_dead(void)
{
    int rank = -1;
    const char *why = "unknown";
    boot_peer_failed(&rank, &why);
    if (rank >= 0)
        LOG(LOG_INFO, "rank %d failed (%s); leaving the boot exchange", rank, why);
    else
        LOG(LOG_INFO, "the launcher ended the job (%s)", why);
    return SHOAL_EPEERDEAD;
}

static int send_msg(enum boot_msg_type type, uint32_t arg, const void *p, uint32_t len,
                    const int *fds, int nfds)
{
    while (boot_proto_send(st.sock, 0, type, arg, p, len, fds, nfds) < 0) {
        if (errno != ETOOMANYREFS) {
            LOG(LOG_ERROR, "cannot send to the launcher: %s", strerror(errno));
            return SHOAL_EBOOT;
        }
        /* Descriptors in flight count against the user's open-file limit
         * until the peers have received theirs; wait for them to drain. */
        if (boot_peer_failed(NULL, NULL))
            return peer_dead();
        poll(NULL, 0, 1);
    }
    return SHOAL_OK;
}

static int join_launcher(uint64_t job_id)
{
    struct boot_hello hello = {.job_id = job_id, .rank = (uint32_t)st.rank,
                               .pid = (uint32_t)getpid()};
    return send_msg(BOOT_MSG_HELLO, st.hang_ready ? BOOT_HELLO_HANG : 0, &hello, sizeof hello, NULL, 0);
}

static int init_launched(struct boot_info *out)
{
    unsigned long long rank, size, bfd, jfd, job_id;
    int rc;
    if ((rc = env_value(CFG_SIZE, 1, BOOT_MAX_RANKS, &size)) ||
        (rc = env_value(CFG_RANK, 0, size - 1, &rank)) ||
        (rc = env_value(CFG_BOOT_FD, 0, INT32_MAX, &bfd)) ||
        (rc = env_value(CFG_JOB_FD, 0, INT32_MAX, &jfd)) ||
        (rc = env_value(CFG_JOB_ID, 0, UINT64_MAX, &job_id)))
        return rc;
    if ((rc = check_socket((int)bfd)) || (rc = map_job((int)jfd, size, job_id, &st.job)))
        return rc;
    /* The mapping outlives the descriptor; closing it keeps it out of
     * programs this rank starts. */
    close((int)jfd);
    st.sock = (int)bfd;
    st.rank = (int)rank;
    st.size = (int)size;
    if ((rc = join_launcher(job_id))) {
        munmap((void *)st.job, sizeof *st.job);
        st.job = NULL;
        st.sock = -1;
        return rc;
    }
    *out = (struct boot_info){.rank = st.rank, .size = st.size, .job_id = job_id,
                              .host = st.job->host[st.rank], .job = st.job};
    return SHOAL_OK;
}

int boot_init(struct boot_info *out)
{
    if (st.inited)
        return SHOAL_EINIT;
    struct boot_info info = {.rank = 0, .size = 1, .singleton = 1};
    st.rank = 0;
    st.size = 1;
    if (launched_by_shoalrun()) {
        int rc = init_launched(&info);
        if (rc)
            return rc;
    }
    util_log_set_identity(st.rank);
    st.net_local = util_config_int(CFG_NET_LOCAL) == 1;
    st.inited = 1;
    if (out)
        *out = info;
    return SHOAL_OK;
}

static void (*progress_hook)(void);

void boot_set_progress(void (*fn)(void))
{
    progress_hook = fn;
}

/* Blocks until the launcher has something for us, but never past the
 * moment the job is marked failed.  With a progress hook set, it runs
 * between short polls, so a peer that waits on us meanwhile is served. */
static int wait_readable(void)
{
    for (unsigned spins = 0;; spins++) {
        if (boot_peer_failed(NULL, NULL))
            return peer_dead();
        if (progress_hook)
            progress_hook();
        /* with a hook: spin briefly, then 1 ms polls so an oversubscribed
         * host still gives the launcher its CPU */
        int timeout = !progress_hook ? BOOT_POLL_MS : spins < 1000 ? 0 : 1;
        struct pollfd p = {.fd = st.sock, .events = POLLIN};
        int n = poll(&p, 1, timeout);
        if (n > 0)
            return SHOAL_OK;
        if (n < 0 && errno != EINTR) {
            LOG(LOG_ERROR, "waiting for the launcher: %s", strerror(errno));
            return SHOAL_ESYS;
        }
    }
}

/* Receives the next message, which must be of the given type. */
static int recv_msg(enum boot_msg_type type, struct boot_msg_hdr *h, void *buf, size_t cap,
                    int *fds, int *nfds)
{
    int rc = wait_readable();
    if (rc)
        return rc;
    int got = boot_proto_recv(st.sock, 0, h, buf, cap, fds, nfds);
    if (got == 0 || (got < 0 && (errno == ECONNRESET || errno == EPIPE))) {
        /* The launcher closes our socket when it ends the job. */
        if (boot_peer_failed(NULL, NULL))
            return peer_dead();
        LOG(LOG_ERROR, "the launcher closed the connection");
        return SHOAL_EBOOT;
    }
    if (got < 0) {
        int err = errno;
        LOG(LOG_ERROR, "bad message from the launcher: %s%s", strerror(err),
            err == EMFILE ? " (raise the open-file limit, ulimit -n)" : "");
        return SHOAL_EBOOT;
    }
    if (h->type == type)
        return SHOAL_OK;
    if (nfds)
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
    LOG(LOG_ERROR, "unexpected message type %u from the launcher (expected %u)", h->type, type);
    return SHOAL_EBOOT;
}

/* An exchange hands us one descriptor per rank; make room for them so the
 * kernel does not drop some for lack of descriptor slots. */
static void reserve_fds(int count)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)count + BOOT_FD_HEADROOM;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

int boot_host_of(int rank)
{
    return st.job && rank >= 0 && rank < st.size ? st.job->host[rank] : 0;
}

int boot_shm_peers(int a, int b)
{
    return a == b || (!st.net_local && boot_host_of(a) == boot_host_of(b));
}

int boot_rank_local(int rank)
{
    return boot_shm_peers(st.rank, rank);
}

/* The ranks of this host, in rank order: the launcher sends their
 * descriptors in that order (FDS's arg indexes this list). */
static int local_ranks(int *list)
{
    int n = 0;
    for (int r = 0; r < st.size; r++)
        if (boot_host_of(r) == boot_host_of(st.rank))
            list[n++] = r;
    return n;
}

static int recv_fds(int *fds)
{
    int *local = malloc((size_t)st.size * sizeof *local);
    if (!local)
        return SHOAL_ENOMEM;
    int nlocal = local_ranks(local), got = 0, rc = SHOAL_OK;
    for (int r = 0; r < st.size; r++)
        fds[r] = -1;
    while (got < nlocal && rc == SHOAL_OK) {
        struct boot_msg_hdr h;
        int batch[BOOT_PROTO_MAX_FDS], n = 0;
        int want = nlocal - got < BOOT_PROTO_MAX_FDS ? nlocal - got : BOOT_PROTO_MAX_FDS;
        rc = recv_msg(BOOT_MSG_FDS, &h, NULL, 0, batch, &n);
        if (rc == SHOAL_OK && (h.arg != (uint32_t)got || n != want)) {
            LOG(LOG_ERROR, "launcher sent descriptors %u..+%d, expected %d..+%d", h.arg, n, got, want);
            rc = SHOAL_EBOOT;
        }
        for (int i = 0; i < n; i++) {
            if (rc == SHOAL_OK)
                fds[local[got + i]] = batch[i];
            else
                close(batch[i]);
        }
        if (rc == SHOAL_OK)
            got += n;
    }
    if (rc)
        while (got > 0) {
            got--;
            close(fds[local[got]]);
            fds[local[got]] = -1; /* the caller may close what it was given */
        }
    free(local);
    return rc;
}

int boot_exchange_fd(int my_fd, int *fds)
{
    if (!st.inited)
        return SHOAL_ENOTINIT;
    if (my_fd < 0 || !fds)
        return SHOAL_EINVAL;
    if (st.sock < 0) {
        fds[0] = fcntl(my_fd, F_DUPFD_CLOEXEC, 0);
        return fds[0] < 0 ? SHOAL_ESYS : SHOAL_OK;
    }
    reserve_fds(st.size);
    int rc = send_msg(BOOT_MSG_FD, 0, NULL, 0, &my_fd, 1);
    return rc ? rc : recv_fds(fds);
}

static int send_contribution(const void *mine, size_t len)
{
    size_t off = 0;
    do {
        size_t n = len - off < BOOT_PROTO_MAX_PAYLOAD ? len - off : BOOT_PROTO_MAX_PAYLOAD;
        int rc = send_msg(BOOT_MSG_GATHER, (uint32_t)len, (const char *)mine + off,
                          (uint32_t)n, NULL, 0);
        if (rc)
            return rc;
        off += n;
    } while (off < len);
    return SHOAL_OK;
}

static int recv_gathered(void *all, size_t total)
{
    size_t off = 0;
    do {
        struct boot_msg_hdr h;
        int rc = recv_msg(BOOT_MSG_GATHERED, &h, (char *)all + off, total - off, NULL, NULL);
        if (rc)
            return rc;
        if (h.len == 0 && total > 0) {
            LOG(LOG_ERROR, "launcher sent an empty part of a %zu-byte allgather", total);
            return SHOAL_EBOOT;
        }
        off += h.len;
    } while (off < total);
    return SHOAL_OK;
}

int boot_allgather(const void *mine, size_t len, void *all)
{
    if (!st.inited)
        return SHOAL_ENOTINIT;
    if (len && (!mine || !all))
        return SHOAL_EINVAL;
    if (len > UINT32_MAX)
        return SHOAL_ETOOBIG;
    static char nothing; /* a barrier's NULL buffers still take offsets below */
    if (len == 0)
        mine = all = &nothing;
    if (st.sock < 0) {
        if (len)
            memmove(all, mine, len);
        return SHOAL_OK;
    }
    int rc = send_contribution(mine, len);
    return rc ? rc : recv_gathered(all, len * (size_t)st.size);
}

int boot_barrier(void)
{
    return boot_allgather(NULL, 0, NULL);
}

void boot_abort_notify(int exitcode, const char *msg)
{
    if (st.sock < 0)
        return;
    size_t len = msg ? strnlen(msg, BOOT_ABORT_TEXT_MAX) : 0;
    /* Never block an aborting process on a launcher that is not reading. */
    boot_proto_send(st.sock, MSG_DONTWAIT, BOOT_MSG_ABORT, (uint32_t)exitcode, msg,
                    (uint32_t)len, NULL, 0);
}

void boot_hang_ready(void)
{
    st.hang_ready = 1;
}

void boot_hang_report(const struct boot_hang *report, unsigned why)
{
    if (st.sock >= 0)
        boot_proto_send(st.sock, MSG_DONTWAIT, BOOT_MSG_HANG, why, report, sizeof *report, NULL, 0);
}

static void boot_teardown(int finalized)
{
    if (st.sock >= 0) {
        if (finalized)
            send_msg(BOOT_MSG_FINALIZE, 0, NULL, 0, NULL, 0);
        close(st.sock);
        munmap((void *)st.job, sizeof *st.job);
    }
    st.sock = -1;
    st.job = NULL;
    st.inited = 0;
    st.hang_ready = 0;
    progress_hook = NULL;
}

void boot_finalize(void)
{
    boot_teardown(1);
}

void boot_leave(void)
{
    boot_teardown(0);
}
