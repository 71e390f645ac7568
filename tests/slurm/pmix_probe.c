/* The proof that the Slurm test cluster (slurm_cluster) gives a job what a
 * PMIx bootstrap relies on: linked with libpmix alone, no shoal.
 *
 *   pmix_probe layout SIZE NODES   the job has SIZE ranks in blocks of
 *       SIZE/NODES per node (srun's default distribution): checks the job
 *       size, PMIX_LOCAL_PEERS, that PMIX_NODEID groups exactly those
 *       blocks, and a Put/Commit/Fence(collect)/Get exchange of every
 *       rank's (rank, node id) with every other
 *   pmix_probe kill VICTIM         after a fence rank VICTIM kills itself
 *       with SIGKILL and the others sleep: only the launcher ends the job
 *
 * Each rank prints "rank R of S: node N, local peers P".  A failed check
 * names the rank and ends the job through PMIx_Abort. */
#include <pmix.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROBE_KEY "shoal.probe"
#define PROBE_FENCE_SECONDS 30 /* a fence that has not completed by then fails */
#define PROBE_SLEEP_SECONDS 60 /* kill mode: longer than any test's bound */

struct probe_card { /* what each rank publishes */
    uint32_t rank, nodeid;
};

static pmix_proc_t probe_me;

static _Noreturn void probe_fail(const char *what, pmix_status_t rc)
{
    char msg[256];
    snprintf(msg, sizeof msg, "pmix_probe: rank %u: %s (%s)", probe_me.rank, what,
             PMIx_Error_string(rc));
    fprintf(stderr, "%s\n", msg);
    PMIx_Abort(1, msg, NULL, 0);
    exit(1);
}

/* Servers differ in the integer type of a key (CLUSTER_TESTING.md §1). */
static uint32_t probe_get_uint(uint32_t rank, const char *key)
{
    pmix_proc_t proc;
    pmix_value_t *v = NULL;
    PMIX_PROC_LOAD(&proc, probe_me.nspace, rank);
    pmix_status_t rc = PMIx_Get(&proc, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS)
        probe_fail(key, rc);
    uint64_t x;
    switch (v->type) {
    case PMIX_UINT32: x = v->data.uint32; break;
    case PMIX_UINT16: x = v->data.uint16; break;
    case PMIX_UINT64: x = v->data.uint64; break;
    case PMIX_INT: x = (uint64_t)v->data.integer; break;
    case PMIX_INT32: x = (uint64_t)v->data.int32; break;
    default: probe_fail(key, PMIX_ERR_BAD_PARAM);
    }
    PMIX_VALUE_RELEASE(v);
    return (uint32_t)x;
}

static void probe_fence(int collect)
{
    pmix_info_t info[2];
    bool yes = true;
    int seconds = PROBE_FENCE_SECONDS;
    PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &seconds, PMIX_INT);
    PMIX_INFO_LOAD(&info[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    pmix_proc_t all;
    PMIX_PROC_LOAD(&all, probe_me.nspace, PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_Fence(&all, 1, info, collect ? 2 : 1);
    if (rc != PMIX_SUCCESS)
        probe_fail(collect ? "collecting fence" : "fence", rc);
}

/* PMIX_LOCAL_PEERS of the job, "0,1,2" */
static void probe_local_peers(char *out, size_t cap)
{
    pmix_proc_t job;
    pmix_value_t *v = NULL;
    PMIX_PROC_LOAD(&job, probe_me.nspace, PMIX_RANK_WILDCARD);
    pmix_status_t rc = PMIx_Get(&job, PMIX_LOCAL_PEERS, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || v->type != PMIX_STRING)
        probe_fail(PMIX_LOCAL_PEERS, rc != PMIX_SUCCESS ? rc : PMIX_ERR_BAD_PARAM);
    snprintf(out, cap, "%s", v->data.string);
    PMIX_VALUE_RELEASE(v);
}

static void probe_put_card(uint32_t nodeid)
{
    struct probe_card card = {probe_me.rank, nodeid};
    pmix_value_t v;
    pmix_byte_object_t bo = {.bytes = (char *)&card, .size = sizeof card};
    PMIX_VALUE_LOAD(&v, &bo, PMIX_BYTE_OBJECT);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, PROBE_KEY, &v);
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        probe_fail("put", rc);
}

static struct probe_card probe_get_card(uint32_t rank)
{
    pmix_proc_t proc;
    pmix_value_t *v = NULL;
    PMIX_PROC_LOAD(&proc, probe_me.nspace, rank);
    pmix_status_t rc = PMIx_Get(&proc, PROBE_KEY, NULL, 0, &v);
    if (rc != PMIX_SUCCESS)
        probe_fail("get of a peer's card", rc);
    struct probe_card card;
    if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != sizeof card)
        probe_fail("a peer's card has the wrong type or size", PMIX_ERR_BAD_PARAM);
    memcpy(&card, v->data.bo.bytes, sizeof card);
    PMIX_VALUE_RELEASE(v);
    return card;
}

static void probe_expect(int ok, const char *what)
{
    if (!ok)
        probe_fail(what, PMIX_ERROR);
}

static void probe_layout(uint32_t size, uint32_t nodes, uint32_t job_size, uint32_t nodeid,
                         const char *peers)
{
    if (job_size != size) {
        fprintf(stderr, "pmix_probe: rank %u: job size %u, expected %u\n", probe_me.rank, job_size, size);
        probe_fail("wrong PMIX_JOB_SIZE", PMIX_ERROR);
    }
    uint32_t per_node = size / nodes, first = probe_me.rank / per_node * per_node;
    char want[1024] = "";
    for (uint32_t r = first; r < first + per_node; r++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%u", r > first ? "," : "", r);
    if (strcmp(peers, want)) {
        fprintf(stderr, "pmix_probe: rank %u: local peers \"%s\", expected \"%s\"\n", probe_me.rank,
                peers, want);
        probe_fail("wrong PMIX_LOCAL_PEERS", PMIX_ERROR);
    }
    probe_put_card(nodeid);
    probe_fence(1);
    /* same node id exactly for the ranks of my block.  Slurm 22.05 answers
     * PMIX_NODEID of a rank on another node with NOT-FOUND, so a rank
     * learns that one only from the rank's own card. */
    for (uint32_t r = 0; r < size; r++) {
        struct probe_card c = probe_get_card(r);
        int local = r / per_node == probe_me.rank / per_node;
        probe_expect(c.rank == r, "a peer's card carries another rank");
        probe_expect((c.nodeid == nodeid) == local,
                     "PMIX_NODEID does not group the ranks in blocks of SIZE/NODES");
        probe_expect(!local || c.nodeid == probe_get_uint(r, PMIX_NODEID),
                     "a local peer's own node id differs from the one the server gives for it");
    }
    probe_fence(0);
    if (probe_me.rank == 0)
        printf("pmix_probe: %u ranks on %u nodes, locality and exchange correct\n", size, nodes);
}

static _Noreturn void probe_usage(void)
{
    fprintf(stderr, "usage: pmix_probe layout SIZE NODES | kill VICTIM\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        probe_usage();
    pmix_status_t rc = PMIx_Init(&probe_me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_probe: PMIx_Init: %s (not launched by a PMIx server?)\n",
                PMIx_Error_string(rc));
        return 1;
    }
    uint32_t size = probe_get_uint(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
    uint32_t nodeid = probe_get_uint(probe_me.rank, PMIX_NODEID);
    char peers[1024];
    probe_local_peers(peers, sizeof peers);
    printf("rank %u of %u: node %u, local peers %s\n", probe_me.rank, size, nodeid, peers);
    fflush(stdout);
    if (!strcmp(argv[1], "layout") && argc == 4) {
        uint32_t want = (uint32_t)atoi(argv[2]), nodes = (uint32_t)atoi(argv[3]);
        if (nodes == 0 || want % nodes)
            probe_usage();
        probe_layout(want, nodes, size, nodeid, peers);
    } else if (!strcmp(argv[1], "kill")) {
        probe_fence(0);
        if (probe_me.rank == (uint32_t)atoi(argv[2]))
            raise(SIGKILL);
        sleep(PROBE_SLEEP_SECONDS);
    } else {
        probe_usage();
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}
