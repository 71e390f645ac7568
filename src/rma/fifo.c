/* Memory-based FIFO and FIFOe (Matsumoto's MBCF thesis §4.1): a bounded multi-producer
 * queue in the owner's segment.  Producers reserve a ticket with one CAS on
 * the tail word (which also holds FIFOe's stopped bit), so a full queue
 * cancels instead of waiting; the owner consumes without any lock.  The
 * header is read once and checked against the segment on every use, so a
 * corrupted structure can never make a write leave the segment.
 *
 * FIFOe keeps, besides the FIFO-wide stopped bit, one bit per sender: set
 * when one of its entries is cancelled, cleared by its stored RETRY.  The
 * FIFO-wide bit alone cannot keep a sender's order when it has several
 * entries in flight: another sender's RETRY could restart the FIFO between
 * its cancelled entry and the next.  Only a sender's own commands touch its
 * bit, and they run one at a time, so the bit needs no atomicity with the
 * tail. */
#include "rma/rma.h"

#include <string.h>

#define FIFO_MAGIC 0x4f464946u /* "FIFO" */
#define FIFO_VERSION 2u /* 2: sequence words say whose turn an entry is */
#define FIFO_HEAD_BYTES 192u

struct fifo_head {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;        /* SHOAL_FIFO_ORDERED or 0 */
    uint32_t entry_bytes; /* largest datum */
    uint32_t stride;      /* bytes per entry, a multiple of 64 */
    uint32_t entries;
    uint32_t senders;     /* FIFOe: bits in the per-sender stop map after the header */
    char pad0[40];
    _Atomic uint64_t tail; /* producers: next ticket << 1 | stopped */
    char pad1[56];
    _Atomic uint64_t head; /* owner: next ticket to take (producers never read it) */
    char pad2[56];
};

/* Each entry's sequence word says whose turn it is (after Vyukov's bounded
 * queue): == ticket: free for the producer of that ticket; == ticket + 1:
 * complete, for the owner to take; the owner then sets ticket + entries.
 * So a producer reads only the tail and the entry it writes, never a word
 * the owner rewrites on every dequeue. */
struct fifo_entry {
    _Atomic uint64_t seq;
    int32_t src;
    uint32_t len;
    char data[];
};

_Static_assert(sizeof(struct fifo_head) == FIFO_HEAD_BYTES, "FIFO header layout");

static uint32_t stride_for(size_t entry_bytes)
{
    return (uint32_t)((sizeof(struct fifo_entry) + entry_bytes + 63) / 64 * 64);
}

static size_t map_bytes(uint32_t senders)
{
    return ((size_t)senders + 511) / 512 * 64;
}

static uint32_t senders_for(unsigned kind)
{
    return kind & SHOAL_FIFO_ORDERED ? (uint32_t)rma.nranks : 0;
}

size_t rma_fifo_bytes(size_t entry_bytes, uint32_t entries, unsigned kind)
{
    /* one entry would make "complete for ticket t" and "free for t+1" the same value */
    if (entry_bytes == 0 || entry_bytes > RMA_MAX_STRUCT_DATA || entries < 2)
        return 0;
    return FIFO_HEAD_BYTES + map_bytes(senders_for(kind)) + (size_t)entries * stride_for(entry_bytes);
}

int rma_fifo_format(char *at, size_t room, size_t entry_bytes, uint32_t entries, unsigned kind)
{
    size_t bytes = rma_fifo_bytes(entry_bytes, entries, kind);
    if (!bytes || (kind & ~SHOAL_FIFO_ORDERED) || ((uintptr_t)at & 63u))
        return SHOAL_EINVAL;
    if (bytes > room)
        return SHOAL_ERANGE;
    struct fifo_head *f = (struct fifo_head *)at;
    memset(at, 0, bytes);
    f->version = FIFO_VERSION;
    f->kind = (uint16_t)kind;
    f->entry_bytes = (uint32_t)entry_bytes;
    f->stride = stride_for(entry_bytes);
    f->entries = entries;
    f->senders = senders_for(kind);
    char *ring = at + FIFO_HEAD_BYTES + map_bytes(f->senders);
    for (uint32_t i = 0; i < entries; i++)
        atomic_store_explicit(&((struct fifo_entry *)(ring + (size_t)i * f->stride))->seq, i, memory_order_relaxed);
    __atomic_store_n(&f->magic, FIFO_MAGIC, __ATOMIC_RELEASE); /* valid only once whole */
    return SHOAL_OK;
}

/* The geometry, read once and checked against the segment. */
struct fifo_geo {
    struct fifo_head *f;
    uint64_t *stops; /* FIFOe per-sender bits */
    char *ring;
    uint32_t entry_bytes, stride, entries;
    int ordered;
};

static int fifo_open(char *seg, uint64_t seg_size, uint64_t off, struct fifo_geo *g)
{
    if ((off & 63u) || off > seg_size || seg_size - off < FIFO_HEAD_BYTES)
        return SHOAL_ENOSTRUCT;
    struct fifo_head *f = (struct fifo_head *)(seg + off);
    if (__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) != FIFO_MAGIC || f->version != FIFO_VERSION)
        return SHOAL_ENOSTRUCT;
    uint32_t senders = f->senders;
    *g = (struct fifo_geo){.f = f, .stops = (uint64_t *)((char *)f + FIFO_HEAD_BYTES),
                           .ring = (char *)f + FIFO_HEAD_BYTES + map_bytes(senders), .entry_bytes = f->entry_bytes,
                           .stride = f->stride, .entries = f->entries, .ordered = f->kind & SHOAL_FIFO_ORDERED};
    if (g->entries < 2 || g->entry_bytes > RMA_MAX_STRUCT_DATA || g->stride != stride_for(g->entry_bytes) ||
        (g->ordered && senders < (uint32_t)rma.nranks) ||
        (uint64_t)g->entries * g->stride + map_bytes(senders) > seg_size - off - FIFO_HEAD_BYTES)
        return SHOAL_ENOSTRUCT;
    return SHOAL_OK;
}

static struct fifo_entry *entry_at(const struct fifo_geo *g, uint64_t ticket)
{
    return (struct fifo_entry *)(g->ring + (ticket % g->entries) * g->stride);
}

/* One CAS decides: a ticket, a cancellation, or (FIFOe) the stop.  The
 * queue is full when the entry for the next ticket still holds the
 * previous lap's, not yet taken. */
static int reserve(struct fifo_geo *g, int retry, uint64_t *ticket)
{
    for (;;) {
        uint64_t t = atomic_load_explicit(&g->f->tail, memory_order_acquire);
        uint64_t next = t >> 1;
        int stopped = (int)(t & 1u);
        if (g->ordered && stopped && !retry)
            return SHOAL_ESTOPPED;
        int64_t turn = (int64_t)(atomic_load_explicit(&entry_at(g, next)->seq, memory_order_acquire) - next);
        if (turn > 0)
            continue; /* another producer took this ticket since we read the tail */
        if (turn < 0) {
            if (atomic_load_explicit(&g->f->tail, memory_order_acquire) != t)
                continue;
            if (!g->ordered || stopped)
                return SHOAL_EFULL;
            if (atomic_compare_exchange_weak_explicit(&g->f->tail, &t, t | 1u, memory_order_acq_rel,
                                                      memory_order_relaxed))
                return SHOAL_EFULL; /* this cancellation stopped it */
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&g->f->tail, &t, (next + 1) << 1, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
            *ticket = next;
            return SHOAL_OK;
        }
    }
}

int rma_fifo_enqueue(char *seg, uint64_t seg_size, uint64_t off, int src, const void *data, size_t n, int retry)
{
    struct fifo_geo g;
    int rc = fifo_open(seg, seg_size, off, &g);
    if (rc)
        return rc;
    if (n > g.entry_bytes)
        return SHOAL_ETOOBIG;
    uint64_t ticket, *stop = &g.stops[src / 64], bit = 1ull << (src % 64);
    if (g.ordered && (__atomic_load_n(stop, __ATOMIC_RELAXED) & bit) && !retry)
        return SHOAL_ESTOPPED; /* this sender owes a RETRY */
    rc = reserve(&g, retry, &ticket);
    if (g.ordered && rc)
        __atomic_fetch_or(stop, bit, __ATOMIC_RELAXED);
    else if (g.ordered && retry)
        __atomic_fetch_and(stop, ~bit, __ATOMIC_RELAXED);
    if (rc)
        return rc;
    struct fifo_entry *e = entry_at(&g, ticket);
    e->src = src;
    e->len = (uint32_t)n;
    memcpy(e->data, data, n);
    atomic_store_explicit(&e->seq, ticket + 1, memory_order_release);
    return SHOAL_OK;
}

int rma_fifo_take(char *seg, uint64_t seg_size, uint64_t off, void *buf, size_t cap, size_t *n, int *src)
{
    struct fifo_geo g;
    int rc = fifo_open(seg, seg_size, off, &g);
    if (rc)
        return rc;
    uint64_t head = atomic_load_explicit(&g.f->head, memory_order_relaxed);
    struct fifo_entry *e = entry_at(&g, head);
    if (atomic_load_explicit(&e->seq, memory_order_acquire) != head + 1)
        return SHOAL_EAGAIN;
    size_t len = e->len < g.entry_bytes ? e->len : g.entry_bytes;
    if (n)
        *n = len;
    if (len > cap)
        return SHOAL_ETOOBIG;
    if (len && !buf)
        return SHOAL_EINVAL;
    memcpy(buf, e->data, len);
    if (src)
        *src = e->src;
    atomic_store_explicit(&g.f->head, head + 1, memory_order_relaxed); /* only the owner's, and counts */
    atomic_store_explicit(&e->seq, head + g.entries, memory_order_release); /* free for the next lap */
    return SHOAL_OK;
}

uint32_t rma_fifo_count(char *fifo)
{
    struct fifo_head *f = (struct fifo_head *)fifo;
    uint64_t t = atomic_load_explicit(&f->tail, memory_order_acquire) >> 1;
    uint64_t h = atomic_load_explicit(&f->head, memory_order_acquire);
    return (uint32_t)(t - h);
}

/* ---- public, owner side ---------------------------------------------------- */

static int own_segment(shoal_mem_t mem, char **base, size_t *size)
{
    void *b;
    int rc = shoal_mem_local(mem, &b, size);
    *base = b;
    return rc;
}

size_t shoal_fifo_footprint(size_t entry_bytes, uint32_t entries, unsigned kind)
{
    return rma_fifo_bytes(entry_bytes, entries, kind);
}

int shoal_fifo_init(shoal_mem_t mem, size_t off, size_t entry_bytes, uint32_t entries, unsigned kind)
{
    AM_GUARD();
    char *base;
    size_t size;
    int rc = own_segment(mem, &base, &size);
    if (rc)
        return rc;
    if (off > size)
        return SHOAL_ERANGE;
    return rma_fifo_format(base + off, size - off, entry_bytes, entries, kind);
}

int shoal_fifo_dequeue(shoal_mem_t mem, size_t off, void *buf, size_t cap, size_t *n, int *src)
{
    AM_GUARD();
    char *base;
    size_t size;
    int rc = own_segment(mem, &base, &size);
    return rc ? rc : rma_fifo_take(base, size, off, buf, cap, n, src);
}
