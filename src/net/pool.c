#include "net/pool.h"

#include <stdlib.h>

#define POOL_IDLE_NS 50000000ull

int pool_init(struct pkt_pool *p, uint32_t cap, size_t size)
{
    *p = (struct pkt_pool){.cap = cap, .size = (size + 63) & ~(size_t)63};
    p->free = calloc(cap ? cap : 1, sizeof *p->free);
    return p->free ? 0 : -1;
}

static void pool_empty(struct pkt_pool *p)
{
    while (p->nfree)
        free(p->free[--p->nfree]);
}

void pool_fini(struct pkt_pool *p)
{
    if (p->free)
        pool_empty(p);
    free(p->free);
    p->free = NULL;
}

void *pool_take(struct pkt_pool *p)
{
    p->taken = 1;
    return p->nfree ? p->free[--p->nfree] : aligned_alloc(64, p->size);
}

void pool_give(struct pkt_pool *p, void *buf)
{
    if (buf && p->nfree < p->cap)
        p->free[p->nfree++] = buf;
    else
        free(buf);
}

void pool_tick(struct pkt_pool *p, uint64_t now)
{
    if (now < p->look)
        return;
    if (!p->taken)
        pool_empty(p);
    p->taken = 0;
    p->look = now + POOL_IDLE_NS;
}

uint64_t pool_deadline(const struct pkt_pool *p)
{
    return p->nfree ? p->look : UINT64_MAX;
}
