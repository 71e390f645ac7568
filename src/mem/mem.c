/* mem: memory shared between the ranks of one host (memfd allocations,
 * their exchange through the bootstrap, heaps) and the copy into it. */
#include "mem/mem.h"
#include "boot/boot.h"
#include "shoal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copies a medium payload into a ring.  glibc switches to `rep movsb` from
 * 2 KiB (its lowest threshold), which on the AMD Zen machines measured here
 * is up to 2x slower than its vector loop when the destination lines were
 * last read by another core, as ring lines always were; chunks of 1 KiB keep
 * the vector loop (docs/SHM_QUEUE.md has the numbers).  Long messages keep
 * plain memcpy: into a segment it measured as fast or faster. */
void mem_copy(void *dst, const void *src, size_t n)
{
    const size_t chunk = 1024;
    char *d = dst;
    const char *s = src;
    while (n > chunk) {
        memcpy(d, s, chunk);
        d += chunk;
        s += chunk;
        n -= chunk;
    }
    if (n)
        memcpy(d, s, n);
}

int mem_populate(const char *what, void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
        return SHOAL_OK;
    if (errno != EINVAL) {
        LOG(LOG_ERROR, "cannot back %zu bytes of shared memory for %s: %s "
            "(host memory or the memory cgroup's limit exhausted)", len, what, strerror(errno));
        return SHOAL_ENOMEM;
    }
#endif
    /* before Linux 5.14: a read fault backs a tmpfs page too, but where
     * nothing reserved it (fallocate), an exhausted limit is a SIGBUS */
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < len; i += (size_t)page)
        (void)((volatile char *)p)[i];
    return SHOAL_OK;
}

int mem_alloc(const char *name, size_t bytes, size_t eager, int *fd_out, void **addr)
{
    /* memfd memory is not bounded by any mount: reserving more than the
     * host has would run into the OOM killer instead of failing. */
    size_t host = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > host / 2) {
        LOG(LOG_ERROR, "%s of %zu bytes refused: more than half of this host's %zu bytes of memory",
            name, bytes, host);
        return SHOAL_ENOMEM;
    }
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        LOG(LOG_ERROR, "memfd_create(%s): %s", name, strerror(errno));
        return SHOAL_ESYS;
    }
    int rc = ftruncate(fd, (off_t)bytes) ? errno : posix_fallocate(fd, 0, (off_t)eager);
    if (rc) {
        LOG(LOG_ERROR, "cannot reserve %zu bytes of shared memory for %s: %s "
            "(host memory or the memory cgroup's limit exhausted)", eager, name, strerror(rc));
        close(fd);
        return rc == ENOSPC || rc == ENOMEM ? SHOAL_ENOMEM : SHOAL_ESYS;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        LOG(LOG_ERROR, "mmap %zu bytes for %s: %s", bytes, name, strerror(errno));
        close(fd);
        return SHOAL_ENOMEM;
    }
    rc = mem_populate(name, p, eager);
    if (rc) {
        munmap(p, bytes);
        close(fd);
        return rc;
    }
    *fd_out = fd;
    *addr = p;
    return SHOAL_OK;
}

int mem_map_fd(int fd, size_t eager, void **addr, size_t *bytes)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size <= 0) {
        LOG(LOG_ERROR, "peer shared memory descriptor unusable: %s", strerror(errno));
        return SHOAL_ESYS;
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        LOG(LOG_ERROR, "mmap of peer shared memory (%lld bytes): %s", (long long)sb.st_size, strerror(errno));
        return SHOAL_ENOMEM;
    }
    /* backed by its owner already: this maps it (no fault on the first touches) */
    size_t mapped = eager < (size_t)sb.st_size ? eager : (size_t)sb.st_size;
#ifdef MADV_POPULATE_READ
    if (madvise(p, mapped, MADV_POPULATE_READ) != 0 && errno != EINVAL)
        LOG(LOG_DEBUG, "prefaulting a peer's shared memory: %s", strerror(errno));
#else
    (void)mapped;
#endif
    *addr = p;
    *bytes = (size_t)sb.st_size;
    return SHOAL_OK;
}

/* Descriptors from boot_exchange_fd: -1 marks one never received. */
static int *fd_array(int nranks)
{
    int *fds = malloc((size_t)nranks * sizeof *fds);
    for (int r = 0; fds && r < nranks; r++)
        fds[r] = -1;
    return fds;
}

static void close_fds(int *fds, int nranks)
{
    for (int r = 0; fds && r < nranks; r++)
        if (fds[r] >= 0)
            close(fds[r]);
    free(fds);
}

/* What one rank reports in the agreement round of mem_exchange_alloc. */
struct shm_alloc_result {
    int32_t alloc_rc; /* its own allocation */
    int32_t map_rc;   /* mapping its host's */
    uint64_t bytes;   /* its allocation's size, for ranks on other hosts */
};

int mem_exchange_alloc(const char *name, size_t bytes, size_t eager, const void *head, size_t head_len,
                       int nranks, void **bases, size_t *sizes)
{
    /* Every rank joins the exchange even when its own allocation failed (with
     * an empty placeholder), then all agree on the outcome, so one rank's
     * failure is every rank's failure and the collective never hangs. */
    struct shm_alloc_result mine = {0, 0, bytes};
    int myfd = -1;
    void *p;
    int nlocal = 0;
    for (int r = 0; r < nranks; r++)
        nlocal += boot_rank_local(r);
    /* this host's ranks reserve at once, as a rule under one cgroup */
    mine.alloc_rc = mem_cgroup_check(name, bytes, (unsigned)nlocal);
    if (mine.alloc_rc == SHOAL_OK)
        mine.alloc_rc = mem_alloc(name, bytes, eager, &myfd, &p);
    if (mine.alloc_rc == SHOAL_OK) {
        /* written before sharing: a peer sees it as soon as it maps the fd */
        if (head_len)
            memcpy(p, head, head_len);
        munmap(p, bytes); /* remapped below with every peer's, in one loop */
    } else
        myfd = memfd_create("shoal-placeholder", MFD_CLOEXEC);
    int *fds = fd_array(nranks);
    struct shm_alloc_result *all = calloc((size_t)nranks, sizeof *all);
    if (myfd < 0 || !fds || !all) {
        /* cannot even take part: the job cannot agree on anything any more */
        util_fatal("cannot take part in a shared allocation of %zu bytes", bytes);
    }
    int rc = boot_exchange_fd(myfd, fds);
    close(myfd);
    for (int r = 0; r < nranks && rc == SHOAL_OK && mine.alloc_rc == SHOAL_OK && !mine.map_rc; r++) {
        struct stat sb;
        if (!boot_rank_local(r))
            continue; /* reached over the network: its memory stays there */
        if (fstat(fds[r], &sb) == 0 && sb.st_size == 0)
            mine.map_rc = SHOAL_ENOMEM; /* that rank's placeholder: it reports its own failure */
        else
            mine.map_rc = mem_map_fd(fds[r], eager, &bases[r], &sizes[r]);
    }
    close_fds(fds, nranks);
    if (rc == SHOAL_OK)
        rc = boot_allgather(&mine, sizeof mine, all);
    for (int r = 0; r < nranks && rc == SHOAL_OK; r++)
        rc = all[r].alloc_rc;
    for (int r = 0; r < nranks && rc == SHOAL_OK; r++)
        rc = all[r].map_rc;
    for (int r = 0; r < nranks && rc == SHOAL_OK; r++)
        if (!bases[r])
            sizes[r] = all[r].bytes;
    free(all);
    if (rc)
        for (int r = 0; r < nranks; r++)
            if (bases[r]) {
                munmap(bases[r], sizes[r]);
                bases[r] = NULL;
            }
    return rc;
}

/* ---- heaps ------------------------------------------------------------- */

static int heap_create(size_t bytes)
{
    int fd = memfd_create("shoal-heap", MFD_CLOEXEC);
    if (fd < 0) {
        LOG(LOG_ERROR, "memfd_create(shoal-heap): %s", strerror(errno));
        return -1;
    }
    if (ftruncate(fd, (off_t)bytes) != 0) { /* sparse: no memory yet */
        LOG(LOG_ERROR, "cannot size a %zu-byte heap: %s (SHOAL_RMA_HEAP)", bytes, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int heap_map_all(struct mem_heap *h, const int *fds)
{
    for (int r = 0; r < h->nranks; r++) {
        struct stat sb;
        if (!boot_rank_local(r))
            continue;
        if (fstat(fds[r], &sb) != 0 || (size_t)sb.st_size != h->bytes) {
            LOG(LOG_ERROR, "heap of rank %d has %lld bytes, this rank expects %zu: "
                "all ranks must use the same SHOAL_RMA_HEAP", r, (long long)sb.st_size, h->bytes);
            return SHOAL_EBOOT;
        }
        void *p = mmap(NULL, h->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fds[r], 0);
        if (p == MAP_FAILED) {
            LOG(LOG_ERROR, "mapping the %zu-byte heap of rank %d: %s", h->bytes, r, strerror(errno));
            return SHOAL_ENOMEM;
        }
        h->bases[r] = p;
    }
    return SHOAL_OK;
}

int mem_heap_init(struct mem_heap *h, size_t bytes, int nranks)
{
    memset(h, 0, sizeof *h);
    h->bytes = bytes;
    h->nranks = nranks;
    h->bases = calloc((size_t)nranks, sizeof *h->bases);
    int *fds = fd_array(nranks);
    h->fd = heap_create(bytes);
    int myfd = h->fd >= 0 ? h->fd : memfd_create("shoal-placeholder", MFD_CLOEXEC);
    if (!h->bases || !fds || myfd < 0)
        util_fatal("cannot take part in the heap exchange");
    struct shm_alloc_result mine = {h->fd >= 0 ? SHOAL_OK : SHOAL_ESYS, 0, bytes}, *all = calloc((size_t)nranks, sizeof *all);
    if (!all)
        util_fatal("cannot take part in the heap exchange");
    int rc = boot_exchange_fd(myfd, fds);
    if (h->fd < 0)
        close(myfd);
    if (rc == SHOAL_OK && mine.alloc_rc == SHOAL_OK)
        mine.map_rc = heap_map_all(h, fds);
    close_fds(fds, nranks);
    if (rc == SHOAL_OK)
        rc = boot_allgather(&mine, sizeof mine, all);
    for (int r = 0; r < nranks && rc == SHOAL_OK; r++)
        rc = all[r].alloc_rc ? all[r].alloc_rc : all[r].map_rc;
    free(all);
    return rc;
}

void mem_heap_fini(struct mem_heap *h)
{
    for (int r = 0; h->bases && r < h->nranks; r++)
        if (h->bases[r])
            munmap(h->bases[r], h->bytes);
    free(h->bases);
    if (h->fd >= 0)
        close(h->fd);
    memset(h, 0, sizeof *h);
    h->fd = -1;
}

int mem_heap_reserve(struct mem_heap *h, int rank, size_t off, size_t len)
{
    int rc = mem_cgroup_check("shoal-heap segment", len, 1);
    if (rc)
        return rc;
    rc = posix_fallocate(h->fd, (off_t)off, (off_t)len);
    if (rc) {
        LOG(LOG_ERROR, "cannot back %zu bytes of shared heap: %s "
            "(host memory or the memory cgroup's limit exhausted)", len, strerror(rc));
        return rc == ENOSPC || rc == ENOMEM || rc == EFBIG ? SHOAL_ENOMEM : SHOAL_ESYS;
    }
    return mem_populate("shoal-heap segment", (char *)h->bases[rank] + off, len);
}

void mem_heap_release(struct mem_heap *h, size_t off, size_t len)
{
    if (fallocate(h->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) != 0)
        LOG(LOG_WARN, "releasing %zu bytes of shared heap: %s", len, strerror(errno));
}
