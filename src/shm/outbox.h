/* A rank's outbox: a pool of bytes in its own inbox region that only it
 * writes, holding the payloads of medium messages too large for their ring
 * (docs/SHM_QUEUE.md, "The outbox").  The ring carries a descriptor
 * (arguments, the payload's offset); the receiver's handler reads the payload
 * in place, so a medium is still one copy.  A chunk is free again once the
 * consumer head of the ring its descriptor went into has passed the
 * descriptor: the receiver does nothing new.
 *
 * Chunks are taken in order around the pool and given back in order: a
 * chunk whose descriptor was consumed stays taken until every older one is
 * free too (its receiver may be slower), which keeps the allocator a pair of
 * counters.  A lock guards it: at SHOAL_THREAD_MULTIPLE several threads send
 * mediums at once, and these payloads are large enough that a lock is
 * nothing beside the copy. */
#ifndef SHOAL_SHM_OUTBOX_H
#define SHOAL_SHM_OUTBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define OUTBOX_ALIGN 64u /* chunks start on a line: the copies in and out are line-aligned */

struct outbox_chunk {
    const _Atomic uint64_t *head; /* the ring's consumer head; NULL: given back unsent */
    uint64_t end;                 /* slot index just past the descriptor; OUTBOX_PENDING until sent */
    uint64_t stop;                /* pool position just past the chunk (and any skip before it) */
};

struct outbox {
    _Atomic uint32_t lock;
    char *base;
    size_t bytes;          /* a multiple of OUTBOX_ALIGN */
    uint64_t taken;        /* absolute pool position of the next chunk */
    uint64_t freed;        /* positions below this are free again */
    struct outbox_chunk *chunks; /* FIFO of the chunks not yet free, by sequence number */
    uint64_t first, next;  /* sequence numbers: oldest not free, next to take */
    uint32_t mask;         /* chunks[] holds mask + 1 entries */
    uint64_t full_events;  /* times a payload found no room */
};

int outbox_init(struct outbox *ob, void *base, size_t bytes);
void outbox_fini(struct outbox *ob);

/* n payload bytes: the chunk's sequence number and *off, its offset in the
 * pool; -1 when there is no room even after taking back what receivers
 * consumed. */
int64_t outbox_take(struct outbox *ob, size_t n, size_t *off);
/* The chunk's descriptor went into the ring whose consumer head is head and
 * ends at slot index end: the chunk is free once head reaches it. */
void outbox_sent(struct outbox *ob, int64_t chunk, const _Atomic uint64_t *head, uint64_t end);
/* The descriptor was never sent (the ring had no room and the caller gives
 * up): the chunk is free. */
void outbox_cancel(struct outbox *ob, int64_t chunk);

/* Whether [off, off + n) lies inside a pool of `bytes`: a receiver's check
 * of a descriptor, which a corrupt or forged one fails. */
static inline int outbox_in_bounds(size_t bytes, uint64_t off, uint64_t n)
{
    return off <= bytes && n <= bytes - off;
}

#endif
