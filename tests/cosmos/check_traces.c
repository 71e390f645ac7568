/* Checks a directory of Cosmos traces written by one job (SHOAL_COSMOS_TRACE)
 * and prints what they hold:
 *   check_traces DIR --ranks N [--barriers B] [--min-messages M]
 * Every rank's file is there, of one job; each file reads to its end; the
 * receive order counts from 0 without a gap, markers too; a record's role
 * agrees with the home of its region (the rid's high half) and its type
 * with the direction of the role; nobody receives from itself; every rank
 * passed exactly B barriers; and, across ranks, every request a home
 * received from a rank for a region was answered by exactly one response
 * of the same kind that rank received (a request is never lost or
 * answered twice), which the two sides' records must agree on.  The kinds
 * are read (get_ro) and write (get_rw and upgrade: a home answers an
 * upgrade whose copy is gone with an exclusive grant, docs/CRL.md D2). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.h"
#include "cosmos/trace.h"
#include "../common/check.h"

#define MAX_RANKS 64
#define MAX_PAIRS 65536

/* Requests and responses per <region, remote rank, kind>: kind 0 read,
 * 1 write. */
struct pair {
    uint64_t block;
    uint32_t remote;
    long long balance[2]; /* requests seen at the home minus responses seen at the remote */
};

static struct pair pairs[MAX_PAIRS];
static unsigned npairs;
static unsigned long long by_type[2][COSMOS_TYPE_COUNT];

static struct pair *pair_of(uint64_t block, uint32_t remote)
{
    for (unsigned i = 0; i < npairs; i++)
        if (pairs[i].block == block && pairs[i].remote == remote)
            return &pairs[i];
    CHECK(npairs < MAX_PAIRS, "more than %d <region, rank> pairs", MAX_PAIRS);
    pairs[npairs] = (struct pair){.block = block, .remote = remote};
    return &pairs[npairs++];
}

/* Request or response kind of a type (0 read, 1 write), or -1. */
static int kind_of(unsigned type, int *request)
{
    *request = type <= COSMOS_UPGRADE_REQ;
    switch (type) {
    case COSMOS_GET_RO_REQ: case COSMOS_GET_RO_RESP: return 0;
    case COSMOS_GET_RW_REQ: case COSMOS_GET_RW_RESP:
    case COSMOS_UPGRADE_REQ: case COSMOS_UPGRADE_RESP: return 1;
    default: return -1;
    }
}

static void check_record(const char *path, const struct cosmos_trace_hdr *h, const struct cosmos_rec *r,
                         unsigned long long *msgs, unsigned long long *marks)
{
    if (r->role == COSMOS_ROLE_MARKER) {
        CHECK(r->seq == *marks, "%s: marker %llu has seq %llu", path, *marks, (unsigned long long)r->seq);
        (*marks)++;
        return;
    }
    CHECK(r->seq == *msgs, "%s: message %llu has seq %llu", path, *msgs, (unsigned long long)r->seq);
    (*msgs)++;
    int home = (uint32_t)(r->block >> 32) == h->rank;
    CHECK(home == (r->role == COSMOS_ROLE_HOME), "%s: message %llu: role %u for a region homed at %u",
          path, *msgs - 1, r->role, (unsigned)(r->block >> 32));
    CHECK(home == (r->type <= COSMOS_FLUSH), "%s: message %llu: %s received at the %s side", path,
          *msgs - 1, cosmos_type_name(r->type), home ? "home" : "remote");
    CHECK(r->sender != h->rank && r->sender < h->nranks, "%s: message %llu from rank %u", path, *msgs - 1,
          r->sender);
    by_type[home][r->type]++;
    int request;
    int kind = kind_of(r->type, &request);
    if (kind >= 0)
        pair_of(r->block, home ? r->sender : h->rank)->balance[kind] += request ? 1 : -1;
}

/* Reads one rank's file; returns its marker count. */
static unsigned long long check_file(const char *path, unsigned nranks, uint64_t *job, unsigned *seen)
{
    struct cosmos_trace_r *t;
    struct cosmos_trace_hdr h;
    CHECK_RC(cosmos_trace_open_read(path, &t, &h), SHOAL_OK);
    CHECK(h.nranks == nranks, "%s: a job of %u ranks, expected %u", path, h.nranks, nranks);
    CHECK(*job == 0 || h.job_id == *job, "%s: job %llx, another file's is %llx", path,
          (unsigned long long)h.job_id, (unsigned long long)*job);
    CHECK(!seen[h.rank], "%s: rank %u's trace twice", path, h.rank);
    *job = h.job_id;
    seen[h.rank] = 1;
    struct cosmos_rec r;
    unsigned long long msgs = 0, marks = 0;
    int rc;
    while ((rc = cosmos_trace_next(t, &r)) == 1)
        check_record(path, &h, &r, &msgs, &marks);
    CHECK(rc == 0, "%s: unreadable after %llu messages", path, msgs);
    cosmos_trace_close_read(t);
    printf("rank %u: %llu messages, %llu markers\n", h.rank, msgs, marks);
    return marks;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 4 && !strcmp(argv[2], "--ranks"), "usage: %s DIR --ranks N [--barriers B] [--min-messages M]",
          argv[0]);
    unsigned nranks = (unsigned)atoi(argv[3]);
    long long barriers = -1, min_messages = 0;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--barriers"))
            barriers = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--min-messages"))
            min_messages = atoll(argv[i + 1]);
        else
            CHECK(0, "unknown option %s", argv[i]);
    }
    CHECK(nranks > 0 && nranks <= MAX_RANKS, "--ranks %u", nranks);
    DIR *d = opendir(argv[1]);
    CHECK(d, "cannot open %s", argv[1]);
    unsigned seen[MAX_RANKS] = {0}, files = 0;
    uint64_t job = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "cosmos-", 7) || len < 6 || strcmp(e->d_name + len - 6, ".trace"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        unsigned long long marks = check_file(path, nranks, &job, seen);
        CHECK(barriers < 0 || marks == (unsigned long long)barriers, "%s: %llu barrier markers, expected %lld",
              path, marks, barriers);
        files++;
    }
    closedir(d);
    CHECK(files == nranks, "%u trace files in %s, expected %u", files, argv[1], nranks);
    for (unsigned i = 0; i < npairs; i++)
        for (int k = 0; k < 2; k++)
            CHECK(pairs[i].balance[k] == 0, "region %u:%u, rank %u: %lld more %s requests at the home than "
                  "responses at the rank", (unsigned)(pairs[i].block >> 32), (unsigned)pairs[i].block,
                  pairs[i].remote, pairs[i].balance[k], k == 0 ? "read" : "write");
    unsigned long long total = 0;
    for (int side = 0; side < 2; side++)
        for (unsigned t = 1; t < COSMOS_TYPE_COUNT; t++)
            if (by_type[side][t]) {
                printf("  %-6s %-20s %10llu\n", side ? "home" : "remote", cosmos_type_name(t), by_type[side][t]);
                total += by_type[side][t];
            }
    printf("job %llx: %llu messages in %u files, %u regions x ranks requested\n", (unsigned long long)job, total,
           files, npairs);
    CHECK(total >= (unsigned long long)min_messages, "%llu messages, expected at least %lld", total, min_messages);
    printf("ok\n");
    return 0;
}
