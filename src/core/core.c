/* Job control: the public entry points that tie the layers together. */
#include "am/am.h"
#include "am/hang.h"
#include "boot/boot.h"
#include "coll/coll.h"
#include "net/net.h"
#include "rma/rma.h"
#include "shm/shm.h"
#include "util/util.h"

#include <stdarg.h>
#include <stdio.h>

static struct shm_state shm;
static struct boot_info boot;
static int initialized;
static uint64_t t0_ns;

static void core_fatal_hook(int exitcode, const char *msg)
{
    boot_abort_notify(exitcode, msg);
}

static void core_progress(void)
{
    am_poll(0);
}

int shoal_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (initialized)
        return SHOAL_EINIT;
    t0_ns = util_now_ns();
    int rc = util_config_load();
    if (rc)
        return rc;
    hang_init(); /* before the launcher learns of us: it may ask at once */
    rc = boot_init(&boot);
    if (rc)
        return rc;
    util_log_set_identity(boot.rank);
    util_fatal_hook = core_fatal_hook;
    rc = shm_init(&shm, boot.rank, boot.size);
    if (rc == SHOAL_OK)
        rc = am_init(&shm, boot.rank, boot.size);
    coll_init();
    if (rc == SHOAL_OK)
        rc = am_net_init(boot.job_id);
    if (rc == SHOAL_OK)
        rc = rma_init(boot.rank, boot.size);
    if (rc) {
        LOG(LOG_ERROR, "shoal_init failed: %s", shoal_strerror(rc));
        rma_fini();
        am_net_fini();
        coll_fini();
        am_fini();
        shm_fini(&shm);
        boot_leave();
        util_fatal_hook = NULL;
        return rc;
    }
    boot_set_progress(core_progress);
    initialized = 1;
    LOG(LOG_INFO, "joined job %016llx as rank %d of %d (shm rings of %u slots, medium max %zu)",
        (unsigned long long)boot.job_id, boot.rank, boot.size, shm.ring_slots, am.max_medium);
    rc = shoal_barrier();
    if (rc == SHOAL_OK)
        rma_check_peers(); /* every peer has written its heap header by now */
    return rc;
}

/* Entry check of every call that blocks: initialized, and not in a handler. */
static int core_blocking_entry(const char *call)
{
    if (!initialized)
        return SHOAL_ENOTINIT;
    return am_blocking_allowed(call);
}

/* Runs handlers until nothing is left in any ring. */
static void core_drain(void)
{
    while (am_poll(0) != 0) {
    }
}

int shoal_finalize(void)
{
    int rc = core_blocking_entry("shoal_finalize");
    if (rc)
        return rc;
    hang_push("shoal_finalize", -1, 0, NULL, NULL); /* am_fini clears it */
    /* After the first barrier no rank issues requests; draining then runs
     * every request, whose replies reach their targets before the second
     * barrier ends; replies send nothing, so the last drain empties all. */
    rc = coll_barrier(0);
    core_drain();
    if (rc == SHOAL_OK)
        rc = coll_barrier(0);
    core_drain();
    rma_fini();
    am_net_fini();
    coll_fini();
    am_fini();
    shm_fini(&shm);
    boot_finalize();
    util_fatal_hook = NULL;
    initialized = 0;
    return rc;
}

int shoal_rank(void)
{
    return initialized ? boot.rank : -1;
}

int shoal_size(void)
{
    return initialized ? boot.size : -1;
}

int shoal_rank_local(int rank)
{
    if (!initialized)
        return SHOAL_ENOTINIT;
    if (rank < 0 || rank >= boot.size)
        return SHOAL_ERANK;
    return !am_is_remote(rank);
}

_Noreturn void shoal_abort(int exitcode, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* an exit status is 8 bits: 256 would read as success */
    util_fatal_v((exitcode & 0xff) ? exitcode & 0xff : 1, fmt, ap);
}

static struct {
    shoal_failure_handler_t fn;
    void *arg;
} failure_handler;

static void core_peer_failure(int rank, const char *msg)
{
    failure_handler.fn(rank, msg, failure_handler.arg);
}

void shoal_on_peer_failure(shoal_failure_handler_t fn, void *arg)
{
    util_peer_failure_hook = NULL; /* never a half-updated pair */
    failure_handler.fn = fn;
    failure_handler.arg = arg;
    util_peer_failure_hook = fn ? core_peer_failure : NULL;
}

int shoal_poll(void)
{
    int rc = core_blocking_entry("shoal_poll");
    if (rc)
        return rc;
    am_poll(0);
    int dead;
    const char *reason;
    return boot_peer_failed(&dead, &reason) ? SHOAL_EPEERDEAD : SHOAL_OK;
}

int shoal_wait_until(volatile uint64_t *flag, uint64_t value)
{
    int rc = core_blocking_entry("shoal_wait_until");
    if (rc)
        return rc;
    if (!flag)
        return SHOAL_EINVAL;
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("shoal_wait_until", -1, value, (const void *)flag, hang_describe_flag);
    while (*flag < value)
        am_progress_wait(&b, 0);
    hang_pop();
    *flag -= value;
    return SHOAL_OK;
}

double shoal_wtime(void)
{
    return (double)(util_now_ns() - t0_ns) * 1e-9;
}

int shoal_stats_get(struct shoal_stats *out)
{
    if (!initialized)
        return SHOAL_ENOTINIT;
    if (!out)
        return SHOAL_EINVAL;
    *out = am.stats;
    if (am.remote) {
        struct net_stats ns;
        net_get_stats(&ns);
        out->net_packets_sent = ns.packets_sent;
        out->net_packets_received = ns.packets_received;
        out->net_retransmits = ns.retransmits;
        out->net_dropped = ns.dropped;
        out->net_dropped_foreign = ns.dropped_foreign;
        out->net_dropped_malformed = ns.dropped_malformed;
        out->net_send_batches = ns.send_batches;
    }
    out->rma_refused = atomic_load_explicit(&rma.hdr[boot.rank]->refused, memory_order_relaxed);
    return SHOAL_OK;
}
