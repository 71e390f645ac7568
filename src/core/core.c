/* Job control: the public entry points that tie the layers together. */
#include "am/am.h"
#include "am/hang.h"
#include "boot/boot.h"
#include "coll/coll.h"
#include "cmam/cmam_int.h"
#include "rma/rma.h"
#include "util/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static struct boot_info boot;
static int initialized;
static uint64_t t0_ns;

static void core_fatal_hook(int exitcode, const char *msg)
{
    boot_abort_notify(exitcode, msg);
}

/* What the bootstrap runs while it waits for the other ranks (finalize's
 * exchanges among them): handlers, and the check that no rank is in a
 * collective this one will not join. */
static void core_progress(void)
{
    am_poll(0);
    coll_watch();
    hang_check();
}

/* What shoal_finalize waits for, in a hang report: the launcher's exchange
 * is complete when every rank has reached shoal_finalize (shoalrun names
 * those that have not), and finalize ends when the counts agree. */
static int core_describe_finalize(const struct hang_wait *w, char *buf, size_t n)
{
    (void)w;
    struct am_quiet q;
    am_quiet_state(&q);
    snprintf(buf, n, "exchanging message counts through the launcher (quiescence): waits for every rank to "
             "reach shoal_finalize and for every message sent to run (here: %llu sent, %llu run%s)",
             (unsigned long long)q.sent, (unsigned long long)q.run, q.unsettled ? ", packets unacknowledged" : "");
    return -1;
}

/* A rank that returns from main (or calls exit(0)) without shoal_finalize
 * may leave messages it sent unrun and peers waiting for it: a failure, as
 * in MPI, under every launcher.  on_exit sees the status; a non-zero one is
 * already a failure the launcher reports.  A forked child's exit is not the
 * rank's. */
static pid_t init_pid;

static void core_warn_unknown(const char *var, const char *nearest, void *arg)
{
    (void)arg;
    if (nearest)
        LOG(LOG_WARN, "%s is not a shoal setting (did you mean %s?); shoal-info lists them", var, nearest);
    else
        LOG(LOG_WARN, "%s is not a shoal setting; shoal-info lists them", var);
}

static void core_exit_check(int status, void *arg)
{
    (void)arg;
    if (initialized && status == 0 && getpid() == init_pid)
        util_fatal("the program exited with status 0 without calling shoal_finalize: messages it sent "
                   "may not have run, and other ranks may be waiting for it");
}

static void core_watch_exit(void)
{
    static int watching;
    init_pid = getpid();
    if (!watching && on_exit(core_exit_check, NULL) == 0)
        watching = 1;
}

/* SHOAL_LOG=info: one summary of the job, by rank 0. */
static void core_log_summary(void)
{
    const char *name = NULL;
    char why[256], layout[512];
    if (boot_choose(&name, why, sizeof why) != SHOAL_OK || !name)
        snprintf(why, sizeof why, "?");
    LOG(LOG_INFO, "job %016llx: %s; bootstrap %s (%s); progress: %s", (unsigned long long)boot.job_id,
        am_describe_job(layout, sizeof layout), name ? name : "?", why,
        am_threaded ? "thread (a progress thread runs handlers as messages arrive; SHOAL_PROGRESS=thread)"
                    : "poll (handlers run inside shoal calls)");
}

static int core_init(int level)
{
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
    util_crash_init(boot.rank, (int)util_config_int(CFG_BACKTRACE));
    if (boot.rank == 0) /* once per job: every rank has the same environment */
        util_config_unknown(core_warn_unknown, NULL);
    util_fatal_hook = core_fatal_hook;
    rc = am_init(boot.rank, boot.size, level);
    coll_init();
    cmam_init();
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
        boot_leave();
        util_fatal_hook = NULL;
        return rc;
    }
    boot_set_progress(core_progress);
    core_watch_exit();
    initialized = 1;
    LOG(LOG_INFO, "joined job %016llx as rank %d of %d (shm rings of %u slots, medium max %zu)",
        (unsigned long long)boot.job_id, boot.rank, boot.size, am_ring_slots(), am_max_medium());
    rc = shoal_barrier();
    if (rc == SHOAL_OK)
        rma_check_peers(); /* every peer has written its heap header by now */
    am_thread_level_set(level); /* before the progress thread, which takes the lock by it */
    if (rc == SHOAL_OK)
        rc = am_progress_start(); /* SHOAL_PROGRESS=thread */
    if (rc == SHOAL_OK && boot.rank == 0 && util_log_level >= LOG_INFO)
        core_log_summary();
    return rc;
}

int shoal_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return core_init(SHOAL_THREAD_SINGLE);
}

int shoal_init_thread(int *argc, char ***argv, int required, int *provided)
{
    (void)argc;
    (void)argv;
    if (required < SHOAL_THREAD_SINGLE || required > SHOAL_THREAD_MULTIPLE || !provided)
        return SHOAL_EINVAL;
    int rc = core_init(required);
    if (rc == SHOAL_OK)
        *provided = required;
    return rc;
}

int shoal_query_thread(int *provided)
{
    if (!provided)
        return SHOAL_EINVAL;
    if (!initialized)
        return SHOAL_ENOTINIT;
    *provided = am_thread_level();
    return SHOAL_OK;
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

/* Before it reports its counts, a rank serves until what it sent is
 * acknowledged (or CORE_SETTLE_NS pass: the next wave asks again), so a
 * wave is rarely wasted on a packet about to be acknowledged. */
#define CORE_SETTLE_NS 20000000ull

static void core_settle(struct am_quiet *q)
{
    struct util_backoff b;
    util_backoff_init(&b);
    uint64_t until = util_now_ns() + CORE_SETTLE_NS;
    for (;;) {
        core_drain();
        am_quiet_state(q);
        if (!q->unsettled || util_now_ns() >= until)
            return;
        am_wait_step(&b);
    }
}

/* One rank's contribution to a wave: its counts, and whether they have
 * stood still past core_stall_ns (rank 0's view decides for all). */
struct core_wave {
    struct am_quiet q;
    uint64_t stalled;
};

/* Counts that stay the same this long while sent != run mean a message
 * will never run (it was dropped as malformed): finalize says so and
 * returns instead of waiting for ever. */
static uint64_t core_stall_ns(void)
{
    uint64_t dead = (uint64_t)util_config_int(CFG_NET_DEAD_MS) * 1000000ull;
    return dead > 1000000000ull ? dead : 1000000000ull;
}

static void core_report_lost(const struct core_wave *all, uint64_t sent, uint64_t run)
{
    if (boot.rank != 0)
        return;
    util_log(LOG_ERROR, "shoal_finalize: %llu of the %llu messages sent in the job never ran; per rank:",
             (unsigned long long)(sent - run), (unsigned long long)sent);
    for (int r = 0; r < boot.size; r++)
        util_log(LOG_ERROR, "  rank %d sent %llu, ran %llu, dropped %llu malformed", r,
                 (unsigned long long)all[r].q.sent, (unsigned long long)all[r].q.run,
                 (unsigned long long)all[r].q.dropped);
}

/* Quiescence: every message any rank sent (both classes, every transport)
 * has run at its target, and every packet is acknowledged, before any rank
 * leaves.  Waves of the bootstrap's allgather (which sends no message
 * itself, and serves handlers while it waits) collect each rank's counts;
 * two consecutive waves with the same totals, sent == run, end it: the
 * counts are monotonic and every rank's second snapshot follows every
 * first one, so at the moment between the waves nothing was in flight,
 * and nothing could be sent after it (only a message's arrival makes a
 * rank send) (Mattern's four-counter method). */
static int core_quiesce(void)
{
    struct core_wave *all = malloc((size_t)boot.size * sizeof *all);
    if (!all)
        return SHOAL_ENOMEM;
    uint64_t prev_sent = UINT64_MAX, prev_run = UINT64_MAX;
    uint64_t changed_at = util_now_ns();
    for (;;) {
        struct core_wave mine;
        core_settle(&mine.q);
        mine.stalled = util_now_ns() - changed_at > core_stall_ns();
        int rc = boot_allgather(&mine, sizeof mine, all);
        if (rc) {
            free(all);
            return rc;
        }
        uint64_t sent = 0, run = 0, unsettled = 0;
        for (int r = 0; r < boot.size; r++) {
            sent += all[r].q.sent;
            run += all[r].q.run;
            unsettled += all[r].q.unsettled;
        }
        if (sent == run && sent == prev_sent && run == prev_run && !unsettled)
            break;
        if (sent != prev_sent || run != prev_run)
            changed_at = util_now_ns();
        else if (all[0].stalled && sent != run) { /* rank 0's view: every rank decides alike */
            core_report_lost(all, sent, run);
            free(all);
            return SHOAL_ETIMEDOUT;
        }
        prev_sent = sent;
        prev_run = run;
    }
    free(all);
    return SHOAL_OK;
}

/* One row of the SHOAL_STATS table. */
static void core_stats_row(const char *who, const struct shoal_stats *s)
{
    printf("%-6s %9llu %9llu %9llu %9llu %9llu %12llu %9llu %9llu %9llu %9llu %9llu %9llu %10.1f\n", who,
           (unsigned long long)s->am_sent[0], (unsigned long long)s->am_sent[1],
           (unsigned long long)s->am_class_sent[0], (unsigned long long)s->am_class_sent[1],
           (unsigned long long)s->am_class_sent[2], (unsigned long long)s->bytes_sent,
           (unsigned long long)(s->rma_direct + s->rma_remote), (unsigned long long)s->rma_executed,
           (unsigned long long)(s->rma_refused + s->rma_native_refused),
           (unsigned long long)s->net_packets_sent, (unsigned long long)s->net_retransmits,
           (unsigned long long)(s->net_dropped + s->dropped), (double)s->wait_ns / 1e6);
}

/* SHOAL_STATS=1: every rank's counters, gathered through the launcher
 * (no message: quiescence is done), printed by rank 0 with the job's sum. */
static int core_print_stats(void)
{
    struct shoal_stats mine, *all = malloc((size_t)boot.size * sizeof *all), sum = {0};
    if (!all)
        return SHOAL_ENOMEM;
    shoal_stats_get(&mine);
    int rc = boot_allgather(&mine, sizeof mine, all);
    if (rc == SHOAL_OK && boot.rank == 0) {
        printf("shoal statistics (SHOAL_STATS=1), messages and bytes sent; rma = one-sided commands issued\n"
               "%-6s %9s %9s %9s %9s %9s %12s %9s %9s %9s %9s %9s %9s %10s\n", "rank", "requests", "replies",
               "short", "medium", "long", "bytes", "rma", "served", "refused", "packets", "resent", "dropped",
               "wait ms");
        for (int r = 0; r < boot.size; r++) {
            char who[16];
            snprintf(who, sizeof who, "%d", r);
            core_stats_row(who, &all[r]);
            const uint64_t *from = (const uint64_t *)&all[r];
            uint64_t *to = (uint64_t *)&sum;
            for (size_t i = 0; i < sizeof sum / sizeof *to; i++) /* every field is a uint64_t */
                to[i] += from[i];
        }
        core_stats_row("job", &sum);
        fflush(stdout);
    }
    free(all);
    return rc;
}

int shoal_finalize(void)
{
    AM_GUARD(); /* held, the progress thread is not in a handler as it stops */
    int rc = core_blocking_entry("shoal_finalize");
    if (rc)
        return rc;
    am_progress_stop();
    hang_push("shoal_finalize", -1, 0, NULL, core_describe_finalize); /* am_fini clears it */
    coll_finalizing();
    rc = core_quiesce();
    if (rc == SHOAL_OK && util_config_int(CFG_STATS))
        rc = core_print_stats();
    rma_fini();
    am_net_fini();
    coll_fini();
    am_fini();
    boot_finalize();
    util_fatal_hook = NULL;
    initialized = 0;
    return rc;
}

int shoal_seg_create(size_t size, shoal_seg_t *seg)
{
    AM_GUARD();
    int rc = am_seg_create(size, seg);
    /* No long message may reach the new segment before its owner has it in
     * its table: nobody sends into it until everyone is past here. */
    return rc ? rc : shoal_barrier();
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
    AM_GUARD();
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
    AM_GUARD();
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
    AM_GUARD();
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
    AM_GUARD();
    if (!initialized)
        return SHOAL_ENOTINIT;
    if (!out)
        return SHOAL_EINVAL;
    am_stats_settle();
    *out = *am_stats();
    struct tp_stats ns; /* zeros when the job has no message transport */
    am_transport_stats(&ns);
    out->net_packets_sent = ns.packets_sent;
    out->net_packets_received = ns.packets_received;
    out->net_retransmits = ns.retransmits;
    out->net_dropped = ns.dropped;
    out->net_dropped_foreign = ns.dropped_foreign;
    out->net_dropped_malformed = ns.dropped_malformed;
    out->net_send_batches = ns.send_batches;
    out->rma_refused = atomic_load_explicit(&rma.hdr[boot.rank]->refused, memory_order_relaxed);
    out->wait_ns = hang.wait_ns;
    return SHOAL_OK;
}
