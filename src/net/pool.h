/* net layer: packet buffers kept for reuse.
 *
 * The engines hold large packets for a while (a sent one until it is
 * acknowledged, a received one until the AM layer has run its handler).
 * A fresh 64 KB malloc is often memory glibc just gave back to the kernel,
 * and refaulting its 16 pages for every packet halved the throughput of
 * one-packet messages on loopback.  So freed buffers wait in a pool, up to
 * its capacity, for the next packet; once nobody has taken one for
 * 50 ms (POOL_IDLE_NS) the pool is emptied, so an idle process keeps none. */
#ifndef SHOAL_NET_POOL_H
#define SHOAL_NET_POOL_H

#include <stddef.h>
#include <stdint.h>

struct pkt_pool {
    void **free;     /* cap buffers at most */
    uint32_t nfree, cap;
    size_t size;     /* bytes per buffer, a multiple of 64; buffers are 64-byte aligned */
    int taken;       /* a buffer was taken since the last look */
    uint64_t look;   /* when pool_tick next looks */
};

/* 0, or -1 when out of memory. */
int pool_init(struct pkt_pool *p, uint32_t cap, size_t size);
void pool_fini(struct pkt_pool *p);
/* A buffer of p->size bytes, or NULL when out of memory. */
void *pool_take(struct pkt_pool *p);
void pool_give(struct pkt_pool *p, void *buf);
/* Empties the pool if no buffer was taken since the last look. */
void pool_tick(struct pkt_pool *p, uint64_t now);
/* When pool_tick has something to do (UINT64_MAX: nothing). */
uint64_t pool_deadline(const struct pkt_pool *p);

#endif
