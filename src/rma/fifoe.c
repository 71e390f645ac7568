/* The FIFOe sender helper (Matsumoto's MBCF thesis §4.1: the requestor keeps copies and
 * resends cancelled entries in order).  Entries go out non-blocking and
 * settle in order (one ordered path per target).  After a cancellation
 * nothing new is sent until every entry in flight has settled; then the
 * first unsettled entry goes as RETRY, alone, and once it is stored the
 * rest follow as NORMAL. */
#include "rma/rma.h"

#include <stdlib.h>
#include <string.h>

enum entry_state { QUEUED, INFLIGHT, CANCELLED, STORED };

struct pending {
    shoal_handle_t h;
    enum entry_state state;
    size_t n;
    char *data;
};

struct shoal_fifoe_sender {
    shoal_rmem_t m;
    size_t off;
    uint32_t cap, head, count;
    int retry_inflight; /* the RETRY is out: send nothing else */
    struct pending *q;
    char *store;
};

static struct pending *at(shoal_fifoe_sender_t *s, uint32_t i)
{
    return &s->q[(s->head + i) % s->cap];
}

int shoal_fifoe_sender_create(shoal_rmem_t m, size_t off, uint32_t max_pending, shoal_fifoe_sender_t **out)
{
    AM_GUARD();
    if (!out || max_pending == 0 || max_pending > 65536)
        return SHOAL_EINVAL;
    if (rma.rank < 0)
        return SHOAL_ENOTINIT;
    if (m.rank < 0 || m.rank >= rma.nranks)
        return SHOAL_ERANK;
    shoal_fifoe_sender_t *s = calloc(1, sizeof *s);
    if (!s)
        return SHOAL_ENOMEM;
    s->q = calloc(max_pending, sizeof *s->q);
    s->store = malloc((size_t)max_pending * RMA_MAX_STRUCT_DATA);
    if (!s->q || !s->store) {
        free(s->q);
        free(s->store);
        free(s);
        return SHOAL_ENOMEM;
    }
    for (uint32_t i = 0; i < max_pending; i++)
        s->q[i].data = s->store + (size_t)i * RMA_MAX_STRUCT_DATA;
    s->m = m;
    s->off = off;
    s->cap = max_pending;
    *out = s;
    return SHOAL_OK;
}

static int issue(shoal_fifoe_sender_t *s, struct pending *p, unsigned flags)
{
    p->state = INFLIGHT;
    int rc = shoal_fifo_enqueue(s->m, s->off, p->data, p->n, flags, &p->h);
    if (rc)
        p->state = QUEUED;
    return rc;
}

/* Settles finished entries; a hard error (not a cancellation) is returned
 * and its entry kept.  Stored entries leave from the front. */
static int settle(shoal_fifoe_sender_t *s, int *inflight, int *cancelled)
{
    *inflight = *cancelled = 0;
    for (uint32_t i = 0; i < s->count; i++) {
        struct pending *p = at(s, i);
        if (p->state == INFLIGHT) {
            int rc = shoal_test(&p->h);
            if (rc == SHOAL_EAGAIN)
                (*inflight)++;
            else if (rc == SHOAL_EFULL || rc == SHOAL_ESTOPPED)
                p->state = CANCELLED;
            else if (rc == SHOAL_OK)
                p->state = STORED;
            else {
                p->state = QUEUED;
                return rc;
            }
        }
        *cancelled += p->state == CANCELLED;
    }
    while (s->count && at(s, 0)->state == STORED) {
        s->head = (s->head + 1) % s->cap;
        s->count--;
    }
    return SHOAL_OK;
}

/* Sends entries [from, count) that are queued, with flags for the first. */
static int send_queued(shoal_fifoe_sender_t *s, unsigned first_flags, int only_first)
{
    for (uint32_t i = 0; i < s->count; i++) {
        struct pending *p = at(s, i);
        if (p->state != QUEUED)
            continue;
        int rc = issue(s, p, first_flags);
        if (rc)
            return rc;
        if (only_first)
            break;
        first_flags = 0;
    }
    return SHOAL_OK;
}

int shoal_fifoe_progress(shoal_fifoe_sender_t *s)
{
    AM_GUARD();
    if (!s)
        return SHOAL_EINVAL;
    int inflight, cancelled;
    int rc = settle(s, &inflight, &cancelled);
    if (rc)
        return rc;
    if (inflight && (cancelled || s->retry_inflight))
        return (int)s->count; /* wait until everything out has settled */
    s->retry_inflight = 0;
    if (cancelled) {
        for (uint32_t i = 0; i < s->count; i++)
            if (at(s, i)->state == CANCELLED)
                at(s, i)->state = QUEUED;
        s->retry_inflight = 1;
        rc = send_queued(s, SHOAL_FIFO_RETRY, 1);
    } else
        rc = send_queued(s, 0, 0);
    if (rc && rc != SHOAL_EAGAIN)
        return rc;
    rc = settle(s, &inflight, &cancelled);
    return rc ? rc : (int)s->count;
}

int shoal_fifoe_send(shoal_fifoe_sender_t *s, const void *data, size_t n)
{
    AM_GUARD();
    if (!s || (n && !data))
        return SHOAL_EINVAL;
    if (n > RMA_MAX_STRUCT_DATA)
        return SHOAL_ETOOBIG;
    if (s->count == s->cap) {
        int rc = shoal_fifoe_progress(s);
        if (rc < 0)
            return rc;
        if (s->count == s->cap)
            return SHOAL_EAGAIN;
    }
    struct pending *p = at(s, s->count++);
    p->state = QUEUED;
    p->n = n;
    memcpy(p->data, data, n);
    int rc = shoal_fifoe_progress(s);
    return rc < 0 ? rc : SHOAL_OK;
}

int shoal_fifoe_flush(shoal_fifoe_sender_t *s, double timeout_s)
{
    AM_GUARD();
    if (!s)
        return SHOAL_EINVAL;
    uint64_t deadline = util_now_ns() + (uint64_t)(timeout_s * 1e9);
    struct util_backoff b;
    util_backoff_init(&b);
    for (;;) {
        int rc = shoal_fifoe_progress(s);
        if (rc <= 0)
            return rc;
        if (util_now_ns() > deadline)
            return SHOAL_ETIMEDOUT;
        int prc = am_blocking_allowed("shoal_fifoe_flush");
        if (prc)
            return prc;
        am_progress_wait(&b, 0);
    }
}

int shoal_fifoe_sender_destroy(shoal_fifoe_sender_t *s)
{
    AM_GUARD();
    if (!s)
        return SHOAL_EINVAL;
    for (uint32_t i = 0; i < s->count; i++)
        if (at(s, i)->state == INFLIGHT)
            return SHOAL_EAGAIN; /* its handle is still the target's to complete */
    free(s->q);
    free(s->store);
    free(s);
    return SHOAL_OK;
}
