/* The boot layer's front: chooses a bootstrap from the environment (in
 * boot_choose, the one place that does) and forwards boot.h's calls to it;
 * holds what every bootstrap shares (locality rules, the progress hook,
 * waits and descriptor messages).  docs/BOOT.md describes the interface. */
#include "impl.h"
#include "shoal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a wait without a progress hook sleeps before it looks at the
 * failed flag again; launchers also close or fail what we wait on when
 * the job ends, so this only bounds the delay if that notice is missed. */
#define BOOT_POLL_MS 100
/* Descriptors kept free beyond an exchange's peers for the caller's use. */
#define BOOT_FD_HEADROOM 256

static const _Atomic uint32_t no_failure;

static struct {
    const struct boot_ops *ops;
    const _Atomic uint32_t *failed;    /* the chosen bootstrap's failed word */
    int net_local;                     /* SHOAL_NET_LOCAL=1: every rank its own host for shm */
    int rank, size;
    uint64_t job_id;
} st = {.failed = &no_failure};

int boot_hang_on_sigquit;
static void (*progress_hook)(void);

/* Launchers shoal cannot join, known by the variables they set: started
 * under one, a program must stop with a message saying how to run it
 * rather than run as N unrelated singletons.  Read in this one table (they
 * are not shoal's settings); the first row that matches names the
 * launcher.  A launch of one process matches none and runs as a singleton. */
static const struct boot_mark {
    const char *var;  /* set by the launcher (with more_than_one: a number > 1) */
    int more_than_one;
    const char *also; /* must be set as well; NULL: no condition */
    const char *launcher;
    const char *how;
} boot_marks[] = {
    {"MPI_LOCALNRANKS", 0, NULL, "MPICH's hydra (mpiexec/mpirun)",
     "hydra offers only PMI-1/PMI-2, which shoal does not speak: start the program with shoalrun, "
     "or under a PMIx launcher (Open MPI's mpirun, srun --mpi=pmix)"},
    {"PMI_FD", 0, "SLURM_STEP_ID", "Slurm's srun --mpi=pmi2",
     "run it with srun --mpi=pmix (or MpiDefault=pmix in slurm.conf)"},
    {"SLURM_NTASKS", 1, "SLURM_STEP_ID", "Slurm's srun without --mpi=pmix",
     "run it with srun --mpi=pmix (or MpiDefault=pmix in slurm.conf)"},
    {"PMI_SIZE", 1, NULL, "a PMI-1/PMI-2 launcher",
     "start the program with shoalrun, or under a PMIx launcher (Open MPI's mpirun, srun --mpi=pmix)"},
    {"OMPI_COMM_WORLD_SIZE", 1, NULL, "Open MPI's mpirun without a PMIx server",
     "use an Open MPI built with PMIx (Open MPI 4 and later are), or shoalrun"},
};

/* The variables that say a PMIx server launched us. */
static const char *const boot_pmix_vars[] = {"PMIX_NAMESPACE", "PMIX_RANK"};

static int launched_by_shoalrun(void)
{
    return util_config_is_set(CFG_RANK) || util_config_is_set(CFG_SIZE) ||
           util_config_is_set(CFG_BOOT_FD) || util_config_is_set(CFG_JOB_FD) ||
           util_config_is_set(CFG_JOB_ID);
}

static int mark_matches(const struct boot_mark *m)
{
    const char *v = getenv(m->var);
    if (!v || (m->also && !getenv(m->also)))
        return 0;
    return !m->more_than_one || strtol(v, NULL, 10) > 1;
}

static const char *pmix_mark(void)
{
    for (size_t i = 0; i < sizeof boot_pmix_vars / sizeof boot_pmix_vars[0]; i++)
        if (getenv(boot_pmix_vars[i]))
            return boot_pmix_vars[i];
    return NULL;
}

static int choose(const struct boot_ops **ops, char *why, size_t n)
{
    const char *pv = pmix_mark();
    if (launched_by_shoalrun()) {
        *ops = &boot_shoalrun_ops;
        snprintf(why, n, "started by shoalrun (SHOAL_RANK and the other SHOAL_* launch variables)");
        return SHOAL_OK;
    }
    if (pv) {
#ifdef SHOAL_HAVE_PMIX
        *ops = &boot_pmix_ops;
        snprintf(why, n, "started by a PMIx launcher (%s=%s)", pv, getenv(pv));
        return SHOAL_OK;
#else
        *ops = NULL;
        snprintf(why, n, "%s=%s says a PMIx launcher (mpirun, srun --mpi=pmix) started this program, but "
                 "this shoal was built without PMIx (libpmix was not found at configure time): install "
                 "libpmix-dev so that pkg-config finds pmix, rebuild shoal, or start the program with shoalrun",
                 pv, getenv(pv));
        return SHOAL_EBOOT;
#endif
    }
    for (size_t i = 0; i < sizeof boot_marks / sizeof boot_marks[0]; i++) {
        const struct boot_mark *m = &boot_marks[i];
        if (mark_matches(m)) {
            *ops = NULL;
            snprintf(why, n, "started by %s (%s=%s), which shoal cannot join: %s", m->launcher, m->var,
                     getenv(m->var), m->how);
            return SHOAL_EBOOT;
        }
    }
    *ops = &boot_singleton_ops;
    snprintf(why, n, "no launcher: rank 0 of 1");
    return SHOAL_OK;
}

int boot_choose(const char **name, char *why, size_t n)
{
    const struct boot_ops *ops;
    int rc = choose(&ops, why, n);
    if (name)
        *name = ops ? ops->name : NULL;
    return rc;
}

const char *boot_builtin(void)
{
#ifdef SHOAL_HAVE_PMIX
    return "shoalrun, pmix, singleton";
#else
    return "shoalrun, singleton (pmix: not built, libpmix was not found)";
#endif
}

int boot_init(struct boot_info *out)
{
    if (st.ops)
        return SHOAL_EINIT;
    char why[512];
    const struct boot_ops *ops;
    if (choose(&ops, why, sizeof why)) {
        LOG(LOG_ERROR, "%s", why);
        return SHOAL_EBOOT;
    }
    struct boot_info info = {.size = 1, .nhosts = 1};
    const _Atomic uint32_t *failed = &no_failure;
    int rc = ops->init(&info, &failed);
    if (rc)
        return rc;
    info.boot = ops->name;
    info.singleton = ops == &boot_singleton_ops;
    st.ops = ops;
    st.failed = failed;
    st.rank = info.rank;
    st.size = info.size;
    st.job_id = info.job_id;
    util_log_set_identity(st.rank);
    st.net_local = util_config_int(CFG_NET_LOCAL) == 1;
    LOG(LOG_DEBUG, "bootstrap %s: %s", ops->name, why);
    if (out)
        *out = info;
    return SHOAL_OK;
}

int boot_peer_failed(int *rank, const char **reason)
{
    if (!atomic_load_explicit(st.failed, memory_order_acquire))
        return 0;
    int r = -1;
    const char *why = "unknown";
    st.ops->failure(&r, &why);
    if (rank)
        *rank = r;
    if (reason)
        *reason = why;
    return 1;
}

int boot_peer_dead(void)
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

void boot_set_progress(void (*fn)(void))
{
    progress_hook = fn;
}

int boot_wait(int fd, const atomic_int *flag, uint64_t deadline_ns)
{
    for (unsigned spins = 0;; spins++) {
        if (flag && atomic_load_explicit(flag, memory_order_acquire))
            return SHOAL_OK;
        if (deadline_ns && util_now_ns() >= deadline_ns)
            return SHOAL_ETIMEDOUT;
        if (boot_peer_failed(NULL, NULL))
            return boot_peer_dead();
        if (progress_hook)
            progress_hook();
        /* spin briefly, then 1 ms polls so an oversubscribed host still
         * gives the launcher its CPU; a socket without a hook sleeps in poll */
        int timeout = fd >= 0 && !progress_hook ? BOOT_POLL_MS : spins < 1000 ? 0 : 1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, timeout);
        if (n > 0 && fd >= 0)
            return SHOAL_OK;
        if (n < 0 && errno != EINTR) {
            LOG(LOG_ERROR, "waiting for the bootstrap: %s", strerror(errno));
            return SHOAL_ESYS;
        }
    }
}

int boot_send_msg(int sock, enum boot_msg_type type, uint32_t arg, const void *p, uint32_t len,
                  const int *fds, int nfds)
{
    while (boot_proto_send(sock, 0, type, arg, p, len, fds, nfds) < 0) {
        if (errno != ETOOMANYREFS) {
            LOG(LOG_ERROR, "cannot send to the bootstrap's socket: %s", strerror(errno));
            return SHOAL_EBOOT;
        }
        if (boot_peer_failed(NULL, NULL))
            return boot_peer_dead();
        poll(NULL, 0, 1);
    }
    return SHOAL_OK;
}

int boot_recv_msg(int sock, const char *peer, enum boot_msg_type type, struct boot_msg_hdr *h,
                  void *buf, size_t cap, int *fds, int *nfds)
{
    int rc = boot_wait(sock, NULL, 0);
    if (rc)
        return rc;
    int got = boot_proto_recv(sock, 0, h, buf, cap, fds, nfds);
    if (got == 0 || (got < 0 && (errno == ECONNRESET || errno == EPIPE))) {
        /* The launcher closes our socket when it ends the job. */
        if (boot_peer_failed(NULL, NULL))
            return boot_peer_dead();
        LOG(LOG_ERROR, "%s closed the connection", peer);
        return SHOAL_EBOOT;
    }
    if (got < 0) {
        int err = errno;
        LOG(LOG_ERROR, "bad message from %s: %s%s", peer, strerror(err),
            err == EMFILE ? " (raise the open-file limit, ulimit -n)" : "");
        return SHOAL_EBOOT;
    }
    if (h->type == type)
        return SHOAL_OK;
    if (nfds)
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
    LOG(LOG_ERROR, "unexpected message type %u from %s (expected %u)", h->type, peer, type);
    return SHOAL_EBOOT;
}

int boot_recv_fds(int sock, const char *peer, const int *local, int nlocal, int size, int *fds)
{
    int got = 0, rc = SHOAL_OK;
    for (int r = 0; r < size; r++)
        fds[r] = -1;
    while (got < nlocal && rc == SHOAL_OK) {
        struct boot_msg_hdr h;
        int batch[BOOT_PROTO_MAX_FDS], n = 0;
        int want = nlocal - got < BOOT_PROTO_MAX_FDS ? nlocal - got : BOOT_PROTO_MAX_FDS;
        rc = boot_recv_msg(sock, peer, BOOT_MSG_FDS, &h, NULL, 0, batch, &n);
        if (rc == SHOAL_OK && (h.arg != (uint32_t)got || n != want)) {
            LOG(LOG_ERROR, "%s sent descriptors %u..+%d, expected %d..+%d", peer, h.arg, n, got, want);
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
    return rc;
}

void boot_reserve_fds(int count)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)count + BOOT_FD_HEADROOM;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
    setrlimit(RLIMIT_NOFILE, &rl);
}

uint64_t boot_job_id(void)
{
    return st.job_id;
}

int boot_host_of(int rank)
{
    return st.ops && rank >= 0 && rank < st.size ? st.ops->host_of(rank) : 0;
}

int boot_shm_peers(int a, int b)
{
    return a == b || (!st.net_local && boot_host_of(a) == boot_host_of(b));
}

int boot_rank_local(int rank)
{
    return boot_shm_peers(st.rank, rank);
}

int boot_exchange_fd(int my_fd, int *fds)
{
    if (!st.ops)
        return SHOAL_ENOTINIT;
    if (my_fd < 0 || !fds)
        return SHOAL_EINVAL;
    return st.ops->exchange_fd(my_fd, fds);
}

int boot_allgather(const void *mine, size_t len, void *all)
{
    if (!st.ops)
        return SHOAL_ENOTINIT;
    if (len && (!mine || !all))
        return SHOAL_EINVAL;
    if (len > UINT32_MAX)
        return SHOAL_ETOOBIG;
    return st.ops->allgather(mine, len, all);
}

int boot_barrier(void)
{
    return boot_allgather(NULL, 0, NULL);
}

void boot_abort_notify(int exitcode, const char *msg)
{
    if (st.ops)
        st.ops->abort_notify(exitcode, msg);
}

void boot_hang_ready(void)
{
    boot_hang_on_sigquit = 1;
}

void boot_hang_report(const struct boot_hang *report, unsigned why)
{
    if (st.ops && st.ops->hang_report)
        st.ops->hang_report(report, why);
}

static void boot_teardown(int finalized)
{
    if (st.ops)
        st.ops->teardown(finalized);
    st.ops = NULL;
    st.failed = &no_failure;
    boot_hang_on_sigquit = 0;
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
