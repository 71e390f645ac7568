/* dsm layer glue: the protocol engine (proto.h) over active messages, the
 * region calls of shoal/crl.h, the unmapped region cache and the global
 * operations.  Internal to libshoal. */
#ifndef SHOAL_DSM_H
#define SHOAL_DSM_H

#include <stddef.h>
#include <stdint.h>

#include "am/am.h"
#include "dsm/observe.h"
#include "dsm/proto.h"
#include "util/util.h"

/* Internal AM handlers: dsm's block (am.h). */
#define DSM_H_PROTO (AM_LAYER_BASE(AM_BLOCK_DSM) + 0) /* a protocol or mapping message */
#define DSM_H_WAKE (AM_LAYER_BASE(AM_BLOCK_DSM) + 1)  /* to self: drain the outbox from any poll */

#define DSM_WIRE_ARGS 3

/* A message the rings had no room for (or for only some of its pieces),
 * kept with a copy of its payload until later progress calls send the
 * rest; order per sender is kept. */
struct dsm_outgoing {
    struct dsm_outgoing *next;
    uint32_t dst, handler;
    uint64_t args[DSM_WIRE_ARGS];
    size_t len, done; /* done: bytes already sent */
    unsigned char data[];
};

struct dsm_glue {
    int initialized;
    int started_shoal; /* crl_init ran shoal_init, so crl_exit finalizes */
    int closed;        /* crl_exit has begun: late messages are dropped */
    struct dsm_node node;
    struct dsm_outgoing *out_head, *out_tail;
    int wake_armed; /* a DSM_H_WAKE to self is on its way */
    /* unmapped region cache (§4.5) */
    struct dsm_region **urc;
    uint32_t urc_size, urc_count, urc_scan;
    /* global operations */
    uint32_t starts_since_poll;
    /* SHOAL_CRL_STATS=1 */
    int timing;
    uint64_t ns_ops, ns_map;
    uint64_t t_start;
};

extern struct dsm_glue dsm;

/* Transport (wire.c). */
void dsm_wire_init(void);
void dsm_wire_fini(void);
/* Sends a message of any size now when the rings have room, else queues
 * it, or what am could not send of it (never blocks, so handlers may call
 * it).  flags SHOAL_MORE: more sends follow at once (over the network it
 * waits for them, or for the next poll). */
void dsm_wire_send(uint32_t dst, uint32_t handler, const uint64_t *args, const void *data, size_t len,
                   unsigned flags);
/* The engine's send callback. */
void dsm_wire_send_msg(struct dsm_node *node, const struct dsm_msg *m);
/* One step of a wait: sends what the outbox holds, runs arrived handlers,
 * backs off while nothing arrives. */
void dsm_progress(struct util_backoff *b);
/* Sends the queued messages that fit now. */
void dsm_wire_drain(void);
static inline void dsm_flush_outbox(void)
{
    if (UTIL_UNLIKELY(dsm.out_head != NULL))
        dsm_wire_drain();
}

/* Aborts a call that needs crl_init when it has not run. */
static inline void dsm_check_init(const char *call)
{
    if (UTIL_UNLIKELY(!dsm.initialized))
        shoal_abort(1, "crl: %s before crl_init", call);
}

/* Global operations (coll.c). */
void dsm_barrier(void);

#endif
