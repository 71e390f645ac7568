/* boot layer: how a rank learns who it is and meets its peers.
 *
 * One interface over three bootstraps, chosen at boot_init from the
 * environment (boot_choose): shoalrun (each rank inherits a SOCK_SEQPACKET
 * socket to the launcher, SHOAL_BOOT_FD, and the job control block memfd,
 * SHOAL_JOB_FD), PMIx (mpirun, srun --mpi=pmix; built when libpmix is
 * found) and singleton (no launcher: rank 0 of 1, every collective below
 * completes locally).  docs/BOOT.md documents the interface, the selection,
 * shoalrun's protocol and control block, and PMIx's keys. */
#ifndef SHOAL_BOOT_H
#define SHOAL_BOOT_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#define BOOT_JOB_MAGIC 0x53484f414c4a4f42ull /* "SHOALJOB" */
#define BOOT_JOB_VERSION 2
#define BOOT_MAX_RANKS 4096

/* Job control block: one memfd created by shoalrun, mapped by every rank.
 * The launcher is its only writer after start-up. */
struct boot_job_block {
    uint64_t magic;
    uint32_t version;
    uint32_t size;                /* ranks */
    uint64_t job_id;
    _Atomic uint32_t failed;      /* 0 while the job runs; 1 once a rank failed */
    int32_t failed_rank;          /* valid once failed == 1 */
    int32_t failed_status;        /* waitpid status of that rank */
    uint32_t nhosts;              /* hosts the job runs on, 1.. */
    char failed_reason[256];      /* "exited with status 3", "killed by signal 9 (Killed)" */
    int32_t pid[BOOT_MAX_RANKS];  /* pid of each rank, filled before exec and
                                   * replaced by the joined process's on HELLO;
                                   * 0 for ranks on other hosts */
    uint16_t host[BOOT_MAX_RANKS]; /* host index (0..nhosts-1) of each rank */
};

struct boot_info {
    int rank;
    int size;
    uint64_t job_id;
    int host;                     /* this rank's host index */
    int nhosts;                   /* hosts of the job, 1.. */
    int singleton;                /* started without a launcher */
    const char *boot;             /* the bootstrap: "shoalrun", "pmix", "singleton" */
    const struct boot_job_block *job; /* shoalrun's control block; NULL under the others */
};

/* Chooses the bootstrap (boot_choose) and joins the job.  SHOAL_EBOOT with
 * a log line that says which variable is wrong or which launcher shoal
 * cannot join on failure. */
int boot_init(struct boot_info *out);

/* Which bootstrap boot_init would choose in this environment (*name) and
 * why (one line into why[n]): SHOAL_OK, or SHOAL_EBOOT when the
 * environment names a launcher shoal cannot join (*name NULL; why says
 * which and how to run under it). */
int boot_choose(const char **name, char *why, size_t n);
/* The bootstraps built in, as text for shoal-info. */
const char *boot_builtin(void);

/* Collective fd exchange: every rank contributes one descriptor; on return
 * fds[r] is an open descriptor for rank r's (fds[rank] a dup of my_fd) for
 * every rank on this host, and -1 for ranks elsewhere (descriptors do not
 * cross hosts).  The caller closes them. */
int boot_exchange_fd(int my_fd, int *fds);

/* The job id boot_init gave (0 before it): names per-job files. */
uint64_t boot_job_id(void);

/* Host index of rank r (0 for a singleton).  Ranks with the same index
 * share a host and reach each other over shared memory. */
int boot_host_of(int rank);
/* Non-zero when ranks a and b reach each other over shared memory: the
 * same rank, or on one host while SHOAL_NET_LOCAL=1 (every peer over the
 * network) is not set. */
int boot_shm_peers(int a, int b);
/* boot_shm_peers(this rank, rank). */
int boot_rank_local(int rank);

/* Collective: each rank contributes len bytes; all receives size*len bytes
 * ordered by rank. */
int boot_allgather(const void *mine, size_t len, void *all);

/* Collective barrier through the bootstrap (slow path: init and finalize). */
int boot_barrier(void);

/* Tells the launcher this rank is aborting the job, with its message, so
 * the launcher can report it and end the other ranks.  Best effort; under
 * PMIx this is PMIx_Abort, which ends the job. */
void boot_abort_notify(int exitcode, const char *msg);

/* Before boot_init: this process reports hangs on SIGQUIT, which HELLO
 * tells the launcher (it signals no other rank). */
void boot_hang_ready(void);
/* Sends the launcher this rank's hang report (why: BOOT_HANG_*).  Best
 * effort, never blocks; nothing for a singleton or under PMIx (the
 * report the rank printed on its stderr is all there is). */
struct boot_hang;
void boot_hang_report(const struct boot_hang *report, unsigned why);

/* Non-zero once the bootstrap has recorded a failed rank; then *rank and
 * reason are filled (rank -1: the launcher ended the job).  Cheap: one
 * load of a line nobody writes normally. */
int boot_peer_failed(int *rank, const char **reason);

/* Leaves the job (after the final barrier). */
void boot_finalize(void);

/* Drops the connection without telling the launcher this rank finalized
 * (a failed start-up): exiting afterwards, even with status 0, is then a
 * failure that ends the job instead of leaving peers waiting. */
void boot_leave(void);

/* While a boot collective waits, call fn between short polls
 * (the library runs its message handlers there, so peers are not blocked
 * on a rank that sits in the launcher exchange).  NULL: sleep in poll. */
void boot_set_progress(void (*fn)(void));

#endif
