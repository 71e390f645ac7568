/* The outbox allocator (outbox.h). */
#include "shm/outbox.h"
#include "shoal.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

#define OUTBOX_PENDING UINT64_MAX
/* At most one chunk per this many pool bytes is tracked; more chunks than
 * that count as a full pool (only tiny payloads could get there). */
#define OUTBOX_BYTES_PER_CHUNK 1024u

static void outbox_lock(struct outbox *ob)
{
    util_spin_lock(&ob->lock);
}

static void outbox_unlock(struct outbox *ob)
{
    util_spin_unlock(&ob->lock);
}

int outbox_init(struct outbox *ob, void *base, size_t bytes)
{
    memset(ob, 0, sizeof *ob);
    uint32_t cap = 16;
    while (cap < bytes / OUTBOX_BYTES_PER_CHUNK)
        cap *= 2;
    ob->chunks = calloc(cap, sizeof *ob->chunks);
    if (!ob->chunks)
        return SHOAL_ENOMEM;
    ob->mask = cap - 1;
    ob->base = base;
    ob->bytes = bytes;
    return SHOAL_OK;
}

void outbox_fini(struct outbox *ob)
{
    free(ob->chunks);
    memset(ob, 0, sizeof *ob);
}

/* Gives back, oldest first, the chunks whose descriptors were consumed. */
static void outbox_reclaim(struct outbox *ob)
{
    while (ob->first != ob->next) {
        const struct outbox_chunk *c = &ob->chunks[ob->first & ob->mask];
        if (c->end == OUTBOX_PENDING ||
            (c->head && atomic_load_explicit(c->head, memory_order_acquire) < c->end))
            break; /* acquire: the receiver's reads of the payload are done before we overwrite it */
        ob->freed = c->stop;
        ob->first++;
    }
}

/* A chunk never wraps around the pool's end: the rest of the pass is
 * skipped and counted in it. */
static int outbox_fits(const struct outbox *ob, size_t need)
{
    return ob->next - ob->first <= ob->mask && ob->taken + need - ob->freed <= ob->bytes;
}

int64_t outbox_take(struct outbox *ob, size_t n, size_t *off)
{
    n = util_round_up(n ? n : 1, OUTBOX_ALIGN);
    if (n > ob->bytes / 2) /* would not always fit an empty pool: am's medium limit keeps payloads below */
        return -1;
    outbox_lock(ob);
    size_t pos = (size_t)(ob->taken % ob->bytes);
    size_t need = (pos + n > ob->bytes ? ob->bytes - pos : 0) + n;
    if (!outbox_fits(ob, need)) {
        outbox_reclaim(ob);
        if (!outbox_fits(ob, need)) {
            ob->full_events++;
            outbox_unlock(ob);
            return -1;
        }
    }
    *off = need > n ? 0 : pos;
    ob->taken += need;
    int64_t seq = (int64_t)ob->next++;
    ob->chunks[(uint64_t)seq & ob->mask] = (struct outbox_chunk){.end = OUTBOX_PENDING, .stop = ob->taken};
    outbox_unlock(ob);
    return seq;
}

void outbox_sent(struct outbox *ob, int64_t chunk, const _Atomic uint64_t *head, uint64_t end)
{
    outbox_lock(ob);
    struct outbox_chunk *c = &ob->chunks[(uint64_t)chunk & ob->mask];
    c->head = head;
    c->end = end;
    outbox_unlock(ob);
}

void outbox_cancel(struct outbox *ob, int64_t chunk)
{
    outbox_sent(ob, chunk, NULL, 0);
}
