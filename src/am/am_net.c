/* Active messages over a message transport (transport/transport.h).
 *
 * Each message is one or more DATA payloads on the channel of its class
 * (requests, replies), which the transport delivers reliably and in order
 * per (peer, channel).  Every fragment starts with a 24-byte header; the
 * first also carries the arguments.  A long message's fragments are
 * written straight into the destination segment at their offset, a
 * medium's are gathered in a per-peer buffer (a medium that fits in one
 * packet is handed to its handler in place).  Fragments of two messages
 * never interleave on one channel: a sender queues all of a message's
 * fragments before it can start another of that class (handlers, which
 * run while it waits, only send replies).  Layout: docs/WIRE.md §10. */
#include "am/state.h"
#include "am/hang.h"
#include "boot/boot.h"
#include "shm/shm.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the AM payload layout is little-endian");

/* The header of every fragment (docs/WIRE.md §10). */
struct am_net_hdr {
    uint16_t handler;
    uint8_t nargs;    /* arguments after the header (first fragment only) */
    uint8_t kind;     /* enum am_kind */
    uint32_t seg;     /* long: the destination segment */
    uint32_t total;   /* medium/long: payload bytes of the whole message */
    uint32_t frag_off;/* where this fragment's bytes go in the payload */
    uint64_t offset;  /* long: where the payload goes in the segment */
};
_Static_assert(sizeof(struct am_net_hdr) == 24, "AM fragment header is 24 bytes");
/* The most a first fragment carries before its payload: header, arguments
 * and the padding that aligns a large medium payload. */
#define AM_NET_HEAD_MAX ((sizeof(struct am_net_hdr) + 8 * SHOAL_AM_MAX_ARGS + 63) & ~63ul)

/* A message being gathered from one peer on one channel. */
struct am_rx {
    int busy;
    struct am_net_hdr h;  /* of the first fragment */
    uint32_t next_off;    /* the fragment expected next */
    uint64_t args[SHOAL_AM_MAX_ARGS];
    char *buf;            /* medium payload */
    size_t cap;
};

static struct {
    struct am_rx **rx;       /* [peer * 2 + class], allocated on a peer's first fragmented message */
    size_t max_payload;
    uint64_t bcasts_run;     /* broadcast messages run (outside finalize's count: they may be lost) */
} an;

/* Where a fragment's payload starts.  A large medium payload starts on a
 * 64-byte boundary, as in the shm rings (the engines keep the payloads of
 * packets of 256 bytes or more 64-byte aligned), so the handler sees the
 * same alignment on every transport. */
static size_t am_net_data_at(const struct am_net_hdr *h, int first)
{
    size_t at = sizeof *h + (first ? 8 * (size_t)h->nargs : 0);
    if (first && h->kind == AM_MEDIUM && h->total >= 256)
        at = (at + 63) & ~(size_t)63;
    return at;
}

/* ---- sending ------------------------------------------------------------ */

/* One packet to dest, or to every other rank at once (dest AM_NET_ALL). */
#define AM_NET_ALL (-1)
static int am_net_try(int dest, enum am_class cls, const unsigned char *head, size_t hlen, const void *body,
                      size_t blen)
{
    if (dest == AM_NET_ALL)
        return am.tp->send_all((enum tp_channel)cls, head, hlen, body, blen);
    return am.tp->send(dest, (enum tp_channel)cls, head, hlen, body, blen);
}

static int am_net_push(int dest, enum am_class cls, const unsigned char *head, size_t hlen, const void *body,
                       size_t blen)
{
    struct util_backoff b;
    util_backoff_init(&b);
    int rc = am_net_try(dest, cls, head, hlen, body, blen);
    if (UTIL_LIKELY(rc != SHOAL_EAGAIN))
        return rc;
    hang_push(dest == AM_NET_ALL ? "a broadcast" : "a send", dest, cls, NULL,
              dest == AM_NET_ALL ? NULL : am_describe_credits);
    do {
        if (b.spins == 0)
            am.stats.send_stalls++;
        am_progress_wait(&b, cls == AM_REP);
    } while ((rc = am_net_try(dest, cls, head, hlen, body, blen)) == SHOAL_EAGAIN);
    hang_pop();
    return rc;
}

/* Fragments a message of nbytes takes (the first also carries the header
 * padding and arguments). */
static size_t am_net_fragments(const struct am_net_hdr *h, size_t nbytes)
{
    size_t first = an.max_payload - am_net_data_at(h, 1);
    if (nbytes <= first)
        return 1;
    size_t later = an.max_payload - sizeof *h;
    return 1 + (nbytes - first + later - 1) / later;
}

size_t am_net_medium_in_one(unsigned nargs)
{
    /* laid out as a payload of 256 bytes or more, whose start is aligned:
     * the furthest it can start, so the room holds for every size */
    struct am_net_hdr h = {.nargs = (uint8_t)nargs, .kind = AM_MEDIUM, .total = 256};
    size_t room = an.max_payload - am_net_data_at(&h, 1);
    return room < am.max_medium ? room : am.max_medium;
}

int am_net_send(int dest, enum am_class cls, unsigned handler, unsigned flags, enum am_kind kind,
                const void *src, size_t nbytes, uint32_t seg, uint64_t offset, unsigned nargs,
                const uint64_t *args)
{
    unsigned char head[AM_NET_HEAD_MAX] = {0};
    struct am_net_hdr h = {.handler = (uint16_t)handler, .nargs = (uint8_t)nargs, .kind = (uint8_t)kind,
                           .seg = seg, .total = (uint32_t)nbytes, .offset = offset};
    /* SHOAL_IMMEDIATE is all or nothing: room for every fragment now, or
     * SHOAL_EAGAIN with nothing sent (a caller in a handler never waits) */
    if ((flags & SHOAL_IMMEDIATE || (cls == AM_REQ && am.depth > 0)) &&
        am.tp->room(dest, (enum tp_channel)cls) < am_net_fragments(&h, nbytes))
        return flags & SHOAL_IMMEDIATE ? SHOAL_EAGAIN /* a handler never waits for credits (defer.c) */
                                       : am_defer_add(dest, handler, kind, src, nbytes, seg, offset, nargs, args);
    size_t done = 0;
    am.pinned++; /* another thread's message must not come between the fragments */
    do {
        int first = done == 0;
        size_t at = am_net_data_at(&h, first);
        if (first && nargs)
            memcpy(head + sizeof h, args, 8 * (size_t)nargs);
        size_t chunk = nbytes - done < an.max_payload - at ? nbytes - done : an.max_payload - at;
        h.frag_off = (uint32_t)done;
        memcpy(head, &h, sizeof h);
        int rc = am_net_push(dest, cls, head, at, chunk ? (const char *)src + done : NULL, chunk);
        if (rc) {
            am.pinned--;
            return rc;
        }
        done += chunk;
    } while (done < nbytes);
    am.pinned--;
    if (!(flags & SHOAL_MORE))
        am.tp->flush();
    am_count_sent(cls, kind, nbytes);
    return SHOAL_OK;
}

/* Whether the transport can send one packet every other rank takes: it
 * offers it, and reaches every other rank (none is on shared memory). */
static int am_net_all_remote(void)
{
    if (!am.tp || !am.tp->send_all || !am.remote)
        return 0;
    for (int r = 0; r < am.nranks; r++)
        if (r != am.rank && !am.remote[r])
            return 0;
    return 1;
}

int am_net_send_all(unsigned handler, unsigned flags, enum am_kind kind, const void *src, size_t nbytes,
                    unsigned nargs, const uint64_t *args)
{
    struct am_net_hdr h = {.handler = (uint16_t)handler, .nargs = (uint8_t)nargs, .kind = (uint8_t)kind,
                           .total = (uint32_t)nbytes};
    if (!am_net_all_remote() || am_net_fragments(&h, nbytes) != 1)
        return SHOAL_EINVAL;
    unsigned char head[AM_NET_HEAD_MAX] = {0};
    memcpy(head, &h, sizeof h);
    if (nargs)
        memcpy(head + sizeof h, args, 8 * (size_t)nargs);
    am.pinned++; /* as am_net_send: nothing between this and the previous message's fragments */
    int rc = am_net_push(AM_NET_ALL, AM_REQ, head, am_net_data_at(&h, 1), src, nbytes);
    am.pinned--;
    if (rc)
        return rc;
    if (!(flags & SHOAL_MORE))
        am.tp->flush();
    for (int i = 1; i < am.nranks; i++)
        am_count_sent(AM_REQ, kind, nbytes);
    am.stats.am_bcast_frames++;
    return SHOAL_OK;
}

void am_flush(void)
{
    if (am_extra_now() & AM_EXTRA_BELLS)
        am_progress_ring_owed();
    if (am.tp)
        am.tp->flush();
}

int am_bcast_native(void)
{
    return am.tp && am.tp->bcast_native && am.tp->bcast_native();
}

void am_bcast_listen(int on)
{
    if (am.tp && am.tp->bcast_listen)
        am.tp->bcast_listen(on);
}

void am_transport_stats(struct tp_stats *out)
{
    *out = (struct tp_stats){0};
    if (am.tp)
        am.tp->stats(out);
}

int am_bcast_internal(unsigned handler, unsigned nargs, const uint64_t *args, const void *src, size_t nbytes)
{
    if (nbytes > am_net_medium_in_one(nargs))
        return SHOAL_ETOOBIG;
    unsigned char head[AM_NET_HEAD_MAX] = {0};
    struct am_net_hdr h = {.handler = (uint16_t)handler, .nargs = (uint8_t)nargs,
                           .kind = (uint8_t)(nbytes ? AM_MEDIUM : AM_SHORT), .total = (uint32_t)nbytes};
    memcpy(head, &h, sizeof h);
    if (nargs)
        memcpy(head + sizeof h, args, 8 * (size_t)nargs);
    if (!am_bcast_native())
        return SHOAL_EINVAL; /* callers broadcast this way only where the transport can */
    int rc = am.tp->bcast(head, am_net_data_at(&h, 1), src, nbytes);
    am.tp->flush();
    return rc;
}

/* ---- receiving ---------------------------------------------------------- */

static void am_net_drop(uint32_t peer, const char *why)
{
    if (am.stats.dropped++ == 0)
        LOG(LOG_WARN, "dropped a malformed active message from rank %u: %s (further ones are only counted)",
            peer, why);
}

static struct am_rx *am_rx_of(uint32_t peer, enum am_class cls)
{
    if (!an.rx && !(an.rx = calloc((size_t)am.nranks * 2, sizeof *an.rx)))
        return NULL;
    struct am_rx **slot = &an.rx[peer * 2 + cls];
    if (!*slot)
        *slot = calloc(1, sizeof **slot);
    return *slot;
}

/* Where a long message's bytes go: NULL if outside this rank's segment. */
static char *am_long_target(const struct am_net_hdr *h)
{
    if (h->seg >= AM_MAX_SEGMENTS || !am.segs[h->seg].used)
        return NULL;
    size_t size = am.segs[h->seg].sizes[am.rank];
    if (h->offset > size || h->total > size - h->offset)
        return NULL;
    return (char *)am.segs[h->seg].bases[am.rank] + h->offset;
}

/* Checks one fragment's header against what it carries (long_at: its
 * message's place in the segment, am_long_target's); NULL if fine. */
static const char *am_check_fragment(const struct am_net_hdr *h, size_t len, int first, const char *long_at)
{
    if (h->kind > AM_LONG || h->handler >= AM_MAX_INDEX || h->nargs > SHOAL_AM_MAX_ARGS)
        return "bad kind, handler or argument count";
    size_t at = am_net_data_at(h, first);
    if (len < at)
        return "shorter than its header and arguments";
    if (h->frag_off > h->total || len - at > h->total - h->frag_off)
        return "fragment beyond the message's length";
    if (h->kind == AM_SHORT && h->total)
        return "short message with a payload";
    if (h->kind == AM_MEDIUM && h->total > am.max_medium)
        return "medium payload above the limit";
    if (h->kind == AM_LONG && !long_at)
        return "long payload outside this rank's segment";
    return NULL;
}

/* buf: where the message's payload is (segment, gathered or in place). */
static void am_net_run(uint32_t peer, enum am_class cls, int bcast, const struct am_net_hdr *h,
                       const uint64_t *args, void *buf)
{
    hang_event(HANG_EV_RECEIVED, cls, (int)peer, h->handler, 1);
    am_run_handler((int)peer, cls, h->handler, h->nargs, args, h->kind == AM_SHORT ? NULL : buf, h->total);
    an.bcasts_run += (uint64_t)bcast;
}

static void am_net_fragment(uint32_t peer, enum am_class cls, int bcast, const unsigned char *p, size_t len)
{
    struct am_net_hdr h;
    if (len < sizeof h) {
        am_net_drop(peer, "shorter than a fragment header");
        return;
    }
    memcpy(&h, p, sizeof h);
    struct am_rx *rx = NULL;
    int first = h.frag_off == 0;
    if (!first || len - am_net_data_at(&h, 1) < h.total) { /* part of a longer message */
        if (!(rx = am_rx_of(peer, cls)))
            util_fatal("out of memory for a message from rank %u", peer);
        if (first == rx->busy) {
            am_net_drop(peer, first ? "a message began inside another" : "a fragment with no message");
            rx->busy = 0;
            return;
        }
    }
    char *long_at = h.kind == AM_LONG ? am_long_target(&h) : NULL;
    const char *bad = am_check_fragment(&h, len, first, long_at);
    if (!bad && rx && !first && (h.frag_off != rx->next_off || h.handler != rx->h.handler ||
                                 h.kind != rx->h.kind || h.total != rx->h.total || h.seg != rx->h.seg ||
                                 h.offset != rx->h.offset))
        bad = "a fragment out of its message's order";
    if (bad) {
        if (rx)
            rx->busy = 0;
        am_net_drop(peer, bad);
        return;
    }
    size_t at = am_net_data_at(&h, first);
    size_t n = len - at;
    uint64_t args[SHOAL_AM_MAX_ARGS];
    if (first)
        memcpy(args, p + sizeof h, 8 * (size_t)h.nargs);
    if (!rx) { /* the whole message: a medium's payload is handed over in place */
        if (long_at && n)
            memcpy(long_at, p + at, n);
        am_net_run(peer, cls, bcast, &h, args, long_at ? long_at : (void *)(p + at));
        return;
    }
    if (first) {
        rx->h = h;
        memcpy(rx->args, args, 8 * (size_t)h.nargs);
        if (h.kind == AM_MEDIUM && rx->cap < h.total) {
            free(rx->buf); /* a message abandoned midway (malformed) left it */
            if (!(rx->buf = aligned_alloc(64, (h.total + 63u) & ~63u)))
                util_fatal("out of memory for a %u-byte medium message from rank %u", h.total, peer);
            rx->cap = h.total;
        }
        rx->busy = 1;
    }
    char *dst = long_at ? long_at : rx->buf;
    memcpy(dst + h.frag_off, p + at, n);
    rx->next_off = h.frag_off + (uint32_t)n;
    if (rx->next_off == h.total) {
        rx->busy = 0;
        am_net_run(peer, cls, 0, &rx->h, rx->args, dst); /* a broadcast is one packet */
        /* A gathered medium spans packets, so one allocation per message
         * is cheap; keeping the buffer would make every peer that once
         * sent a large medium cost its size for the rest of the job. */
        free(rx->buf);
        rx->buf = NULL;
        rx->cap = 0;
    }
}

static void am_net_deliver(const struct tp_msg *m)
{
    am_net_fragment(m->peer, m->bcast ? AM_REQ : (enum am_class)m->channel, m->bcast, m->data, m->len);
}

void am_quiet_state(struct am_quiet *q)
{
    am_stats_settle();
    q->sent = am.stats.am_sent[AM_REQ] + am.stats.am_sent[AM_REP];
    q->run = am.stats.am_received[AM_REQ] + am.stats.am_received[AM_REP] - an.bcasts_run;
    q->dropped = am.stats.dropped;
    /* deferred requests count as sent when they leave: until then, unsettled */
    q->unsettled = (am.tp && !am.tp->settled()) || (am_extra_now() & AM_EXTRA_DEFER);
}

/* ---- start-up ----------------------------------------------------------- */

/* SHOAL_NET_WAIT: how long a wait past its spin budget may sleep on the
 * socket (0: it spins).  Peers on shm do not wake the socket, so with any
 * of them a sleep is a short nap; with none, it lasts until a timer. */
#define AM_NAP_NS 50000ull
#define AM_BLOCK_NS 100000000ull
static uint64_t am_net_block_ns(void)
{
    const char *mode = util_config_str(CFG_NET_WAIT);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int here = 0; /* processes on this host, whatever transport they use */
    for (int r = 0; r < am.nranks; r++)
        here += boot_host_of(r) == boot_host_of(am.rank);
    int block = !strcmp(mode, "block") || (!strcmp(mode, "auto") && cores > 0 && here > cores);
    if (!block)
        return 0;
    return am.shm->nlocal > 1 ? AM_NAP_NS : AM_BLOCK_NS;
}

int am_net_init(uint64_t job_id)
{
    const char *transport = util_config_str(CFG_TRANSPORT);
    if (am.shm->nlocal == am.nranks)
        return SHOAL_OK; /* every peer is reached over shm */
    int elsewhere = 0;
    while (am.shm->local_index[elsewhere] >= 0)
        elsewhere++;
    enum util_transport t = (enum util_transport)util_transport_find(transport); /* config checked the name */
    if (t == UTIL_TP_shm) {
        LOG(LOG_ERROR, "rank %d runs on another host (host %d, this is host %d) but SHOAL_TRANSPORT=shm "
            "reaches only this host; use udp or eth", elsewhere, boot_host_of(elsewhere), boot_host_of(am.rank));
        return SHOAL_EINVAL;
    }
    const struct tp_ops *tp = am_transport_ops(t);
    if (!tp) {
        LOG(LOG_ERROR, "SHOAL_TRANSPORT=%s, but this build of shoal has no %s transport (its library was not "
            "found when shoal was built; shoal-info lists what is built in)", transport, transport);
        return SHOAL_EINVAL;
    }
    am.remote = calloc((size_t)am.nranks, 1);
    if (!am.remote)
        return SHOAL_ENOMEM;
    for (int r = 0; r < am.nranks; r++)
        am.remote[r] = am.shm->local_index[r] < 0;
    struct tp_init in = {.rank = am.rank, .nranks = am.nranks, .job_id = job_id, .name = transport,
                         .serves = am.remote, .deliver = am_net_deliver};
    int rc = tp->init(&in);
    if (rc)
        return rc;
    am.tp = tp;
    an.max_payload = tp->max_payload();
    am.net_block_ns = am_net_block_ns();
    return SHOAL_OK;
}

const char *am_describe_job(char *buf, size_t n)
{
    int hosts = 0, most = 0;
    for (int r = 0; r < am.nranks; r++) {
        int h = boot_host_of(r), first = 1, here = 0;
        for (int q = 0; q < am.nranks; q++) {
            first &= !(q < r && boot_host_of(q) == h);
            here += boot_host_of(q) == h;
        }
        hosts += first;
        most = here > most ? here : most;
    }
    size_t at = (size_t)snprintf(buf, n, "%d ranks on %d host%s (up to %d on one)", am.nranks, hosts,
                                 hosts == 1 ? "" : "s", most);
    if (at >= n)
        return buf;
    if (!am.tp) {
        snprintf(buf + at, n - at, "; shm between all of them");
        return buf;
    }
    char what[160];
    const char *tr = util_config_str(CFG_TRANSPORT);
    int local = util_config_int(CFG_NET_LOCAL) != 0;
    snprintf(buf + at, n - at, "; %s over %s (rank 0's end; SHOAL_TRANSPORT=%s%s%s); waits %s",
             local ? "every peer, even on this host," : "shm within a host, between hosts",
             am.tp->describe(what, sizeof what), tr, util_config_is_set(CFG_TRANSPORT) ? "" : ", the default",
             local ? ", and SHOAL_NET_LOCAL=1" : "",
             am.net_block_ns ? "sleep in the kernel (more processes than cores, or SHOAL_NET_WAIT=block)" : "spin");
    return buf;
}

void am_net_fini(void)
{
    if (am.tp)
        am.tp->fini();
    for (int i = 0; an.rx && i < am.nranks * 2; i++) {
        if (an.rx[i])
            free(an.rx[i]->buf);
        free(an.rx[i]);
    }
    free(an.rx);
    memset(&an, 0, sizeof an);
    free(am.remote);
    am.remote = NULL;
    am.tp = NULL;
}
