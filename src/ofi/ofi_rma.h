/* Native one-sided commands on the ofi transport's endpoint: put, get and
 * 64-bit atomics on memory a rank exposes, run by the provider without
 * the target's handlers.  Available after ofi_transport.init when the
 * provider has FI_RMA and FI_ATOMIC and orders sends after writes
 * (FI_ORDER_SAW); without them the rma layer keeps executing commands at
 * the target.  Design: docs/OFI.md §8.
 *
 * Completion: a command's request goes from SHOAL_PENDING to SHOAL_OK or
 * a SHOAL_E code inside the transport's poll() or flush().  A get or an
 * atomic is then complete.  A put completed at the initiator has not
 * necessarily arrived (CLUSTER_TESTING.md §3): its data is visible at the
 * target once a message this rank sends there after put() returned is
 * delivered (the endpoint orders sends after writes), which is how the
 * rma layer tells the target, or learns, that a put is done. */
#ifndef SHOAL_OFI_RMA_H
#define SHOAL_OFI_RMA_H

#include <stddef.h>
#include <stdint.h>

struct ofi_rma_req {
    volatile int32_t status; /* SHOAL_PENDING, then SHOAL_OK or a SHOAL_E code */
};

enum ofi_amo { OFI_AMO_FETCH_ADD, OFI_AMO_CSWAP };

struct ofi_rma_ops {
    /* 1 when put and get are native here; *atomics (may be NULL) 1 when
     * fetch-add and compare-swap on 64-bit words are too (fi_atomicvalid). */
    int (*available)(int *atomics);
    /* The largest put or get (the rma layer splits longer ones). */
    size_t (*max_bytes)(void);
    /* Collective: registers [base, base + len) for remote reads, writes
     * and atomics, honouring the provider's mr_mode, and publishes its key
     * and address through the bootstrap; *id names it on every rank.
     * SHOAL_OK, SHOAL_EINVAL (not available), SHOAL_ENOMEM (no more
     * regions), SHOAL_ESYS (a rank's registration failed; logged). */
    int (*expose)(void *base, size_t len, uint32_t *id);
    /* Start one command.  SHOAL_OK (req is then pending), SHOAL_EAGAIN (no
     * room now: poll and retry), SHOAL_ERANK, SHOAL_ESEGMENT (no region
     * id), SHOAL_ERANGE (outside dest's region), SHOAL_ETOOBIG (above
     * max_bytes), SHOAL_EALIGN (an atomic's offset not 8-byte aligned),
     * SHOAL_EINVAL (not available). */
    int (*put)(int dest, uint32_t id, uint64_t offset, const void *src, size_t len, struct ofi_rma_req *req);
    int (*get)(int dest, uint32_t id, uint64_t offset, void *dst, size_t len, struct ofi_rma_req *req);
    /* *old receives the word before the operation (compare-swap writes
     * operand where the word equals compare). */
    int (*amo)(int dest, uint32_t id, uint64_t offset, enum ofi_amo op, uint64_t operand, uint64_t compare,
               uint64_t *old, struct ofi_rma_req *req);
};

extern const struct ofi_rma_ops ofi_rma;

#endif
