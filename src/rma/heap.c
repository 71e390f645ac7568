/* Protected segments: the table every local peer reads, the owner's heap
 * allocator, and deferred reuse of destroyed segments' memory. */
#include "rma/rma.h"
#include "boot/boot.h"

#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

struct rma_state rma = {.rank = -1, .heap = {.fd = -1}};

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* ---- allocator: first fit over page-granular free extents ---------------- */

static int ext_insert(size_t at, uint64_t off, uint64_t len)
{
    if (rma.nfree == rma.free_cap) {
        size_t cap = rma.free_cap ? rma.free_cap * 2 : 16;
        struct rma_extent *e = realloc(rma.free_ext, cap * sizeof *e);
        if (!e)
            return SHOAL_ENOMEM;
        rma.free_ext = e;
        rma.free_cap = cap;
    }
    memmove(&rma.free_ext[at + 1], &rma.free_ext[at], (rma.nfree - at) * sizeof *rma.free_ext);
    rma.free_ext[at] = (struct rma_extent){off, len};
    rma.nfree++;
    return SHOAL_OK;
}

static void ext_remove(size_t at)
{
    memmove(&rma.free_ext[at], &rma.free_ext[at + 1], (rma.nfree - at - 1) * sizeof *rma.free_ext);
    rma.nfree--;
}

static int heap_alloc(uint64_t len, uint64_t *off)
{
    for (size_t i = 0; i < rma.nfree; i++) {
        struct rma_extent *e = &rma.free_ext[i];
        if (e->len < len)
            continue;
        *off = e->off;
        e->off += len;
        e->len -= len;
        if (e->len == 0)
            ext_remove(i);
        return SHOAL_OK;
    }
    return SHOAL_ENOMEM;
}

/* Returns a range, merging with its neighbours. */
static void heap_free(uint64_t off, uint64_t len)
{
    size_t i = 0;
    while (i < rma.nfree && rma.free_ext[i].off < off)
        i++;
    if (i > 0 && rma.free_ext[i - 1].off + rma.free_ext[i - 1].len == off) {
        rma.free_ext[i - 1].len += len;
        if (i < rma.nfree && off + len == rma.free_ext[i].off) {
            rma.free_ext[i - 1].len += rma.free_ext[i].len;
            ext_remove(i);
        }
        return;
    }
    if (i < rma.nfree && off + len == rma.free_ext[i].off) {
        rma.free_ext[i].off = off;
        rma.free_ext[i].len += len;
        return;
    }
    if (ext_insert(i, off, len))
        LOG(LOG_WARN, "lost %llu bytes of heap: no memory to track them", (unsigned long long)len);
}

/* ---- quarantine: destroyed memory a peer might still be writing ---------- */

/* Every rank registers for expedited global membarriers at init, so a
 * destroy costs an IPI to the CPUs running peers (about 0.5 us here), not
 * an RCU grace period (about 18 ms). */
static int membarrier(int cmd)
{
    return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static int membarrier_choice(void)
{
    if (membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0)
        return MEMBARRIER_CMD_GLOBAL_EXPEDITED;
    int cmds = membarrier(MEMBARRIER_CMD_QUERY);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL) ? MEMBARRIER_CMD_GLOBAL : -1;
}

/* After the segment's dead state is stored: every peer's store buffer is
 * drained, so its quiescent count covers every command it finished, and
 * each command it has still to finish began its check before the barrier.
 * 0 when the kernel has no membarrier: such memory is never reused. */
static int drain_peers(void)
{
    if (rma.membarrier_cmd < 0)
        return 0;
    atomic_thread_fence(memory_order_seq_cst);
    return membarrier(rma.membarrier_cmd) == 0;
}

/* A peer's command that began before the destroy has finished once that
 * peer's quiescent count has moved past the value sampled after
 * drain_peers: the count moves after every command. */
static int quarantine_over(const struct rma_quarantine *q)
{
    for (int r = 0; r < rma.nranks; r++) {
        if (r == rma.rank || !rma.hdr[r])
            continue;
        uint64_t now = atomic_load_explicit(&rma.hdr[r]->quiescent, memory_order_acquire);
        if (now <= q->seen[r])
            return 0;
    }
    return 1;
}

void rma_reclaim(void)
{
    size_t kept = 0;
    for (size_t i = 0; i < rma.nquar; i++) {
        struct rma_quarantine *q = &rma.quar[i];
        if (quarantine_over(q)) {
            mem_heap_release(&rma.heap, q->off, q->len);
            heap_free(q->off, q->len);
            free(q->seen);
        } else
            rma.quar[kept++] = *q;
    }
    rma.nquar = kept;
}

static void quarantine_add(uint64_t off, uint64_t len)
{
    uint64_t *seen = calloc((size_t)rma.nranks, sizeof *seen);
    if (rma.nquar == rma.quar_cap) {
        size_t cap = rma.quar_cap ? rma.quar_cap * 2 : 8;
        struct rma_quarantine *q = realloc(rma.quar, cap * sizeof *q);
        if (q) {
            rma.quar = q;
            rma.quar_cap = cap;
        }
    }
    if (!seen || rma.nquar == rma.quar_cap) {
        free(seen);
        LOG(LOG_WARN, "%llu bytes of a destroyed segment are not reused: no memory to track them",
            (unsigned long long)len);
        return;
    }
    int drained = drain_peers();
    for (int r = 0; r < rma.nranks; r++)
        if (rma.hdr[r])
            seen[r] = drained ? atomic_load_explicit(&rma.hdr[r]->quiescent, memory_order_acquire) : UINT64_MAX;
    rma.quar[rma.nquar++] = (struct rma_quarantine){off, len, seen};
}

/* ---- segments ------------------------------------------------------------ */

static int rma_ready(void)
{
    if (rma.rank < 0)
        return SHOAL_ENOTINIT;
    return SHOAL_OK;
}

static int slot_find_free(uint32_t *slot)
{
    struct rma_entry *tab = rma_entry_of(rma.rank, 0);
    for (uint32_t s = 0; s < RMA_SLOTS; s++)
        if (!(atomic_load_explicit(&tab[s].state, memory_order_relaxed) & 1u) && !rma.seg[s].base) {
            *slot = s;
            return SHOAL_OK;
        }
    LOG(LOG_ERROR, "rank %d already has %u segments", rma.rank, RMA_SLOTS);
    return SHOAL_ENOMEM;
}

static uint64_t random_key(void)
{
    uint64_t k = 0;
    while (getrandom(&k, sizeof k, 0) != (ssize_t)sizeof k || k == 0) {
    }
    return k;
}

/* Fills the entry, then makes it live: a reader that sees it live sees it whole. */
static shoal_mem_t publish(uint32_t slot, unsigned perms, uint64_t offset, uint64_t size, void *base)
{
    struct rma_entry *e = rma_entry_of(rma.rank, slot);
    uint32_t gen = (rma.gen[slot] + 1) & ((1u << (32 - RMA_SLOT_BITS)) - 1);
    rma.gen[slot] = gen ? gen : 1;
    e->perms = perms;
    e->key = random_key();
    e->offset = offset;
    e->size = size;
    rma.seg[slot] = (struct rma_local){base, (size_t)size};
    atomic_store_explicit(&e->state, rma.gen[slot] << 1 | 1u, memory_order_release);
    return (shoal_mem_t)slot;
}

static int check_perms(unsigned perms)
{
    return perms == 0 || (perms & ~SHOAL_MEM_ALL) ? SHOAL_EINVAL : SHOAL_OK;
}

int shoal_mem_create(size_t size, unsigned perms, shoal_mem_t *mem)
{
    AM_GUARD();
    int rc = rma_ready();
    if (rc)
        return rc;
    if (!mem || size == 0 || check_perms(perms))
        return SHOAL_EINVAL;
    size_t host = (size_t)sysconf(_SC_PHYS_PAGES) * page_size();
    if (size > host / 2)
        return SHOAL_ENOMEM;
    uint64_t len = util_round_up(size, page_size());
    uint32_t slot;
    uint64_t off;
    rma_reclaim();
    if ((rc = slot_find_free(&slot)) != SHOAL_OK)
        return rc;
    if (heap_alloc(len, &off) != SHOAL_OK) {
        LOG(LOG_ERROR, "segment of %zu bytes does not fit in this rank's heap of %zu bytes (SHOAL_RMA_HEAP)",
            size, rma.heap.bytes);
        return SHOAL_ENOMEM;
    }
    if ((rc = mem_heap_reserve(&rma.heap, rma.rank, off, len)) != SHOAL_OK) {
        heap_free(off, len);
        return rc;
    }
    *mem = publish(slot, perms | RMA_MAPPED, off, len, (char *)rma.heap.bases[rma.rank] + off);
    return SHOAL_OK;
}

int shoal_mem_register(void *base, size_t size, unsigned perms, shoal_mem_t *mem)
{
    AM_GUARD();
    int rc = rma_ready();
    if (rc)
        return rc;
    if (!mem || !base || size == 0 || check_perms(perms))
        return SHOAL_EINVAL;
    uint32_t slot;
    if ((rc = slot_find_free(&slot)) != SHOAL_OK)
        return rc;
    *mem = publish(slot, perms, 0, size, base);
    return SHOAL_OK;
}

static struct rma_entry *own_live_entry(shoal_mem_t mem)
{
    if (rma.rank < 0 || mem < 0 || (unsigned)mem >= RMA_SLOTS || !rma.seg[mem].base)
        return NULL;
    return rma_entry_of(rma.rank, (uint32_t)mem);
}

static int own_status(shoal_mem_t mem, struct rma_entry **e)
{
    int rc = rma_ready();
    if (rc)
        return rc;
    *e = own_live_entry(mem);
    return *e ? SHOAL_OK : SHOAL_ESEGMENT;
}

int shoal_mem_destroy(shoal_mem_t mem)
{
    AM_GUARD();
    struct rma_entry *e;
    int rc = own_status(mem, &e);
    if (rc)
        return rc;
    if (am_in_handler())
        return am_rule_violation("shoal_mem_destroy");
    atomic_store_explicit(&e->state, rma.gen[mem] << 1, memory_order_seq_cst);
    if (e->perms & RMA_MAPPED) {
        rma_native_revoke((uint32_t)mem | rma.gen[mem] << RMA_SLOT_BITS);
        quarantine_add(e->offset, e->size);
    }
    rma.seg[mem] = (struct rma_local){NULL, 0};
    rma_reclaim();
    return SHOAL_OK;
}

int shoal_mem_local(shoal_mem_t mem, void **base, size_t *size)
{
    AM_GUARD();
    struct rma_entry *e;
    int rc = own_status(mem, &e);
    if (rc)
        return rc;
    if (base)
        *base = rma.seg[mem].base;
    if (size)
        *size = rma.seg[mem].size;
    return SHOAL_OK;
}

int shoal_mem_export(shoal_mem_t mem, shoal_rmem_t *out)
{
    AM_GUARD();
    struct rma_entry *e;
    int rc = own_status(mem, &e);
    if (rc)
        return rc;
    if (!out)
        return SHOAL_EINVAL;
    *out = (shoal_rmem_t){.rank = rma.rank, .id = (uint32_t)mem | rma.gen[mem] << RMA_SLOT_BITS, .key = e->key};
    return SHOAL_OK;
}

int shoal_mem_exchange(shoal_mem_t mem, shoal_rmem_t *all)
{
    AM_GUARD();
    if (rma.rank < 0)
        return SHOAL_ENOTINIT;
    int rc = am_blocking_allowed("shoal_mem_exchange");
    if (rc)
        return rc;
    /* Everyone joins the allgather even with a bad argument, so no rank
     * hangs; a rank whose handle is bad sends rank -1 and everyone fails. */
    shoal_rmem_t mine = {.rank = -1}, *got = all ? all : calloc((size_t)rma.nranks, sizeof *got);
    if (!got)
        util_fatal("out of memory for a descriptor exchange");
    int own = all ? shoal_mem_export(mem, &mine) : SHOAL_EINVAL;
    rc = boot_allgather(&mine, sizeof mine, got);
    if (!all)
        free(got);
    if (!all)
        return rc ? rc : SHOAL_EINVAL;
    for (int r = 0; r < rma.nranks && rc == SHOAL_OK; r++)
        if (all[r].rank != r)
            rc = own ? own : SHOAL_ESEGMENT;
    return rc;
}

/* ---- init ---------------------------------------------------------------- */

int rma_init(int rank, int nranks)
{
    rma.rank = rank;
    rma.nranks = nranks;
    rma.direct = (int)util_config_int(CFG_RMA_DIRECT);
    size_t bytes = (size_t)util_config_int(CFG_RMA_HEAP);
    bytes = (bytes + page_size() - 1) / page_size() * page_size();
    if (bytes < 2 * RMA_HEADER_BYTES)
        bytes = 2 * RMA_HEADER_BYTES;
    int rc = mem_heap_init(&rma.heap, bytes, nranks);
    rma.hdr = calloc((size_t)nranks, sizeof *rma.hdr);
    if (!rma.hdr)
        rc = rc ? rc : SHOAL_ENOMEM;
    if (rc)
        return rc;
    for (int r = 0; r < nranks; r++) /* a peer reached over the network runs our commands itself */
        rma.hdr[r] = am_is_remote(r) ? NULL : rma.heap.bases[r];
    size_t hdr_len = (RMA_HEADER_BYTES + page_size() - 1) / page_size() * page_size();
    if ((rc = mem_heap_reserve(&rma.heap, rank, 0, hdr_len)) != SHOAL_OK)
        return rc;
    struct rma_heap_header *h = rma.hdr[rank];
    *h = (struct rma_heap_header){.magic = RMA_MAGIC, .version = RMA_LAYOUT_VERSION, .owner_rank = (uint32_t)rank,
                                  .heap_bytes = bytes, .slots = RMA_SLOTS, .header_bytes = (uint32_t)hdr_len};
    rc = ext_insert(0, hdr_len, bytes - hdr_len);
    rma.membarrier_cmd = membarrier_choice();
    if (rma.membarrier_cmd < 0)
        LOG(LOG_WARN, "no membarrier(2): memory of destroyed segments will not be reused");
    rma_ops_init();
    rma_native_init();
    return rc;
}

void rma_check_peers(void)
{
    for (int r = 0; r < rma.nranks; r++) {
        const struct rma_heap_header *h = rma.hdr[r];
        if (h && (h->magic != RMA_MAGIC || h->version != RMA_LAYOUT_VERSION || h->owner_rank != (uint32_t)r ||
                  h->slots != RMA_SLOTS || h->heap_bytes != rma.heap.bytes))
            util_fatal("rank %d's one-sided heap has another layout (version %u, %u slots, %llu bytes) than "
                       "this rank's (version %u, %u slots, %llu bytes)", r, h->version, h->slots,
                       (unsigned long long)h->heap_bytes, RMA_LAYOUT_VERSION, RMA_SLOTS,
                       (unsigned long long)rma.heap.bytes);
    }
}

void rma_fini(void)
{
    rma_ops_fini();
    rma_native_fini();
    for (size_t i = 0; i < rma.nquar; i++)
        free(rma.quar[i].seen);
    free(rma.quar);
    free(rma.free_ext);
    free(rma.hdr);
    mem_heap_fini(&rma.heap);
    memset(&rma, 0, sizeof rma);
    rma.rank = -1;
    rma.heap.fd = -1;
}
