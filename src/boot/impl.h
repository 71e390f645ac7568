/* Inside the boot layer: the table a bootstrap implements behind boot.h,
 * and the helpers the implementations share.  boot.c chooses one table at
 * boot_init (boot_choose) and forwards boot.h's calls to it. */
#ifndef SHOAL_BOOT_IMPL_H
#define SHOAL_BOOT_IMPL_H

#include "boot.h"
#include "proto.h"

#include <stdatomic.h>

struct boot_ops {
    const char *name;
    /* Fills rank, size, job_id, host, nhosts (and job for shoalrun) and
     * sets *failed to the word that turns non-zero once a rank failed. */
    int (*init)(struct boot_info *out, const _Atomic uint32_t **failed);
    /* Host index of rank r, 0 .. nhosts-1. */
    int (*host_of)(int rank);
    /* boot_exchange_fd, boot_allgather (len 0: a barrier), as in boot.h;
     * arguments are checked by the caller. */
    int (*exchange_fd)(int my_fd, int *fds);
    int (*allgather)(const void *mine, size_t len, void *all);
    /* Once *failed is set: which rank failed and why. */
    void (*failure)(int *rank, const char **reason);
    void (*abort_notify)(int exitcode, const char *msg);
    /* NULL where the report printed on stderr is all there is. */
    void (*hang_report)(const struct boot_hang *report, unsigned why);
    /* finalized: leaving normally (boot_finalize), else boot_leave. */
    void (*teardown)(int finalized);
};

extern const struct boot_ops boot_shoalrun_ops, boot_singleton_ops;
#ifdef SHOAL_HAVE_PMIX
extern const struct boot_ops boot_pmix_ops;
#endif

/* Set by boot_hang_ready: this process reports hangs on SIGQUIT. */
extern int boot_hang_on_sigquit;

/* Logs why a collective stops (the failed rank) and returns SHOAL_EPEERDEAD. */
int boot_peer_dead(void);

/* Waits until fd is readable (fd >= 0) or *flag is non-zero (flag not
 * NULL), running the progress hook between short polls: SHOAL_EPEERDEAD
 * once the job is marked failed, SHOAL_ETIMEDOUT at deadline_ns
 * (util_now_ns; 0: none).  fd -1 and no flag: a sleep that serves. */
int boot_wait(int fd, const atomic_int *flag, uint64_t deadline_ns);

/* boot_proto_send that waits out ETOOMANYREFS (descriptors in flight count
 * against the open-file limit until the receivers took them). */
int boot_send_msg(int sock, enum boot_msg_type type, uint32_t arg, const void *p, uint32_t len,
                  const int *fds, int nfds);

/* Waits for and receives the next message on sock, which must be of the
 * given type; peer names the other end in messages ("the launcher"). */
int boot_recv_msg(int sock, const char *peer, enum boot_msg_type type, struct boot_msg_hdr *h,
                  void *buf, size_t cap, int *fds, int *nfds);

/* Receives the FDS messages of one exchange: one descriptor for each of
 * the nlocal ranks in local (rank order); fds[] has size entries and gets
 * -1 for every other rank. */
int boot_recv_fds(int sock, const char *peer, const int *local, int nlocal, int size, int *fds);

/* Raises the soft open-file limit so count more descriptors fit. */
void boot_reserve_fds(int count);

/* The node-local descriptor rendezvous of bootstraps that cannot pass
 * descriptors (rdv.c, docs/BOOT.md): the lowest local rank binds a Unix
 * socket in a per-job directory under base, collects every local rank's
 * descriptor with SCM_RIGHTS and hands the set back. */
struct boot_rdv {
    int rank, size;
    int *local, nlocal;  /* the ranks of this host, ascending; local[0] leads */
    uint64_t job_id;
    const char *base;    /* directory the job's directory is made in */
    int *conn;           /* leader: connection of local[i] (i >= 1); others: conn[0] */
    int connected;
};
int boot_rdv_exchange(struct boot_rdv *r, int my_fd, int *fds);
void boot_rdv_close(struct boot_rdv *r);

#endif
