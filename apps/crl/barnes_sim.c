/* Barnes-Hut (thesis §6.2.3): gravitational n-body simulation over an
 * octree, after SPLASH-2 barnes.
 *
 * Regions: one per body (created by its owner), per tree cell and per tree
 * leaf, and the root cell (rank 0's).  A rank that creates a cell or leaf
 * at a tree position (its octant path from the root) uses the same region
 * for that position in every later step, so a region stays one part of
 * the tree and its coherence messages repeat from step to step.  A cell
 * names its children by rid; a leaf holds up to LEAF_MAX
 * bodies, with a copy of each body's mass and position taken when it was
 * inserted (positions do not change while the tree stands), so the force
 * walk reads leaves and not bodies.  Global sums, minima and maxima go
 * through the CRL reductions, as in all the thesis's Barnes-Hut versions.
 *
 * A step:
 *   root cube (1 reduction); rank 0 empties the root          barrier
 *   every rank inserts its bodies into the shared tree: a cell
 *   is changed under a write operation on it (the lock), held
 *   down the path when a full leaf splits                        barrier
 *   each rank takes a write on the cells and leaves it created   barrier
 *   centres of mass bottom-up, each rank its own nodes, deepest
 *   first, ending each write when done (reads of it wait)
 *   forces: each rank walks the tree for its bodies
 *   advance my bodies; energy (2 reductions).
 * Bodies are dealt to ranks in contiguous ranges of Morton order, so a
 * rank's bodies are near each other and its walks share most nodes.
 *
 * Operations are coarser than the thesis's one per visited node (~436
 * cycles of work each there, a few ns now): every node is mapped once and
 * stays mapped, and a walk reads a node through a private copy taken with
 * one read operation the first time the rank visits it in a step.  With
 * params->fine (--fine, the thesis's granularity, for Cosmos traces) the
 * walks take a read operation on every node they visit instead, with no
 * private copies, flushes or prefetch: what the thesis's version does. */
#include "crl_app.h"
#include "barnes.h"

#include <math.h>
#include <stdint.h>

enum { EMPTY, CELL, LEAF };
enum { LEAF_MAX = 8, MAX_DEPTH = 60 };

struct body { /* region */
    double mass, pos[3], vel[3], acc[3], phi;
};

struct head { /* the start of cells and leaves */
    double mass, cofm[3];
    int32_t kind, depth;
};

struct cell { /* region */
    struct head h;
    rid_t child[8];
    uint8_t child_kind[8];
};

struct member {
    double mass, pos[3];
    rid_t body;
};

struct leaf { /* region */
    struct head h;
    int32_t count;
    struct member member[LEAF_MAX];
};

union node {
    struct head h;
    struct cell cell;
    struct leaf leaf;
};

/* A node this rank has mapped, and its private copy for the force walk. */
struct node_entry {
    rid_t rid;
    union node *mapped; /* NULL: the slot is free */
    union node *copy;
    int copy_step;      /* the step the copy was taken in */
};

/* A node's tree position: its depth and the integer coordinates of its
 * cube among the 2^depth per axis (the octant path read as three numbers). */
struct tree_pos {
    uint64_t at[3];
    int depth;
};

/* The cells or leaves this rank created, one per tree position it ever
 * created one at; order[0..used) are the ones in this step's tree. */
struct pool {
    rid_t *rid;
    union node **node;
    struct tree_pos *pos; /* kept privately: ordering the centre-of-mass work reads no region */
    int *taken_step;      /* the step the node was last taken in */
    size_t *order;
    size_t *slot;         /* open addressing on pos: index + 1, 0 free */
    size_t created, used, capacity, slots;
};

/* A cell on the path of the last insertion, and the octant taken from it. */
struct path_step {
    rid_t cell;
    double center[3], half;
    struct tree_pos pos;
    int octant;
};

/* A body in costzones' exchange: its Morton key where it is now, and its
 * interactions in the last force walk. */
struct zoned {
    uint64_t key;
    uint32_t body, cost;
};

struct bh {
    const struct barnes_params *p;
    unsigned me, nranks;
    size_t n;              /* bodies */
    size_t *order;         /* [n]: the bodies in Morton order of their positions at the last costzones */
    size_t first, count;   /* my zone: order[first .. first + count), the bodies whose forces I compute */
    size_t home_first, home_count; /* the bodies I created (am home to) */
    size_t *zone;          /* [nranks + 1]: every rank's zone starts at order[zone[rank]] */
    struct zoned *zoned;   /* [n]: costzones' exchange, in the order of `order` */
    struct body **body;    /* [n]: every body I have used, mapped (NULL: not yet) */
    rid_t *body_rid;       /* every body's */
    rid_t root;
    double center[3], half; /* the root cube (the centre stays at the origin) */
    struct path_step path[MAX_DEPTH + 2]; /* path[0..path_len): root, cells linked by CELL children */
    int path_len;
    struct pool cells, leaves;
    struct node_entry *table; /* open addressing on rid */
    size_t table_size, table_count;
    int step;              /* counts force computations */
    double kinetic, potential; /* my part of this step's energy */
    struct app_poll poll;
};

/* A visit is ~40 ns (a leaf's attractions included), so a poll every ~2.5
 * us: a node miss waits ~1.4 us at 2 processes.  Every 8 visits made it
 * ~0.7 us, but the 8 times as many polls (~8 ns each) cost about as much. */
enum { POLL_EVERY_VISITS = 64 };

/* ---- the node table: every node is mapped once per rank ---------------- */

static size_t slot_of(const struct bh *bh, rid_t rid)
{
    return (size_t)((rid * 0x9e3779b97f4a7c15ull) >> 20) & (bh->table_size - 1);
}

static void table_grow(struct bh *bh)
{
    struct node_entry *old = bh->table;
    size_t old_size = bh->table_size;
    bh->table_size = old_size ? 2 * old_size : 1024;
    bh->table = app_alloc(bh->table_size * sizeof *bh->table);
    for (size_t i = 0; i < old_size; i++)
        if (old[i].mapped) {
            size_t s = slot_of(bh, old[i].rid);
            while (bh->table[s].mapped)
                s = (s + 1) & (bh->table_size - 1);
            bh->table[s] = old[i];
        }
    free(old);
}

/* rid's entry, or the free one where it would go (mapped NULL). */
static struct node_entry *table_slot(const struct bh *bh, rid_t rid)
{
    size_t s = slot_of(bh, rid);
    while (bh->table[s].mapped && bh->table[s].rid != rid)
        s = (s + 1) & (bh->table_size - 1);
    return &bh->table[s];
}

static struct node_entry *node_entry(struct bh *bh, rid_t rid)
{
    if (2 * (bh->table_count + 1) > bh->table_size)
        table_grow(bh);
    struct node_entry *e = table_slot(bh, rid);
    if (!e->mapped) {
        *e = (struct node_entry){.rid = rid, .mapped = rgn_map(rid), .copy_step = -1};
        bh->table_count++;
    }
    return e;
}

static union node *node(struct bh *bh, rid_t rid)
{
    return node_entry(bh, rid)->mapped;
}

/* The node as it stands in this step's finished tree, read once per step.
 * The CRL copy of a remote node is flushed at once: this step's walks use
 * the private copy, and the owner rewrites the node in the next tree build,
 * where a copy still cached here would make its write wait for this rank
 * to poll and acknowledge an invalidation (at 2 processes ~900 such waits
 * per rank and step, ~1 ms, against ~200 with the flush).  A flush is one
 * message, sent without waiting; on the home it does nothing. */
static const union node *entry_copy(struct bh *bh, struct node_entry *e)
{
    if (e->copy_step != bh->step) {
        if (!e->copy)
            e->copy = app_alloc(sizeof *e->copy);
        rgn_start_read(e->mapped);
        memcpy(e->copy, e->mapped, e->mapped->h.kind == CELL ? sizeof(struct cell) : sizeof(struct leaf));
        rgn_end_read(e->mapped);
        rgn_flush(e->mapped);
        e->copy_step = bh->step;
    }
    return e->copy;
}

static const union node *node_copy(struct bh *bh, rid_t rid)
{
    return entry_copy(bh, node_entry(bh, rid));
}

/* ---- pools ----------------------------------------------------------------- */

static struct tree_pos child_pos(const struct tree_pos *parent, int o)
{
    struct tree_pos p = {.depth = parent->depth + 1};
    for (int d = 0; d < 3; d++)
        p.at[d] = parent->at[d] << 1 | (uint64_t)(o >> d & 1);
    return p;
}

static int same_pos(const struct tree_pos *a, const struct tree_pos *b)
{
    return a->depth == b->depth && a->at[0] == b->at[0] && a->at[1] == b->at[1] && a->at[2] == b->at[2];
}

static size_t pos_slot(const struct pool *p, const struct tree_pos *pos)
{
    uint64_t h = (uint64_t)pos->depth;
    for (int d = 0; d < 3; d++)
        h = (h ^ pos->at[d]) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (p->slots - 1);
}

/* Where pos's index is, or the free slot where it would go. */
static size_t *pool_slot(const struct pool *p, const struct tree_pos *pos)
{
    size_t s = pos_slot(p, pos);
    while (p->slot[s] && !same_pos(&p->pos[p->slot[s] - 1], pos))
        s = (s + 1) & (p->slots - 1);
    return &p->slot[s];
}

static void pool_grow(struct pool *p)
{
    p->capacity = p->capacity ? 2 * p->capacity : 256;
    p->rid = realloc(p->rid, p->capacity * sizeof *p->rid);
    p->node = realloc(p->node, p->capacity * sizeof *p->node);
    p->pos = realloc(p->pos, p->capacity * sizeof *p->pos);
    p->taken_step = realloc(p->taken_step, p->capacity * sizeof *p->taken_step);
    p->order = realloc(p->order, p->capacity * sizeof *p->order);
    if (!p->rid || !p->node || !p->pos || !p->taken_step || !p->order)
        abort();
    free(p->slot);
    p->slots = 2 * p->capacity;
    p->slot = app_alloc(p->slots * sizeof *p->slot);
    for (size_t i = 0; i < p->created; i++)
        *pool_slot(p, &p->pos[i]) = i + 1;
}

/* My node at tree position pos (created the first time), under a write
 * operation, emptied.  A position holds one cell and one leaf at most per
 * step (a leaf is replaced by a cell, never the reverse), so a node is
 * taken once per step. */
static union node *take_node(struct bh *bh, int kind, const struct tree_pos *pos, rid_t *rid)
{
    struct pool *p = kind == CELL ? &bh->cells : &bh->leaves;
    if (pos->depth >= MAX_DEPTH) {
        fprintf(stderr, "barnes: tree deeper than %d (coincident bodies?)\n", MAX_DEPTH);
        abort();
    }
    if (p->created == p->capacity)
        pool_grow(p);
    size_t *slot = pool_slot(p, pos), i = *slot - 1;
    if (!*slot) {
        i = p->created++;
        *slot = i + 1;
        p->pos[i] = *pos;
        p->rid[i] = rgn_create(kind == CELL ? sizeof(struct cell) : sizeof(struct leaf));
        p->node[i] = node(bh, p->rid[i]);
        p->taken_step[i] = -1;
    }
    if (p->taken_step[i] == bh->step) {
        fprintf(stderr, "barnes: rank %u took the %s at depth %d twice in a step\n", bh->me,
                kind == CELL ? "cell" : "leaf", pos->depth);
        abort();
    }
    p->taken_step[i] = bh->step;
    p->order[p->used++] = i;
    union node *n = p->node[i];
    *rid = p->rid[i];
    rgn_start_write(n);
    memset(n, 0, kind == CELL ? sizeof(struct cell) : sizeof(struct leaf));
    n->h.kind = kind;
    n->h.depth = pos->depth;
    return n;
}

/* ---- building the tree ------------------------------------------------------- */

static int octant(const double center[3], const double pos[3])
{
    return (pos[0] >= center[0]) | (pos[1] >= center[1]) << 1 | (pos[2] >= center[2]) << 2;
}

static void child_center(double center[3], double half, int o)
{
    for (int d = 0; d < 3; d++)
        center[d] += (o >> d & 1 ? 0.5 : -0.5) * half;
}

/* Adds m to octant o of c (at cpos; write held), in a new leaf if empty. */
static void add_member(struct bh *bh, struct cell *c, const struct tree_pos *cpos, int o, const struct member *m)
{
    struct leaf *l;
    if (c->child_kind[o] == EMPTY) {
        struct tree_pos pos = child_pos(cpos, o);
        l = &take_node(bh, LEAF, &pos, &c->child[o])->leaf;
        c->child_kind[o] = LEAF;
    } else {
        l = &node(bh, c->child[o])->leaf; /* a leaf of the cell being built: write held */
    }
    l->member[l->count++] = *m;
}

/* Replaces the full leaf under c's octant o (both under write operations)
 * by a new cell holding its members in new leaves. */
static void split_leaf(struct bh *bh, const struct tree_pos *cpos, struct cell *c, int o, struct leaf *full,
                       const double center[3], double half)
{
    rid_t rid;
    struct tree_pos sub_pos = child_pos(cpos, o);
    struct cell *sub = &take_node(bh, CELL, &sub_pos, &rid)->cell;
    double sub_center[3] = {center[0], center[1], center[2]};
    child_center(sub_center, half, o);
    int touched[8] = {0};
    for (int i = 0; i < full->count; i++) {
        int so = octant(sub_center, full->member[i].pos);
        if (sub->child_kind[so] == EMPTY)
            touched[so] = 1;
        add_member(bh, sub, &sub_pos, so, &full->member[i]);
    }
    for (int so = 0; so < 8; so++)
        if (touched[so])
            rgn_end_write(node(bh, sub->child[so]));
    full->count = 0; /* unreferenced from now on */
    c->child[o] = rid;
    c->child_kind[o] = CELL;
    rgn_end_write(sub);
}

/* Places m in a leaf of octant o of the path's cell c (write held),
 * splitting a full leaf; returns 1 when placed, 0 when octant o now holds a
 * cell to descend. */
static int place(struct bh *bh, const struct path_step *here, struct cell *c, int o, const struct member *m)
{
    if (c->child_kind[o] == EMPTY) {
        add_member(bh, c, &here->pos, o, m);
        rgn_end_write(node(bh, c->child[o]));
        return 1;
    }
    if (c->child_kind[o] == CELL)
        return 0;
    struct leaf *l = &node(bh, c->child[o])->leaf;
    rgn_start_write(l);
    if (l->count < LEAF_MAX) {
        l->member[l->count++] = *m;
        rgn_end_write(l);
        return 1;
    }
    split_leaf(bh, &here->pos, c, o, l, here->center, here->half);
    rgn_end_write(l);
    return 0;
}

/* Adds m to the leaf `rid` under a write on the leaf alone, when the leaf
 * still hangs in the tree (a split leaf is left empty) and has room;
 * returns whether it did.  Most insertions end here, so the cells above,
 * read by every rank's insertions, are written only when the tree's shape
 * changes: a write on the parent for every insertion made the cells near
 * the top ping-pong between the ranks (a miss and an invalidation each). */
static int add_to_leaf(struct bh *bh, rid_t rid, const struct member *m)
{
    struct leaf *l = &node(bh, rid)->leaf;
    rgn_start_write(l);
    int added = l->count > 0 && l->count < LEAF_MAX;
    if (added)
        l->member[l->count++] = *m;
    rgn_end_write(l);
    return added;
}

/* Descends from the root to m's place.  Within a tree build a cell's
 * CELL child never changes (cells are only added below it), so the path of
 * the previous insertion, as far as m takes the same octants, needs no
 * read operation: a rank inserts its bodies in Morton order, and
 * consecutive bodies share most of their path (at 2 processes this removes
 * ~60 % of the tree build's operations, and the misses on cells the other
 * rank's insertions changed). */
static void insert(struct bh *bh, const struct member *m)
{
    struct path_step *path = bh->path;
    int i = 0;
    if (bh->path_len == 0) {
        path[0] = (struct path_step){.cell = bh->root, .half = bh->half};
        memcpy(path[0].center, bh->center, sizeof bh->center);
        bh->path_len = 1;
    }
    while (i + 1 < bh->path_len && octant(path[i].center, m->pos) == path[i].octant)
        i++;
    for (;;) {
        struct path_step *here = &path[i];
        struct cell *c = &node(bh, here->cell)->cell;
        int o = octant(here->center, m->pos);
        rgn_start_read(c);
        int kind = c->child_kind[o];
        rid_t child = c->child[o];
        rgn_end_read(c);
        int placed = kind == LEAF && add_to_leaf(bh, child, m);
        if (!placed && kind != CELL) {
            rgn_start_write(c); /* the octant may have changed since the read */
            placed = place(bh, here, c, o, m);
            child = c->child[o];
            rgn_end_write(c);
        }
        if (placed) {
            bh->path_len = i + 1;
            return;
        }
        here->octant = o;
        path[i + 1] = (struct path_step){.cell = child, .half = here->half / 2, .pos = child_pos(&here->pos, o)};
        memcpy(path[i + 1].center, here->center, sizeof here->center);
        child_center(path[i + 1].center, here->half, o);
        i++;
    }
}

/* ---- centres of mass ----------------------------------------------------------- */

static void leaf_mass(struct leaf *l)
{
    double mass = 0, moment[3] = {0, 0, 0};
    for (int i = 0; i < l->count; i++) {
        mass += l->member[i].mass;
        for (int d = 0; d < 3; d++)
            moment[d] += l->member[i].mass * l->member[i].pos[d];
    }
    l->h.mass = mass;
    for (int d = 0; d < 3; d++)
        l->h.cofm[d] = mass > 0 ? moment[d] / mass : 0;
}

static void cell_mass(struct bh *bh, struct cell *c)
{
    double mass = 0, moment[3] = {0, 0, 0};
    for (int o = 0; o < 8; o++) {
        if (c->child_kind[o] == EMPTY)
            continue;
        union node *child = node(bh, c->child[o]);
        rgn_start_read(child);
        mass += child->h.mass;
        for (int d = 0; d < 3; d++)
            moment[d] += child->h.mass * child->h.cofm[d];
        rgn_end_read(child);
    }
    c->h.mass = mass;
    for (int d = 0; d < 3; d++)
        c->h.cofm[d] = mass > 0 ? moment[d] / mass : 0;
}

static int deepest(const struct pool *p, int depth)
{
    for (size_t i = 0; i < p->used; i++)
        if (p->pos[p->order[i]].depth > depth)
            depth = p->pos[p->order[i]].depth;
    return depth;
}

static void start_writes(const struct pool *p)
{
    for (size_t i = 0; i < p->used; i++)
        rgn_start_write(p->node[p->order[i]]);
}

/* Computes my nodes at this depth and ends the write held on each. */
static void masses_at_depth(struct bh *bh, const struct pool *p, int depth)
{
    for (size_t i = 0; i < p->used; i++) {
        union node *n = p->node[p->order[i]];
        if (p->pos[p->order[i]].depth != depth)
            continue;
        if (n->h.kind == LEAF)
            leaf_mass(&n->leaf);
        else
            cell_mass(bh, &n->cell);
        rgn_end_write(n);
    }
}

/* Bottom-up without a barrier per level: every rank takes a write on each
 * node it created (then one barrier, so nobody reads a node before its
 * owner holds it), and ends it when the node's centre of mass is done.  A
 * parent's read of a child, and the force walk's reads, wait for that end.
 * Each rank goes deepest first and a node waits only for deeper ones, so
 * the deepest pending node never waits: no deadlock. */
static void centres_of_mass(struct bh *bh)
{
    union node *root = node(bh, bh->root);
    start_writes(&bh->leaves);
    start_writes(&bh->cells);
    if (bh->me == 0)
        rgn_start_write(root);
    rgn_barrier();
    for (int d = deepest(&bh->cells, deepest(&bh->leaves, 0)); d >= 1; d--) {
        masses_at_depth(bh, &bh->leaves, d);
        masses_at_depth(bh, &bh->cells, d);
    }
    if (bh->me == 0) {
        cell_mass(bh, &root->cell);
        rgn_end_write(root);
    }
}

/* ---- bodies and costzones ------------------------------------------------------- */

static uint64_t spread_bits(uint64_t x) /* 21 bits to every third of 63 */
{
    x &= 0x1fffff;
    x = (x | x << 32) & 0x1f00000000ffffull;
    x = (x | x << 16) & 0x1f0000ff0000ffull;
    x = (x | x << 8) & 0x100f00f00f00f00full;
    x = (x | x << 4) & 0x10c30c30c30c30c3ull;
    x = (x | x << 2) & 0x1249249249249249ull;
    return x;
}

/* A position's Morton key on a 2^21 grid over [-8, 8)^3 (far bodies clamped). */
static uint64_t morton_key(const double pos[3])
{
    uint64_t key = 0;
    for (int d = 0; d < 3; d++) {
        double g = (pos[d] + 8) / 16 * 0x1p21;
        uint64_t cell = g <= 0 ? 0 : g >= 0x1p21 ? 0x1fffff : (uint64_t)g;
        key |= spread_bits(cell) << d;
    }
    return key;
}

/* Body k, mapped the first time this rank uses it. */
static struct body *body(struct bh *bh, size_t k)
{
    if (!bh->body[k])
        bh->body[k] = rgn_map(bh->body_rid[k]);
    return bh->body[k];
}

/* Insertion sort by key, then body: the bodies move little in a step, so the
 * last order is nearly sorted and this costs O(n + displacements). */
static void sort_zoned(struct zoned *z, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct zoned x = z[i];
        size_t j = i;
        for (; j > 0 && (z[j - 1].key > x.key || (z[j - 1].key == x.key && z[j - 1].body > x.body)); j--)
            z[j] = z[j - 1];
        z[j] = x;
    }
}

/* Costzones (SPLASH-2 barnes; the thesis's Barnes-Hut partitions so): the
 * bodies, in the Morton order of where they are now, are cut into nranks
 * contiguous zones of equal cost, a body's cost being its interactions in
 * the last force walk.  Every rank broadcasts the keys and costs of its
 * zone, so all compute the same order and cuts.  The order is that of the
 * current positions, as SPLASH-2 takes the bodies in the order of the tree
 * just built: cut in the initial order, a zone spread through space as the
 * bodies moved, more leaves held bodies of several zones, and which rank
 * built a tree position (and so which region stood there) changed from step
 * to step (at 2 ranks 30 positions a step at the start, 140 after 19
 * steps).  The bodies stay where they were created (their home); a body
 * that moves to another rank's zone costs that rank one write miss. */
static void costzones(struct bh *bh)
{
    if (bh->nranks == 1 || bh->step == 0) /* one zone; or no costs yet */
        return;
    for (size_t i = bh->first; i < bh->first + bh->count; i++) {
        struct body *b = body(bh, bh->order[i]);
        rgn_start_read(b);
        bh->zoned[i].key = morton_key(b->pos);
        rgn_end_read(b);
    }
    for (unsigned r = 0; r < bh->nranks; r++) {
        int bytes = (int)((bh->zone[r + 1] - bh->zone[r]) * sizeof *bh->zoned);
        if (bytes == 0)
            continue;
        if (r == bh->me)
            rgn_bcast_send(bytes, bh->zoned + bh->zone[r]);
        else
            rgn_bcast_recv(bytes, bh->zoned + bh->zone[r]);
    }
    sort_zoned(bh->zoned, bh->n);
    uint64_t total = 0;
    for (size_t i = 0; i < bh->n; i++) {
        bh->order[i] = bh->zoned[i].body;
        total += bh->zoned[i].cost;
    }
    /* zone[r] is the first body whose preceding bodies cost total r / nranks or more. */
    uint64_t before = 0;
    unsigned r = 1;
    for (size_t i = 0; i < bh->n && r < bh->nranks; i++) {
        while (r < bh->nranks && before * bh->nranks >= total * r)
            bh->zone[r++] = i;
        before += bh->zoned[i].cost;
    }
    while (r < bh->nranks)
        bh->zone[r++] = bh->n;
    bh->first = bh->zone[bh->me];
    bh->count = bh->zone[bh->me + 1] - bh->first;
}

/* ---- forces ----------------------------------------------------------------------- */

static void attract(const struct bh *bh, const double pos[3], double mass, const double at[3], double acc[3],
                    double *phi)
{
    double r[3], r2 = bh->p->epsilon * bh->p->epsilon;
    for (int d = 0; d < 3; d++) {
        r[d] = at[d] - pos[d];
        r2 += r[d] * r[d];
    }
    double inv = 1 / sqrt(r2), m_inv = mass * inv, m_inv3 = m_inv * inv * inv;
    *phi -= m_inv;
    for (int d = 0; d < 3; d++)
        acc[d] += m_inv3 * r[d];
}

/* The walk's accumulators for one body. */
struct walk {
    double acc[3], phi;
    uint32_t interactions;
    rid_t stack[8 * MAX_DEPTH];
    int top;
};

/* One visited node: a leaf's bodies attract, a far cell attracts as one
 * body, a near cell's children are pushed. */
static void visit(const struct bh *bh, const struct body *b, rid_t self, const union node *n, struct walk *w)
{
    if (n->h.kind == LEAF) {
        for (int i = 0; i < n->leaf.count; i++)
            if (n->leaf.member[i].body != self)
                attract(bh, b->pos, n->leaf.member[i].mass, n->leaf.member[i].pos, w->acc, &w->phi);
        w->interactions += (uint32_t)n->leaf.count;
        return;
    }
    double size = ldexp(2 * bh->half, -n->h.depth), d2 = 0;
    for (int d = 0; d < 3; d++)
        d2 += (n->h.cofm[d] - b->pos[d]) * (n->h.cofm[d] - b->pos[d]);
    if (size * size < bh->p->theta * bh->p->theta * d2) {
        attract(bh, b->pos, n->h.mass, n->h.cofm, w->acc, &w->phi);
        w->interactions++;
        return;
    }
    for (int o = 0; o < 8; o++)
        if (n->cell.child_kind[o] != EMPTY)
            w->stack[w->top++] = n->cell.child[o];
}

/* Walks the tree for body b (write held), setting its acc and phi;
 * returns the number of interactions (its cost for costzones). */
static uint32_t gravity(struct bh *bh, struct body *b, rid_t self)
{
    struct walk w = {.top = 0};
    struct app_poll poll = bh->poll; /* a local copy stays in registers */
    w.stack[w.top++] = bh->root;
    while (w.top) {
        app_poll(&poll);
        rid_t rid = w.stack[--w.top];
        if (!bh->p->fine) {
            visit(bh, b, self, node_copy(bh, rid), &w);
            continue;
        }
        union node *n = node(bh, rid);
        rgn_start_read(n);
        visit(bh, b, self, n, &w);
        rgn_end_read(n);
    }
    bh->poll = poll;
    memcpy(b->acc, w.acc, sizeof w.acc);
    b->phi = w.phi;
    return w.interactions;
}

/* The nodes of this step's tree that the last step's walks read, copied
 * before this step's walks start.  The bodies moved little, so the walks
 * will want nearly all of them; fetched in a burst while the other ranks do
 * the same, each miss is served by a home that is itself waiting, at once,
 * where a miss in the middle of a walk waits for the home's next poll.
 * Found from the root down, not by scanning the node table: a region whose
 * tree position is not in this step's tree holds last step's node, and
 * fetching it would be a wasted miss. */
static void prefetch_nodes(struct bh *bh)
{
    rid_t stack[8 * MAX_DEPTH];
    int top = 0;
    stack[top++] = bh->root;
    while (top) {
        struct node_entry *e = table_slot(bh, stack[--top]);
        if (!e->mapped || e->copy_step != bh->step - 1)
            continue;
        const union node *n = entry_copy(bh, e);
        for (int o = 0; n->h.kind == CELL && o < 8; o++)
            if (n->cell.child_kind[o] != EMPTY)
                stack[top++] = n->cell.child[o];
    }
}

static void forces(struct bh *bh)
{
    if (bh->nranks > 1 && !bh->p->fine)
        prefetch_nodes(bh);
    bh->kinetic = bh->potential = 0;
    for (size_t i = bh->first; i < bh->first + bh->count; i++) {
        size_t k = bh->order[i];
        struct body *b = body(bh, k);
        rgn_start_write(b);
        bh->zoned[i].cost = gravity(bh, b, bh->body_rid[k]);
        bh->potential += 0.5 * b->mass * b->phi;
        bh->kinetic += 0.5 * b->mass * (b->vel[0] * b->vel[0] + b->vel[1] * b->vel[1] + b->vel[2] * b->vel[2]);
        rgn_end_write(b);
    }
}

/* ---- a step ---------------------------------------------------------------------- */

/* The root cube, as Barnes's own treecode keeps it (expandbox): centred at
 * the origin, its side a power of two, doubled when a body would leave it
 * and never shrunk.  So a tree position is the same cube of space in every
 * step, and the octree's order is the Morton order of costzones' keys (a
 * power-of-two grid centred at the origin too), so a zone is a run of
 * subtrees.  A bounding box recomputed every step (SPLASH-2's setbound)
 * moved every position's cube a little each step, and bodies near an
 * octant's boundary changed positions with it: at 2 ranks, 19 steps, --fine,
 * 18 % more protocol messages, and depth 3's accuracy 2 points lower. */
static void root_cube(struct bh *bh)
{
    double reach = 0;
    for (size_t i = bh->first; i < bh->first + bh->count; i++) {
        struct body *b = body(bh, bh->order[i]);
        rgn_start_read(b);
        for (int d = 0; d < 3; d++)
            reach = fmax(reach, fabs(b->pos[d]));
        rgn_end_read(b);
    }
    reach = rgn_reduce_dmax(reach);
    if (bh->half == 0)
        bh->half = 1;
    while (bh->half <= reach)
        bh->half *= 2;
}

static void build_tree(struct bh *bh)
{
    root_cube(bh);
    bh->cells.used = bh->leaves.used = 0;
    bh->path_len = 0;
    if (bh->me == 0) {
        union node *root = node(bh, bh->root);
        rgn_start_write(root);
        memset(root, 0, sizeof(struct cell));
        root->h.kind = CELL;
        rgn_end_write(root);
    }
    rgn_barrier();
    for (size_t i = bh->first; i < bh->first + bh->count; i++) {
        size_t k = bh->order[i];
        struct body *b = body(bh, k);
        struct member m = {.body = bh->body_rid[k]};
        rgn_start_read(b);
        memcpy(m.pos, b->pos, sizeof m.pos);
        m.mass = b->mass;
        rgn_end_read(b);
        insert(bh, &m);
    }
    rgn_barrier();
}

/* Forces at the current positions; the energy there on every rank. */
static double compute_forces(struct bh *bh)
{
    costzones(bh);
    build_tree(bh);
    centres_of_mass(bh);
    bh->step++;
    forces(bh);
    return rgn_reduce_dadd(bh->kinetic) + rgn_reduce_dadd(bh->potential);
}

/* Kick and drift (SPLASH-2's advance): vel += acc dt, pos += (vel - acc dt/2) dt. */
static void advance(struct bh *bh)
{
    double dt = bh->p->dt;
    for (size_t i = bh->first; i < bh->first + bh->count; i++) {
        size_t k = bh->order[i];
        struct body *b = body(bh, k);
        rgn_start_write(b);
        for (int d = 0; d < 3; d++) {
            double half_kick = b->acc[d] * dt / 2;
            b->pos[d] += (b->vel[d] + half_kick) * dt;
            b->vel[d] += 2 * half_kick;
        }
        rgn_end_write(b);
    }
}

/* ---- set-up --------------------------------------------------------------------------- */

static double uniform(uint64_t *state) /* splitmix64, in [0, 1) */
{
    uint64_t x = *state += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-53;
}

static void random_direction(uint64_t *rng, double length, double v[3])
{
    double z = 2 * uniform(rng) - 1, phi = 2 * M_PI * uniform(rng), r = sqrt(1 - z * z);
    v[0] = length * r * cos(phi);
    v[1] = length * r * sin(phi);
    v[2] = length * z;
}

/* Body k of a Plummer sphere in virial units (Aarseth, Henon and Wielen's
 * sampling, as SPLASH-2's testdata), from a generator seeded by k. */
static void plummer_body(int k, int n, struct body *b)
{
    uint64_t rng = (uint64_t)k * 0xd1b54a32d192ed03ull + 1;
    const double scale = 3 * M_PI / 16;
    double r = 1 / sqrt(pow(0.999 * uniform(&rng), -2.0 / 3) - 1), x, y;
    do {
        x = uniform(&rng);
        y = 0.1 * uniform(&rng);
    } while (y > x * x * pow(1 - x * x, 3.5));
    memset(b, 0, sizeof *b);
    b->mass = 1.0 / n;
    random_direction(&rng, scale * r, b->pos);
    random_direction(&rng, sqrt(2.0) * x * pow(1 + r * r, -0.25) / sqrt(scale), b->vel);
}

struct keyed_body {
    uint64_t key;
    struct body body;
};

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const struct keyed_body *)a)->key, y = ((const struct keyed_body *)b)->key;
    return (x > y) - (x < y);
}

/* Every rank generates all n bodies and sorts them in Morton order of
 * position. */
static struct keyed_body *initial_bodies(int n)
{
    struct keyed_body *all = app_alloc((size_t)n * sizeof *all);
    for (int k = 0; k < n; k++) {
        plummer_body(k, n, &all[k].body);
        all[k].key = morton_key(all[k].body.pos);
    }
    qsort(all, (size_t)n, sizeof *all, by_key);
    return all;
}

static void create_bodies(struct bh *bh, int n)
{
    struct keyed_body *all = initial_bodies(n);
    unsigned *owner = app_alloc((size_t)n * sizeof *owner);
    bh->body_rid = app_alloc((size_t)n * sizeof *bh->body_rid);
    bh->body = app_alloc((size_t)n * sizeof *bh->body);
    for (size_t k = 0; k < (size_t)n; k++)
        owner[k] = app_owner(k, (size_t)n, crl_num_nodes());
    for (size_t k = bh->home_first; k < bh->home_first + bh->home_count; k++) {
        bh->body_rid[k] = rgn_create(sizeof(struct body));
        struct body *b = body(bh, k);
        rgn_start_write(b);
        *b = all[k].body;
        rgn_end_write(b);
    }
    app_share_rids(bh->body_rid, owner, (size_t)n);
    free(owner);
    free(all);
}

static void create_root(struct bh *bh)
{
    if (bh->me == 0) {
        bh->root = rgn_create(sizeof(struct cell));
        rgn_bcast_send(sizeof bh->root, &bh->root);
    } else {
        rgn_bcast_recv(sizeof bh->root, &bh->root);
    }
}

/* The sum of every body's final coordinates, from each rank's zone (held
 * here since its force walks): the printed checksum needs no body on rank 0. */
static double position_sum(struct bh *bh)
{
    double sum = 0;
    for (size_t i = bh->first; i < bh->first + bh->count; i++) {
        size_t k = bh->order[i];
        struct body *b = body(bh, k);
        rgn_start_read(b);
        sum += b->pos[0] + b->pos[1] + b->pos[2];
        rgn_end_read(b);
    }
    return rgn_reduce_dadd(sum);
}

static void gather(struct bh *bh, int n, struct barnes_body *out)
{
    for (int k = 0; k < n; k++) {
        struct body *b = rgn_map(bh->body_rid[k]);
        rgn_start_read(b);
        out[k] = (struct barnes_body){.mass = b->mass, .phi = b->phi};
        memcpy(out[k].pos, b->pos, sizeof b->pos);
        memcpy(out[k].vel, b->vel, sizeof b->vel);
        memcpy(out[k].acc, b->acc, sizeof b->acc);
        rgn_end_read(b);
        rgn_unmap(b);
    }
}

static void delete_pool(const struct pool *p)
{
    for (size_t i = 0; i < p->created; i++)
        rgn_delete(p->rid[i]);
}

static void free_pool(struct pool *p)
{
    free(p->rid);
    free(p->node);
    free(p->pos);
    free(p->taken_step);
    free(p->order);
    free(p->slot);
}

/* Unmaps everything.  Before the last barrier, so that the flushes of
 * copies the unmapping evicts reach regions that still exist (a message
 * for a deleted region is only offered to Cosmos's table, a cold line). */
static void unmap_all(struct bh *bh)
{
    for (size_t i = 0; i < bh->table_size; i++)
        if (bh->table[i].mapped) {
            rgn_unmap(bh->table[i].mapped);
            free(bh->table[i].copy);
        }
    for (size_t k = 0; k < bh->n; k++)
        if (bh->body[k])
            rgn_unmap(bh->body[k]);
}

/* Deletes what I created; nobody uses it any more. */
static void release(struct bh *bh)
{
    for (size_t k = bh->home_first; k < bh->home_first + bh->home_count; k++)
        rgn_delete(bh->body_rid[k]);
    delete_pool(&bh->cells);
    delete_pool(&bh->leaves);
    if (bh->me == 0)
        rgn_delete(bh->root);
    free(bh->table);
    free(bh->body);
    free(bh->body_rid);
    free(bh->zoned);
    free(bh->order);
    free(bh->zone);
    free_pool(&bh->cells);
    free_pool(&bh->leaves);
}

void SIM_ENTRY(barnes_run)(const struct barnes_params *params, struct barnes_result *result)
{
    struct bh bh = {.p = params, .me = crl_self_addr(), .nranks = crl_num_nodes(), .n = (size_t)params->bodies,
                    .poll = app_poll_init(POLL_EVERY_VISITS)};
    app_partition(bh.n, bh.me, bh.nranks, &bh.home_first, &bh.home_count);
    bh.first = bh.home_first;
    bh.count = bh.home_count;
    bh.order = app_alloc(bh.n * sizeof *bh.order);
    bh.zoned = app_alloc(bh.n * sizeof *bh.zoned);
    for (size_t k = 0; k < bh.n; k++) { /* the bodies are created in Morton order */
        bh.order[k] = k;
        bh.zoned[k].body = (uint32_t)k;
    }
    bh.zone = app_alloc((bh.nranks + 1) * sizeof *bh.zone);
    for (unsigned r = 0; r <= bh.nranks; r++)
        bh.zone[r] = bh.n * r / bh.nranks;
    create_bodies(&bh, params->bodies);
    create_root(&bh);
    rgn_barrier();
    struct app_time timed = {0, 0};
    int first_timed = params->steps >= 3 ? 2 : 0;
    for (int s = 0; s < params->steps; s++) {
        struct app_time start = app_clock();
        double energy = compute_forces(&bh);
        advance(&bh);
        if (s >= first_timed)
            app_add_since(&timed, start);
        if (result->energy)
            result->energy[s] = energy;
    }
    int counted = params->steps - first_timed;
    result->time = (struct app_time){timed.wall / counted, timed.cpu / counted};
    double energy = compute_forces(&bh);
    if (result->energy)
        result->energy[params->steps] = energy;
    result->checksum = position_sum(&bh);
    if (result->state)
        gather(&bh, params->bodies, result->state);
    unmap_all(&bh);
    rgn_barrier();
    release(&bh);
}
