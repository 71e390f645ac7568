/* shoal/cmam.h: CM-5 Active Messages (T. von Eicken's thesis, §4.3.3) over
 * shoal's active messages, so CMAM programs compile unchanged.
 *
 * A program calls shoal_init and shoal_finalize around its CMAM calls and
 * nothing else.  Handlers are named by their function address and called
 * with four words, each wide enough for a pointer (Fig. 4-18 passes
 * pointers); an int, a pointer, a float or a double may be passed in any
 * mix, as long as the handler's parameters agree.  Requests (CMAM_4,
 * CMAM_xfer*) poll both classes as they send, replies (CMAM_reply_*) only
 * replies; only a request handler may reply, once, to its requester.
 * Misuse at the sender (a bad node, a send from the wrong context, an xfer
 * beyond 24 bits of offset) aborts the job with a message naming the rank
 * and the call; a message the receiver cannot accept (an address that is
 * not a function's start in the same image, a segment that is not open, an
 * xfer outside its segment) is dropped there, logged and counted
 * (CMAM_drops).  docs/CMAM.md is the full reference. */
#ifndef SHOAL_CMAM_H
#define SHOAL_CMAM_H

#include <stdint.h>
#include <string.h>

#include <shoal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A handler: any function of up to four word parameters (ints, pointers,
 * floats, doubles), e.g. void h(int ret_node, void *sync, int *addr, int incr). */
typedef void (*CMAM_fun)(void);

/* The caller's rank and the job size. */
#define MYPROC (shoal_rank())
#define PROCS (shoal_size())

/* The sends behind the macros below: w are the four words, kinds says
 * which are floating point (2 bits each, CMAM_KIND_*). */
SHOAL_API void cmam_4_(int node, CMAM_fun fun, unsigned kinds, uintptr_t w1, uintptr_t w2, uintptr_t w3,
                       uintptr_t w4);
SHOAL_API void cmam_reply_4_(int node, CMAM_fun fun, unsigned kinds, uintptr_t w1, uintptr_t w2, uintptr_t w3,
                             uintptr_t w4);
#define CMAM_KIND_INT 0u
#define CMAM_KIND_DOUBLE 1u
#define CMAM_KIND_FLOAT 2u

/* Polls both classes once, running every handler whose message is there. */
SHOAL_API void CMAM_poll(void);
SHOAL_API void CMAM_request_poll(void);
/* The only poll a request handler may call. */
SHOAL_API void CMAM_reply_poll(void);
/* Polls until *flag >= value, then subtracts value. */
SHOAL_API void CMAM_wait(volatile int *flag, int value);

/* Segments (256 per rank).  The id plus a byte offset (below 2^24) names a
 * place in the segment; byte_count (1..2^24) is both how many bytes to
 * receive and the extent writes must stay inside.  When the count reaches
 * 0, eot(base, info) runs (as a handler): it returns a new count to re-arm
 * the segment, or 0 to close it.  Returns -1 when no segment is free or
 * the arguments are invalid (NULL base, count outside 1..2^24). */
typedef int (*CMAM_eot_fun)(void *base, int info);
SHOAL_API int CMAM_open_segment(void *base, int byte_count, CMAM_eot_fun eot, int info);
/* Lowers the count still expected by nbytes (the sender sends less);
 * reaching 0 runs the end-of-transfer function.  0, or -1 for a segment
 * that is not open or an nbytes outside 0..remaining. */
SHOAL_API int CMAM_shorten_segment(int segment_id, int nbytes);

/* Block and 16-byte transfers into a segment of node: seg_addr is a
 * segment id plus the byte offset; the _4i forms send four ints at
 * segment_id + offset.  The reply forms are for request handlers. */
SHOAL_API void CMAM_xfer(int node, int seg_addr, void *buff, int byte_count);
SHOAL_API void CMAM_xfer_4i(int node, int segment_id, unsigned int offset, int d1, int d2, int d3, int d4);
SHOAL_API void CMAM_reply_xfer(int node, int seg_addr, void *buff, int byte_count);
SHOAL_API void CMAM_reply_xfer_4i(int node, int segment_id, unsigned int offset, int d1, int d2, int d3,
                                  int d4);

/* shoal's extension: what this rank's receiver dropped, by reason. */
struct CMAM_drop_counts {
    unsigned long forged;      /* handler address not a function's start in the image */
    unsigned long bad_segment; /* segment never opened */
    unsigned long closed;      /* segment opened once, closed now */
    unsigned long overrun;     /* xfer outside the segment's extent or beyond its count */
};
SHOAL_API void CMAM_drops(struct CMAM_drop_counts *out);

/* ---- a word from any scalar argument --------------------------------------- */
static inline uintptr_t cmam_dword_(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return (uintptr_t)u;
}
static inline uintptr_t cmam_fword_(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uintptr_t)u;
}

#ifdef __cplusplus
} /* extern "C" */

inline uintptr_t cmam_word_(float f) { return cmam_fword_(f); }
inline uintptr_t cmam_word_(double d) { return cmam_dword_(d); }
template <class T> inline uintptr_t cmam_word_(T *p) { return (uintptr_t)p; }
template <class T> inline uintptr_t cmam_word_(T v) { return (uintptr_t)v; }
inline unsigned cmam_kind_(float) { return CMAM_KIND_FLOAT; }
inline unsigned cmam_kind_(double) { return CMAM_KIND_DOUBLE; }
template <class T> inline unsigned cmam_kind_(T) { return CMAM_KIND_INT; }
#define CMAM_W_(x) cmam_word_(x)
#define CMAM_K_(x) cmam_kind_(x)
#else
/* Each branch is valid for every scalar type, so only the chosen one
 * matters; a struct is a compile error, as in CMAM. */
#define CMAM_W_(x)                                                                                            \
    _Generic((x), float: cmam_fword_(_Generic((x), float: (x), default: 0.0f)),                             \
             double: cmam_dword_(_Generic((x), double: (x), default: 0.0)), default: (uintptr_t)(x))
#define CMAM_K_(x) _Generic((x), float: CMAM_KIND_FLOAT, double: CMAM_KIND_DOUBLE, default: CMAM_KIND_INT)
#endif

/* A fifth word would be dropped without a word: it does not compile. */
#define CMAM_NARGS_(...) CMAM_NARGS_N_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define CMAM_NARGS_N_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n
#define CMAM_TOO_MANY_ "CMAM_4 and CMAM_reply_4 take a node, a handler and at most four words"
#ifdef __cplusplus
#define CMAM_AT_MOST_4_(...) ([] { static_assert(CMAM_NARGS_(__VA_ARGS__) <= 6, CMAM_TOO_MANY_); }())
#else
#define CMAM_AT_MOST_4_(...)                                                                                  \
    (void)sizeof(struct {                                                                                     \
        _Static_assert(CMAM_NARGS_(__VA_ARGS__) <= 6, CMAM_TOO_MANY_);                                       \
        int unused_;                                                                                          \
    })
#endif

#define CMAM_SEND_(f, node, fun, a, b, c, d, ...)                                                            \
    f((node), (CMAM_fun)(fun), CMAM_K_(a) | CMAM_K_(b) << 2 | CMAM_K_(c) << 4 | CMAM_K_(d) << 6, CMAM_W_(a), \
      CMAM_W_(b), CMAM_W_(c), CMAM_W_(d))

/* CMAM_4(node, fun, up to four words): a request; fewer words are sent as
 * zeros.  CMAM_reply_4: the reply, from a request handler to its requester. */
#define CMAM_4(...) (CMAM_AT_MOST_4_(__VA_ARGS__), CMAM_SEND_(cmam_4_, __VA_ARGS__, 0, 0, 0, 0, 0))
#define CMAM_reply_4(...) (CMAM_AT_MOST_4_(__VA_ARGS__), CMAM_SEND_(cmam_reply_4_, __VA_ARGS__, 0, 0, 0, 0, 0))

#endif
