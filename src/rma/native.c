/* Native one-sided commands: which peers get them, the initiator's cache
 * of remote entries that lets it do the owner's check, and the revoke
 * protocol that keeps destroyed memory quarantined until no holder of a
 * cached entry can still reach it (docs/RMA.md "Native one-sided
 * commands").  The commands themselves are issued in ops.c. */
#include "am/hang.h"
#include "rma/rma.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEN_MASK ((1u << (32 - RMA_SLOT_BITS)) - 1)

static struct {
    const struct tp_rma_ops *t; /* NULL: every command is executed by its target */
    int atomics;
    uint32_t region;            /* what every rank's heap was exposed as */
    struct rma_cached **cache;  /* [nranks][RMA_SLOTS], a rank's row made when first needed */
    uint64_t *holders;          /* [RMA_SLOTS][words]: ranks that hold this rank's entry */
    size_t words;
    uint32_t acks_due;          /* revokes of the destroy under way not yet acknowledged */
} nat;

/* Generations grow by one per create, wrapping: a is newer than b when it
 * is less than half the range ahead. */
static int gen_after(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & GEN_MASK;
    return d != 0 && d <= GEN_MASK / 2;
}

static struct rma_cached *cached(int target, uint32_t id, int make)
{
    if (!nat.cache[target] && make && !(nat.cache[target] = calloc(RMA_SLOTS, sizeof **nat.cache)))
        util_fatal("out of memory for the cached segment entries of rank %d", target);
    return nat.cache[target] ? &nat.cache[target][id & (RMA_SLOTS - 1)] : NULL;
}

static uint64_t *holder_word(uint32_t slot, int rank)
{
    return &nat.holders[(size_t)slot * nat.words + (size_t)rank / 64];
}

static int describe_revoke(const struct hang_wait *w, char *buf, size_t n)
{
    (void)w;
    snprintf(buf, n, "waits for %u ranks to drop their cached entry of the destroyed segment", nat.acks_due);
    return -1;
}

const struct tp_rma_ops *rma_native_ops(int target, int *atomics, uint32_t *region)
{
    if (!nat.t || !am_is_remote(target))
        return NULL;
    *atomics = nat.atomics;
    *region = nat.region;
    return nat.t;
}

int rma_native_check(int target, uint32_t id, uint64_t key, unsigned perm, uint64_t off, uint64_t len,
                     struct rma_cached **out)
{
    struct rma_cached *ce = cached(target, id, 0);
    if (!ce || !ce->gen || ce->gen != id >> RMA_SLOT_BITS)
        return RMA_NOT_HERE;
    int rc = SHOAL_OK;
    if (ce->key != key || (ce->perms & perm) != perm)
        rc = SHOAL_EACCES;
    else if (off > ce->size || len > ce->size - off)
        rc = SHOAL_ERANGE;
    if (rc)
        am_stats()->rma_native_refused++;
    *out = ce;
    return rc;
}

void rma_native_fill(int target, uint32_t id, uint64_t key, const uint64_t *seg)
{
    uint32_t gen = id >> RMA_SLOT_BITS;
    if (!nat.t || target < 0 || target >= rma.nranks || !gen)
        return;
    struct rma_cached *ce = cached(target, id, 1);
    if (ce->revoked && !gen_after(gen, ce->revoked))
        return; /* its revoke overtook it (replies and requests are not ordered together) */
    ce->gen = gen;
    ce->perms = (uint32_t)seg[0];
    ce->key = key;
    ce->offset = seg[1];
    ce->size = seg[2];
}

int rma_native_offer(int src, uint32_t id, uint64_t *seg)
{
    if (!nat.t || src < 0 || !am_is_remote(src))
        return 0;
    struct rma_entry *e = rma_entry_of(rma.rank, id);
    uint64_t *w = holder_word(id & (RMA_SLOTS - 1), src), bit = 1ull << (src % 64);
    if (!(e->perms & RMA_MAPPED) || (*w & bit))
        return 0; /* registered memory is not exposed; a holder has it already */
    *w |= bit;
    seg[0] = e->perms & SHOAL_MEM_ALL;
    seg[1] = e->offset;
    seg[2] = e->size;
    return 1;
}

void rma_native_revoke(uint32_t id)
{
    uint32_t slot = id & (RMA_SLOTS - 1);
    for (int r = 0; nat.t && r < rma.nranks; r++) {
        uint64_t *w = holder_word(slot, r), bit = 1ull << (r % 64);
        if (!(*w & bit))
            continue;
        *w &= ~bit;
        uint64_t a = id;
        int rc = am_request_internal(r, RMA_H_REVOKE, 0, NULL, 0, 1, &a);
        if (rc)
            util_fatal("revoking rank %d's cached entry of segment %u failed: %s", r, slot, shoal_strerror(rc));
        nat.acks_due++;
    }
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("shoal_mem_destroy", -1, 0, NULL, describe_revoke);
    while (nat.acks_due)
        am_progress_wait(&b, 0);
    hang_pop();
}

/* Holder: drops the entry, waits until every native command it issued to
 * the slot has completed (a get or an atomic could still read reused
 * memory), then acknowledges; the endpoint orders that reply after every
 * earlier write, so the owner reads it after the data. */
static void on_revoke(shoal_token_t tok, void *buf, size_t nbytes, const uint64_t *a, unsigned nargs)
{
    (void)buf;
    int src = shoal_token_source(tok);
    if (nargs != 1 || nbytes || src < 0 || !nat.t) {
        am_stats()->dropped++;
        return;
    }
    uint32_t id = (uint32_t)a[0], gen = id >> RMA_SLOT_BITS;
    struct rma_cached *ce = cached(src, id, 1);
    if (ce->gen == gen)
        ce->gen = 0;
    if (!ce->revoked || gen_after(gen, ce->revoked))
        ce->revoked = gen;
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("a revoke (native one-sided commands to complete)", src, 0, NULL, NULL);
    while (ce->inflight)
        am_progress_wait(&b, 1); /* completions are read with replies */
    hang_pop();
    int rc = am_reply_internal(tok, RMA_H_REVOKE_ACK, NULL, 0, 1, a);
    if (rc)
        util_fatal("acknowledging rank %d's revoke failed: %s", src, shoal_strerror(rc));
}

/* Owner: one holder fewer between the destroy and its return. */
static void on_revoke_ack(shoal_token_t tok, void *buf, size_t nbytes, const uint64_t *a, unsigned nargs)
{
    (void)tok;
    (void)buf;
    (void)a;
    if (nargs != 1 || nbytes || !nat.acks_due) {
        am_stats()->dropped++;
        return;
    }
    nat.acks_due--;
}

void rma_native_init(void)
{
    memset(&nat, 0, sizeof nat);
    am_register_internal(RMA_H_REVOKE, on_revoke);
    am_register_internal(RMA_H_REVOKE_ACK, on_revoke_ack);
    const char *mode = util_config_str(CFG_RMA_NATIVE);
    int atomics = 0;
    const struct tp_rma_ops *t = strcmp(mode, "0") ? am_native_rma(-1, &atomics) : NULL;
    /* With manual progress a native command advances only while the target
     * polls; the target's waits back off when no message arrives, and
     * native commands bring it none: auto keeps such providers on target
     * execution (docs/RMA.md §2.4). */
    if (!t || (!strcmp(mode, "auto") && !t->autonomous()))
        return;
    /* The whole heap, once: segments created later are inside it. */
    int rc = t->expose(rma.heap.bases[rma.rank], rma.heap.bytes, &nat.region);
    if (rc) { /* the same answer on every rank (expose is collective) */
        LOG(LOG_WARN, "one-sided commands are executed by their targets: exposing the heap failed (%s)",
            shoal_strerror(rc));
        return;
    }
    nat.words = ((size_t)rma.nranks + 63) / 64;
    nat.cache = calloc((size_t)rma.nranks, sizeof *nat.cache);
    nat.holders = calloc(RMA_SLOTS * nat.words, sizeof *nat.holders);
    if (!nat.cache || !nat.holders)
        util_fatal("out of memory for the native one-sided commands' tables");
    nat.t = t;
    nat.atomics = atomics && strcmp(mode, "rw") != 0;
    LOG(LOG_INFO, "one-sided commands to remote ranks run natively (put, get%s)",
        nat.atomics ? ", fetch-add, compare-swap" : "");
}

void rma_native_fini(void)
{
    for (int r = 0; nat.cache && r < rma.nranks; r++)
        free(nat.cache[r]);
    free(nat.cache);
    free(nat.holders);
    memset(&nat, 0, sizeof nat);
}
