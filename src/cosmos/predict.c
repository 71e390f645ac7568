/* The Cosmos predictor (cosmos.h): MHRs in one open-addressing table keyed
 * by <block, sender-or-any>, each with COSMOS_PHT_STATIC PHT entries inline;
 * further PHT entries in a second open-addressing table, the shared pool,
 * keyed by <MHR id, history>.  Both tables use linear probing and double at
 * half load, so a message in the steady state costs two or three probes and
 * no allocation.  An MHR with its inline entries is one 64-byte cache line,
 * aligned: in-line, between two messages the application evicts the
 * tables, and what a message costs is the lines it misses (one for most).
 * Hence the embedded states (struct cosmos_blk in the caller's per-block
 * structure, on a line it touches anyway): the same state, kept in the
 * caller's memory while the caller's structure lives and parked in the
 * table when it goes, so a key's history is the same either way. */
#include "cosmos/cosmos.h"

#include <stdlib.h>
#include <string.h>

#include <shoal.h>

#define COSMOS_KEY_ANY 0xffffu /* the MHR key's sender without sender_index */
#define COSMOS_INIT_SLOTS 64
#define COSMOS_LINE 64
/* The held filter's bits per MHR slot: at most 1 in 16 bits is set (the
 * table doubles at half load), so a block the table does not hold is
 * probed for in vain 1 time in 16 or less. */
#define COSMOS_HELD_BITS 8

/* A PHT entry of the pool. */
struct cosmos_pent {
    uint64_t hist; /* the history it is indexed by (tuples, newest lowest) */
    uint32_t id;   /* owner MHR's id; 0 marks a free slot */
    uint16_t pred; /* predicted tuple */
    uint8_t ctr;   /* filter counter, 0..filter */
};

/* cosmos_blk.meta: references seen, saturating at depth (bits 0-2); inline
 * PHT entries in use (bits 3-5); some of the key's entries are in the pool
 * (bit 6). */
#define MHR_REFS(m) ((unsigned)(m)->meta & 7u)
#define MHR_NSTATIC(m) (((unsigned)(m)->meta >> 3) & 7u)
#define MHR_POOL 0x40u

/* A slot of the MHR table: a key's state and its block. */
struct cosmos_mhr {
    uint64_t block;
    struct cosmos_blk b; /* b.id 0 marks a free slot */
};
_Static_assert(sizeof(struct cosmos_mhr) == COSMOS_LINE, "an MHR is one cache line");
_Static_assert(COSMOS_PHT_STATIC <= 4 && COSMOS_DEPTH_MAX <= 7 && COSMOS_FILTER_MAX <= 3,
               "meta and ctrs hold the counts and counters");

/* A PHT entry found: its prediction, and its counter as 2 bits of *ctr. */
struct cosmos_ref {
    uint16_t *pred;
    uint8_t *ctr;
    unsigned shift;
};

struct cosmos_pred {
    struct cosmos_cfg cfg;
    uint64_t hist_mask;
    struct cosmos_mhr *mhr; /* mhr_cap slots, a power of two */
    size_t mhr_cap, mhr_used;
    uint64_t *held; /* COSMOS_HELD_BITS per MHR slot: a block's bit is set once the table holds it */
    size_t loaded; /* embedded states loaded (struct cosmos_blk in the caller's memory) */
    struct cosmos_pent *pool; /* pool_cap slots, a power of two */
    size_t pool_cap;
    uint32_t next_id;
    struct cosmos_counts c;
};

/* splitmix64's finalizer: every key bit moves every slot bit. */
static inline uint64_t cosmos_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline size_t cosmos_mhr_slot(uint64_t block, uint32_t sender, size_t cap)
{
    return cosmos_mix(block ^ ((uint64_t)sender << 40) ^ sender) & (cap - 1);
}

static inline size_t cosmos_pool_slot(uint32_t id, uint64_t hist, size_t cap)
{
    return cosmos_mix(hist ^ ((uint64_t)id * 0x9e3779b97f4a7c15ULL)) & (cap - 1);
}

/* The held filter's bit of a block, from the hash's high half (a slot
 * comes from its low bits). */
static inline size_t cosmos_held_bit(uint64_t block, size_t cap)
{
    return (size_t)(cosmos_mix(block) >> 32) & (COSMOS_HELD_BITS * cap - 1);
}

static size_t cosmos_pow2_at_least(size_t n)
{
    size_t c = COSMOS_INIT_SLOTS;
    while (c < n)
        c <<= 1;
    return c;
}

/* A zeroed table of n entries of size bytes, on cache-line boundaries. */
static void *cosmos_table(size_t n, size_t size)
{
    void *t = aligned_alloc(COSMOS_LINE, n * size); /* n * size: a multiple of 64 (n >= 64) */
    if (t)
        memset(t, 0, n * size);
    return t;
}

int cosmos_create(const struct cosmos_cfg *cfg, struct cosmos_pred **out)
{
    if (!cfg || !out || cfg->depth < 1 || cfg->depth > COSMOS_DEPTH_MAX ||
        cfg->filter > COSMOS_FILTER_MAX)
        return SHOAL_EINVAL;
    struct cosmos_pred *p = calloc(1, sizeof(*p));
    if (!p)
        return SHOAL_ENOMEM;
    p->cfg = *cfg;
    p->hist_mask = cfg->depth == 4 ? UINT64_MAX : (1ULL << (16 * cfg->depth)) - 1;
    p->mhr_cap = COSMOS_INIT_SLOTS;
    /* A bounded pool never grows: its table is sized for it at half load. */
    p->pool_cap = cfg->pool_entries ? cosmos_pow2_at_least(2 * cfg->pool_entries)
                                    : COSMOS_INIT_SLOTS;
    p->mhr = cosmos_table(p->mhr_cap, sizeof(*p->mhr));
    p->held = cosmos_table(p->mhr_cap, COSMOS_HELD_BITS / 8);
    p->pool = cosmos_table(p->pool_cap, sizeof(*p->pool));
    p->next_id = 1;
    if (!p->mhr || !p->held || !p->pool) {
        cosmos_destroy(p);
        return SHOAL_ENOMEM;
    }
    *out = p;
    return 0;
}

void cosmos_destroy(struct cosmos_pred *p)
{
    if (!p)
        return;
    free(p->mhr);
    free(p->held);
    free(p->pool);
    free(p);
}

static struct cosmos_mhr *cosmos_mhr_find(const struct cosmos_pred *p, uint64_t block,
                                          uint32_t sender)
{
    size_t mask = p->mhr_cap - 1;
    for (size_t i = cosmos_mhr_slot(block, sender, p->mhr_cap);; i = (i + 1) & mask) {
        struct cosmos_mhr *m = &p->mhr[i];
        if (!m->b.id)
            return NULL;
        if (m->block == block && m->b.sender == sender)
            return m;
    }
}

/* The free slot for a key known to be absent. */
static struct cosmos_mhr *cosmos_mhr_free_slot(struct cosmos_mhr *t, size_t cap,
                                               uint64_t block, uint32_t sender)
{
    size_t i = cosmos_mhr_slot(block, sender, cap);
    while (t[i].b.id)
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static void cosmos_held_set(uint64_t *held, uint64_t block, size_t cap)
{
    size_t bit = cosmos_held_bit(block, cap);
    held[bit / 64] |= 1ULL << (bit % 64);
}

static int cosmos_mhr_grow(struct cosmos_pred *p)
{
    size_t cap = p->mhr_cap * 2;
    struct cosmos_mhr *t = cosmos_table(cap, sizeof(*t));
    uint64_t *held = cosmos_table(cap, COSMOS_HELD_BITS / 8);
    if (!t || !held) {
        free(t);
        free(held);
        return SHOAL_ENOMEM;
    }
    for (size_t i = 0; i < p->mhr_cap; i++)
        if (p->mhr[i].b.id) {
            *cosmos_mhr_free_slot(t, cap, p->mhr[i].block, p->mhr[i].b.sender) = p->mhr[i];
            cosmos_held_set(held, p->mhr[i].block, cap);
        }
    free(p->mhr);
    free(p->held);
    p->held = held;
    p->mhr = t;
    p->mhr_cap = cap;
    p->c.grows++;
    return 0;
}

/* The key's table slot, a new one if it has none (its state zeroed, b.id
 * 0: the caller fills it); NULL if the table could not grow. */
static struct cosmos_mhr *cosmos_mhr_slot_for(struct cosmos_pred *p, uint64_t block, uint32_t sender)
{
    struct cosmos_mhr *m = cosmos_mhr_find(p, block, sender);
    if (m)
        return m;
    if (2 * (p->mhr_used + 1) > p->mhr_cap && cosmos_mhr_grow(p) != 0)
        return NULL;
    m = cosmos_mhr_free_slot(p->mhr, p->mhr_cap, block, sender);
    cosmos_held_set(p->held, block, p->mhr_cap);
    m->block = block;
    m->b.sender = (uint16_t)sender;
    p->mhr_used++;
    return m;
}

/* A key referenced for the first time. */
static void cosmos_blk_start(struct cosmos_pred *p, struct cosmos_blk *b)
{
    b->id = p->next_id++;
    p->c.blocks++;
}

static struct cosmos_mhr *cosmos_mhr_get(struct cosmos_pred *p, uint64_t block, uint32_t sender)
{
    struct cosmos_mhr *m = cosmos_mhr_slot_for(p, block, sender);
    if (m && !m->b.id)
        cosmos_blk_start(p, &m->b);
    return m;
}

static struct cosmos_pent *cosmos_pool_find(const struct cosmos_pred *p, uint32_t id,
                                            uint64_t hist)
{
    size_t mask = p->pool_cap - 1;
    for (size_t i = cosmos_pool_slot(id, hist, p->pool_cap);; i = (i + 1) & mask) {
        struct cosmos_pent *e = &p->pool[i];
        if (!e->id)
            return NULL;
        if (e->id == id && e->hist == hist)
            return e;
    }
}

static struct cosmos_pent *cosmos_pool_free_slot(struct cosmos_pent *t, size_t cap,
                                                 uint32_t id, uint64_t hist)
{
    size_t i = cosmos_pool_slot(id, hist, cap);
    while (t[i].id)
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static int cosmos_pool_grow(struct cosmos_pred *p)
{
    size_t cap = p->pool_cap * 2;
    struct cosmos_pent *t = cosmos_table(cap, sizeof(*t));
    if (!t)
        return SHOAL_ENOMEM;
    for (size_t i = 0; i < p->pool_cap; i++)
        if (p->pool[i].id)
            *cosmos_pool_free_slot(t, cap, p->pool[i].id, p->pool[i].hist) = p->pool[i];
    free(p->pool);
    p->pool = t;
    p->pool_cap = cap;
    p->c.grows++;
    return 0;
}

/* The PHT entry at the MHR's current history: 1 with *r set, 0 if none. */
static int cosmos_pht_find(const struct cosmos_pred *p, struct cosmos_blk *m, struct cosmos_ref *r)
{
    for (unsigned i = 0; i < MHR_NSTATIC(m); i++)
        if (m->st_hist[i] == m->hist) {
            *r = (struct cosmos_ref){.pred = &m->st_pred[i], .ctr = &m->ctrs, .shift = 2 * i};
            return 1;
        }
    struct cosmos_pent *e = m->meta & MHR_POOL ? cosmos_pool_find(p, m->id, m->hist) : NULL;
    if (e)
        *r = (struct cosmos_ref){.pred = &e->pred, .ctr = &e->ctr, .shift = 0};
    return e != NULL;
}

/* A new PHT entry predicting `tuple` after the MHR's current history: inline
 * while the MHR has room, else from the pool; none when the pool is full. */
static int cosmos_pht_add(struct cosmos_pred *p, struct cosmos_blk *m, uint16_t tuple)
{
    unsigned n = MHR_NSTATIC(m);
    if (n < COSMOS_PHT_STATIC) {
        m->st_hist[n] = m->hist;
        m->st_pred[n] = tuple;
        m->ctrs &= (uint8_t)~(3u << 2 * n);
        m->meta = (uint8_t)(m->meta + (1u << 3));
    } else if (p->cfg.pool_entries && p->c.pool_used >= p->cfg.pool_entries) {
        p->c.pool_failed++;
        return 0;
    } else {
        if (!p->cfg.pool_entries && 2 * (p->c.pool_used + 1) > p->pool_cap &&
            cosmos_pool_grow(p) != 0)
            return SHOAL_ENOMEM;
        *cosmos_pool_free_slot(p->pool, p->pool_cap, m->id, m->hist) =
            (struct cosmos_pent){.hist = m->hist, .id = m->id, .pred = tuple, .ctr = 0};
        m->meta |= MHR_POOL;
        p->c.pool_used++;
    }
    p->c.pht_entries++;
    return 0;
}

/* Predict-then-update at the MHR's (full) history. */
static int cosmos_pht_learn(struct cosmos_pred *p, struct cosmos_blk *m, uint16_t tuple)
{
    struct cosmos_ref r;
    if (!cosmos_pht_find(p, m, &r)) {
        int rc = cosmos_pht_add(p, m, tuple);
        return rc ? rc : COSMOS_NONE;
    }
    unsigned ctr = (*r.ctr >> r.shift) & 3u;
    int out = *r.pred == tuple ? COSMOS_HIT : COSMOS_MISS;
    if (out == COSMOS_HIT && ctr < p->cfg.filter)
        ctr++;
    else if (out == COSMOS_MISS && ctr == 0)
        *r.pred = tuple;
    else if (out == COSMOS_MISS)
        ctr--;
    *r.ctr = (uint8_t)((*r.ctr & ~(3u << r.shift)) | ctr << r.shift);
    return out;
}

static int cosmos_tuple(uint32_t sender, unsigned type)
{
    if (sender > COSMOS_SENDER_MAX || type == 0 || type > COSMOS_TYPE_MAX)
        return SHOAL_EINVAL;
    return (int)(sender << 4 | type);
}

/* Predict-then-update of one key's state m (NULL: it could not be made). */
static int cosmos_step(struct cosmos_pred *p, struct cosmos_blk *m, uint16_t tuple)
{
    if (!m) {
        p->c.none++;
        return SHOAL_ENOMEM;
    }
    int out = COSMOS_NONE;
    if (MHR_REFS(m) < p->cfg.depth)
        m->meta++;
    else
        out = cosmos_pht_learn(p, m, tuple);
    m->hist = (m->hist << 16 | tuple) & p->hist_mask;
    if (out == COSMOS_HIT)
        p->c.hits++;
    else if (out == COSMOS_MISS)
        p->c.misses++;
    else
        p->c.none++;
    return out;
}

int cosmos_observe(struct cosmos_pred *p, uint64_t block, uint32_t sender, unsigned type)
{
    int tuple = cosmos_tuple(sender, type);
    if (tuple < 0)
        return tuple;
    struct cosmos_mhr *m = cosmos_mhr_get(p, block, p->cfg.sender_index ? sender : COSMOS_KEY_ANY);
    return cosmos_step(p, m ? &m->b : NULL, (uint16_t)tuple);
}

/* Whether the table may hold block: its bit in the held filter. */
static int cosmos_held(const struct cosmos_pred *p, uint64_t block)
{
    size_t bit = cosmos_held_bit(block, p->mhr_cap);
    return (int)(p->held[bit / 64] >> (bit % 64) & 1);
}

/* An embedded state's first use: the block's state parked in the table, or
 * a new one.  The table is probed only when the held filter's bit says it
 * may hold the block: a probe is a cold line, and most first uses are of
 * blocks never parked (every new block in LU; in Barnes-Hut every tree
 * node's first message at each side, 16 % of its messages, with the table
 * not empty). */
static void cosmos_blk_load(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block)
{
    const struct cosmos_mhr *m = cosmos_held(p, block) ? cosmos_mhr_find(p, block, COSMOS_KEY_ANY) : NULL;
    if (m)
        *b = m->b;
    else
        cosmos_blk_start(p, b);
    p->loaded++;
}

int cosmos_observe_blk(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block, uint32_t sender,
                       unsigned type)
{
    if (p->cfg.sender_index)
        return cosmos_observe(p, block, sender, type);
    int tuple = cosmos_tuple(sender, type);
    if (tuple < 0)
        return tuple;
    if (__builtin_expect(!b->id, 0))
        cosmos_blk_load(p, b, block);
    return cosmos_step(p, b, (uint16_t)tuple);
}

int cosmos_blk_park(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block)
{
    if (!b->id)
        return 0;
    struct cosmos_mhr *m = cosmos_mhr_slot_for(p, block, COSMOS_KEY_ANY);
    if (m) {
        m->b = *b;
        m->b.sender = COSMOS_KEY_ANY;
    }
    *b = (struct cosmos_blk){0};
    p->loaded--;
    return m ? 0 : SHOAL_ENOMEM;
}

/* The prediction at key state m's history. */
static int cosmos_predict_at(const struct cosmos_pred *p, struct cosmos_blk *m, uint32_t *sender,
                             unsigned *type)
{
    struct cosmos_ref r;
    if (!m || MHR_REFS(m) < p->cfg.depth || !cosmos_pht_find(p, m, &r))
        return 0;
    *sender = *r.pred >> 4u;
    *type = *r.pred & 0xfu;
    return 1;
}

int cosmos_predict(struct cosmos_pred *p, uint64_t block, uint32_t *sender, unsigned *type)
{
    uint32_t key = COSMOS_KEY_ANY;
    if (p->cfg.sender_index) {
        if (*sender > COSMOS_SENDER_MAX)
            return 0;
        key = *sender;
    }
    struct cosmos_mhr *m = cosmos_mhr_find(p, block, key);
    return cosmos_predict_at(p, m ? &m->b : NULL, sender, type);
}

int cosmos_predict_blk(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block, uint32_t *sender,
                       unsigned *type)
{
    if (p->cfg.sender_index || !b->id)
        return cosmos_predict(p, block, sender, type);
    return cosmos_predict_at(p, b, sender, type);
}

/* The prediction at key state m's history as it would be after `tuple`
 * came: the history shifted and one more reference, on a copy. */
static int cosmos_predict_next(const struct cosmos_pred *p, const struct cosmos_blk *m, uint16_t tuple,
                               uint32_t *sender, unsigned *type)
{
    if (!m)
        return 0;
    struct cosmos_blk next = *m;
    next.hist = (m->hist << 16 | tuple) & p->hist_mask;
    if (MHR_REFS(&next) < p->cfg.depth)
        next.meta++;
    return cosmos_predict_at(p, &next, sender, type);
}

int cosmos_predict_after(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block, uint32_t after_sender,
                         unsigned after_type, uint32_t *sender, unsigned *type)
{
    int tuple = cosmos_tuple(after_sender, after_type);
    if (tuple < 0)
        return 0;
    if (p->cfg.sender_index && *sender != after_sender) /* that sender's history does not change */
        return cosmos_predict(p, block, sender, type);
    if (p->cfg.sender_index || !b || !b->id) {
        const struct cosmos_mhr *m = cosmos_mhr_find(p, block, p->cfg.sender_index ? after_sender : COSMOS_KEY_ANY);
        return cosmos_predict_next(p, m ? &m->b : NULL, (uint16_t)tuple, sender, type);
    }
    return cosmos_predict_next(p, b, (uint16_t)tuple, sender, type);
}

int cosmos_last(const struct cosmos_pred *p, uint64_t block, uint32_t sender,
                uint32_t *last_sender, unsigned *last_type)
{
    if (p->cfg.sender_index && sender > COSMOS_SENDER_MAX)
        return 0;
    const struct cosmos_mhr *m =
        cosmos_mhr_find(p, block, p->cfg.sender_index ? sender : COSMOS_KEY_ANY);
    if (!m)
        return 0;
    *last_sender = (m->b.hist & 0xffff) >> 4;
    *last_type = m->b.hist & 0xf;
    return 1;
}

void cosmos_counts(const struct cosmos_pred *p, struct cosmos_counts *c)
{
    *c = p->c;
}

size_t cosmos_mem_bytes(const struct cosmos_pred *p)
{
    return sizeof(*p) + p->mhr_cap * (sizeof(*p->mhr) + COSMOS_HELD_BITS / 8) + p->pool_cap * sizeof(*p->pool) +
           p->loaded * sizeof(struct cosmos_blk);
}
