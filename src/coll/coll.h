/* coll layer: collectives over the am layer. */
#ifndef SHOAL_COLL_H
#define SHOAL_COLL_H

/* Registers the collectives' internal handlers (after am_init). */
void coll_init(void);

#endif
