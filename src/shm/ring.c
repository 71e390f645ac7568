/* Cachable queue: the parts off the fast path. */
#include "shm/ring.h"
#include "shoal.h"

#include <stdlib.h>

int ring_tx_init(struct ring_tx *tx, struct ring_slot *slots, struct ring_head *head, uint32_t nslots)
{
    memset(tx, 0, sizeof *tx);
    /* zeroed slots hold parity-0 control words, which is what 0 records */
    tx->held = calloc(nslots, 1);
    if (!tx->held)
        return SHOAL_ENOMEM;
    tx->nslots = nslots;
    tx->mask = nslots - 1;
    tx->shift = (unsigned)__builtin_ctz(nslots);
    tx->slots = slots;
    tx->head = head;
    tx->tail = atomic_load_explicit(&head->head, memory_order_acquire);
    tx->shadow_head = tx->tail - nslots; /* "full": the fast path's test fails until warm */
    tx->cold = 1;
    return SHOAL_OK;
}

void ring_tx_warm(struct ring_tx *tx)
{
    tx->cold = 0;
    tx->shadow_head = atomic_load_explicit(&tx->head->head, memory_order_acquire);
}

void ring_tx_fini(struct ring_tx *tx)
{
    free(tx->held);
    tx->held = NULL;
}

void ring_rx_init(struct ring_rx *rx, struct ring_slot *slots, struct ring_head *head, uint32_t nslots)
{
    memset(rx, 0, sizeof *rx);
    rx->mask = nslots - 1;
    rx->shift = (unsigned)__builtin_ctz(nslots);
    rx->slots = slots;
    rx->shared = head;
    rx->head = atomic_load_explicit(&head->head, memory_order_relaxed);
    rx->published = rx->head;
    rx->publish_batch = nslots / 16 ? nslots / 16 : 1;
    ring_rx_advance(rx, 0);
}

static int ring_fits(const struct ring_tx *tx, uint32_t need)
{
    return tx->tail + need + 1 - tx->shadow_head <= tx->nslots;
}

struct ring_slot *ring_tx_reserve_slow(struct ring_tx *tx, uint32_t m)
{
    uint32_t idx = (uint32_t)tx->tail & tx->mask;
    uint32_t pad = idx + m > tx->nslots ? tx->nslots - idx : 0;
    if (UTIL_UNLIKELY(tx->cold))
        return NULL;
    if (!ring_fits(tx, pad + m)) {
        tx->shadow_head = atomic_load_explicit(&tx->head->head, memory_order_acquire);
        if (!ring_fits(tx, pad + m)) {
            tx->full_events++;
            return NULL;
        }
    }
    if (pad) /* its body is never read or written: only the control word */
        ring_tx_publish(tx, RING_TYPE_PAD, pad, 0);
    return &tx->slots[(uint32_t)tx->tail & tx->mask];
}
