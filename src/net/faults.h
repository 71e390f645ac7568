/* net layer: fault injection for the cluster carriers (SHOAL_FAULTS).
 *
 * A carrier passes every packet it sends, and every packet it receives,
 * through one `struct faults` per direction (so a packet meets the spec
 * twice: loss=p loses 2p - p^2 end to end).  For each packet the module
 * draws from a seeded PRNG and decides, independently:
 *   - loss:    the packet vanishes;
 *   - corrupt: one random byte of the 64-byte shoal header is changed (xor
 *              with a nonzero value): damage the carrier's own check (UDP
 *              checksum, Ethernet FCS) missed.  Only the header is checked
 *              end to end (CRC-32C, docs/WIRE.md), so a carrier must send
 *              and require header checksums while corrupt > 0;
 *   - dup:     the packet is emitted twice;
 *   - reorder: the packet is held back and emitted right after the next
 *              packet for the same address (a swap), or FAULT_HOLD_NS
 *              later if none comes (with FAULT_HOLD_SLOTS addresses
 *              holding one already, it goes on in order);
 *   - delay:   every packet is emitted `delay` after it was passed in
 *              (a fixed one-way latency: it keeps the order).
 * Packets not emitted at once are copied into an internal FIFO (it grows
 * with delay x packet rate) that fault_flush releases when their time
 * comes; fault_next_deadline tells a carrier when to call it.  Everything is deterministic: the same spec,
 * stream and sequence of calls (packets and times) give the same output.
 *
 * Spec syntax (all items optional, comma-separated, no spaces):
 *   loss=P,dup=P,reorder=P,corrupt=P,delay=T,seed=N
 * P is a probability in [0,1]; T is a number with a unit ns, us or ms
 * ("200us", "1.5ms"); N is an unsigned 64-bit integer (default 1).  An
 * empty spec injects nothing. */
#ifndef SHOAL_NET_FAULTS_H
#define SHOAL_NET_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define FAULT_HOLD_SLOTS 8           /* packets held for reordering at once (one per address) */
#define FAULT_HOLD_NS 100000ull      /* longest hold when no later packet comes: a LAN-scale reorder window, not a delay */

/* Nonzero if c injects anything (a carrier can skip the module otherwise). */
int fault_active(const struct util_fault_spec *c);

struct fault_stats {
    uint64_t packets;    /* passed in */
    uint64_t dropped;    /* lost on purpose */
    uint64_t duplicated; /* emitted a second time */
    uint64_t reordered;  /* held back behind a later packet */
    uint64_t corrupted;  /* one byte changed */
    uint64_t delayed;    /* queued for `delay` */
    uint64_t nomem;      /* lost because a copy could not be allocated */
};

struct fault_entry; /* a queued copy (faults.c) */

struct faults {
    struct util_fault_spec cfg;
    uint64_t rng[4];                /* xoshiro256** state */
    struct fault_entry **q;         /* FIFO of delayed packets, by release time */
    size_t qhead, qlen, qcap;       /* ring indices over q */
    struct fault_entry *held[FAULT_HOLD_SLOTS];
    struct fault_stats stats;
};

/* Called for each packet released: addr is what fault_pass was given (the
 * destination on the send path, the source on the receive path).  It must
 * not call back into the same instance (it may into another: the receive
 * path's emit may make the engine send). */
typedef void (*fault_emit_fn)(void *ctx, uint32_t addr, const void *pkt, size_t len);

/* stream separates the PRNG sequences of the instances of one job: use
 * e.g. 2 * rank for sends and 2 * rank + 1 for receives, so ranks differ
 * and runs repeat. */
void fault_init(struct faults *f, const struct util_fault_spec *c, uint64_t stream);
/* Frees queued packets without emitting them; f then injects nothing. */
void fault_fini(struct faults *f);

/* Applies the faults to one packet at time now (ns): emit is called 0, 1
 * or 2 times for it, now or from a later fault_pass/fault_flush, and may
 * also release earlier packets that are due.  pkt is not kept. */
void fault_pass(struct faults *f, uint64_t now, uint32_t addr, const void *pkt, size_t len,
                fault_emit_fn emit, void *ctx);

/* Emits every queued packet due at now (UINT64_MAX: all of them). */
void fault_flush(struct faults *f, uint64_t now, fault_emit_fn emit, void *ctx);

/* When the next queued packet is due; UINT64_MAX if none. */
uint64_t fault_next_deadline(const struct faults *f);

#endif
