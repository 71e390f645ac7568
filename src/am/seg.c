/* Segments: memory every local peer maps, addressed as (rank, seg, offset).
 * This is the registration long messages need; the protection model
 * (permissions, keys) extends it in the memory-based communication layer. */
#include "am/state.h"
#include "shm/shm.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int am_seg_create(size_t size, shoal_seg_t *seg)
{
    if (am.rank < 0)
        return SHOAL_ENOTINIT;
    if (am.ctx != AM_CTX_NONE)
        return am_rule_violation("shoal_seg_create");
    if (!seg || size == 0)
        return SHOAL_EINVAL;
    int id = 0;
    while (id < AM_MAX_SEGMENTS && am.segs[id].used)
        id++;
    /* SPMD: every rank allocated the same ids so far, so they agree on id. */
    if (id == AM_MAX_SEGMENTS)
        return SHOAL_ENOMEM;
    /* SIZE_MAX past the top: mem_alloc refuses it, on this rank, inside
     * the collective, so every rank still agrees */
    size_t bytes = util_round_up(size, (size_t)sysconf(_SC_PAGESIZE));
    struct am_segment *s = &am.segs[id];
    s->bases = calloc((size_t)am.nranks, sizeof *s->bases);
    s->sizes = calloc((size_t)am.nranks, sizeof *s->sizes);
    if (!s->bases || !s->sizes)
        util_fatal("out of memory for the table of segment %d", id); /* peers are in the collective */
    /* Handlers run while the descriptors are exchanged (the boot progress
     * hook), so a peer that waits for us meanwhile is served. */
    int rc = mem_exchange_alloc("shoal-seg", bytes, bytes, NULL, 0, am.nranks, s->bases, s->sizes);
    if (rc) {
        free(s->bases);
        free(s->sizes);
        memset(s, 0, sizeof *s);
        return rc;
    }
    s->used = 1;
    *seg = id;
    return SHOAL_OK;
}

static const struct am_segment *seg_lookup(shoal_seg_t seg)
{
    if (am.rank < 0 || seg < 0 || seg >= AM_MAX_SEGMENTS || !am.segs[seg].used)
        return NULL;
    return &am.segs[seg];
}

int shoal_seg_local(shoal_seg_t seg, void **base, size_t *size)
{
    AM_GUARD();
    const struct am_segment *s = seg_lookup(seg);
    if (!s)
        return am.rank < 0 ? SHOAL_ENOTINIT : SHOAL_ESEGMENT;
    if (base)
        *base = s->bases[am.rank];
    if (size)
        *size = s->sizes[am.rank];
    return SHOAL_OK;
}

int shoal_seg_size(shoal_seg_t seg, int rank, size_t *size)
{
    AM_GUARD();
    const struct am_segment *s = seg_lookup(seg);
    if (!s)
        return am.rank < 0 ? SHOAL_ENOTINIT : SHOAL_ESEGMENT;
    if (rank < 0 || rank >= am.nranks)
        return SHOAL_ERANK;
    if (!size)
        return SHOAL_EINVAL;
    *size = s->sizes[rank];
    return SHOAL_OK;
}

void am_seg_fini(void)
{
    for (int id = 0; id < AM_MAX_SEGMENTS; id++) {
        struct am_segment *s = &am.segs[id];
        for (int r = 0; s->used && r < am.nranks; r++)
            munmap(s->bases[r], s->sizes[r]);
        free(s->bases);
        free(s->sizes);
        memset(s, 0, sizeof *s);
    }
}
