/* Mediums of any size (am.h): a payload above what one message to its
 * destination carries is cut into pieces, each an internal medium to
 * AM_H_LARGE on the message's own channel, so flow control, ordering per
 * channel and the request/reply deadlock argument are those of every
 * medium, on shm and on every message transport alike.  The receiver
 * gathers a sender's pieces per class in one buffer and runs the real
 * handler in the last piece's handler call (its token, its context), so a
 * request handler can reply and nothing nests deeper than a medium does.
 * Layout: docs/WIRE.md §10.6. */
#include "am/state.h"
#include "am/hang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AM_H_LARGE AM_LAYER_BASE(AM_BLOCK_AM)
/* A piece's arguments: [handler | nargs << 16, total, offset], then, in the
 * first piece only, the message's own nargs arguments. */
#define LG_HEAD_ARGS 3u
_Static_assert(AM_LARGE_MAX_ARGS + LG_HEAD_ARGS == SHOAL_AM_MAX_ARGS, "a first piece carries every argument");

/* A message being gathered from one sender on one channel. */
struct lg_rx {
    unsigned char *buf; /* NULL: none in progress */
    uint64_t total, got;
    unsigned handler, nargs;
    uint64_t args[AM_LARGE_MAX_ARGS];
};

static struct {
    size_t max;          /* SHOAL_AM_LARGE_MAX */
    struct lg_rx *rx;    /* [src * 2 + class], allocated at the first piece */
    uint8_t *sending;    /* [dest]: a large request's pieces are partly sent */
} lg;

size_t am_large_max(void)
{
    return lg.max;
}

/* ---- sending ------------------------------------------------------------- */

static int lg_describe_busy(const struct hang_wait *w, char *buf, size_t n)
{
    snprintf(buf, n, "a large request to rank %d waits for another one's pieces to go first", w->peer);
    return w->peer;
}

/* A new large request to dest waits while another is in pieces there (its
 * owner, a handler's queue, sends the rest from the polls). */
static int lg_claim(int dest, unsigned flags)
{
    if (!lg.sending[dest])
        return SHOAL_OK;
    if (flags & SHOAL_IMMEDIATE)
        return SHOAL_EAGAIN;
    struct util_backoff b;
    util_backoff_init(&b);
    hang_push("a large send", dest, 0, NULL, lg_describe_busy);
    while (lg.sending[dest])
        am_progress_wait(&b, 0);
    hang_pop();
    return SHOAL_OK;
}

static int lg_pieces(int dest, enum am_class cls, unsigned handler, unsigned flags, const unsigned char *src,
                     size_t nbytes, unsigned nargs, const uint64_t *args, size_t *done)
{
    size_t piece = am_medium_in_one(dest, LG_HEAD_ARGS + nargs);
    while (*done < nbytes) {
        int first = *done == 0;
        size_t len = nbytes - *done < piece ? nbytes - *done : piece;
        uint64_t a[SHOAL_AM_MAX_ARGS] = {handler | (uint64_t)nargs << 16, nbytes, *done};
        if (first && nargs)
            memcpy(a + LG_HEAD_ARGS, args, 8 * (size_t)nargs);
        /* the pieces leave together; the last one as the caller asked */
        unsigned f = (flags & SHOAL_IMMEDIATE) | (*done + len == nbytes ? flags & SHOAL_MORE : SHOAL_MORE);
        int rc = am_send_medium(dest, cls, AM_H_LARGE, f, src + *done, len, LG_HEAD_ARGS + (first ? nargs : 0), a);
        if (rc) {
            if (*done)
                am_flush(); /* the pieces that went must not wait for the rest */
            return rc;
        }
        *done += len;
    }
    return SHOAL_OK;
}

int am_large_send(int dest, enum am_class cls, unsigned handler, unsigned flags, const void *src, size_t nbytes,
                  unsigned nargs, const uint64_t *args, size_t *done)
{
    if (nargs > AM_LARGE_MAX_ARGS || (nargs && !args) || (nbytes && !src))
        return SHOAL_EINVAL;
    if (nbytes > lg.max)
        return SHOAL_ETOOBIG;
    if (nbytes <= am_medium_in_one(dest, nargs)) { /* one message, straight to the handler */
        int rc = am_send_medium(dest, cls, handler, flags, src, nbytes, nargs, args);
        *done = rc == SHOAL_OK ? nbytes : 0;
        return rc;
    }
    /* Replies come only from the innermost request handler, which nothing
     * interrupts with another reply: only requests can interleave. */
    int rc = cls == AM_REQ && *done == 0 ? lg_claim(dest, flags) : SHOAL_OK;
    if (rc)
        return rc;
    if (cls == AM_REQ)
        lg.sending[dest] = 1;
    rc = lg_pieces(dest, cls, handler, flags, src, nbytes, nargs, args, done);
    if (cls == AM_REQ && (rc == SHOAL_OK || *done == 0))
        lg.sending[dest] = 0;
    return rc;
}

int am_request_large(int dest, unsigned handler, unsigned flags, const void *src, size_t nbytes, unsigned nargs,
                     const uint64_t *args, size_t *done)
{
    if (dest < 0 || dest >= am_size())
        return SHOAL_ERANK;
    return am_large_send(dest, AM_REQ, handler, flags, src, nbytes, nargs, args, done);
}

/* ---- receiving ----------------------------------------------------------- */

static struct lg_rx *lg_rx_of(int src, int reply)
{
    if (!lg.rx && !(lg.rx = calloc((size_t)am_size() * 2, sizeof *lg.rx)))
        util_fatal("out of memory for the large-message table of %d ranks", am_size());
    return &lg.rx[(size_t)src * 2 + (size_t)reply];
}

/* The first piece: checks the header, allocates the whole payload. */
static void lg_begin(struct lg_rx *rx, int src, const uint64_t *args, unsigned nargs)
{
    unsigned handler = (unsigned)(args[0] & 0xffff), hn = (unsigned)(args[0] >> 16 & 0xff);
    if (rx->buf)
        util_fatal("a large message from rank %d began before its previous one (%llu of %llu bytes) ended", src,
                   (unsigned long long)rx->got, (unsigned long long)rx->total);
    if (hn > AM_LARGE_MAX_ARGS || nargs != LG_HEAD_ARGS + hn || handler >= AM_MAX_INDEX)
        util_fatal("malformed first piece of a large message from rank %d", src);
    if (args[1] > lg.max)
        util_fatal("rank %d sent a %llu-byte message, above this rank's SHOAL_AM_LARGE_MAX (%zu)", src,
                   (unsigned long long)args[1], lg.max);
    if (!(rx->buf = aligned_alloc(64, (args[1] + 63) & ~(uint64_t)63)))
        util_fatal("out of memory for a %llu-byte message from rank %d", (unsigned long long)args[1], src);
    rx->total = args[1];
    rx->got = 0;
    rx->handler = handler;
    rx->nargs = hn;
    memcpy(rx->args, args + LG_HEAD_ARGS, 8 * (size_t)hn);
}

static void lg_piece(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    int src = shoal_token_source(tok);
    if (nargs < LG_HEAD_ARGS)
        util_fatal("malformed piece of a large message from rank %d", src);
    struct lg_rx *rx = lg_rx_of(src, am.ctx == AM_CTX_REPLY);
    if (args[2] == 0)
        lg_begin(rx, src, args, nargs);
    else if (!rx->buf || args[2] != rx->got || args[1] != rx->total || nargs != LG_HEAD_ARGS)
        util_fatal("a piece at %llu of a %llu-byte message from rank %d out of order (%llu bytes arrived)",
                   (unsigned long long)args[2], (unsigned long long)args[1], src, (unsigned long long)rx->got);
    if (n > rx->total - rx->got)
        util_fatal("a piece of a large message from rank %d runs past its %llu bytes", src,
                   (unsigned long long)rx->total);
    memcpy(rx->buf + rx->got, buf, n);
    rx->got += n;
    if (rx->got < rx->total)
        return;
    /* the handler may reply, and the reply's wait may run a large reply's
     * last piece: this slot is free before it runs */
    unsigned char *whole = rx->buf;
    uint64_t a[AM_LARGE_MAX_ARGS];
    unsigned handler = rx->handler, hn = rx->nargs;
    size_t total = (size_t)rx->total;
    memcpy(a, rx->args, 8 * (size_t)hn);
    rx->buf = NULL;
    shoal_handler_t fn = am_handlers[handler];
    if (!fn)
        util_fatal("a large message from rank %d names handler %u, which is not registered here", src, handler);
    fn(tok, whole, total, a, hn);
    free(whole);
}

void am_large_init(void)
{
    lg.max = (size_t)util_config_int(CFG_AM_LARGE_MAX);
    if (!(lg.sending = calloc((size_t)am_size(), 1)))
        util_fatal("out of memory for the large-message table of %d ranks", am_size());
    am_register_internal(AM_H_LARGE, lg_piece);
}

void am_large_fini(void)
{
    for (size_t i = 0; lg.rx && i < (size_t)am_size() * 2; i++)
        free(lg.rx[i].buf);
    free(lg.rx);
    free(lg.sending);
    memset(&lg, 0, sizeof lg);
}
