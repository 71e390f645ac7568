/* The cachable queue (Mukherjee's CNI thesis §3.2): a single-producer single-consumer
 * ring of 64-byte slots holding variable-length messages.
 *
 * - Every message starts at a slot whose first 8 bytes are its control word;
 *   the sender stores it last, with release order, so the receiver's one
 *   miss on it brings in the first 56 bytes of the message too.
 * - Sense reverse: a control word is valid when its bit 0 equals the pass
 *   parity of that slot's absolute index (1 on pass 0, 0 on pass 1, ...).
 *   The receiver never writes a slot; memory starts zeroed = invalid.
 * - Variable-size entries: before publishing a message at [t, t+m), the
 *   sender makes sure slot t+m cannot look valid: if what it last wrote
 *   there was body bytes (or a control word of the same pass parity), it
 *   writes an invalid control word there first.  The sender remembers what
 *   each slot holds, so a stream of one-slot messages never writes a marker
 *   and touches one line per message.  The marker costs one reserved slot
 *   (the thesis's empty-entry removal only pays for fixed-size entries;
 *   docs/SHM_QUEUE.md explains).
 * - Lazy pointer: the sender keeps shadow_head and rereads the shared head
 *   only when the shadow says the message does not fit.
 * - The shared head is an absolute 64-bit slot count (it encodes index and
 *   sense in one word, the thesis's packed {head, sense}); it sits alone
 *   on a 128-byte block, away from the slots and from sender state.
 * - A message never wraps: when it would cross the end, the sender fills
 *   the rest of the pass with a PAD message and starts at slot 0.
 *
 * The byte layout is documented in docs/SHM_QUEUE.md. */
#ifndef SHOAL_SHM_RING_H
#define SHOAL_SHM_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

#define RING_SLOT_BYTES 64u
#define RING_HEAD_BLOCK 128u

/* Control word: bit 0 sense, bits 1-3 type, bits 4-19 slot count, bits
 * 20-63 belong to the layer above (the "tag"). */
#define RING_TYPE_MARKER 0u /* "no message here yet" */
#define RING_TYPE_PAD 1u    /* skip to the end of this pass */
#define RING_TYPE_MSG 2u
#define RING_TAG_SHIFT 20
#define RING_MAX_MSG_SLOTS 0xffffu

struct ring_slot {
    _Atomic uint64_t ctl;
    uint64_t body[7];
} __attribute__((aligned(RING_SLOT_BYTES)));

/* A message's bytes after its control word.  Messages span several slots,
 * so the body is addressed from the slot's start, not through body[]. */
static inline uint64_t *ring_msg_body(const struct ring_slot *s)
{
    return (uint64_t *)((uintptr_t)s + sizeof(uint64_t));
}

/* The consumer's published head, alone in its block. */
struct ring_head {
    _Atomic uint64_t head;
    char pad[RING_HEAD_BLOCK - sizeof(uint64_t)];
} __attribute__((aligned(RING_HEAD_BLOCK)));

/* Sender-private state (in the sender's own memory). */
struct ring_tx {
    uint64_t tail;        /* absolute index of the next free slot */
    uint64_t shadow_head; /* possibly stale copy of the consumer's head */
    uint32_t nslots;      /* power of two */
    uint32_t mask;
    unsigned shift;       /* log2(nslots) */
    struct ring_slot *slots;
    struct ring_head *head;
    /* What each slot holds, as this sender last wrote it: a control word of
     * parity 0 or 1, or RING_SLOT_BODY. */
    uint8_t *held;
    uint64_t full_events; /* times the ring was found full */
    /* 1 until the first message: the ring's pages are not backed yet, and
     * the shadow head says "full" so that the first reserve takes the slow
     * path, which refuses while cold (the caller backs the ring first). */
    int cold;
};

#define RING_SLOT_BODY 2u

/* Receiver-private state. */
struct ring_rx {
    /* hot: what an empty poll touches */
    struct ring_slot *cur; /* the slot at head */
    uint64_t want;         /* sense a valid control word at cur has */
    uint64_t head;
    uint64_t published; /* the head value last stored to shared->head */
    uint32_t publish_batch;
    uint32_t mask;
    unsigned shift;
    struct ring_slot *slots;
    struct ring_head *shared;
};

/* shift = log2(slots in the ring): pass 0 -> 1, pass 1 -> 0, ... (zeroed
 * memory is never valid) */
static inline uint64_t ring_sense(uint64_t abs_index, unsigned shift)
{
    return ((abs_index >> shift) & 1u) ^ 1u;
}

static inline uint64_t ring_ctl(uint64_t abs_index, unsigned shift, unsigned type,
                                uint32_t nslots_msg, uint64_t tag)
{
    return ring_sense(abs_index, shift) | ((uint64_t)type << 1) |
           ((uint64_t)nslots_msg << 4) | (tag << RING_TAG_SHIFT);
}

static inline unsigned ring_ctl_type(uint64_t ctl) { return (unsigned)(ctl >> 1) & 7u; }
static inline uint32_t ring_ctl_slots(uint64_t ctl) { return (uint32_t)(ctl >> 4) & 0xffffu; }
static inline uint64_t ring_ctl_tag(uint64_t ctl) { return ctl >> RING_TAG_SHIFT; }

/* Largest message (in slots) a ring of nslots accepts: a message, the pad
 * before it and its marker slot always fit in an empty ring. */
static inline uint32_t ring_max_msg_slots(uint32_t nslots)
{
    uint32_t m = nslots / 2 - 1;
    return m < RING_MAX_MSG_SLOTS ? m : RING_MAX_MSG_SLOTS;
}

/* ring_tx_init allocates the sender's slot bookkeeping: SHOAL_ENOMEM.
 * The ring starts cold (see struct ring_tx); ring_tx_warm ends that. */
int ring_tx_init(struct ring_tx *tx, struct ring_slot *slots, struct ring_head *head, uint32_t nslots);
void ring_tx_fini(struct ring_tx *tx);
/* Ends the cold state once the ring's pages are backed: rereads the head. */
void ring_tx_warm(struct ring_tx *tx);
void ring_rx_init(struct ring_rx *rx, struct ring_slot *slots, struct ring_head *head, uint32_t nslots);

/* Slow path of ring_tx_reserve: refresh the shadow head and insert a pad. */
struct ring_slot *ring_tx_reserve_slow(struct ring_tx *tx, uint32_t m);

/* Room for an m-slot message: returns its first slot (contiguous m slots),
 * or NULL when the ring is full even after rereading the shared head. */
static inline struct ring_slot *ring_tx_reserve(struct ring_tx *tx, uint32_t m)
{
    uint32_t idx = (uint32_t)tx->tail & tx->mask;
    if (UTIL_LIKELY(idx + m <= tx->nslots &&
                    tx->tail + m + 1 - tx->shadow_head <= tx->nslots))
        return &tx->slots[idx];
    return ring_tx_reserve_slow(tx, m);
}

/* Before a message ending at `next` is published: slot `next` must hold a
 * control word of the wrong parity for its pass, so the receiver waits there. */
static inline void ring_tx_guard(struct ring_tx *tx, uint64_t next)
{
    uint32_t q = (uint32_t)next & tx->mask;
    uint8_t invalid = (uint8_t)(ring_sense(next, tx->shift) ^ 1u);
    if (UTIL_LIKELY(tx->held[q] == invalid))
        return;
    atomic_store_explicit(&tx->slots[q].ctl, invalid, memory_order_relaxed);
    tx->held[q] = invalid;
}

/* Publishes an m-slot entry of `type` at tail: the guard slot after it
 * first, then its control word with release order.  Messages and pads
 * both go through here. */
static inline void ring_tx_publish(struct ring_tx *tx, unsigned type, uint32_t m, uint64_t tag)
{
    uint32_t i = (uint32_t)tx->tail & tx->mask;
    uint64_t next = tx->tail + m;
    tx->held[i] = (uint8_t)ring_sense(tx->tail, tx->shift);
    ring_tx_guard(tx, next);
    atomic_store_explicit(&tx->slots[i].ctl, ring_ctl(tx->tail, tx->shift, type, m, tag),
                          memory_order_release);
    tx->tail = next;
}

/* Publishes the m-slot message at the slot ring_tx_reserve returned.  The
 * body must already be written; tag is the upper layer's 44 bits. */
static inline void ring_tx_commit(struct ring_tx *tx, uint32_t m, uint64_t tag)
{
    if (m > 1) /* its body slots now hold bytes that may look like anything */
        memset(&tx->held[((uint32_t)tx->tail & tx->mask) + 1], RING_SLOT_BODY, m - 1);
    ring_tx_publish(tx, RING_TYPE_MSG, m, tag);
}

/* Moves the receiver's head forward by m slots. */
static inline void ring_rx_advance(struct ring_rx *rx, uint32_t m)
{
    rx->head += m;
    rx->cur = &rx->slots[(uint32_t)rx->head & rx->mask];
    rx->want = ring_sense(rx->head, rx->shift);
}

/* Hands every freed slot back to the sender. */
static inline void ring_rx_publish(struct ring_rx *rx)
{
    rx->published = rx->head;
    atomic_store_explicit(&rx->shared->head, rx->head, memory_order_release);
}

/* The message at the receiver's head, or NULL.  Pads are consumed here. */
static inline const struct ring_slot *ring_rx_peek(struct ring_rx *rx, uint64_t *ctl_out)
{
    for (;;) {
        uint64_t ctl = atomic_load_explicit(&rx->cur->ctl, memory_order_acquire);
        if ((ctl & 1u) != rx->want || ring_ctl_type(ctl) == RING_TYPE_MARKER) {
            if (UTIL_UNLIKELY(rx->published != rx->head))
                ring_rx_publish(rx); /* idle: the sender may be waiting for room */
            return NULL;
        }
        if (UTIL_LIKELY(ring_ctl_type(ctl) == RING_TYPE_MSG)) {
            *ctl_out = ctl;
            return rx->cur;
        }
        ring_rx_advance(rx, ring_ctl_slots(ctl)); /* pad: jump to the next pass */
    }
}

/* Frees the message at head (after its handler returned).  The shared head
 * is stored once per publish_batch slots, or when the ring runs empty:
 * storing it per message makes a sender that has filled the ring reread it
 * per message, and the head line then bounces once per message. */
static inline void ring_rx_release(struct ring_rx *rx, uint32_t m)
{
    ring_rx_advance(rx, m);
    if (rx->head - rx->published >= rx->publish_batch)
        ring_rx_publish(rx);
}

#endif
