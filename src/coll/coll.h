/* coll layer: collectives over the am layer. */
#ifndef SHOAL_COLL_H
#define SHOAL_COLL_H

/* Registers the collectives' internal handlers (after am_init). */
void coll_init(void);
/* Forgets the job's layout (at finalize). */
void coll_fini(void);

/* shoal_barrier; may_broadcast 0 keeps to messages every rank acknowledges:
 * the last barriers before ranks leave (shoal_finalize), where a rank whose
 * broadcast release was lost could find rank 0 gone when it asks. */
int coll_barrier(int may_broadcast);

#endif
