/* Every boot collective, checked for real effect: exchanged descriptors map
 * the memory of the peers on this host (and are -1 exactly for the ranks on
 * other hosts), allgather results are rank-ordered (also across several
 * messages and hosts), and a barrier keeps ranks in step.  Runs under
 * shoalrun with any rank count, on one host or several, or alone as a
 * singleton.
 *
 * Where a rank runs is checked too when the test says how to tell hosts
 * apart: BOOT_TEST_SUBNET=A.B.C.0/24 (the rank's own IPv4 address in that
 * subnet, from getifaddrs: proves the ranks run in different network
 * namespaces) or else BOOT_TEST_HOST (set per host by the remote-shell
 * template).  Ranks share a host index exactly when they share that
 * identity. */
#include "boot/boot.h"
#include "shoal.h"
#include "util/util.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BARRIER_ROUNDS 50

static int rank, size;
#define HOST_ID_LEN 64
static size_t page_len; /* room for one seen[] slot per rank */

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", rank, __FILE__,      \
                    __LINE__, #cond);                                                  \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define CHECK_OK(call)                                                                 \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != SHOAL_OK) {                                                         \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, shoal_strerror(rc_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* Page layout of each rank's shared page. */
struct page {
    uint64_t owner;            /* owner's rank + 1, written before the exchange */
    volatile uint64_t round;   /* last barrier round the owner entered */
    volatile uint64_t seen[];  /* seen[r]: written by rank r into this page */
};

/* The bootstrap the launcher's variables call for. */
static const char *expected_boot(void)
{
    return util_config_is_set(CFG_RANK) ? "shoalrun" : getenv("PMIX_RANK") ? "pmix" : "singleton";
}

static void check_info(const struct boot_info *bi)
{
    rank = bi->rank;
    size = bi->size;
    CHECK(size >= 1 && rank >= 0 && rank < size);
    CHECK(bi->boot && strcmp(bi->boot, expected_boot()) == 0);
    CHECK(bi->singleton == (strcmp(bi->boot, "singleton") == 0));
    CHECK(bi->nhosts >= 1 && bi->host >= 0 && bi->host < bi->nhosts && bi->host == boot_host_of(rank));
    CHECK(!boot_peer_failed(NULL, NULL));
    if (strcmp(bi->boot, "shoalrun")) {
        CHECK(bi->job == NULL && (!bi->singleton || size == 1));
        return;
    }
    CHECK(bi->job != NULL);
    CHECK(bi->job->magic == BOOT_JOB_MAGIC && bi->job->size == (uint32_t)size);
    CHECK(bi->job->job_id == bi->job_id);
    CHECK(bi->job->nhosts == (uint32_t)bi->nhosts);
}

/* Every rank names the same job. */
static void check_job_id(const struct boot_info *bi)
{
    uint64_t *ids = calloc((size_t)size, sizeof *ids);
    CHECK(ids);
    CHECK_OK(boot_allgather(&bi->job_id, sizeof bi->job_id, ids));
    for (int r = 0; r < size; r++)
        CHECK(ids[r] == bi->job_id);
    free(ids);
}

static int same_host(int r)
{
    return boot_host_of(r) == boot_host_of(rank);
}

static struct page **exchange_pages(void)
{
    page_len = (sizeof(struct page) + sizeof(uint64_t) * (size_t)size + 4095) & ~(size_t)4095;
    int fd = memfd_create("boot-test", MFD_CLOEXEC);
    CHECK(fd >= 0 && ftruncate(fd, page_len) == 0);
    struct page *mine = mmap(NULL, page_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(mine != MAP_FAILED);
    mine->owner = (uint64_t)rank + 1;

    int *fds = calloc((size_t)size, sizeof *fds);
    struct page **pages = calloc((size_t)size, sizeof *pages);
    CHECK(fds && pages);
    CHECK_OK(boot_exchange_fd(fd, fds));
    for (int r = 0; r < size; r++) {
        CHECK((fds[r] >= 0) == same_host(r));
        if (fds[r] < 0)
            continue;
        pages[r] = mmap(NULL, page_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[r], 0);
        CHECK(pages[r] != MAP_FAILED);
        CHECK(pages[r]->owner == (uint64_t)r + 1);
        close(fds[r]);
    }
    close(fd);
    munmap(mine, page_len);
    free(fds);
    return pages;
}

/* Each rank writes into the page of every peer on its host, then after a
 * barrier finds each such peer's mark in its own: the descriptors really
 * share memory. */
static void check_cross_writes(struct page **pages)
{
    for (int r = 0; r < size; r++)
        if (pages[r])
            pages[r]->seen[rank] = (uint64_t)rank + 100;
    CHECK_OK(boot_barrier());
    for (int r = 0; r < size; r++)
        CHECK(pages[rank]->seen[r] == (same_host(r) ? (uint64_t)r + 100 : 0));
}

/* A barrier that let anyone through early would show a peer still in an
 * earlier round. */
static void check_barrier_rounds(struct page **pages)
{
    for (uint64_t round = 1; round <= BARRIER_ROUNDS; round++) {
        pages[rank]->round = round;
        CHECK_OK(boot_barrier());
        for (int r = 0; r < size; r++)
            CHECK(!pages[r] || pages[r]->round >= round);
    }
}

static unsigned char pattern(int r, size_t i)
{
    return (unsigned char)(r * 31 + (int)(i % 251) + 7);
}

static void check_allgather(size_t len)
{
    unsigned char *mine = malloc(len ? len : 1);
    unsigned char *all = malloc(len * (size_t)size + 1);
    CHECK(mine && all);
    for (size_t i = 0; i < len; i++)
        mine[i] = pattern(rank, i);
    CHECK_OK(boot_allgather(mine, len, all));
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < len; i++)
            CHECK(all[(size_t)r * len + i] == pattern(r, i));
    free(mine);
    free(all);
}

static void check_pids(const struct boot_info *bi)
{
    int32_t mine = (int32_t)getpid();
    int32_t *pids = calloc((size_t)size, sizeof *pids);
    CHECK(pids);
    CHECK_OK(boot_allgather(&mine, sizeof mine, pids));
    CHECK(pids[rank] == mine);
    /* After a collective every rank's HELLO has been handled; only this
     * host's launcher knows its ranks' pids. */
    for (int r = 0; r < size && bi->job; r++)
        CHECK(bi->job->pid[r] == (same_host(r) ? pids[r] : 0));
    free(pids);
}

/* This rank's host as the test defines it (see the top); "" if undefined. */
static void host_identity(char id[HOST_ID_LEN])
{
    memset(id, 0, HOST_ID_LEN);
    const char *subnet = getenv("BOOT_TEST_SUBNET"), *name = getenv("BOOT_TEST_HOST");
    if (!subnet) {
        snprintf(id, HOST_ID_LEN, "%s", name ? name : "");
        return;
    }
    char net[32];
    struct in_addr want;
    snprintf(net, sizeof net, "%s", subnet);
    net[strcspn(net, "/")] = '\0';
    CHECK(inet_pton(AF_INET, net, &want) == 1);
    struct ifaddrs *ifs;
    CHECK(getifaddrs(&ifs) == 0);
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        if ((ntohl(a.s_addr) & 0xffffff00u) == (ntohl(want.s_addr) & 0xffffff00u))
            inet_ntop(AF_INET, &a, id, HOST_ID_LEN);
    }
    freeifaddrs(ifs);
    CHECK(id[0] != '\0'); /* this rank has an address in the subnet */
}

static void check_hosts(void)
{
    char mine[HOST_ID_LEN];
    host_identity(mine);
    char *all = malloc((size_t)size * HOST_ID_LEN);
    int *hosts = malloc((size_t)size * sizeof *hosts);
    int me = boot_host_of(rank);
    CHECK(all && hosts);
    CHECK_OK(boot_allgather(mine, HOST_ID_LEN, all));
    CHECK_OK(boot_allgather(&me, sizeof me, hosts));
    for (int r = 0; r < size; r++) {
        CHECK(hosts[r] == boot_host_of(r)); /* every rank sees the same host map */
        if (mine[0])
            CHECK((strcmp(all + (size_t)r * HOST_ID_LEN, mine) == 0) == same_host(r));
    }
    if (mine[0] && rank == 0)
        printf("rank 0 runs at %s\n", mine);
    free(all);
    free(hosts);
}

int main(void)
{
    struct boot_info bi;
    CHECK_OK(boot_init(&bi));
    check_info(&bi);
    CHECK(boot_init(&bi) == SHOAL_EINIT);
    check_pids(&bi);
    check_job_id(&bi);
    check_hosts();
    struct page **pages = exchange_pages();
    check_cross_writes(pages);
    check_barrier_rounds(pages);
    check_allgather(0);
    check_allgather(3);
    /* Above one message's payload in the result, and for few ranks in each
     * contribution too. */
    check_allgather(size <= 8 ? 200000 : 700);
    for (int r = 0; r < size; r++)
        if (pages[r])
            munmap(pages[r], page_len);
    free(pages);
    CHECK(!boot_peer_failed(NULL, NULL));
    boot_finalize();
    printf("rank %d of %d: boot collectives ok\n", rank, size);
    return 0;
}
