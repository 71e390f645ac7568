/* rma layer: protected segments and the MBCF commands (Matsumoto's MBCF thesis ch. 4).
 * Each rank's segments live in its shm heap, mapped by every local peer, or
 * are registered private memory.  One function, rma_issue (ops.c), decides whether
 * a command runs here on mapped memory or is sent for the target's progress
 * engine to run; both run the same executor, rma_execute, which does the
 * owner's checks.  Layout of the heap header: docs/RMA.md. */
#ifndef SHOAL_RMA_H
#define SHOAL_RMA_H

#include <stdint.h>

#include "am/am.h"
#include "mem/mem.h"
#include "shoal.h"

#define RMA_MAGIC 0x414d524c414f4853ull /* "SHOALRMA" */
#define RMA_LAYOUT_VERSION 1u
#define RMA_SLOT_BITS 10u
#define RMA_SLOTS (1u << RMA_SLOT_BITS) /* segments per rank */
#define RMA_LOCKS 64u                   /* lock stripes for compound commands */
#define RMA_LOCKS_OFFSET 4096u
#define RMA_ENTRIES_OFFSET 8192u
#define RMA_HEADER_BYTES (RMA_ENTRIES_OFFSET + RMA_SLOTS * 64u)
#define RMA_MAPPED 0x100u /* entry flag: the segment is in the heap */
#define RMA_MAX_STRUCT_DATA 4096u /* FIFO entry, signal datum, z-buffer data */
_Static_assert(RMA_MAX_STRUCT_DATA <= UTIL_MEDIUM_MIN, "the served path sends these unsplit");

/* Start of every rank's heap, written by the owner. */
struct rma_heap_header {
    uint64_t magic;
    uint32_t version;
    uint32_t owner_rank;
    uint64_t heap_bytes;
    uint32_t slots;
    uint32_t header_bytes;
    char pad0[32];
    _Atomic uint64_t refused;   /* refused accesses, counted by whoever checked */
    char pad1[56];
    _Atomic uint64_t quiescent; /* owner's commands on mapped memory completed */
    char pad2[56];
};

/* One segment, one line.  state = generation << 1 | live.  The owner writes
 * the other fields only while the entry is not live. */
struct rma_entry {
    _Atomic uint32_t state;
    uint32_t perms; /* SHOAL_MEM_* | RMA_MAPPED */
    uint64_t key;
    uint64_t offset; /* in the heap, when mapped */
    uint64_t size;
    char pad[32];
};

struct rma_lock {
    _Atomic uint32_t word;
    char pad[60];
};

enum rma_kind {
    RMA_PUT, RMA_PUT_FLAG, RMA_GET, RMA_FETCH_OP, RMA_CAS, RMA_ZBUF, RMA_ZBUF_PACKED,
    RMA_FIFO, RMA_SIGNAL, RMA_FENCE, RMA_KINDS
};

/* A command as both paths carry it.  n is bytes (put, get, z-buffer data,
 * FIFO and signal data) or elements (fetch-op, packed z-buffer).  A command
 * split into several messages runs [off, off + n) of the whole command
 * [whole_off, whole_off + whole_n), and every part checks the whole, so a
 * refused command has no effect at all; unsplit, the two are equal. */
struct rma_cmd {
    enum rma_kind kind;
    unsigned flags;
    int src; /* initiator, filled by the library (FIFO and signal store it) */
    uint32_t id;
    uint64_t key;
    uint64_t off;
    uint64_t n;
    uint64_t whole_off, whole_n;
    const void *data;
    uint64_t a, b, c; /* put_flag: flag_off, value; fetch-op: op, type;
                         cas: expected, swap_off, desired; zbuf: depth, data_off;
                         signal: buffer offset */
};

/* The refusals of the owner's check, counted at the owner. */
static inline int rma_is_refusal(int rc)
{
    return rc == SHOAL_EACCES || rc == SHOAL_ERANGE || rc == SHOAL_ESEGMENT || rc == SHOAL_EALIGN ||
           rc == SHOAL_ENOSTRUCT;
}

/* What a command gives back besides its status. */
struct rma_result {
    void *data;                   /* get: read bytes; fetch-op: old values (may be NULL) */
    struct shoal_cas_result *cas; /* may be NULL */
    int *written;                 /* z-buffer; may be NULL */
};

/* Executes c on rank's memory, which must be mapped here (rank's heap, or
 * this rank's own registered memory); RMA_NOT_HERE when it is not. */
#define RMA_NOT_HERE 1
int rma_execute(int rank, const struct rma_cmd *c, struct rma_result *res);

/* One element of a fetch-op, as one CPU atomic on resolved memory; returns
 * the previous value (exec.c). */
uint64_t rma_atomic(enum shoal_aop op, enum shoal_atype type, uint64_t *p, uint64_t v);

/* FIFO and signal structures (fifo.c, signal.c) on resolved memory. */
int rma_fifo_enqueue(char *seg, uint64_t seg_size, uint64_t off, int src, const void *data, size_t n,
                     int retry);
size_t rma_fifo_bytes(size_t entry_bytes, uint32_t entries, unsigned kind);
int rma_fifo_format(char *at, size_t room, size_t entry_bytes, uint32_t entries, unsigned kind);
int rma_fifo_take(char *seg, uint64_t seg_size, uint64_t off, void *buf, size_t cap, size_t *n, int *src);
uint32_t rma_fifo_count(char *fifo);
int rma_signal_deliver(shoal_mem_t mem, char *seg, uint64_t seg_size, uint64_t off, int src,
                       const void *data, size_t n, uint64_t offset);

/* Per-rank state. */
struct rma_extent {
    uint64_t off, len;
};
struct rma_quarantine {
    uint64_t off, len;
    uint64_t *seen; /* [nranks] each peer's quiescent count at destroy */
};
struct rma_local {
    void *base; /* this rank's view */
    size_t size;
};

struct rma_state {
    int rank, nranks;
    int direct;              /* SHOAL_RMA_DIRECT */
    int membarrier_cmd;      /* how a destroy drains peers' stores; -1: it cannot */
    struct mem_heap heap;
    struct rma_heap_header **hdr; /* [nranks]: mapped heaps, NULL when not local */
    struct rma_local seg[RMA_SLOTS];
    uint32_t gen[RMA_SLOTS];
    struct rma_extent *free_ext; /* sorted by offset */
    size_t nfree, free_cap;
    struct rma_quarantine *quar;
    size_t nquar, quar_cap;
};
extern struct rma_state rma;

int rma_init(int rank, int nranks);
void rma_fini(void);
/* After start-up: every local peer's heap has this rank's layout (fatal if not). */
void rma_check_peers(void);
/* Reclaims quarantined memory that no peer can still be writing. */
void rma_reclaim(void);

static inline struct rma_entry *rma_entry_of(int rank, uint32_t id)
{
    return (struct rma_entry *)((char *)rma.hdr[rank] + RMA_ENTRIES_OFFSET) + (id & (RMA_SLOTS - 1));
}

/* The owner's check of (id, key, perm, [off, off+len)) against rank's
 * table, wherever the command runs: the segment's base and size here,
 * RMA_NOT_HERE for a peer's private memory (its owner checks), or the
 * refusal (which the caller counts).  Inline: it is the whole cost of a
 * small put beyond the copy. */
static inline int rma_check(int rank, uint32_t id, uint64_t key, unsigned perm, uint64_t off, uint64_t len,
                            char **base, uint64_t *size)
{
    struct rma_entry *e = rma_entry_of(rank, id);
    uint32_t want = (id >> RMA_SLOT_BITS) << 1 | 1u;
    if (atomic_load_explicit(&e->state, memory_order_acquire) != want)
        return SHOAL_ESEGMENT;
    unsigned perms = e->perms;
    uint64_t k = e->key, offset = e->offset, sz = e->size;
    /* seqlock: the fields belong to the generation seen before and after */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->state, memory_order_relaxed) != want)
        return SHOAL_ESEGMENT;
    if (!(perms & RMA_MAPPED) && rank != rma.rank)
        return RMA_NOT_HERE;
    if (k != key || (perms & perm) != perm)
        return SHOAL_EACCES;
    if (off > sz || len > sz - off)
        return SHOAL_ERANGE;
    *base = perms & RMA_MAPPED ? (char *)rma.hdr[rank] + offset : (char *)rma.seg[id & (RMA_SLOTS - 1)].base;
    *size = sz;
    return SHOAL_OK;
}

/* Marks a point where no command of this rank runs (see heap.c). */
static inline void rma_quiescent_tick(void)
{
    _Atomic uint64_t *q = &rma.hdr[rma.rank]->quiescent;
    atomic_store_explicit(q, atomic_load_explicit(q, memory_order_relaxed) + 1, memory_order_release);
}

/* Completion side (ops.c). */
void rma_ops_init(void);
void rma_ops_fini(void);

/* The layer's AM handlers (their indices travel: docs/RMA.md). */
enum { RMA_H_REQ = AM_LAYER_BASE(AM_BLOCK_RMA), RMA_H_REP, RMA_H_REVOKE, RMA_H_REVOKE_ACK };

/* ---- native commands (native.c; docs/RMA.md "Native one-sided commands") ----
 * An initiator's copy of a remote segment's entry, filled by the target's
 * reply to a command that passed its check, dropped when the target
 * revokes it (shoal_mem_destroy). */
struct rma_cached {
    uint32_t gen;      /* the segment's generation; 0: nothing cached */
    uint32_t perms;    /* SHOAL_MEM_* */
    uint64_t key;
    uint64_t offset;   /* in the target's heap, which is its exposed region */
    uint64_t size;
    uint32_t inflight; /* native commands issued to this slot not yet completed */
    uint32_t revoked;  /* the newest generation revoked (a late fill of it is refused) */
};

/* Collective, after the heap exists: exposes this rank's whole heap when
 * the job's transport has native one-sided commands and SHOAL_RMA_NATIVE
 * allows them (every rank decides alike). */
void rma_native_init(void);
void rma_native_fini(void);
/* The transport's table when commands to target may go natively, with
 * whether atomics may and the region every heap was exposed as; else NULL. */
const struct tp_rma_ops *rma_native_ops(int target, int *atomics, uint32_t *region);
/* The initiator's check of a command against its cached entry, the same
 * as rma_check's at the owner: SHOAL_OK (*ce: the entry), RMA_NOT_HERE (no
 * entry of that generation: the target executes and checks), or the
 * refusal (counted in stats.rma_native_refused). */
int rma_native_check(int target, uint32_t id, uint64_t key, unsigned perm, uint64_t off, uint64_t len,
                     struct rma_cached **ce);
/* Initiator: the entry a reply carried, {perms, offset, size} in seg. */
void rma_native_fill(int target, uint32_t id, uint64_t key, const uint64_t *seg);
/* Owner: before replying to src's command on segment id that passed the
 * check, 1 with seg filled when src should cache the entry (it is
 * recorded as a holder), else 0. */
int rma_native_offer(int src, uint32_t id, uint64_t *seg);
/* Owner, at destroy, after the entry is dead: revokes every holder's copy
 * and returns once each has acknowledged (after its native commands to the
 * segment completed), so the memory can go to quarantine as if no rank had
 * ever cached it. */
void rma_native_revoke(uint32_t id);

#endif
