/* The spanning tree every rooted collective uses (coll.h): binomial across
 * hosts among the sources (the root, then every other host's leader in
 * rank order), then binomial on each host from its source (the root on its
 * own host, the leader elsewhere), so data crosses the network once per
 * host and the rest moves over shared memory. */
#include "am/am.h"
#include "boot/boot.h"
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

/* The members of a tree: `first`, then `others` but `skip`. */
static int tree_members(int *out, int first, const int *others, int n, int skip)
{
    int m = 0;
    out[m++] = first;
    for (int i = 0; i < n; i++)
        if (others[i] != skip)
            out[m++] = others[i];
    return m;
}

static int tree_index(const int *members, int m, int rank)
{
    for (int i = 0; i < m; i++)
        if (members[i] == rank)
            return i;
    return -1;
}

/* Index i's place in a binomial tree of m members: children i + d for every
 * power of two d > i (farthest first), parent i less its highest bit. */
static void tree_place(struct coll_tree *t, const int *members, int m, int i)
{
    int top = 1;
    while (top < m)
        top <<= 1;
    for (int d = top; d >= 1; d >>= 1)
        if (d > i && i + d < m && t->nchildren < COLL_MAX_CHILDREN)
            t->children[t->nchildren++] = members[i + d];
    if (i > 0) {
        int high = 1;
        while (high * 2 <= i)
            high *= 2;
        t->parent = members[i - high];
    }
}

static int *members; /* scratch of nranks: a tree's members in order */

int coll_tree(struct coll_tree *t, int root, int cross_hosts)
{
    if (!members && !(members = malloc((size_t)am_size() * sizeof *members)))
        return SHOAL_ENOMEM;
    int nleaders;
    const int *leaders = coll_leaders(&nleaders);
    int root_leader = root;
    for (int i = 0; i < nleaders; i++)
        if (leaders[i] == root || boot_shm_peers(leaders[i], root))
            root_leader = leaders[i];
    memset(t, 0, sizeof *t);
    t->parent = -1;
    t->nsources = tree_members(members, root, leaders, nleaders, root_leader);
    int si = tree_index(members, t->nsources, am_rank());
    t->source = si >= 0;
    if (si >= 0 && cross_hosts)
        tree_place(t, members, t->nsources, si);
    int nlocal;
    const int *local = am_local_ranks(&nlocal);
    int src = !am_is_remote(root) ? root : local[0];
    int m = tree_members(members, src, local, nlocal, src);
    tree_place(t, members, m, tree_index(members, m, am_rank()));
    return SHOAL_OK;
}

void coll_tree_fini(void)
{
    free(members);
    members = NULL;
}

size_t coll_piece(int rank, unsigned nargs)
{
    return am_medium_in_one(rank, nargs);
}

/* ---- messages of a collective this rank has not reached ---------------- */

void coll_stash_keep(struct coll_stash *s, int src, const uint64_t *args, unsigned nargs, const void *data,
                     size_t len)
{
    struct coll_early *e = malloc(sizeof *e + len);
    if (!e)
        util_fatal("out of memory for a %zu-byte early collective message from rank %d", len, src);
    *e = (struct coll_early){.src = src, .nargs = nargs, .len = len};
    memcpy(e->args, args, 8 * (size_t)nargs);
    memcpy(e->data, data, len);
    if (!s->tail)
        s->tail = &s->head;
    *s->tail = e;
    s->tail = &e->next;
}

void coll_stash_route(struct coll_stash *s, uint64_t current, int active, int src, const uint64_t *args,
                      unsigned nargs, const void *data, size_t len,
                      void (*take)(int src, const uint64_t *args, const void *data, size_t len))
{
    if (args[0] < current || (args[0] == current && !active))
        return;
    if (args[0] == current)
        take(src, args, data, len);
    else
        coll_stash_keep(s, src, args, nargs, data, len);
}

void coll_stash_take(struct coll_stash *s, uint64_t epoch,
                     void (*take)(int src, const uint64_t *args, const void *data, size_t len))
{
    s->tail = &s->head;
    for (struct coll_early **p = &s->head; *p;) {
        struct coll_early *e = *p;
        if (e->args[0] != epoch) {
            s->tail = &e->next;
            p = &e->next;
            continue;
        }
        *p = e->next;
        take(e->src, e->args, e->data, e->len);
        free(e);
    }
}

void coll_stash_free(struct coll_stash *s)
{
    while (s->head) {
        struct coll_early *e = s->head;
        s->head = e->next;
        free(e);
    }
    s->tail = &s->head;
}
