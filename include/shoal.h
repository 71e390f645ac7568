/* shoal: active messages, one-sided communication and region DSM for
 * parallel C programs.  This header is the whole public API of the core
 * runtime: job control, active messages, segments and the barrier.
 *
 * Conventions: every function returns 0 or a negative SHOAL_E* code unless
 * its documentation says it cannot fail; shoal_strerror() names a code.
 * Ranks are 0 .. shoal_size()-1.  See docs/API.md for the full reference. */
#ifndef SHOAL_H
#define SHOAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHOAL_API __attribute__((visibility("default")))

#define SHOAL_VERSION_MAJOR 0
#define SHOAL_VERSION_MINOR 1
#define SHOAL_VERSION_PATCH 0
#define SHOAL_VERSION_STRING "0.1.0"

/* ---- status codes ------------------------------------------------------ */
enum shoal_status {
    SHOAL_OK = 0,
    SHOAL_EINVAL = -1,      /* an argument is out of its documented range */
    SHOAL_ERANK = -2,       /* rank is not in [0, size) */
    SHOAL_ENOHANDLER = -3,  /* handler index not registered */
    SHOAL_ETOOBIG = -4,     /* payload or argument count above the limit */
    SHOAL_EAGAIN = -5,      /* SHOAL_IMMEDIATE and no resources right now */
    SHOAL_EHANDLER = -6,    /* call not allowed in this handler context */
    SHOAL_ENOTINIT = -7,    /* shoal_init has not run (or finalize has) */
    SHOAL_EINIT = -8,       /* shoal_init called twice */
    SHOAL_ENOMEM = -9,      /* memory or shared backing store exhausted */
    SHOAL_ESYS = -10,       /* a system call failed (errno kept in the log) */
    SHOAL_EBOOT = -11,      /* launcher protocol failed or environment bad */
    SHOAL_EPEERDEAD = -12,  /* a peer rank died */
    SHOAL_ESEGMENT = -13,   /* unknown segment */
    SHOAL_ERANGE = -14,     /* offset/length outside the segment */
    SHOAL_ETIMEDOUT = -15,  /* a bounded wait expired */
    SHOAL_EALIGN = -16,     /* misaligned address or offset */
    SHOAL_ECONFIG = -17,    /* a SHOAL_* environment setting is invalid */
};

/* Name of a status code ("SHOAL_EAGAIN: resource temporarily ..."). */
SHOAL_API const char *shoal_strerror(int status);

/* ---- job control --------------------------------------------------------- */
/* Joins the job.  Started by shoalrun, the process learns its rank and the
 * job's shared memory from the launcher; started alone it is rank 0 of 1.
 * argc/argv may be NULL.  Returns SHOAL_EINIT if already initialized. */
SHOAL_API int shoal_init(int *argc, char ***argv);

/* Collective: waits until every rank has finalized its communication, then
 * releases all resources.  Messages still in flight are delivered first. */
SHOAL_API int shoal_finalize(void);

/* Rank and size of the job; -1 before shoal_init. They cannot fail. */
SHOAL_API int shoal_rank(void);
SHOAL_API int shoal_size(void);

/* Ends the whole job: prints "shoal: rank R on HOST: fatal: msg" and makes the
 * launcher end every other rank with a non-zero exit.  Never returns. */
SHOAL_API _Noreturn void shoal_abort(int exitcode, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Runs every handler whose message has arrived.  Not callable from a
 * handler (SHOAL_EHANDLER). Returns SHOAL_EPEERDEAD if a peer died. */
SHOAL_API int shoal_poll(void);

/* Polls until *flag >= value (a handler increments it), then subtracts
 * value, as CMAM_wait does. */
SHOAL_API int shoal_wait_until(volatile uint64_t *flag, uint64_t value);

/* Seconds since an arbitrary fixed point; monotonic. Cannot fail. */
SHOAL_API double shoal_wtime(void);

/* ---- active messages ----------------------------------------------------- */
#define SHOAL_AM_MAX_ARGS 16      /* 64-bit argument words per message */
#define SHOAL_AM_MAX_HANDLERS 256 /* user handler indices 0..255 */

/* Send flag: fail with SHOAL_EAGAIN instead of waiting for ring space. */
#define SHOAL_IMMEDIATE 0x1u

/* Opaque description of the message a handler is running for. */
typedef struct shoal_token *shoal_token_t;

/* One signature for every class.  Short: buf == NULL, nbytes == 0.
 * Medium: buf is receiver-owned and valid until the handler returns.
 * Long: buf points into the destination segment where the data landed. */
typedef void (*shoal_handler_t)(shoal_token_t token, void *buf, size_t nbytes,
                                const uint64_t *args, unsigned nargs);

/* Registers fn under index (0..SHOAL_AM_MAX_HANDLERS-1).  Every rank must
 * register the same index for the same function before messages to it
 * arrive; a message for an unregistered index aborts the receiver with a
 * message naming the sender.  May be called before or after shoal_init. */
SHOAL_API int shoal_am_register(unsigned index, shoal_handler_t fn);

/* Largest medium payload and argument count this job supports. */
SHOAL_API size_t shoal_am_max_medium(void);
SHOAL_API unsigned shoal_am_max_args(void);

/* Requests: from the main computation only (SHOAL_EHANDLER in a handler). */
SHOAL_API int shoal_am_request_short(int dest, unsigned handler, unsigned flags,
                           unsigned nargs, const uint64_t *args);
SHOAL_API int shoal_am_request_medium(int dest, unsigned handler, unsigned flags,
                            const void *src, size_t nbytes,
                            unsigned nargs, const uint64_t *args);

/* Writes nbytes from src into dest's segment seg at offset, then runs the
 * handler at dest with buf pointing there. */
typedef int shoal_seg_t;
SHOAL_API int shoal_am_request_long(int dest, unsigned handler, unsigned flags,
                          const void *src, size_t nbytes,
                          shoal_seg_t seg, size_t offset,
                          unsigned nargs, const uint64_t *args);

/* Replies: only from a request handler, at most once, to the requester. */
SHOAL_API int shoal_am_reply_short(shoal_token_t token, unsigned handler, unsigned flags,
                         unsigned nargs, const uint64_t *args);
SHOAL_API int shoal_am_reply_medium(shoal_token_t token, unsigned handler, unsigned flags,
                          const void *src, size_t nbytes,
                          unsigned nargs, const uint64_t *args);
SHOAL_API int shoal_am_reply_long(shoal_token_t token, unsigned handler, unsigned flags,
                        const void *src, size_t nbytes,
                        shoal_seg_t seg, size_t offset,
                        unsigned nargs, const uint64_t *args);

/* Source rank of the message behind token (cannot fail for a live token;
 * -1 for a stale one). */
SHOAL_API int shoal_token_source(shoal_token_t token);

/* Argument-list helpers: shoal_args(a, b, c) expands to "3, (uint64_t[]){a,b,c}". */
#define SHOAL_ARGC_(...) (sizeof((uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))
#define shoal_args(...) (unsigned)SHOAL_ARGC_(__VA_ARGS__), (const uint64_t[]){__VA_ARGS__}
#define shoal_noargs 0u, (const uint64_t *)0

/* ---- segments (registered memory that long messages write into) ---------- */
/* Collective: every rank allocates a segment of `size` bytes (page-rounded,
 * zero-filled, mapped by every rank on the host) and all ranks get the same
 * id.  Sizes may differ per rank. */
SHOAL_API int shoal_seg_create(size_t size, shoal_seg_t *seg);

/* This rank's own part of seg. */
SHOAL_API int shoal_seg_local(shoal_seg_t seg, void **base, size_t *size);

/* Size of rank's part of seg. */
SHOAL_API int shoal_seg_size(shoal_seg_t seg, int rank, size_t *size);

/* ---- synchronization ---------------------------------------------------- */
/* Collective; runs handlers while waiting. */
SHOAL_API int shoal_barrier(void);

/* ---- statistics ---------------------------------------------------------- */
struct shoal_stats {
    uint64_t am_sent[2];      /* [0] requests, [1] replies */
    uint64_t am_received[2];
    uint64_t bytes_sent;
    uint64_t send_stalls;     /* sends that found the ring full */
    uint64_t barriers;
};
SHOAL_API int shoal_stats_get(struct shoal_stats *out);

#ifdef __cplusplus
}
#endif
#endif
