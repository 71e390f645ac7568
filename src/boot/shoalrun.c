/* The shoalrun bootstrap: joins the job shoalrun started through the two
 * descriptors it passes (a SOCK_SEQPACKET socket and the job control block
 * memfd).  docs/BOOT.md is the protocol. */
#include "impl.h"
#include "shoal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BOOT_ABORT_TEXT_MAX 1024
#define LAUNCHER "the launcher"

static struct {
    int sock;
    int rank, size;
    const struct boot_job_block *job;
} sr = {.sock = -1};

static const char *var_name(enum util_cfg_id id)
{
    size_t n;
    return util_config_table(&n)[id].name;
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

static void sr_failure(int *rank, const char **reason)
{
    *rank = sr.job->failed_rank;
    *reason = sr.job->failed_reason;
}

static int join_launcher(uint64_t job_id)
{
    struct boot_hello hello = {.job_id = job_id, .rank = (uint32_t)sr.rank,
                               .pid = (uint32_t)getpid()};
    return boot_send_msg(sr.sock, BOOT_MSG_HELLO, boot_hang_on_sigquit ? BOOT_HELLO_HANG : 0, &hello,
                         sizeof hello, NULL, 0);
}

static int sr_init(struct boot_info *out, const _Atomic uint32_t **failed)
{
    unsigned long long rank, size, bfd, jfd, job_id;
    int rc;
    if ((rc = env_value(CFG_SIZE, 1, BOOT_MAX_RANKS, &size)) ||
        (rc = env_value(CFG_RANK, 0, size - 1, &rank)) ||
        (rc = env_value(CFG_BOOT_FD, 0, INT32_MAX, &bfd)) ||
        (rc = env_value(CFG_JOB_FD, 0, INT32_MAX, &jfd)) ||
        (rc = env_value(CFG_JOB_ID, 0, UINT64_MAX, &job_id)))
        return rc;
    if ((rc = check_socket((int)bfd)) || (rc = map_job((int)jfd, size, job_id, &sr.job)))
        return rc;
    /* The mapping outlives the descriptor; closing it keeps it out of
     * programs this rank starts. */
    close((int)jfd);
    sr.sock = (int)bfd;
    sr.rank = (int)rank;
    sr.size = (int)size;
    if ((rc = join_launcher(job_id))) {
        munmap((void *)sr.job, sizeof *sr.job);
        sr.job = NULL;
        sr.sock = -1;
        return rc;
    }
    *out = (struct boot_info){.rank = sr.rank, .size = sr.size, .job_id = job_id,
                              .host = sr.job->host[sr.rank], .nhosts = (int)sr.job->nhosts,
                              .job = sr.job};
    *failed = &sr.job->failed;
    return SHOAL_OK;
}

static int sr_host_of(int rank)
{
    return sr.job->host[rank];
}

/* The ranks of this host, in rank order: the launcher sends their
 * descriptors in that order (FDS's arg indexes this list). */
static int local_ranks(int *list)
{
    int n = 0;
    for (int r = 0; r < sr.size; r++)
        if (sr_host_of(r) == sr_host_of(sr.rank))
            list[n++] = r;
    return n;
}

static int sr_exchange_fd(int my_fd, int *fds)
{
    boot_reserve_fds(sr.size);
    int rc = boot_send_msg(sr.sock, BOOT_MSG_FD, 0, NULL, 0, &my_fd, 1);
    if (rc)
        return rc;
    int *local = malloc((size_t)sr.size * sizeof *local);
    if (!local)
        return SHOAL_ENOMEM;
    rc = boot_recv_fds(sr.sock, LAUNCHER, local, local_ranks(local), sr.size, fds);
    free(local);
    return rc;
}

static int send_contribution(const void *mine, size_t len)
{
    size_t off = 0;
    do {
        size_t n = len - off < BOOT_PROTO_MAX_PAYLOAD ? len - off : BOOT_PROTO_MAX_PAYLOAD;
        int rc = boot_send_msg(sr.sock, BOOT_MSG_GATHER, (uint32_t)len, (const char *)mine + off,
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
        int rc = boot_recv_msg(sr.sock, LAUNCHER, BOOT_MSG_GATHERED, &h, (char *)all + off, total - off,
                               NULL, NULL);
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

static int sr_allgather(const void *mine, size_t len, void *all)
{
    static char nothing; /* a barrier's NULL buffers still take offsets below */
    if (len == 0)
        mine = all = &nothing;
    int rc = send_contribution(mine, len);
    return rc ? rc : recv_gathered(all, len * (size_t)sr.size);
}

static void sr_abort_notify(int exitcode, const char *msg)
{
    size_t len = msg ? strnlen(msg, BOOT_ABORT_TEXT_MAX) : 0;
    /* Never block an aborting process on a launcher that is not reading. */
    boot_proto_send(sr.sock, MSG_DONTWAIT, BOOT_MSG_ABORT, (uint32_t)exitcode, msg, (uint32_t)len, NULL, 0);
}

static void sr_hang_report(const struct boot_hang *report, unsigned why)
{
    boot_proto_send(sr.sock, MSG_DONTWAIT, BOOT_MSG_HANG, why, report, sizeof *report, NULL, 0);
}

static void sr_teardown(int finalized)
{
    if (finalized)
        boot_send_msg(sr.sock, BOOT_MSG_FINALIZE, 0, NULL, 0, NULL, 0);
    close(sr.sock);
    munmap((void *)sr.job, sizeof *sr.job);
    sr.sock = -1;
    sr.job = NULL;
}

const struct boot_ops boot_shoalrun_ops = {
    .name = "shoalrun",
    .init = sr_init,
    .host_of = sr_host_of,
    .exchange_fd = sr_exchange_fd,
    .allgather = sr_allgather,
    .failure = sr_failure,
    .abort_notify = sr_abort_notify,
    .hang_report = sr_hang_report,
    .teardown = sr_teardown,
};
