/* shm transport: per-rank inbox regions holding the rings every local peer
 * sends into, plus shared segments.  All memory comes from memfd_create and
 * reaches peers as descriptors over the launcher socket, so no name ever
 * exists in /dev/shm.  Layout: docs/SHM_QUEUE.md. */
#ifndef SHOAL_SHM_H
#define SHOAL_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "shm/ring.h"

#define SHM_MAGIC 0x4d4853414f4853ull /* "SHOASHM" */
#define SHM_LAYOUT_VERSION 2u
#define SHM_CLASSES 2u                /* 0 = requests, 1 = replies */
#define SHM_BARRIER_ROUNDS 16u        /* dissemination rounds: 2^16 ranks */
#define SHM_BARRIER_OFFSET 4096u
#define SHM_HEADS_OFFSET 8192u

struct shm_region_header {
    uint64_t magic;
    uint32_t version;
    uint32_t owner_rank;
    uint32_t nranks;         /* ranks of this host: senders with rings here */
    uint32_t ring_slots;
    uint64_t rings_offset;
    uint64_t total_bytes;
    int32_t owner_pid;
    uint32_t reserved;
};

/* One dissemination-barrier flag, written by one peer per round. */
struct shm_barrier_flag {
    _Atomic uint64_t epoch;
    char pad[RING_HEAD_BLOCK - sizeof(uint64_t)];
} __attribute__((aligned(RING_HEAD_BLOCK)));

struct shm_state {
    int rank;
    int nranks;
    int nlocal;              /* ranks reached over shared memory, this one included */
    int *local;              /* [nlocal]: those ranks, in rank order */
    int *local_index;        /* [nranks]: index in local[], -1 for ranks on other hosts */
    uint32_t ring_slots;
    void **regions;          /* regions[r]: rank r's inbox, mapped here (NULL: other host) */
    size_t *region_sizes;    /* as mapped (a peer's may differ if misconfigured) */
    size_t region_bytes;     /* this rank's */
    struct ring_tx *tx;      /* [dest * SHM_CLASSES + class]; local dests only */
    struct ring_rx *rx;      /* [local index * SHM_CLASSES + class] */
};

/* Geometry for nranks ranks on one host: slots per ring
 * (SHOAL_SHM_RING_SLOTS or the default rule) and the region size. */
uint32_t shm_default_ring_slots(int nranks);
size_t shm_region_bytes(int nranks, uint32_t ring_slots);

/* memcpy for medium payloads into a ring (shm.c says why not plain memcpy). */
void shm_copy(void *dst, const void *src, size_t n);

/* Collective: creates this rank's inbox, exchanges descriptors, maps the
 * inbox of every peer on this host (boot_rank_local) and validates it. */
int shm_init(struct shm_state *st, int rank, int nranks);
void shm_fini(struct shm_state *st);

/* Barrier flag `round` in rank r's inbox. */
struct shm_barrier_flag *shm_barrier_flag(struct shm_state *st, int r, unsigned round);

/* Shared memory of `bytes` from a memfd: backing store reserved up front
 * (a full tmpfs is SHOAL_ENOMEM here, never SIGBUS later) and prefaulted. */
int shm_alloc(const char *name, size_t bytes, int *fd, void **addr);
/* SHOAL_ENOMEM, logged naming the cgroup, when `ranks` reservations of
 * `bytes` (for `what`) at once would not fit under the tightest memory
 * cgroup limit above this process with a 16 MiB margin (file cache the
 * kernel can reclaim counts as free).  memfd memory past the limit would
 * bring the OOM killer instead of an error. */
int shm_cgroup_check(const char *what, size_t bytes, unsigned ranks);
/* Maps a descriptor received from a peer, whole file, prefaulted. */
int shm_map_fd(int fd, void **addr, size_t *bytes);

/* Collective: every rank allocates `bytes`, writes head_len bytes of head
 * at its start (head may be NULL when head_len is 0), and maps the
 * allocations of the ranks on its host.  bases and sizes have nranks
 * entries, bases zeroed by the caller; bases[r] stays NULL for a rank on
 * another host, and sizes[r] is its allocation's size all the same.  All ranks return
 * the same status: if any rank's allocation or mapping failed, every rank
 * unmaps what it mapped and returns the first failure. */
int shm_exchange_alloc(const char *name, size_t bytes, const void *head, size_t head_len, int nranks,
                       void **bases, size_t *sizes);

/* A heap: one sparse memfd per rank, mapped by every local peer at init
 * and never remapped, so memory carved from it later is reachable by all
 * without another exchange.  Only reserved ranges use memory. */
struct shm_heap {
    int fd;         /* this rank's memfd (kept to reserve and release ranges) */
    size_t bytes;   /* every rank's heap size */
    void **bases;   /* [nranks]; NULL for ranks on other hosts */
    int nranks;
};
/* Collective, with failure agreement like shm_exchange_alloc. */
int shm_heap_init(struct shm_heap *h, size_t bytes, int nranks);
void shm_heap_fini(struct shm_heap *h);
/* Backs [off, off+len) of this rank's heap with memory (SHOAL_ENOMEM when
 * the host cannot) and prefaults it here. */
int shm_heap_reserve(struct shm_heap *h, int rank, size_t off, size_t len);
/* Returns the range's memory; it reads as zeros afterwards. */
void shm_heap_release(struct shm_heap *h, size_t off, size_t len);

#endif
