/* CM-5 Active Messages (von Eicken's thesis §4.3.3) on am: CMAM_4 and its
 * reply are one medium message of five words without payload to an
 * internal handler, which checks the handler reference (image.c) and calls
 * the user's function with the four words; xfers are mediums to a
 * hard-wired handler that stores into a segment and counts bytes.  Every
 * decision is in docs/CMAM.md. */
#include "cmam/cmam_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "am/am.h"
#include "util/util.h"

#define CMAM_H(h) (AM_LAYER_BASE(AM_BLOCK_CMAM) + (h))
_Static_assert(CMAM_HANDLERS <= AM_LAYER_HANDLERS, "cmam's handlers fit its block");

#define CMAM_SEGMENTS 256
#define CMAM_OFFSET_BITS 24
#define CMAM_OFFSET_MASK ((1u << CMAM_OFFSET_BITS) - 1)
#define CMAM_MAX_COUNT (1 << CMAM_OFFSET_BITS)
#define CMAM_LOG_DROPS 8 /* log lines per reason; the counters go on */

struct cmam_segment {
    char *base;
    int remaining; /* bytes still expected */
    int extent;    /* writes stay inside [0, extent) */
    CMAM_eot_fun eot;
    int info;
    unsigned char open, ever; /* ever: opened once, so "closed" rather than "never opened" */
};

static struct cmam_segment segs[CMAM_SEGMENTS];
static struct CMAM_drop_counts drops;
static shoal_token_t cur_request; /* the innermost CMAM request handler's message, NULL outside */

/* ---- handler references ----------------------------------------------------- */

/* Sender side: the last references made, by address (a send costs one
 * compare once its handler has been seen). */
#define CMAM_REF_CACHE 64
static struct {
    CMAM_fun fn;
    uint64_t ref;
} ref_cache[CMAM_REF_CACHE];

static uint64_t cmam_ref(const char *call, CMAM_fun fn)
{
    unsigned slot = (unsigned)(((uintptr_t)fn >> 4) % CMAM_REF_CACHE);
    if (UTIL_LIKELY(ref_cache[slot].fn == fn && fn))
        return ref_cache[slot].ref;
    uint64_t ref = cmam_image_ref(fn);
    if (ref == CMAM_REF_NONE)
        util_fatal("%s: handler %p is not a function in an executable segment of this program or a library "
                   "it loaded",
                   call, (void *)(uintptr_t)fn);
    ref_cache[slot].fn = fn;
    ref_cache[slot].ref = ref;
    return ref;
}

/* Receiver side: references already checked, direct-mapped. */
#define CMAM_RESOLVED 256
static struct {
    uint64_t ref;
    CMAM_fun fn;
} resolved[CMAM_RESOLVED];

static void cmam_drop(unsigned long *counter, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cmam_drop(unsigned long *counter, const char *fmt, ...)
{
    if (++*counter <= CMAM_LOG_DROPS) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        LOG(LOG_ERROR, "cmam: dropped %s%s", msg,
            *counter == CMAM_LOG_DROPS ? " (further drops of this kind are only counted: CMAM_drops)" : "");
    }
}

static CMAM_fun cmam_resolve(uint64_t ref, shoal_token_t tok)
{
    unsigned slot = (unsigned)((ref ^ ref >> 13) % CMAM_RESOLVED);
    if (UTIL_LIKELY(resolved[slot].ref == ref && resolved[slot].fn))
        return resolved[slot].fn;
    const char *why = "";
    CMAM_fun fn = cmam_image_resolve(ref, &why);
    if (!fn) {
        cmam_drop(&drops.forged, "a message from rank %d naming handler image %u offset 0x%llx: %s",
                  shoal_token_source(tok),
                  (unsigned)(ref >> CMAM_REF_IMAGE_SHIFT),
                  (unsigned long long)(ref & CMAM_REF_OFFSET_MASK), why);
        return NULL;
    }
    resolved[slot].ref = ref;
    resolved[slot].fn = fn;
    return fn;
}

/* ---- the CMAM_4 message ----------------------------------------------------- */

/* Calls fn with the words where the ABI puts parameters of their types: on
 * x86-64 and AArch64 integer-class and floating-point parameters take
 * their own registers in order, so passing the integer words as the first
 * four integer arguments and the floating ones as the first four
 * floating-point arguments reaches any handler of up to four words in any
 * mix (a float in the low half of its register).  Elsewhere words are
 * integers only (docs/CMAM.md §2). */
typedef void (*cmam_call_t)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, double, double, double, double);

typedef void (*cmam_call_int_t)(uintptr_t, uintptr_t, uintptr_t, uintptr_t);

static void cmam_call(CMAM_fun fn, unsigned kinds, const uint64_t *w)
{
    if (UTIL_LIKELY(kinds == 0)) { /* integers and pointers only: the usual case */
        ((cmam_call_int_t)fn)((uintptr_t)w[0], (uintptr_t)w[1], (uintptr_t)w[2], (uintptr_t)w[3]);
        return;
    }
    uintptr_t iw[4] = {0, 0, 0, 0};
    double fw[4] = {0, 0, 0, 0};
    unsigned ni = 0, nf = 0;
    for (unsigned i = 0; i < 4; i++) {
        unsigned k = kinds >> (2 * i) & 3u;
        if (k == CMAM_KIND_INT) {
            iw[ni++] = (uintptr_t)w[i];
        } else { /* the bits as given: a float's in the low 32 bits */
            uint64_t bits = w[i];
            memcpy(&fw[nf++], &bits, sizeof bits);
        }
    }
    ((cmam_call_t)fn)(iw[0], iw[1], iw[2], iw[3], fw[0], fw[1], fw[2], fw[3]);
}

/* Runs the handler a message names, with the request it may reply to
 * (NULL in a reply handler, which may not reply). */
static void cmam_run(shoal_token_t tok, const uint64_t *args, shoal_token_t replies_to)
{
    CMAM_fun fn = cmam_resolve(args[0] & ~(UINT64_C(0xff) << CMAM_REF_KINDS_SHIFT), tok);
    if (!fn)
        return;
    shoal_token_t outer = cur_request;
    cur_request = replies_to;
    cmam_call(fn, (unsigned)(args[0] >> CMAM_REF_KINDS_SHIFT) & 0xffu, args + 1);
    cur_request = outer;
}

static void cmam_h_request(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n, (void)nargs;
    cmam_run(tok, args, tok);
}

static void cmam_h_reply(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n, (void)nargs;
    cmam_run(tok, args, NULL);
}

static void cmam_check_node(const char *call, int node)
{
    if (node < 0 || node >= am_size())
        util_fatal("%s: node %d is not a rank of this job (0..%d)", call, node, am_size() - 1);
}

/* Requests come from the computation only (handlers may only reply). */
static void cmam_check_request(const char *call, int node)
{
    if (am_in_handler())
        util_fatal("%s called from a handler: handlers may only reply (CMAM_reply_4, CMAM_reply_xfer)", call);
    cmam_check_node(call, node);
}

/* Replies come from a CMAM request handler, to its requester. */
static shoal_token_t cmam_check_reply(const char *call, int node)
{
    if (!cur_request)
        util_fatal("%s called outside a CMAM request handler: only a request handler may reply", call);
    int src = shoal_token_source(cur_request);
    if (node != src)
        util_fatal("%s: node %d is not the requester (rank %d): a reply goes to the rank whose request is "
                   "running",
                   call, node, src);
    return cur_request;
}

static void cmam_sent(const char *call, int rc)
{
    if (rc != SHOAL_OK)
        util_fatal("%s failed: %s%s", call, shoal_strerror(rc),
                   rc == SHOAL_EHANDLER ? " (a request handler replies once)" : "");
}

void cmam_4_(int node, CMAM_fun fun, unsigned kinds, uintptr_t w1, uintptr_t w2, uintptr_t w3, uintptr_t w4)
{
    AM_GUARD();
    cmam_check_request("CMAM_4", node);
    uint64_t args[5] = {cmam_ref("CMAM_4", fun) | (uint64_t)(kinds & 0xffu) << CMAM_REF_KINDS_SHIFT, w1, w2, w3,
                        w4};
    cmam_sent("CMAM_4", am_request_internal(node, CMAM_H(CMAM_H_REQUEST), 0, NULL, 0, 5, args));
    am_poll(0);
}

void cmam_reply_4_(int node, CMAM_fun fun, unsigned kinds, uintptr_t w1, uintptr_t w2, uintptr_t w3,
                   uintptr_t w4)
{
    AM_GUARD();
    shoal_token_t tok = cmam_check_reply("CMAM_reply_4", node);
    uint64_t args[5] = {cmam_ref("CMAM_reply_4", fun) | (uint64_t)(kinds & 0xffu) << CMAM_REF_KINDS_SHIFT,
                        w1, w2, w3, w4};
    cmam_sent("CMAM_reply_4", am_reply_internal(tok, CMAM_H(CMAM_H_REPLY), NULL, 0, 5, args));
    am_poll(1);
}

/* ---- polls ------------------------------------------------------------------ */

static void cmam_check_computation(const char *call)
{
    if (am_in_handler())
        util_fatal("%s called from a handler: a handler that must poll calls CMAM_reply_poll", call);
}

void CMAM_poll(void)
{
    AM_GUARD();
    cmam_check_computation("CMAM_poll");
    am_poll(0);
}

/* shoal's rings have no request-only poll: this serves replies too, which
 * is always safe (reply handlers send nothing). */
void CMAM_request_poll(void)
{
    AM_GUARD();
    cmam_check_computation("CMAM_request_poll");
    am_poll(0);
}

void CMAM_reply_poll(void)
{
    AM_GUARD();
    am_poll(1);
}

void CMAM_wait(volatile int *flag, int value)
{
    AM_GUARD();
    cmam_check_computation("CMAM_wait");
    if (!flag)
        util_fatal("CMAM_wait: flag is NULL");
    struct util_backoff b;
    util_backoff_init(&b);
    while (*flag < value)
        am_progress_wait(&b, 0);
    *flag -= value;
}

/* ---- segments --------------------------------------------------------------- */

int CMAM_open_segment(void *base, int byte_count, CMAM_eot_fun eot, int info)
{
    AM_GUARD();
    if (!base || byte_count < 1 || byte_count > CMAM_MAX_COUNT)
        return -1;
    for (int i = CMAM_SEGMENTS - 1; i >= 0; i--) { /* the highest free one, as CMAM */
        struct cmam_segment *s = &segs[i];
        if (s->open)
            continue;
        *s = (struct cmam_segment){.base = base, .remaining = byte_count, .extent = byte_count, .eot = eot,
                                   .info = info, .open = 1, .ever = 1};
        return (int)((unsigned)i << CMAM_OFFSET_BITS);
    }
    return -1;
}

/* The count reached 0: the end-of-transfer function re-arms or closes. */
static void cmam_segment_done(struct cmam_segment *s, unsigned idx)
{
    int next = s->eot ? s->eot(s->base, s->info) : 0;
    if (next < 0 || next > CMAM_MAX_COUNT) {
        LOG(LOG_ERROR, "cmam: the end-of-transfer function of segment %u returned %d (not 0..%d): segment closed",
            idx, next, CMAM_MAX_COUNT);
        next = 0;
    }
    s->remaining = s->extent = next;
    s->open = next > 0;
}

static struct cmam_segment *cmam_segment_of(int id)
{
    unsigned idx = (unsigned)id >> CMAM_OFFSET_BITS;
    if (((unsigned)id & CMAM_OFFSET_MASK) || !segs[idx].open)
        return NULL;
    return &segs[idx];
}

int CMAM_shorten_segment(int segment_id, int nbytes)
{
    AM_GUARD();
    struct cmam_segment *s = cmam_segment_of(segment_id);
    if (!s || nbytes < 0 || nbytes > s->remaining)
        return -1;
    s->remaining -= nbytes;
    if (s->remaining == 0)
        cmam_segment_done(s, (unsigned)segment_id >> CMAM_OFFSET_BITS);
    return 0;
}

static void cmam_h_xfer(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)nargs;
    uint32_t addr = (uint32_t)args[0];
    unsigned idx = addr >> CMAM_OFFSET_BITS, off = addr & CMAM_OFFSET_MASK;
    struct cmam_segment *s = &segs[idx];
    if (!s->open) {
        cmam_drop(s->ever ? &drops.closed : &drops.bad_segment,
                  "an xfer of %zu bytes from rank %d into segment %u, which is %s", n, shoal_token_source(tok),
                  idx, s->ever ? "closed" : "not open");
        return;
    }
    if (off + n > (size_t)s->extent || n > (size_t)s->remaining) {
        cmam_drop(&drops.overrun,
                  "an xfer from rank %d into segment %u at [%u, +%zu): outside the segment (%d bytes, %d of "
                  "them still expected)",
                  shoal_token_source(tok), idx, off, n, s->extent, s->remaining);
        return;
    }
    memcpy(s->base + off, buf, n);
    s->remaining -= (int)n;
    if (s->remaining == 0)
        cmam_segment_done(s, idx);
}

static void cmam_check_xfer(const char *call, int seg_addr, const void *buff, int byte_count)
{
    unsigned off = (unsigned)seg_addr & CMAM_OFFSET_MASK;
    if (byte_count < 0 || (byte_count && !buff) || off + (unsigned)byte_count > (unsigned)CMAM_MAX_COUNT)
        util_fatal("%s: %d bytes from %p at segment offset %u: the count must be 0..2^24 and stay below "
                   "offset 2^24, with a buffer",
                   call, byte_count, buff, off);
}

/* The pieces each fit one packet to node: each is stored where it lands. */
static void cmam_xfer_request(const char *call, int node, int seg_addr, const void *buff, int byte_count)
{
    cmam_check_request(call, node);
    cmam_check_xfer(call, seg_addr, buff, byte_count);
    size_t piece = am_medium_in_one(node, 1), done = 0, n = (size_t)byte_count;
    while (done < n) {
        size_t k = n - done < piece ? n - done : piece;
        uint64_t addr = (uint32_t)seg_addr + (uint32_t)done;
        cmam_sent(call, am_request_internal(node, CMAM_H(CMAM_H_XFER), done + k < n ? SHOAL_MORE : 0,
                                            (const char *)buff + done, k, 1, &addr));
        done += k;
        am_poll(0);
    }
}

/* A reply is one message (a request handler replies once): am cuts it in
 * pieces and runs the handler once with the whole block. */
static void cmam_xfer_reply(const char *call, int node, int seg_addr, const void *buff, int byte_count)
{
    shoal_token_t tok = cmam_check_reply(call, node);
    cmam_check_xfer(call, seg_addr, buff, byte_count);
    uint64_t addr = (uint32_t)seg_addr;
    cmam_sent(call, am_reply_large(tok, CMAM_H(CMAM_H_XFER), buff, (size_t)byte_count, 1, &addr));
    am_poll(1);
}

void CMAM_xfer(int node, int seg_addr, void *buff, int byte_count)
{
    AM_GUARD();
    cmam_xfer_request("CMAM_xfer", node, seg_addr, buff, byte_count);
}

/* The _4i forms add segment_id and offset as CMAM does: an offset of 24
 * bits or more would name another segment. */
static int cmam_addr_4i(const char *call, int segment_id, unsigned offset)
{
    if (offset > CMAM_OFFSET_MASK)
        util_fatal("%s: offset %u does not fit the 24 bits of a segment address", call, offset);
    return (int)((unsigned)segment_id + offset);
}

void CMAM_xfer_4i(int node, int segment_id, unsigned int offset, int d1, int d2, int d3, int d4)
{
    AM_GUARD();
    int d[4] = {d1, d2, d3, d4};
    cmam_xfer_request("CMAM_xfer_4i", node, cmam_addr_4i("CMAM_xfer_4i", segment_id, offset), d, (int)sizeof d);
}

void CMAM_reply_xfer(int node, int seg_addr, void *buff, int byte_count)
{
    AM_GUARD();
    cmam_xfer_reply("CMAM_reply_xfer", node, seg_addr, buff, byte_count);
}

void CMAM_reply_xfer_4i(int node, int segment_id, unsigned int offset, int d1, int d2, int d3, int d4)
{
    AM_GUARD();
    int d[4] = {d1, d2, d3, d4};
    cmam_xfer_reply("CMAM_reply_xfer_4i", node, cmam_addr_4i("CMAM_reply_xfer_4i", segment_id, offset), d, (int)sizeof d);
}

void CMAM_drops(struct CMAM_drop_counts *out)
{
    AM_GUARD();
    if (out)
        *out = drops;
}

void cmam_init(void)
{
    am_register_internal(CMAM_H(CMAM_H_REQUEST), cmam_h_request);
    am_register_internal(CMAM_H(CMAM_H_REPLY), cmam_h_reply);
    am_register_internal(CMAM_H(CMAM_H_XFER), cmam_h_xfer);
}
