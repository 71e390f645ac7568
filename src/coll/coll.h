/* coll layer: collectives over the am layer. */
#ifndef SHOAL_COLL_H
#define SHOAL_COLL_H

/* Registers the collectives' internal handlers (after am_init). */
void coll_init(void);
/* Forgets the job's layout (at finalize). */
void coll_fini(void);
/* shoal_broadcast's handlers and state (bcast.c), from coll_init/coll_fini. */
void coll_bcast_init(void);
void coll_bcast_fini(void);

/* shoal_barrier; may_broadcast 0 keeps to messages every rank acknowledges:
 * the last barriers before ranks leave (shoal_finalize), where a rank whose
 * broadcast release was lost could find rank 0 gone when it asks. */
int coll_barrier(int may_broadcast);

/* The job's hosts as the collectives see them: the lowest rank of each
 * host (its leader), in rank order; n of them. */
const int *coll_leaders(int *n);
/* 1 when collectives cross hosts with the network's broadcast: ranks on
 * several hosts, over a carrier where a broadcast is one packet. */
int coll_use_broadcast(void);
/* A collective that takes broadcast packets starts (1) or stops (0)
 * waiting for them (net_bcast_listen), when coll_use_broadcast. */
void coll_listen(int on);

#endif
