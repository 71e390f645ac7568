/* Fault injection for the cluster carriers (faults.h). */
#include "net/faults.h"

#include "net/wire.h"

#include "shoal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fault_entry {
    uint64_t due;   /* release time; for a held packet, when the hold ends */
    uint32_t addr;
    size_t len;
    unsigned char data[];
};

int fault_active(const struct util_fault_spec *c)
{
    return c->loss > 0 || c->dup > 0 || c->reorder > 0 || c->corrupt > 0 || c->delay_ns > 0;
}

/* ---- PRNG: splitmix64 seeds xoshiro256** --------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ z >> 27) * 0x94d049bb133111ebull;
    return z ^ z >> 31;
}

static uint64_t rotl(uint64_t x, int k)
{
    return x << k | x >> (64 - k);
}

static uint64_t next_u64(struct faults *f)
{
    uint64_t *s = f->rng;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* True with probability p; draws nothing when p is 0, so enabling one
 * fault does not change the decisions of a run without it. */
static int chance(struct faults *f, double p)
{
    return p > 0 && (double)(next_u64(f) >> 11) * 0x1.0p-53 < p;
}

void fault_init(struct faults *f, const struct util_fault_spec *c, uint64_t stream)
{
    *f = (struct faults){.cfg = *c};
    uint64_t x = c->seed ^ splitmix64(&stream);
    for (int i = 0; i < 4; i++)
        f->rng[i] = splitmix64(&x);
}

/* ---- queues --------------------------------------------------------------- */

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

static struct fault_entry *entry_new(struct faults *f, uint32_t addr, const void *pkt, size_t len)
{
    struct fault_entry *e = malloc(sizeof *e + len);
    if (!e) {
        f->stats.nomem++;
        return NULL;
    }
    e->addr = addr;
    e->len = len;
    memcpy(e->data, pkt, len);
    return e;
}

/* Appends e to the FIFO, due at now + delay (nondecreasing, as now is). */
static void enqueue(struct faults *f, uint64_t now, struct fault_entry *e)
{
    if (f->qlen == f->qcap) {
        size_t cap = f->qcap ? 2 * f->qcap : 64;
        struct fault_entry **q = malloc(cap * sizeof *q);
        if (!q) {
            f->stats.nomem++;
            free(e);
            return;
        }
        for (size_t i = 0; i < f->qlen; i++)
            q[i] = f->q[(f->qhead + i) % f->qcap];
        free(f->q);
        f->q = q;
        f->qcap = cap;
        f->qhead = 0;
    }
    e->due = add_sat(now, f->cfg.delay_ns);
    f->q[(f->qhead + f->qlen++) % f->qcap] = e;
}

static int held_slot(const struct faults *f, uint32_t addr)
{
    for (int i = 0; i < FAULT_HOLD_SLOTS; i++)
        if (f->held[i] && f->held[i]->addr == addr)
            return i;
    return -1;
}

static int free_slot(const struct faults *f)
{
    for (int i = 0; i < FAULT_HOLD_SLOTS; i++)
        if (!f->held[i])
            return i;
    return -1;
}

/* Queues the packet held for addr, if any: it now follows a later one. */
static void release_held(struct faults *f, uint64_t now, uint32_t addr)
{
    int i = held_slot(f, addr);
    if (i >= 0) {
        enqueue(f, now, f->held[i]);
        f->held[i] = NULL;
    }
}

void fault_flush(struct faults *f, uint64_t now, fault_emit_fn emit, void *ctx)
{
    for (int i = 0; i < FAULT_HOLD_SLOTS; i++)
        if (f->held[i] && f->held[i]->due <= now) {
            enqueue(f, now, f->held[i]);
            f->held[i] = NULL;
        }
    while (f->qlen && f->q[f->qhead]->due <= now) {
        struct fault_entry *e = f->q[f->qhead];
        f->qhead = (f->qhead + 1) % f->qcap;
        f->qlen--;
        emit(ctx, e->addr, e->data, e->len);
        free(e);
    }
}

uint64_t fault_next_deadline(const struct faults *f)
{
    uint64_t t = f->qlen ? f->q[f->qhead]->due : UINT64_MAX;
    for (int i = 0; i < FAULT_HOLD_SLOTS; i++)
        if (f->held[i] && f->held[i]->due < t)
            t = f->held[i]->due;
    return t;
}

void fault_fini(struct faults *f)
{
    for (size_t i = 0; i < f->qlen; i++)
        free(f->q[(f->qhead + i) % f->qcap]);
    for (int i = 0; i < FAULT_HOLD_SLOTS; i++)
        free(f->held[i]);
    free(f->q);
    *f = (struct faults){0}; /* injects nothing */
}

/* ---- the decision --------------------------------------------------------- */

/* The packet goes through untouched and unqueued: nothing to copy. */
static int straight_through(const struct faults *f, uint32_t addr)
{
    return f->cfg.delay_ns == 0 && f->qlen == 0 && held_slot(f, addr) < 0;
}

void fault_pass(struct faults *f, uint64_t now, uint32_t addr, const void *pkt, size_t len,
                fault_emit_fn emit, void *ctx)
{
    f->stats.packets++;
    if (chance(f, f->cfg.loss)) {
        f->stats.dropped++;
        return;
    }
    int corrupt = len > 0 && chance(f, f->cfg.corrupt);
    size_t span = len < WIRE_HEADER_BYTES ? len : WIRE_HEADER_BYTES; /* the part checked end to end */
    int dup = chance(f, f->cfg.dup);
    int hold = chance(f, f->cfg.reorder) && held_slot(f, addr) < 0 && free_slot(f) >= 0;
    if (!corrupt && !dup && !hold && straight_through(f, addr)) {
        emit(ctx, addr, pkt, len);
        return;
    }
    struct fault_entry *e = entry_new(f, addr, pkt, len);
    if (!e)
        return;
    if (corrupt) {
        e->data[next_u64(f) % span] ^= (unsigned char)(1 + next_u64(f) % 255);
        f->stats.corrupted++;
    }
    struct fault_entry *copy = dup ? entry_new(f, addr, e->data, len) : NULL;
    f->stats.duplicated += copy != NULL;
    f->stats.delayed += f->cfg.delay_ns > 0;
    if (hold) {
        e->due = add_sat(now, FAULT_HOLD_NS);
        f->held[free_slot(f)] = e;
        f->stats.reordered++;
    } else {
        enqueue(f, now, e);
    }
    if (copy)
        enqueue(f, now, copy);
    if (!hold)
        release_held(f, now, addr);
    fault_flush(f, now, emit, ctx);
}
