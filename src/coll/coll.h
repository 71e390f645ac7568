/* coll layer: collectives over the am layer. */
#ifndef SHOAL_COLL_H
#define SHOAL_COLL_H

#include <stddef.h>
#include <stdint.h>

/* ---- the identity of every collective (seq.c) ---- */
enum coll_kind { COLL_KIND_BARRIER = 1, COLL_KIND_BCAST, COLL_KIND_REDUCE, COLL_KIND_OBARRIER, COLL_KIND_OBCAST };
/* A collective of kind k starts: its number, one more than the last (of
 * any kind); it ends the job if a message already said another rank called
 * another kind as this number. */
uint64_t coll_begin(enum coll_kind k);
void coll_end(void);
/* A message of collective #seq, kind k, from src: ends the job naming both
 * ranks and calls if this rank called another kind as #seq, or is in
 * shoal_finalize and #seq is past its last; else remembers it. */
void coll_check(int src, uint64_t seq, enum coll_kind k);
/* The same for the barrier flags in this rank's shared inbox, which no
 * message announces: waits of the other collectives and shoal_finalize
 * call it. */
void coll_watch(void);
/* shoal_finalize starts: any collective past the last one is a mismatch. */
void coll_finalizing(void);
void coll_seq_fini(void);
/* Who raises this rank's shm barrier flag of round `round`, or -1 (none,
 * or a flag that comes by message). */
int coll_flag_writer(unsigned round);

/* ---- collectives whose messages travel on the am request channels,
 * for the layers above (ordered.c) ---- */
/* A barrier of messages only: the message rank a sends rank b runs after
 * every request a handed am for b before the call (what is queued above am
 * is the caller's to drain first).  With two ranks, a rank leaves only once
 * the other's earlier requests have run here.  Dissemination, ceil(log2 n)
 * rounds; numbered and checked as every collective. */
int coll_barrier_ordered(void);
/* A broadcast whose receivers need not name the root: the root passes its
 * own rank, every other rank -1.  The payload goes down coll's tree as one
 * am_request_large per edge, so any size up to am_large_max() works (a
 * root's larger n: SHOAL_ETOOBIG, nothing sent).  SHOAL_OK; on a receiver whose n is not the root's, SHOAL_EINVAL with
 * *from and *sent (the root and its n) set, buf untouched and nothing
 * forwarded (the caller ends the job naming its own call). */
int coll_bcast_any(void *buf, size_t n, int root, int *from, size_t *sent);
void coll_ordered_init(void);
void coll_ordered_fini(void);

/* GAMMA's K-chain barrier (Ciaccio §5.3) over every rank, flat (no
 * hierarchy of hosts), released by one broadcast where every other rank is
 * on a host of its own and the network broadcasts natively: gamma_sync.
 * k >= 1 (clamped to size - 1).  SHOAL_OK, SHOAL_ENOTINIT, SHOAL_EINVAL,
 * SHOAL_EHANDLER (in a handler). */
int coll_barrier_chain(int k);

/* Registers the collectives' internal handlers (after am_init). */
void coll_init(void);
/* Forgets the job's layout (at finalize). */
void coll_fini(void);
/* shoal_broadcast's handlers and state (bcast.c), from coll_init/coll_fini. */
void coll_bcast_init(void);
void coll_bcast_fini(void);
/* shoal_reduce's (reduce.c). */
void coll_reduce_init(void);
void coll_reduce_fini(void);

/* The job's hosts as the collectives see them: the lowest rank of each
 * host (its leader), in rank order; n of them. */
const int *coll_leaders(int *n);
/* 1 when collectives cross hosts with the network's broadcast: ranks on
 * several hosts, over a carrier where a broadcast is one packet. */
int coll_use_broadcast(void);
/* A collective that takes broadcast packets starts (1) or stops (0)
 * waiting for them (net_bcast_listen), when coll_use_broadcast. */
void coll_listen(int on);

/* ---- the tree of rooted collectives (tree.c) ---- */
#define COLL_MAX_CHILDREN 64
#define COLL_MAX_ARGS 8
/* This rank's place in the spanning tree rooted at root: binomial across
 * hosts among the sources (root, then every other host's leader), then
 * binomial on each host from its source; cross_hosts 0 leaves out the
 * tree among the sources (fed by broadcast packets instead). */
struct coll_tree {
    int parent;                      /* -1: none (the root, or a source fed by packets) */
    int children[COLL_MAX_CHILDREN]; /* farthest first */
    int nchildren;
    int source;                      /* this rank is its host's source */
    int nsources;                    /* hosts */
};
int coll_tree(struct coll_tree *t, int root, int cross_hosts);
/* Frees coll_tree's scratch (coll_fini). */
void coll_tree_fini(void);
/* The largest piece of payload to send rank in one message with nargs
 * arguments: one packet to another host, the medium limit on this one. */
size_t coll_piece(int rank, unsigned nargs);

/* Messages of a numbered collective this rank has not reached yet (their
 * first argument is the number), kept in arrival order. */
struct coll_early {
    struct coll_early *next;
    int src;
    unsigned nargs;
    uint64_t args[COLL_MAX_ARGS];
    size_t len;
    unsigned char data[];
};
struct coll_stash {
    struct coll_early *head, **tail;
};
void coll_stash_keep(struct coll_stash *s, int src, const uint64_t *args, unsigned nargs, const void *data,
                     size_t len);
/* A message of collective args[0] as it arrives: to take if it is the
 * one in progress (current, active), kept if this rank has not reached
 * it, dropped if it is finished here. */
void coll_stash_route(struct coll_stash *s, uint64_t current, int active, int src, const uint64_t *args,
                      unsigned nargs, const void *data, size_t len,
                      void (*take)(int src, const uint64_t *args, const void *data, size_t len));
/* Hands every kept message of collective `epoch` to take, in arrival order. */
void coll_stash_take(struct coll_stash *s, uint64_t epoch,
                     void (*take)(int src, const uint64_t *args, const void *data, size_t len));
void coll_stash_free(struct coll_stash *s);

#endif
