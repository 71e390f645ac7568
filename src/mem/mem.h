/* mem: memory shared between the ranks of one host.  All of it comes from
 * memfd_create and reaches peers as descriptors through the bootstrap
 * (boot_exchange_fd), so no name ever exists in /dev/shm.  The shm
 * transport's inboxes, am's segments and rma's heaps are made of it. */
#ifndef SHOAL_MEM_H
#define SHOAL_MEM_H

#include <stddef.h>
#include <stdint.h>

/* memcpy for medium payloads into a ring (mem.c says why not plain memcpy). */
void mem_copy(void *dst, const void *src, size_t n);

/* Shared memory of `bytes` from a memfd, whose first `eager` bytes are
 * backed up front (a full tmpfs is SHOAL_ENOMEM here, never SIGBUS later)
 * and prefaulted; the rest is backed by whoever first needs it (the shm
 * rings' senders, ring_tx_warm). */
int mem_alloc(const char *name, size_t bytes, size_t eager, int *fd, void **addr);
/* SHOAL_ENOMEM, logged naming the cgroup, when `ranks` reservations of
 * `bytes` (for `what`) at once would not fit under the tightest memory
 * cgroup limit above this process with a 16 MiB margin (file cache the
 * kernel can reclaim counts as free).  memfd memory past the limit would
 * bring the OOM killer instead of an error. */
int mem_cgroup_check(const char *what, size_t bytes, unsigned ranks);
/* Backs [p, p + len) of a shared mapping with memory and maps it here
 * (MADV_POPULATE_WRITE): SHOAL_ENOMEM, logged naming `what` and the
 * bytes, when the host or the memory cgroup cannot, instead of a SIGBUS
 * at some later store. */
int mem_populate(const char *what, void *p, size_t len);
/* Maps a descriptor received from a peer, whole file, its first `eager`
 * bytes prefaulted. */
int mem_map_fd(int fd, size_t eager, void **addr, size_t *bytes);

/* Collective: every rank allocates `bytes` (the first `eager` backed and
 * mapped at once, as mem_alloc), writes head_len bytes of head
 * at its start (head may be NULL when head_len is 0), and maps the
 * allocations of the ranks on its host.  bases and sizes have nranks
 * entries, bases zeroed by the caller; bases[r] stays NULL for a rank on
 * another host, and sizes[r] is its allocation's size all the same.  All ranks return
 * the same status: if any rank's allocation or mapping failed, every rank
 * unmaps what it mapped and returns the first failure. */
int mem_exchange_alloc(const char *name, size_t bytes, size_t eager, const void *head, size_t head_len,
                       int nranks, void **bases, size_t *sizes);

/* A heap: one sparse memfd per rank, mapped by every local peer at init
 * and never remapped, so memory carved from it later is reachable by all
 * without another exchange.  Only reserved ranges use memory. */
struct mem_heap {
    int fd;         /* this rank's memfd (kept to reserve and release ranges) */
    size_t bytes;   /* every rank's heap size */
    void **bases;   /* [nranks]; NULL for ranks on other hosts */
    int nranks;
};
/* Collective, with failure agreement like mem_exchange_alloc. */
int mem_heap_init(struct mem_heap *h, size_t bytes, int nranks);
void mem_heap_fini(struct mem_heap *h);
/* Backs [off, off+len) of this rank's heap with memory (SHOAL_ENOMEM when
 * the host cannot) and prefaults it here. */
int mem_heap_reserve(struct mem_heap *h, int rank, size_t off, size_t len);
/* Returns the range's memory; it reads as zeros afterwards. */
void mem_heap_release(struct mem_heap *h, size_t off, size_t len);

#endif
