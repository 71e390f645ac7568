/* dsm messages over active messages.  Every dsm message is a medium
 * request of four argument words and a payload:
 *   proto: [rid, type | version << 32, aux, prefix]
 *   coll:  [kind | root << 8, seq, 0, prefix]   (kind 0: barrier, 1: broadcast)
 *   frag:  [offset, total, 0, 0]
 *   wake:  [0, 0, 0, 0], to ourselves
 * prefix is how many leading payload bytes went ahead in frag messages
 * (payloads above the medium limit).  Handlers must not block, and the
 * protocol's handlers send to ranks other than the requester (invalidations,
 * grants from a continuation), so nothing here waits for ring space: a send
 * that finds no room goes to an outbox, in order, which every progress call,
 * every later handler and a wake-up message to ourselves drain.
 * docs/CRL.md "Message format". */
#include "dsm/dsm.h"

#include <stdlib.h>
#include <string.h>

struct dsm_glue dsm;

static int try_send(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len,
                    unsigned flags)
{
    int rc = am_request_internal((int)dst, handler, SHOAL_IMMEDIATE | flags, data, len, DSM_WIRE_ARGS, args);
    if (rc != SHOAL_OK && rc != SHOAL_EAGAIN)
        shoal_abort(1, "crl: sending to rank %u failed: %s", dst, shoal_strerror(rc));
    return rc == SHOAL_OK;
}

/* While the outbox holds messages, a message to ourselves stays in flight:
 * its handler drains the outbox and re-arms, so any poll — shoal_poll in
 * the program's own loop too, not only CRL's calls — sends what waits. */
static void arm_wake(void)
{
    static const uint64_t none[DSM_WIRE_ARGS];
    if (!dsm.wake_armed && try_send(dsm.node.rank, DSM_H_WAKE, none, NULL, 0, 0))
        dsm.wake_armed = 1;
}

static void enqueue(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len)
{
    struct dsm_outgoing *o = malloc(sizeof *o + len);
    if (!o)
        shoal_abort(1, "crl: out of memory queueing a %zu-byte message for rank %u", len, dst);
    o->next = NULL;
    o->dst = dst;
    o->handler = handler;
    memcpy(o->args, args, sizeof o->args);
    o->len = len;
    if (len)
        memcpy(o->data, data, len);
    if (dsm.out_tail)
        dsm.out_tail->next = o;
    else
        dsm.out_head = o;
    dsm.out_tail = o;
    arm_wake();
}

static void send_piece(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len,
                       unsigned flags)
{
    if (dsm.out_head || !try_send(dst, handler, args, data, len, flags))
        enqueue(dst, handler, args, data, len);
}

void dsm_wire_drain(void)
{
    struct dsm_outgoing *o;
    while ((o = dsm.out_head) && try_send(o->dst, o->handler, o->args, o->data, o->len, 0)) {
        dsm.out_head = o->next;
        if (!dsm.out_head)
            dsm.out_tail = NULL;
        free(o);
    }
}

void dsm_wire_send(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len,
                   unsigned flags)
{
    const unsigned char *p = data;
    size_t done = 0;
    while (len - done > dsm.chunk) {
        uint64_t frag[DSM_WIRE_ARGS] = {done, len, 0, 0};
        send_piece(dst, DSM_H_FRAG, frag, p + done, dsm.chunk, SHOAL_MORE);
        done += dsm.chunk;
    }
    uint64_t last[DSM_WIRE_ARGS] = {args[0], args[1], args[2], done};
    send_piece(dst, handler, last, len ? p + done : NULL, len - done, flags);
}

void dsm_wire_send_msg(struct dsm_node *node, const struct dsm_msg *m)
{
    (void)node;
    uint64_t args[DSM_WIRE_ARGS] = {m->rid, (uint64_t)m->type | (uint64_t)m->version << 32, m->aux, 0};
    dsm_wire_send(m->dst, DSM_H_PROTO, args, m->data, m->len, m->more ? SHOAL_MORE : 0);
}

void dsm_progress(struct util_backoff *b)
{
    dsm_wire_drain();
    am_progress_wait(b, 0);
}

/* ---- receive side --------------------------------------------------------- */

static struct dsm_reassembly *reassembly_of(uint32_t src)
{
    if (src >= dsm.node.nranks)
        shoal_abort(1, "crl: message from unknown rank %u", src);
    return &dsm.reasm[src];
}

static void reassembly_append(struct dsm_reassembly *ra, const void *buf, size_t n, size_t total)
{
    if (total > ra->cap) {
        unsigned char *nb = realloc(ra->buf, total);
        if (!nb)
            shoal_abort(1, "crl: out of memory reassembling a %zu-byte message", total);
        ra->buf = nb;
        ra->cap = total;
    }
    memcpy(ra->buf + ra->len, buf, n);
    ra->len += n;
}

static void on_frag(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    if (dsm.closed)
        return;
    struct dsm_reassembly *ra = reassembly_of((uint32_t)shoal_token_source(tok));
    if (nargs != DSM_WIRE_ARGS || args[0] != ra->len || args[0] + n > args[1])
        shoal_abort(1, "crl: fragment at %llu of a %llu-byte message out of order (have %zu bytes)",
                    (unsigned long long)args[0], (unsigned long long)args[1], ra->len);
    reassembly_append(ra, buf, n, (size_t)args[1]);
}

/* The whole payload of a message whose last piece is (buf, n). */
static const void *reassemble(uint32_t src, uint64_t prefix, const void *buf, size_t n, size_t *total)
{
    *total = n;
    if (prefix == 0)
        return buf;
    struct dsm_reassembly *ra = reassembly_of(src);
    if (ra->len != prefix)
        shoal_abort(1, "crl: message from rank %u expects %llu leading bytes, %zu arrived", src,
                    (unsigned long long)prefix, ra->len);
    reassembly_append(ra, buf, n, (size_t)prefix + n);
    *total = ra->len;
    ra->len = 0; /* the buffer is read before the next message can arrive */
    return ra->buf;
}

static void on_proto(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    if (dsm.closed) /* crl_exit has run: nothing is left to keep coherent */
        return;
    uint32_t src = (uint32_t)shoal_token_source(tok);
    unsigned type = nargs == DSM_WIRE_ARGS ? (unsigned)(args[1] & 0xff) : DSM_MSG_TYPE_COUNT;
    if (type >= DSM_MSG_TYPE_COUNT)
        shoal_abort(1, "crl: malformed protocol message from rank %u", src);
    size_t len;
    const void *data = reassemble(src, args[3], buf, n, &len);
    struct dsm_msg m = {.type = (enum dsm_msg_type)type, .src = src, .dst = dsm.node.rank, .rid = args[0],
                        .version = (uint32_t)(args[1] >> 32), .aux = (uint32_t)args[2], .data = data,
                        .len = (uint32_t)len};
    dsm_deliver(&dsm.node, &m);
    dsm_flush_outbox();
}

static void on_coll(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    if (dsm.closed)
        return;
    uint32_t src = (uint32_t)shoal_token_source(tok);
    if (nargs != DSM_WIRE_ARGS)
        shoal_abort(1, "crl: malformed collective message from rank %u", src);
    size_t len;
    const void *data = reassemble(src, args[3], buf, n, &len);
    dsm_coll_arrived(src, args, data, len);
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
    dsm.chunk = shoal_am_max_medium();
    dsm.reasm = calloc(dsm.node.nranks, sizeof *dsm.reasm);
    if (!dsm.reasm)
        shoal_abort(1, "crl: out of memory");
    am_register_internal(DSM_H_PROTO, on_proto);
    am_register_internal(DSM_H_FRAG, on_frag);
    am_register_internal(DSM_H_COLL, on_coll);
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
    for (uint32_t i = 0; dsm.reasm && i < dsm.node.nranks; i++)
        free(dsm.reasm[i].buf);
    free(dsm.reasm);
    dsm.reasm = NULL;
}
