/* shoal/crl.h: the C Region Library interface (K. L. Johnson, MIT/LCS/TR-674,
 * Tables 3-1 and 3-2) over shoal, so CRL programs compile unchanged.
 *
 * Regions are named by rid_t (64 bits: home rank in the upper 32, the home's
 * creation sequence number in the lower 32).  Accesses to a mapped region's
 * data happen between rgn_start_read/rgn_end_read (loads only) or
 * rgn_start_write/rgn_end_write (loads and stores).  Misuse (bad rid,
 * unmapped pointer, a write started inside a read on the same node, an end
 * without a start) aborts the job with a message naming the rank, the
 * region and the call.  docs/CRL.md is the full reference.
 *
 * Null build: compile with -DSHOAL_CRL_NULL and every call becomes a no-op
 * or identity, rgn_create a malloc, so the same source gives the sequential
 * baseline (the thesis's "null" CRL, §4.8) without linking shoal. */
#ifndef SHOAL_CRL_H
#define SHOAL_CRL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t rid_t;

#ifndef SHOAL_CRL_NULL

#include <shoal.h>

/* Starts CRL (and shoal, when shoal_init has not run yet); collective. */
SHOAL_API void crl_init(void);
/* Ends CRL (and shoal, when crl_init started it); collective.  Prints the
 * per-rank counters when SHOAL_CRL_STATS=1. */
SHOAL_API void crl_exit(void);
SHOAL_API unsigned crl_self_addr(void);
SHOAL_API unsigned crl_num_nodes(void);

/* Region functions (Table 3-1). */
SHOAL_API rid_t rgn_create(unsigned size); /* contents start zeroed; not mapped */
/* Frees the region at its home and every copy on every rank.  Any rank
 * may call it, once, when it has the region unmapped and no rank is in an
 * operation on it or starts one later (the program orders them, e.g. by a
 * barrier); other ranks may still have it mapped, and then may only unmap
 * it (their memory is freed then).  Returns when the home has freed it: a
 * later rgn_map of the rid, on any rank, aborts.  The rid is never reused. */
SHOAL_API void rgn_delete(rid_t rid);
/* Same address for every mapping on this rank; a remote region not mapped
 * or cached costs one round trip to its home (no data moves until an
 * operation starts). */
SHOAL_API void *rgn_map(rid_t rid);
/* After the last unmap a remote copy waits in the unmapped region cache
 * (SHOAL_CRL_URC_SIZE) and the pointer must not be used. */
SHOAL_API void rgn_unmap(void *rgn);
SHOAL_API rid_t rgn_rid(void *rgn);
SHOAL_API unsigned rgn_size(void *rgn);
/* Reads nest on a rank and run concurrently on all; a write excludes every
 * other operation on the region everywhere.  A start that misses polls
 * (serving other ranks' requests) until it can proceed. */
SHOAL_API void rgn_start_read(void *rgn);
SHOAL_API void rgn_end_read(void *rgn);
SHOAL_API void rgn_start_write(void *rgn);
SHOAL_API void rgn_end_write(void *rgn);
SHOAL_API void rgn_flush(void *rgn);

/* Global synchronization (Table 3-2); all collective. */
SHOAL_API void rgn_barrier(void);
SHOAL_API void rgn_bcast_send(int nbytes, void *buf);
SHOAL_API void rgn_bcast_recv(int nbytes, void *buf);
SHOAL_API double rgn_reduce_dadd(double x);
SHOAL_API double rgn_reduce_dmin(double x);
SHOAL_API double rgn_reduce_dmax(double x);

#else /* SHOAL_CRL_NULL: one process, no coherence, the sequential baseline */

#include <stdlib.h>
#include <string.h>

/* A null region is a malloc'ed block: its size in the 16 bytes before the
 * data (keeping the data 16-byte aligned); its rid is the data's address. */
static inline rid_t rgn_create(unsigned size)
{
    unsigned char *p = (unsigned char *)calloc(1, 16 + (size_t)size);
    if (!p)
        abort();
    memcpy(p, &size, sizeof size);
    return (rid_t)(uintptr_t)(p + 16);
}
static inline void rgn_delete(rid_t rid) { free((unsigned char *)(uintptr_t)rid - 16); }
static inline void *rgn_map(rid_t rid) { return (void *)(uintptr_t)rid; }
static inline void rgn_unmap(void *rgn) { (void)rgn; }
static inline rid_t rgn_rid(void *rgn) { return (rid_t)(uintptr_t)rgn; }
static inline unsigned rgn_size(void *rgn)
{
    unsigned size;
    memcpy(&size, (unsigned char *)rgn - 16, sizeof size);
    return size;
}
static inline void rgn_start_read(void *rgn) { (void)rgn; }
static inline void rgn_end_read(void *rgn) { (void)rgn; }
static inline void rgn_start_write(void *rgn) { (void)rgn; }
static inline void rgn_end_write(void *rgn) { (void)rgn; }
static inline void rgn_flush(void *rgn) { (void)rgn; }

static inline void crl_init(void) {}
static inline void crl_exit(void) {}
static inline unsigned crl_self_addr(void) { return 0; }
static inline unsigned crl_num_nodes(void) { return 1; }
static inline void rgn_barrier(void) {}
static inline void rgn_bcast_send(int nbytes, void *buf) { (void)nbytes, (void)buf; }
static inline void rgn_bcast_recv(int nbytes, void *buf) { (void)nbytes, (void)buf; }
static inline double rgn_reduce_dadd(double x) { return x; }
static inline double rgn_reduce_dmin(double x) { return x; }
static inline double rgn_reduce_dmax(double x) { return x; }

#endif /* SHOAL_CRL_NULL */

#ifdef __cplusplus
}
#endif

#endif /* SHOAL_CRL_H */
