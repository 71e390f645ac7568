/* dsm messages over active messages.  Every dsm message is a request of
 * three argument words and a payload of any size, which am cuts into
 * pieces where it exceeds one message (am_request_large):
 *   proto: [rid, type | version << 32, aux]
 *   wake:  [0, 0, 0], to ourselves
 * The barrier and the broadcast are coll's (coll_barrier_ordered,
 * coll_bcast_any), on the same request channels.  Handlers must not block,
 * and the protocol's handlers send to ranks other than the requester
 * (invalidations, grants from a continuation), so nothing here waits for
 * ring space: a send that finds no room, or room for only some of a large
 * message's pieces, goes to an outbox, in order, which every progress call,
 * every later handler and a wake-up message to ourselves drain.
 * docs/CRL.md "Message format". */
#include "dsm/dsm.h"

#include <stdlib.h>
#include <string.h>

struct dsm_glue dsm;

/* 1 when the message is all sent; *done counts what went. */
static int try_send(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len,
                    unsigned flags, size_t *done)
{
    int rc = am_request_large((int)dst, handler, SHOAL_IMMEDIATE | flags, data, len, DSM_WIRE_ARGS, args, done);
    if (rc != SHOAL_OK && rc != SHOAL_EAGAIN)
        shoal_abort(1, "crl: sending %zu bytes to rank %u failed: %s", len, dst, shoal_strerror(rc));
    return rc == SHOAL_OK;
}

/* While the outbox holds messages, a message to ourselves stays in flight:
 * its handler drains the outbox and re-arms, so any poll — shoal_poll in
 * the program's own loop too, not only CRL's calls — sends what waits. */
static void arm_wake(void)
{
    static const uint64_t none[DSM_WIRE_ARGS];
    size_t done = 0;
    if (!dsm.wake_armed && try_send(dsm.node.rank, DSM_H_WAKE, none, NULL, 0, 0, &done))
        dsm.wake_armed = 1;
}

/* done: bytes of a large message already sent (the rest goes first). */
static void enqueue(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len,
                    size_t done)
{
    struct dsm_outgoing *o = malloc(sizeof *o + len);
    if (!o)
        shoal_abort(1, "crl: out of memory queueing a %zu-byte message for rank %u", len, dst);
    o->next = NULL;
    o->dst = dst;
    o->handler = handler;
    memcpy(o->args, args, sizeof o->args);
    o->len = len;
    o->done = done;
    if (len)
        memcpy(o->data, data, len);
    if (dsm.out_tail)
        dsm.out_tail->next = o;
    else
        dsm.out_head = o;
    dsm.out_tail = o;
    arm_wake();
}

void dsm_wire_drain(void)
{
    struct dsm_outgoing *o;
    while ((o = dsm.out_head) && try_send(o->dst, o->handler, o->args, o->data, o->len, 0, &o->done)) {
        dsm.out_head = o->next;
        if (!dsm.out_head)
            dsm.out_tail = NULL;
        free(o);
    }
}

void dsm_wire_send(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len,
                   unsigned flags)
{
    size_t done = 0;
    if (dsm.out_head || !try_send(dst, handler, args, data, len, flags, &done))
        enqueue(dst, handler, args, data, len, done);
}

void dsm_wire_send_msg(struct dsm_node *node, const struct dsm_msg *m)
{
    (void)node;
    uint64_t args[DSM_WIRE_ARGS] = {m->rid, (uint64_t)m->type | (uint64_t)m->version << 32,
                                    m->aux | (uint64_t)m->from << 32};
    dsm_wire_send(m->dst, DSM_H_PROTO, args, m->data, m->len, m->more ? SHOAL_MORE : 0);
}

void dsm_progress(struct util_backoff *b)
{
    dsm_wire_drain();
    am_progress_wait(b, 0);
}

/* ---- receive side --------------------------------------------------------- */

static void on_proto(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    if (dsm.closed) /* crl_exit has run: nothing is left to keep coherent */
        return;
    uint32_t src = (uint32_t)shoal_token_source(tok);
    unsigned type = nargs == DSM_WIRE_ARGS ? (unsigned)(args[1] & 0xff) : DSM_MSG_TYPE_COUNT;
    if (type >= DSM_MSG_TYPE_COUNT)
        shoal_abort(1, "crl: malformed protocol message from rank %u", src);
    struct dsm_msg m = {.type = (enum dsm_msg_type)type, .src = src, .dst = dsm.node.rank, .rid = args[0],
                        .version = (uint32_t)(args[1] >> 32), .aux = (uint32_t)args[2],
                        .from = (uint32_t)(args[2] >> 32), .data = buf,
                        .len = (uint32_t)n};
    dsm_deliver(&dsm.node, &m);
    dsm_flush_outbox();
}

static void on_wake(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)tok, (void)buf, (void)n, (void)args, (void)nargs;
    dsm.wake_armed = 0;
    if (dsm.closed)
        return;
    dsm_wire_drain();
    if (dsm.out_head)
        arm_wake();
}

void dsm_wire_init(void)
{
    am_register_internal(DSM_H_PROTO, on_proto);
    am_register_internal(DSM_H_WAKE, on_wake);
}

void dsm_wire_fini(void)
{
    while (dsm.out_head) {
        struct dsm_outgoing *o = dsm.out_head;
        dsm.out_head = o->next;
        free(o);
    }
    dsm.out_tail = NULL;
}
