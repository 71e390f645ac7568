/* The PMIx bootstrap: joins a job a PMIx server started (Open MPI's mpirun,
 * srun --mpi=pmix, prterun).  Rank, size and locality come from the
 * server's job data (never from host names); an allgather is a Put of a
 * key new to each call, a Commit and a collecting fence that is polled, so
 * message handlers keep running; descriptors go through the node-local
 * rendezvous (rdv.c), since PMIx cannot pass them.  docs/BOOT.md, "PMIx". */
#include "impl.h"
#include "shoal.h"
#include "util/util.h"

#include <pmix.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a failed fence waits for the event that names the failed rank. */
#define PX_EVENT_GRACE_NS 1000000000ull

static struct {
    pmix_proc_t me;
    int size;
    int *host;                 /* dense host index of each rank, rank 0's host first */
    uint64_t seq;              /* allgathers so far: each one's key is new */
    _Atomic uint32_t failed;   /* set (release) by the event handler after the two below */
    int failed_rank;
    char failed_reason[256];
    int handler;               /* event handler reference; -1 none */
    char *nsdir;               /* PMIX_NSDIR, when the server gives one */
    struct boot_rdv rdv;
} px = {.handler = -1};

/* Servers give integers in several types (PMIX_NODEID is UINT32 here, an
 * application number INT under Slurm): take any of them. */
static int px_get_int(const pmix_proc_t *who, const char *key, long long *out)
{
    pmix_value_t *v = NULL;
    if (PMIx_Get(who, key, NULL, 0, &v) != PMIX_SUCCESS || !v)
        return -1;
    int ok = 1;
    switch (v->type) {
    case PMIX_INT: *out = v->data.integer; break;
    case PMIX_INT8: *out = v->data.int8; break;
    case PMIX_INT16: *out = v->data.int16; break;
    case PMIX_INT32: *out = v->data.int32; break;
    case PMIX_INT64: *out = v->data.int64; break;
    case PMIX_UINT: *out = v->data.uint; break;
    case PMIX_UINT8: *out = v->data.uint8; break;
    case PMIX_UINT16: *out = v->data.uint16; break;
    case PMIX_UINT32: *out = v->data.uint32; break;
    case PMIX_UINT64: *out = (long long)v->data.uint64; break;
    case PMIX_SIZE: *out = (long long)v->data.size; break;
    case PMIX_PROC_RANK: *out = v->data.rank; break;
    default: ok = 0; break;
    }
    PMIX_VALUE_RELEASE(v);
    return ok ? 0 : -1;
}

/* A string value (malloc'd), or NULL. */
static char *px_get_str(const pmix_proc_t *who, const char *key)
{
    pmix_value_t *v = NULL;
    if (PMIx_Get(who, key, NULL, 0, &v) != PMIX_SUCCESS || !v)
        return NULL;
    char *s = v->type == PMIX_STRING && v->data.string ? strdup(v->data.string) : NULL;
    PMIX_VALUE_RELEASE(v);
    return s;
}

static pmix_proc_t px_proc(pmix_rank_t rank)
{
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, px.me.nspace, rank);
    return p;
}

static int px_allgather(const void *mine, size_t len, void *all);

/* Host indices from every rank's PMIX_NODEID, numbered in order of first
 * appearance; *nhosts gets their count.  Each rank reads its own and the
 * ranks exchange them: Slurm 22.05 answers NOT-FOUND for another node's. */
static int px_hosts(int *nhosts)
{
    long long mine;
    pmix_proc_t me = px_proc(px.me.rank);
    if (px_get_int(&me, PMIX_NODEID, &mine)) {
        LOG(LOG_ERROR, "the PMIx server gives no %s for this rank (%u): shoal cannot tell which ranks share a host",
            PMIX_NODEID, px.me.rank);
        return SHOAL_EBOOT;
    }
    long long *ids = malloc((size_t)px.size * sizeof *ids);
    px.host = malloc((size_t)px.size * sizeof *px.host);
    int rc = ids && px.host ? px_allgather(&mine, sizeof mine, ids) : SHOAL_ENOMEM;
    int n = 0;
    for (int r = 0; r < px.size && rc == SHOAL_OK; r++) {
        int h = 0;
        while (h < r && ids[h] != ids[r])
            h++;
        px.host[r] = h < r ? px.host[h] : n++;
    }
    free(ids);
    *nhosts = n;
    return rc;
}

/* This host's ranks, ascending, cross-checked with PMIX_LOCAL_PEERS. */
static int px_local(void)
{
    pmix_proc_t wild = px_proc(PMIX_RANK_WILDCARD);
    char *peers = px_get_str(&wild, PMIX_LOCAL_PEERS);
    int mine = px.host[px.me.rank], listed = 0, agree = peers != NULL;
    px.rdv.local = malloc((size_t)px.size * sizeof *px.rdv.local);
    if (!px.rdv.local) {
        free(peers);
        return SHOAL_ENOMEM;
    }
    px.rdv.nlocal = 0;
    for (int r = 0; r < px.size; r++)
        if (px.host[r] == mine)
            px.rdv.local[px.rdv.nlocal++] = r;
    for (char *s = peers, *end; agree && *s; s = *end ? end + 1 : end) {
        long r = strtol(s, &end, 10);
        agree = end != s && (*end == ',' || !*end) && r >= 0 && r < px.size && px.host[r] == mine;
        listed++;
    }
    if (!agree || listed != px.rdv.nlocal) {
        LOG(LOG_ERROR, "the PMIx server's %s (\"%s\") does not match its %s: %d ranks on this host",
            PMIX_LOCAL_PEERS, peers ? peers : "absent", PMIX_NODEID, px.rdv.nlocal);
        free(peers);
        return SHOAL_EBOOT;
    }
    free(peers);
    return SHOAL_OK;
}

/* The namespace is the job's name on every rank: its FNV-1a hash, top bit
 * clear like shoalrun's ids, is the job id. */
static uint64_t px_job_id(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = px.me.nspace; *c; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    return h & ~(1ull << 63);
}

/* Where the rendezvous directory goes: the server's per-job directory when
 * it gives one we may write, else TMPDIR, else /tmp. */
static const char *px_rdv_base(void)
{
    pmix_proc_t wild = px_proc(PMIX_RANK_WILDCARD);
    px.nsdir = px_get_str(&wild, PMIX_NSDIR);
    if (px.nsdir && access(px.nsdir, W_OK | X_OK) == 0)
        return px.nsdir;
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp && access(tmp, W_OK | X_OK) == 0 ? tmp : "/tmp";
}

/* Process ends the server reports.  A clean exit (status 0, after
 * shoal_finalize) is not a failure. */
static void px_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                     size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)results, (void)nresults;
    LOG(LOG_DEBUG, "PMIx event %s", PMIx_Error_string(status));
    const pmix_proc_t *who = source;
    long long code = -1;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
            who = info[i].value.data.proc;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE) && info[i].value.type == PMIX_INT)
            code = info[i].value.data.integer;
    }
    int ours = who && PMIX_CHECK_NSPACE(who->nspace, px.me.nspace) && who->rank < (pmix_rank_t)px.size &&
               who->rank != px.me.rank;
    int clean = (status == PMIX_PROC_TERMINATED || status == PMIX_EVENT_PROC_TERMINATED) && code <= 0;
    if ((ours && !clean) || status == PMIX_ERR_LOST_CONNECTION) {
        if (!atomic_load_explicit(&px.failed, memory_order_relaxed)) {
            px.failed_rank = ours ? (int)who->rank : -1;
            if (code > 0)
                snprintf(px.failed_reason, sizeof px.failed_reason, "exited with status %lld (PMIx event: %s)",
                         code, PMIx_Error_string(status));
            else
                snprintf(px.failed_reason, sizeof px.failed_reason, "%s (PMIx event)",
                         status == PMIX_ERR_LOST_CONNECTION ? "the PMIx server went away"
                                                            : PMIx_Error_string(status));
            atomic_store_explicit(&px.failed, 1, memory_order_release);
        }
    }
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void px_watch_failures(void)
{
    pmix_status_t codes[] = {PMIX_ERR_PROC_ABORTED_BY_SIG, PMIX_ERR_PROC_REQUESTED_ABORT, PMIX_ERR_PROC_TERM_WO_SYNC,
                             PMIX_PROC_TERMINATED, PMIX_EVENT_PROC_TERMINATED, PMIX_ERR_LOST_CONNECTION};
    /* without a callback the registration blocks and returns the reference */
    px.handler = PMIx_Register_event_handler(codes, sizeof codes / sizeof codes[0], NULL, 0, px_event, NULL, NULL);
    if (px.handler < 0)
        LOG(LOG_DEBUG, "no PMIx failure events (%s): the transports' liveness checks detect dead ranks",
            PMIx_Error_string(px.handler));
}

static void px_release(void);

static int px_fail(pmix_status_t rc, const char *what)
{
    LOG(LOG_ERROR, "%s: %s", what, PMIx_Error_string(rc));
    return SHOAL_EBOOT;
}

static int px_init(struct boot_info *out, const _Atomic uint32_t **failed)
{
    pmix_status_t rc = PMIx_Init(&px.me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        /* it fills in a singleton when the server is unreachable: never run as one */
        LOG(LOG_ERROR, "PMIX_NAMESPACE=%s, PMIX_RANK=%s: a PMIx launcher started this program, but its server "
                       "cannot be reached (PMIx_Init: %s; PMIX_SERVER_URI* %s): start it under mpirun or srun "
                       "--mpi=pmix, or unset the PMIX_* variables to run it alone",
            getenv("PMIX_NAMESPACE") ? getenv("PMIX_NAMESPACE") : "(unset)",
            getenv("PMIX_RANK") ? getenv("PMIX_RANK") : "(unset)", PMIx_Error_string(rc),
            getenv("PMIX_SERVER_URI41") || getenv("PMIX_SERVER_URI4") || getenv("PMIX_SERVER_URI3") ||
                    getenv("PMIX_SERVER_URI2") ? "set" : "not set");
        return SHOAL_EBOOT; /* PMIx_Finalize after a failed init crashes (libpmix 4.2) */
    }
    pmix_proc_t wild = px_proc(PMIX_RANK_WILDCARD);
    long long size = 0;
    if (px_get_int(&wild, PMIX_JOB_SIZE, &size) || size < 1 || size > BOOT_MAX_RANKS ||
        px.me.rank >= (pmix_rank_t)size) {
        LOG(LOG_ERROR, "the PMIx server gives no usable %s (%lld; rank %u; at most %d ranks)", PMIX_JOB_SIZE, size,
            px.me.rank, BOOT_MAX_RANKS);
        px_release();
        return SHOAL_EBOOT;
    }
    px.size = (int)size;
    int nhosts = 0;
    int brc = px_hosts(&nhosts);
    if (brc == SHOAL_OK)
        brc = px_local();
    if (brc) {
        px_release();
        return brc;
    }
    px_watch_failures();
    uint64_t job_id = px_job_id();
    px.rdv = (struct boot_rdv){.rank = (int)px.me.rank, .size = px.size, .local = px.rdv.local,
                               .nlocal = px.rdv.nlocal, .job_id = job_id, .base = px_rdv_base()};
    *out = (struct boot_info){.rank = (int)px.me.rank, .size = px.size, .job_id = job_id,
                              .host = px.host[px.me.rank], .nhosts = nhosts};
    *failed = &px.failed;
    return SHOAL_OK;
}

static int px_host_of(int rank)
{
    return px.host[rank];
}

static int px_exchange_fd(int my_fd, int *fds)
{
    return boot_rdv_exchange(&px.rdv, my_fd, fds);
}

struct px_fence {
    atomic_int done;
    pmix_status_t status;
    pmix_info_t info; /* PMIX_COLLECT_DATA: lives as long as the fence */
};

static void px_fence_done(pmix_status_t status, void *cbdata)
{
    struct px_fence *f = cbdata;
    f->status = status;
    atomic_store_explicit(&f->done, 1, memory_order_release);
}

/* A fence over the whole namespace that this rank polls, running the
 * progress hook, instead of blocking in it: peers may need our handlers
 * (finalize's quiescence waves are allgathers). */
static int px_fence(int collect)
{
    struct px_fence *f = calloc(1, sizeof *f);
    if (!f)
        return SHOAL_ENOMEM;
    bool yes = true;
    PMIX_INFO_LOAD(&f->info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence_nb(NULL, 0, collect ? &f->info : NULL, collect ? 1 : 0, px_fence_done, f);
    if (rc != PMIX_SUCCESS) {
        free(f);
        return px_fail(rc, "PMIx_Fence_nb");
    }
    int wrc = boot_wait(-1, &f->done, 0);
    if (wrc)
        return wrc; /* f stays: the server may still complete the fence */
    rc = f->status;
    free(f);
    if (rc == PMIX_SUCCESS)
        return SHOAL_OK;
    /* A fence fails when a rank ended; the server's event that names it
     * may come just after. */
    wrc = boot_wait(-1, NULL, util_now_ns() + PX_EVENT_GRACE_NS);
    if (wrc == SHOAL_EPEERDEAD)
        return wrc;
    return px_fail(rc, "PMIx fence failed and the server named no failed rank");
}

static int px_get_part(int r, const char *key, size_t len, void *into)
{
    pmix_proc_t p = px_proc((pmix_rank_t)r);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&p, key, NULL, 0, &v);
    int ok = rc == PMIX_SUCCESS && v && v->type == PMIX_BYTE_OBJECT && v->data.bo.size == len;
    if (ok)
        memcpy(into, v->data.bo.bytes, len);
    else
        LOG(LOG_ERROR, "allgather: rank %d's %s is missing or not %zu bytes (PMIx_Get: %s)", r, key, len,
            PMIx_Error_string(rc));
    if (v)
        PMIX_VALUE_RELEASE(v);
    return ok ? SHOAL_OK : SHOAL_EBOOT;
}

static int px_allgather(const void *mine, size_t len, void *all)
{
    if (len == 0)
        return px_fence(0);
    char key[64];
    snprintf(key, sizeof key, "shoal.ag.%llu", (unsigned long long)px.seq++);
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)mine; /* PMIx_Put copies it */
    v.data.bo.size = len;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return px_fail(rc, "PMIx_Put/PMIx_Commit of an allgather");
    int brc = px_fence(1);
    for (int r = 0; r < px.size && brc == SHOAL_OK; r++) {
        char *to = (char *)all + (size_t)r * len;
        if (r == (int)px.me.rank)
            memmove(to, mine, len);
        else
            brc = px_get_part(r, key, len, to);
    }
    return brc;
}

static void px_failure(int *rank, const char **reason)
{
    *rank = px.failed_rank;
    *reason = px.failed_reason;
}

/* PMIx_Abort ends the job through the launcher (its exit status is code).
 * The message that names the rank, as shoalrun's would, goes to stderr
 * first: mpirun does not print an abort's message. */
static void px_abort_notify(int exitcode, const char *msg)
{
    char text[1400];
    int n = msg ? (int)strnlen(msg, 1024) : 0;
    while (n > 0 && msg[n - 1] == '\n')
        n--;
    int len = snprintf(text, sizeof text, "shoal: rank %u (pid %d on %s) aborted with status %d: %.*s\n",
                       px.me.rank, (int)getpid(), util_hostname(), exitcode, n, msg ? msg : "");
    if (len > 0 && write(2, text, (size_t)len < sizeof text ? (size_t)len : sizeof text - 1) < 0) {
        /* nowhere to say it: the launcher still ends the job */
    }
    text[strcspn(text, "\n")] = '\0';
    PMIx_Abort(exitcode, text, NULL, 0);
}

/* Leaves the server and frees what init built (also after a failed init). */
static void px_release(void)
{
    boot_rdv_close(&px.rdv);
    if (px.handler >= 0)
        PMIx_Deregister_event_handler((size_t)px.handler, NULL, NULL);
    px.handler = -1;
    PMIx_Finalize(NULL, 0);
    free(px.rdv.local);
    free(px.host);
    free(px.nsdir);
    px.rdv.local = NULL;
    px.host = NULL;
    px.nsdir = NULL;
    atomic_store_explicit(&px.failed, 0, memory_order_relaxed);
}

static void px_teardown(int finalized)
{
    (void)finalized; /* the launcher judges a rank by its exit status */
    px_release();
}

const struct boot_ops boot_pmix_ops = {
    .name = "pmix",
    .init = px_init,
    .host_of = px_host_of,
    .exchange_fd = px_exchange_fd,
    .allgather = px_allgather,
    .failure = px_failure,
    .abort_notify = px_abort_notify,
    .teardown = px_teardown,
};
