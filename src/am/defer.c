/* Requests a handler could not send for want of room (docs/ARCHITECTURE.md,
 * "Deferred requests"): a handler never waits for room, since a wait polls
 * requests and would nest handlers beyond AM_MAX_NEST, or deadlock two
 * ranks whose handlers both send.  The request is copied into a queue per
 * destination and leaves at the next poll outside handlers; while the
 * queue holds anything, every later request to that destination goes
 * behind it, so requests between a pair of ranks stay in order.  Runs
 * under the owner lock, as every locked send does. */
#include "am/state.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct am_deferred {
    struct am_deferred *next;
    unsigned handler, nargs;
    enum am_kind kind;
    uint32_t seg;
    uint64_t offset;
    size_t nbytes;
    uint64_t args[SHOAL_AM_MAX_ARGS];
    unsigned char payload[]; /* nbytes: a copy of the caller's buffer */
};

struct am_defer_queue {
    struct am_deferred *head, *tail;
};

static unsigned am_defer_queued;        /* requests in all queues (AM_EXTRA_DEFER: some) */
static struct am_defer_queue *am_defer_q; /* [nranks], allocated at the first deferral */
static size_t am_defer_bytes;            /* their payloads and headers, bounded by AM_DEFER_MAX_BYTES */
static int am_defer_draining;            /* a drain is sending (its sends must not drain again) */

static void am_defer_count(int delta)
{
    am_defer_queued += (unsigned)delta;
    am_extra_set(AM_EXTRA_DEFER, am_defer_queued != 0);
}

int am_defer_add(int dest, unsigned handler, enum am_kind kind, const void *src, size_t nbytes, uint32_t seg,
                 uint64_t offset, unsigned nargs, const uint64_t *args)
{
    size_t size = sizeof(struct am_deferred) + nbytes;
    if (am_defer_bytes + size > AM_DEFER_MAX_BYTES)
        util_fatal("rank %d: a handler's requests to rank %d found no room and the deferred requests would "
                   "take more than %llu bytes (AM_DEFER_MAX_BYTES, docs/API.md \"Handler rules\"): a handler "
                   "sends more than its peers take; send from outside handlers",
                   am.rank, dest, (unsigned long long)AM_DEFER_MAX_BYTES);
    if (!am_defer_q && !(am_defer_q = calloc((size_t)am.nranks, sizeof *am_defer_q)))
        util_fatal("rank %d: no memory for the deferred request queues", am.rank);
    struct am_deferred *d = malloc(size);
    if (!d)
        util_fatal("rank %d: no memory to defer a request of %zu bytes to rank %d", am.rank, nbytes, dest);
    *d = (struct am_deferred){.handler = handler, .nargs = nargs, .kind = kind, .seg = seg, .offset = offset,
                              .nbytes = nbytes};
    if (nargs)
        memcpy(d->args, args, 8 * (size_t)nargs);
    if (nbytes)
        memcpy(d->payload, src, nbytes);
    struct am_defer_queue *q = &am_defer_q[dest];
    if (q->tail)
        q->tail->next = d;
    else
        q->head = d;
    q->tail = d;
    am_defer_bytes += size;
    am_defer_count(1);
    am.stats.send_stalls++;
    return SHOAL_OK;
}

/* Sends what dest's queue holds while there is room; the number sent. */
static unsigned am_defer_drain_one(int dest)
{
    struct am_defer_queue *q = &am_defer_q[dest];
    unsigned sent = 0;
    am_defer_draining++;
    struct am_deferred *d;
    while ((d = q->head) != NULL && am_send_now(dest, d->handler, SHOAL_IMMEDIATE, d->kind, d->payload,
                                                d->nbytes, d->seg, d->offset, d->nargs, d->args) == SHOAL_OK) {
        q->head = d->next;
        if (!q->head)
            q->tail = NULL;
        am_defer_bytes -= sizeof *d + d->nbytes;
        am_defer_count(-1);
        free(d);
        sent++;
    }
    am_defer_draining--;
    return sent;
}

unsigned am_defer_drain(void)
{
    if (am.depth > 0 || am.pinned > 0 || am_defer_draining)
        return 0; /* a handler, or a message's fragments half sent: the next poll outside them */
    unsigned sent = 0;
    for (int dest = 0; dest < am.nranks; dest++)
        if (am_defer_q[dest].head)
            sent += am_defer_drain_one(dest);
    return sent;
}

int am_defer_first(int dest, unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                   uint32_t seg, uint64_t offset, unsigned nargs, const uint64_t *args)
{
    if (am_defer_draining || !am_defer_q || !am_defer_q[dest].head)
        return AM_SEND_NOW;
    if (am.depth > 0 && !(flags & SHOAL_IMMEDIATE))
        return am_defer_add(dest, handler, kind, src, nbytes, seg, offset, nargs, args);
    if (am.depth == 0 && am.pinned == 0)
        am_defer_drain_one(dest);
    if (!am_defer_q[dest].head)
        return AM_SEND_NOW;
    if (flags & SHOAL_IMMEDIATE)
        return SHOAL_EAGAIN;
    struct util_backoff b;
    util_backoff_init(&b);
    while (am_defer_q[dest].head) { /* the poll drains it */
        am_progress_wait(&b, 0);
        if (am.pinned == 0)
            am_defer_drain_one(dest);
    }
    return AM_SEND_NOW;
}

void am_defer_fini(void)
{
    if (am_defer_q)
        for (int dest = 0; dest < am.nranks; dest++)
            while (am_defer_q[dest].head) {
                struct am_deferred *d = am_defer_q[dest].head;
                am_defer_q[dest].head = d->next;
                free(d);
            }
    free(am_defer_q);
    am_defer_q = NULL;
    am_defer_bytes = 0;
    am_defer_queued = 0;
    am_extra_set(AM_EXTRA_DEFER, 0);
}
