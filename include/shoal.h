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
/* shoal_args' C++ form (below): C++ has no compound literals, so the list
 * becomes a temporary whose array lives to the end of the full expression,
 * as the C literal lives to the end of its block.  Each value converts to
 * uint64_t as the C initializer converts it.  Templates cannot have C
 * linkage, hence before the extern "C" block. */
template <unsigned N> struct shoal_args_array_ {
    uint64_t v[N];
};
template <class... T> inline shoal_args_array_<sizeof...(T)> shoal_args_make_(T... a)
{
    return {{static_cast<uint64_t>(a)...}};
}
extern "C" {
#endif

#define SHOAL_API __attribute__((visibility("default")))
/* One spelling that both languages accept after SHOAL_API ([[noreturn]]
 * must come first in C++, _Noreturn does not exist there). */
#define SHOAL_NORETURN __attribute__((noreturn))

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
    SHOAL_EACCES = -18,     /* wrong access key, or the memory lacks the permission */
    SHOAL_EFULL = -19,      /* FIFO full: the entry was cancelled (FIFOe: and it stopped) */
    SHOAL_ESTOPPED = -20,   /* FIFOe stopped by an earlier cancellation: send RETRY */
    SHOAL_ECANCELED = -21,  /* signal refused by its state or invocation condition */
    SHOAL_ENOSTRUCT = -22,  /* no FIFO or signal structure at that offset */
};

/* Status of an operation still in flight (a handle's status, never returned). */
#define SHOAL_PENDING 1

/* Name of a status code ("SHOAL_EAGAIN: resource temporarily ..."). */
SHOAL_API const char *shoal_strerror(int status);

/* ---- job control --------------------------------------------------------- */
/* Joins the job.  Started by shoalrun, the process learns its rank and the
 * job's shared memory from the launcher; started alone it is rank 0 of 1.
 * argc/argv may be NULL.  Returns SHOAL_EINIT if already initialized. */
SHOAL_API int shoal_init(int *argc, char ***argv);

/* Thread levels (MPI's meanings), lowest first:
 *  SINGLE      the process has one thread that calls shoal (shoal_init);
 *  FUNNELED    several threads, but only the one that called shoal_init
 *              calls shoal;
 *  SERIALIZED  any thread may call shoal, one at a time: the application
 *              orders the calls (a mutex, a join) so no two overlap;
 *  MULTIPLE    any thread may call shoal at any time, concurrently (the
 *              rules in docs/API.md "Threads and signals": collectives one thread at a
 *              time per rank, CRL regions one thread each, fences and
 *              colours count every thread's commands).
 * A lower level used as a higher one is refused where SHOAL_STRICT checks
 * (debug builds, or SHOAL_STRICT=1): an abort naming the rank and the call. */
enum shoal_thread_level {
    SHOAL_THREAD_SINGLE = 0,
    SHOAL_THREAD_FUNNELED = 1,
    SHOAL_THREAD_SERIALIZED = 2,
    SHOAL_THREAD_MULTIPLE = 3,
};

/* shoal_init at thread level required; *provided is the level granted.
 * Every level is supported, so provided == required (check it all the same,
 * as MPI programs do: a later build may grant less).  SHOAL_EINVAL, with
 * nothing done, for a level outside SINGLE..MULTIPLE or provided NULL; else
 * what shoal_init returns.  Call it from the thread that will be the main
 * thread (FUNNELED's). */
SHOAL_API int shoal_init_thread(int *argc, char ***argv, int required, int *provided);

/* The level granted at init (SHOAL_THREAD_SINGLE after shoal_init);
 * SHOAL_ENOTINIT before it, SHOAL_EINVAL for provided NULL. */
SHOAL_API int shoal_query_thread(int *provided);

/* Collective: waits until every rank has finalized its communication, then
 * releases all resources.  Messages still in flight are delivered first. */
SHOAL_API int shoal_finalize(void);

/* Rank and size of the job; -1 before shoal_init. They cannot fail. */
SHOAL_API int shoal_rank(void);
SHOAL_API int shoal_size(void);
/* 1 if rank shares memory with this process (same host, shm transport:
 * active messages through shared rings, one-sided commands by CPU copies),
 * 0 if it is reached over the cluster transport; SHOAL_ENOTINIT or
 * SHOAL_ERANK. */
SHOAL_API int shoal_rank_local(int rank);

/* Ends the whole job: prints "shoal: rank R on HOST: fatal: msg" and makes the
 * launcher end every other rank with a non-zero exit.  Never returns. */
SHOAL_API SHOAL_NORETURN void shoal_abort(int exitcode, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Called once when this rank learns that a peer failed (it exited, was
 * killed, or stopped answering over the network past SHOAL_NET_DEAD_MS):
 * rank is the failed peer (-1 when the launcher ended the job, e.g. on its
 * timeout), reason the message shoal is about to print.  The job is ending:
 * when fn returns, this rank exits with that message and status 1.  fn may
 * run on the network progress thread and must not call shoal functions
 * other than shoal_rank, shoal_size and shoal_wtime; use it to log or save
 * state.  NULL removes it.  Cannot fail; callable at any time. */
typedef void (*shoal_failure_handler_t)(int rank, const char *reason, void *arg);
SHOAL_API void shoal_on_peer_failure(shoal_failure_handler_t fn, void *arg);

/* Runs every handler whose message has arrived.  Not callable from a
 * handler (SHOAL_EHANDLER). Returns SHOAL_EPEERDEAD if a peer died. */
SHOAL_API int shoal_poll(void);

/* Polls until *flag >= value (a handler increments it), then subtracts
 * value, as CMAM_wait does. */
SHOAL_API int shoal_wait_until(volatile uint64_t *flag, uint64_t value);

/* Seconds since an arbitrary fixed point; monotonic. Cannot fail. */
SHOAL_API double shoal_wtime(void);

/* A critical section that no handler runs during (the seeds' AMdisable and
 * AMenable).  With SHOAL_PROGRESS=thread the progress thread runs no handler
 * from disable until the matching enable, so data the application shares
 * with its handlers may be updated there without atomics; shoal calls made
 * inside still run handlers on this thread, as polling calls always do.
 * Nestable (each disable needs its enable).  With SHOAL_PROGRESS=poll only
 * the application's own shoal calls run handlers, and these only count.
 * SHOAL_ENOTINIT before shoal_init; enable without a disable: SHOAL_EINVAL. */
SHOAL_API int shoal_handlers_disable(void);
SHOAL_API int shoal_handlers_enable(void);
/* 1 when a progress thread runs handlers while the application computes
 * (SHOAL_PROGRESS=thread), 0 in poll mode or outside shoal_init..finalize.
 * Cannot fail. */
SHOAL_API int shoal_progress_threaded(void);

/* ---- active messages ----------------------------------------------------- */
#define SHOAL_AM_MAX_ARGS 16      /* 64-bit argument words per message */
#define SHOAL_AM_MAX_HANDLERS 256 /* user handler indices 0..255 */

/* Send flag: fail with SHOAL_EAGAIN instead of waiting for ring space. */
#define SHOAL_IMMEDIATE 0x1u
/* Send flag (requests, and the commands below): more sends follow at once.
 * A message to a peer over the network may wait in the transport's queue
 * until a call without it sends, or this rank polls or waits, so that a
 * burst of small messages leaves in a few system calls (the progress
 * thread, SHOAL_NET_THREAD=1, sends what a rank leaves there within about
 * 15 ms).  No effect over shared memory. */
#define SHOAL_MORE 0x10u

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

/* One-sided broadcast: the request runs `handler` at every rank but this
 * one, as if sent to each (what a request to one rank may do, a handler
 * may do here; shoal_token_source names this rank).  Reliable, and in
 * order with this rank's other requests to each rank.  ONE frame every
 * other rank takes over eth, and over udp with SHOAL_NET_BCAST=1, when every
 * other rank is on that carrier, the job has at most 64 ranks and the
 * message fits one packet; otherwise a request per rank (docs/API.md).
 * The rules and errors of shoal_am_request_short/medium, and SHOAL_EINVAL
 * with SHOAL_IMMEDIATE (a broadcast is never sent in part); with one rank
 * it checks its arguments and sends nothing. */
SHOAL_API int shoal_am_bcast_short(unsigned handler, unsigned flags, unsigned nargs, const uint64_t *args);
SHOAL_API int shoal_am_bcast_medium(unsigned handler, unsigned flags, const void *src, size_t nbytes,
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

/* Argument-list helpers: shoal_args(a, b, c) expands to "3, (uint64_t[]){a,b,c}"
 * (the count is taken without evaluating the arguments twice). */
#ifdef __cplusplus
#define shoal_args(...)                                                                           \
    (unsigned)(sizeof(decltype(shoal_args_make_(__VA_ARGS__))) / sizeof(uint64_t)),              \
        static_cast<const uint64_t *>(shoal_args_make_(__VA_ARGS__).v)
#else
#define SHOAL_ARGC_(...) (sizeof((uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))
#define shoal_args(...) (unsigned)SHOAL_ARGC_(__VA_ARGS__), (const uint64_t[]){__VA_ARGS__}
#endif
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

/* ---- memory-based communication (one-sided; seed MBCF) ------------------- */
/* A rank exposes memory as a protected segment: permissions and a random
 * 64-bit access key.  Peers name a location as (segment descriptor, offset),
 * never as an address; every access is checked against the owner's table
 * (bounds, permission, key, liveness).  A refused access has no effect, is
 * counted at the owner (stats.rma_refused; an initiator that checked its
 * cached copy of the entry for a native command counts it in its own
 * stats.rma_native_refused) and returns its error to the initiator.
 * docs/RMA.md has the exact semantics of every command. */
#define SHOAL_MEM_READ 0x1u   /* get */
#define SHOAL_MEM_WRITE 0x2u  /* put, put_flag, z-buffer */
#define SHOAL_MEM_ATOMIC 0x4u /* fetch-ops, swap, compare-and-swap */
#define SHOAL_MEM_QUEUE 0x8u  /* FIFO enqueue and signal */
#define SHOAL_MEM_ALL 0xfu

typedef int shoal_mem_t; /* local handle of a segment this rank owns */

/* What a peer needs to reach a segment: hand it over by active message or
 * with shoal_mem_exchange.  Plain data; copying it is fine. */
typedef struct shoal_rmem {
    int32_t rank;
    uint32_t id;  /* table slot and generation: a destroyed segment's id never comes back */
    uint64_t key; /* random; the owner's check compares it */
} shoal_rmem_t;

/* A segment of `size` bytes (page-rounded, zero-filled) from this rank's
 * shared heap: peers on the host access it directly with CPU loads, stores
 * and atomics, without the owner's involvement.  Not collective. */
SHOAL_API int shoal_mem_create(size_t size, unsigned perms, shoal_mem_t *mem);
/* Registers existing memory (any alignment).  Peers cannot map it, so the
 * owner's progress engine executes their commands (it must poll). */
SHOAL_API int shoal_mem_register(void *base, size_t size, unsigned perms, shoal_mem_t *mem);
/* Ends the segment: commands that begin afterwards fail with
 * SHOAL_ESEGMENT.  One that a peer began before may still complete into the
 * old memory; the library reuses that memory only once every peer has been
 * seen outside any command. */
SHOAL_API int shoal_mem_destroy(shoal_mem_t mem);
SHOAL_API int shoal_mem_local(shoal_mem_t mem, void **base, size_t *size);
SHOAL_API int shoal_mem_export(shoal_mem_t mem, shoal_rmem_t *out);
/* Collective: all[r] receives rank r's descriptor of its `mem` (each rank
 * passes its own segment; all has shoal_size() entries). */
SHOAL_API int shoal_mem_exchange(shoal_mem_t mem, shoal_rmem_t *all);

/* Completion.  Every command takes `flags` and a handle pointer h:
 *  - h == NULL, no colour, no status option: blocking; returns the
 *    command's status once it has completed at the target.
 *  - h != NULL: non-blocking; returns 0 once issued (or an error found
 *    before issue) and h->status becomes the final status later
 *    (SHOAL_PENDING until then).  h must stay valid until complete.
 *  - SHOAL_COLOR(c): implicit completion counted in colour c
 *    (shoal_color_wait); the first failure is kept for the colour.
 *  - SHOAL_STATUS_NONE / SHOAL_STATUS_FAILURES with neither: fire and
 *    forget.  STATUS_FAILURES reports any failure; STATUS_NONE only a
 *    refused access (SHOAL_EACCES, SHOAL_ERANGE, SHOAL_ESEGMENT,
 *    SHOAL_EALIGN, SHOAL_ENOSTRUCT); the same on directly mapped memory and
 *    on memory the target serves.  Reported failures are kept for
 *    shoal_fence; the others are ignored (not counted in rma_failures).
 *    Nothing comes back, so a status option on a command that returns
 *    results is SHOAL_EINVAL: a get of n > 0 bytes, a fetch-op with
 *    count > 0 and old != NULL, a CAS with res != NULL, a z-buffer with
 *    written != NULL.
 * Results (old values, read data) are written where the call says once the
 * command completes. */
typedef struct shoal_handle {
    volatile int32_t status; /* SHOAL_PENDING, then 0 or a SHOAL_E* code */
    uint32_t op;             /* internal */
} shoal_handle_t;

#define SHOAL_STATUS_NONE 0x2u     /* report only a refused access */
#define SHOAL_STATUS_FAILURES 0x4u /* report only failures */
#define SHOAL_FIFO_RETRY 0x8u      /* FIFOe: the RETRY form of the enqueue */
#define SHOAL_COLORS 16u           /* colours 1..15; 0 means none */
#define SHOAL_COLOR(c) (((unsigned)(c) & 0xfu) << 8)

/* SHOAL_EAGAIN while pending, else the final status. */
SHOAL_API int shoal_test(shoal_handle_t *h);
SHOAL_API int shoal_wait(shoal_handle_t *h);
/* Elastic memory barrier: commands issued and completed in colour c. */
SHOAL_API int shoal_color_counts(unsigned c, uint64_t *issued, uint64_t *completed);
/* Waits until every command issued in colour c has completed; returns the
 * colour's first failure since the last wait (and clears it). */
SHOAL_API int shoal_color_wait(unsigned c);
/* Waits until every command this rank issued, to every target, has
 * completed there; returns the first failure reported for a fire-and-forget
 * command since the last fence (and clears it). */
SHOAL_API int shoal_fence(void);

/* Ordering: commands from one rank to one target take effect in issue order
 * when they take the same path (direct, or executed by the target); a fence
 * orders everything.  put_flag's data is visible before its flag. */

/* Write n bytes at dst+off. */
SHOAL_API int shoal_put(shoal_rmem_t dst, size_t off, const void *src, size_t n,
                        unsigned flags, shoal_handle_t *h);
/* Write n bytes at dst+off, then the 64-bit flag_value at dst+flag_off
 * (8-byte aligned): whoever sees the flag sees the data (MBCF_WRITE_F). */
SHOAL_API int shoal_put_flag(shoal_rmem_t dst, size_t off, const void *src, size_t n,
                             size_t flag_off, uint64_t flag_value, unsigned flags, shoal_handle_t *h);
/* Read n bytes at src+off into dst. */
SHOAL_API int shoal_get(void *dst, shoal_rmem_t src, size_t off, size_t n,
                        unsigned flags, shoal_handle_t *h);

/* Atomic read-modify-write over count consecutive 8-byte elements at
 * m+off (8-byte aligned): each element atomically becomes elem OP operand,
 * and old[i] (if old != NULL) receives its previous value.  Each element is
 * one atomic step; the vector is not one transaction. */
enum shoal_aop { SHOAL_AOP_ADD, SHOAL_AOP_AND, SHOAL_AOP_OR, SHOAL_AOP_XOR, SHOAL_AOP_SWAP };
enum shoal_atype { SHOAL_INT64, SHOAL_UINT64, SHOAL_DOUBLE }; /* AND/OR/XOR: integers only */
SHOAL_API int shoal_fetch_op(shoal_rmem_t m, size_t off, enum shoal_aop op, enum shoal_atype type,
                             const void *operands, void *old, size_t count, unsigned flags,
                             shoal_handle_t *h);
/* Blocking scalar form: *old (may be NULL) = previous value; word += add. */
SHOAL_API int shoal_fetch_add64(shoal_rmem_t m, size_t off, int64_t add, int64_t *old);

/* Generalized compare-and-swap (MBCF_COMP_SWAP): if the word at cmp_off
 * equals expected, the word at swap_off is exchanged with desired.  Both
 * 8-byte aligned in the same segment; cmp_off == swap_off is the usual CAS. */
struct shoal_cas_result {
    uint64_t observed; /* value seen at cmp_off */
    uint64_t old;      /* previous value at swap_off (when swapped) */
    int32_t swapped;   /* 1 if the exchange happened */
};
SHOAL_API int shoal_cas(shoal_rmem_t m, size_t cmp_off, uint64_t expected, size_t swap_off,
                        uint64_t desired, struct shoal_cas_result *res, unsigned flags,
                        shoal_handle_t *h);

/* Z-buffer write (MBCF_ZBUFFER): if the int64 at ref_off is greater than
 * depth, it becomes depth and n bytes of data are written at data_off;
 * otherwise nothing changes.  *written (may be NULL) tells which. */
SHOAL_API int shoal_zbuffer(shoal_rmem_t m, size_t ref_off, int64_t depth, size_t data_off,
                            const void *data, size_t n, int *written, unsigned flags,
                            shoal_handle_t *h);
/* Packed form (MBCF_ZBUF_PACKED): count consecutive 8-byte cells at off,
 * each SHOAL_ZCELL(depth, datum); cell i is replaced by cells[i] if its
 * depth is greater, each cell atomically. */
#define SHOAL_ZCELL(depth, datum) (((uint64_t)(uint32_t)(depth) << 32) | (uint32_t)(datum))
SHOAL_API int shoal_zbuffer_packed(shoal_rmem_t m, size_t off, const uint64_t *cells, size_t count,
                                   unsigned flags, shoal_handle_t *h);

/* FIFO (MBCF_FIFO): a queue the owner lays out in its own segment at off
 * (64-byte aligned); senders append (their rank + up to entry_bytes of
 * data) or are cancelled with SHOAL_EFULL; the owner dequeues locally.
 * SHOAL_FIFO_ORDERED makes it a FIFOe: after the first cancellation it is
 * stopped (SHOAL_ESTOPPED for every NORMAL enqueue) until a
 * SHOAL_FIFO_RETRY enqueue finds room; and a sender whose entry was
 * cancelled gets SHOAL_ESTOPPED for its NORMAL enqueues until its own
 * RETRY is stored, so its entries in flight cannot overtake the cancelled
 * one.  entry_bytes <= 4096. */
#define SHOAL_FIFO_ORDERED 0x1u
/* Bytes the structure needs (0 for bad arguments); FIFOe's depends on the
 * job size, so call it after shoal_init. */
SHOAL_API size_t shoal_fifo_footprint(size_t entry_bytes, uint32_t entries, unsigned kind);
SHOAL_API int shoal_fifo_init(shoal_mem_t mem, size_t off, size_t entry_bytes, uint32_t entries,
                              unsigned kind);
SHOAL_API int shoal_fifo_enqueue(shoal_rmem_t m, size_t off, const void *data, size_t n,
                                 unsigned flags, shoal_handle_t *h);
/* Owner side: SHOAL_EAGAIN when empty; *n = length, *src = sender rank.
 * SHOAL_ETOOBIG (entry kept) if cap is too small. */
SHOAL_API int shoal_fifo_dequeue(shoal_mem_t mem, size_t off, void *buf, size_t cap, size_t *n,
                                 int *src);

/* FIFOe sender helper: keeps a copy of every entry until it is stored and
 * resends cancelled ones in order (the first as RETRY), so this sender's
 * order survives overflow.  send queues behind earlier cancelled entries. */
typedef struct shoal_fifoe_sender shoal_fifoe_sender_t;
SHOAL_API int shoal_fifoe_sender_create(shoal_rmem_t m, size_t off, uint32_t max_pending,
                                        shoal_fifoe_sender_t **out);
SHOAL_API int shoal_fifoe_send(shoal_fifoe_sender_t *s, const void *data, size_t n);
/* Resends what is due; returns entries not yet stored (0: all stored). */
SHOAL_API int shoal_fifoe_progress(shoal_fifoe_sender_t *s);
/* Drives progress until every entry is stored or timeout_s passes
 * (SHOAL_ETIMEDOUT). */
SHOAL_API int shoal_fifoe_flush(shoal_fifoe_sender_t *s, double timeout_s);
SHOAL_API int shoal_fifoe_sender_destroy(shoal_fifoe_sender_t *s);

/* Signal (MBCF_SIGNAL): a structure in the owner's segment that stores what
 * senders send, with their rank, and may run a registered signal handler in
 * the owner's progress engine (never an address from the network). */
enum shoal_sig_storage {
    SHOAL_SIG_STORE_NONE,         /* store nothing (the handler still sees the data) */
    SHOAL_SIG_STORE_QUEUE,        /* append to the structure's queue; full: SHOAL_EFULL */
    SHOAL_SIG_STORE_BUFFER,       /* overwrite the fixed buffer (newest wins) */
    SHOAL_SIG_STORE_BUFFER_OFFSET /* write at buffer + the sender's offset */
};
enum shoal_sig_condition {
    SHOAL_SIG_EVERY_BLOCKING,  /* run on every arrival; cancel arrivals while running */
    SHOAL_SIG_FIRST_BLOCKING,  /* run on the first; cancel arrivals until shoal_signal_next clears it */
    SHOAL_SIG_EVERY,           /* run on every arrival */
    SHOAL_SIG_FIRST            /* run if not running, else only store; shoal_signal_next loops */
};
#define SHOAL_SIG_POLL (-1)    /* handler index meaning: store only, the owner polls */
struct shoal_signal_config {
    enum shoal_sig_storage storage;
    enum shoal_sig_condition condition;
    int handler;           /* index from shoal_signal_register, or SHOAL_SIG_POLL */
    size_t entry_bytes;    /* QUEUE: largest datum; BUFFER*: buffer size */
    uint32_t entries;      /* QUEUE: queue length */
};
/* Handler: runs in the owner's progress engine (the rules of a request
 * handler that does not reply).  data is the stored copy (or the message's,
 * with STORE_NONE), valid until it returns. */
typedef void (*shoal_signal_handler_t)(shoal_mem_t mem, size_t sig_off, int src, const void *data,
                                       size_t n, size_t offset);
#define SHOAL_SIGNAL_MAX_HANDLERS 64
SHOAL_API int shoal_signal_register(unsigned index, shoal_signal_handler_t fn);
SHOAL_API size_t shoal_signal_footprint(const struct shoal_signal_config *cfg);
SHOAL_API int shoal_signal_init(shoal_mem_t mem, size_t off, const struct shoal_signal_config *cfg);
/* Enable or disable (MB_SIGNAL_NONE: every signal SHOAL_ECANCELED). */
SHOAL_API int shoal_signal_enable(shoal_mem_t mem, size_t off, int enabled);
/* Send: data (n bytes) and, for BUFFER_OFFSET, the offset into the buffer. */
SHOAL_API int shoal_signal(shoal_rmem_t m, size_t off, const void *data, size_t n, size_t offset,
                           unsigned flags, shoal_handle_t *h);
/* Owner: the "done/next" call.  Takes the next queued entry (SHOAL_OK), or,
 * with the queue empty, clears the running flag atomically and returns
 * SHOAL_EAGAIN. */
SHOAL_API int shoal_signal_next(shoal_mem_t mem, size_t off, void *buf, size_t cap, size_t *n,
                                int *src);
/* Owner: blocks until a signal has been delivered to the structure since
 * the caller last looked (MBCF's task wake-up).  *seen is the number of
 * deliveries the caller has seen (mod 2^32; 0 after shoal_signal_init):
 * returns SHOAL_OK once the structure's count differs, storing it there,
 * or SHOAL_ETIMEDOUT after timeout_s seconds.  With SHOAL_PROGRESS=thread
 * the caller sleeps in the kernel and the progress thread's delivery wakes
 * it; otherwise it polls as shoal_wait_until does. */
SHOAL_API int shoal_signal_wait(shoal_mem_t mem, size_t off, uint32_t *seen, double timeout_s);
/* Owner: the running flag and entries waiting (for tests and tools). */
SHOAL_API int shoal_signal_state(shoal_mem_t mem, size_t off, int *running, uint32_t *queued);

/* ---- synchronization and collectives -------------------------------------- */
/* Collective; runs handlers while waiting. */
SHOAL_API int shoal_barrier(void);
/* Collective: root's n bytes at buf are copied into every other rank's buf.
 * Every rank passes the same n and root (a disagreement ends the job with a
 * message naming both ranks).  Runs handlers while waiting; returns when
 * this rank's buf is complete (the root: when it may reuse buf).
 * SHOAL_ERANK, SHOAL_EINVAL (buf NULL with n > 0), SHOAL_EHANDLER. */
SHOAL_API int shoal_broadcast(void *buf, size_t n, int root);
/* Element-wise reduction of count 8-byte elements of `type` (enum
 * shoal_atype) over every rank's `in`: into root's `out` (shoal_reduce;
 * out unused elsewhere) or every rank's (shoal_allreduce, identical bits on
 * every rank).  AND/OR/XOR: integer types only.  in and out may be the
 * same buffer.  Every rank passes the same count, type, op (and root).
 * SHOAL_ERANK, SHOAL_EINVAL, SHOAL_EHANDLER. */
enum shoal_rop { SHOAL_ROP_SUM, SHOAL_ROP_MIN, SHOAL_ROP_MAX, SHOAL_ROP_AND, SHOAL_ROP_OR, SHOAL_ROP_XOR };
SHOAL_API int shoal_reduce(const void *in, void *out, size_t count, enum shoal_atype type, enum shoal_rop op,
                           int root);
SHOAL_API int shoal_allreduce(const void *in, void *out, size_t count, enum shoal_atype type,
                              enum shoal_rop op);

/* ---- statistics ---------------------------------------------------------- */
struct shoal_stats {
    uint64_t am_sent[2];      /* [0] requests, [1] replies */
    uint64_t am_received[2];
    uint64_t bytes_sent;
    uint64_t send_stalls;     /* sends that found the ring full */
    uint64_t barriers;
    uint64_t broadcasts;      /* shoal_broadcast calls */
    uint64_t bcast_packets;   /* as root: chunks sent as one broadcast packet to every host */
    uint64_t bcast_resent;    /* as root: chunks resent reliably to a host that missed the packet */
    uint64_t reductions;      /* shoal_reduce and shoal_allreduce calls */
    uint64_t rma_direct;      /* commands this rank executed on mapped memory */
    uint64_t rma_remote;      /* commands this rank sent for a target to execute */
    uint64_t rma_executed;    /* commands this rank executed for peers */
    uint64_t rma_refused;     /* accesses to this rank's memory refused (key, bounds, permission) */
    uint64_t rma_failures;    /* failures reported to this rank for its commands */
    uint64_t dropped;         /* malformed messages dropped without effect */
    /* the cluster transport (zero when every peer is reached over shm) */
    uint64_t net_packets_sent, net_packets_received;
    uint64_t net_retransmits;      /* packets sent again (loss, or a late ack) */
    uint64_t net_dropped;          /* packets refused, all reasons (duplicates included) */
    uint64_t net_dropped_foreign;  /* of which not shoal's or another job's (magic, version, job, key) */
    uint64_t net_dropped_malformed;/* of which damaged (length, checksum, type, rank) */
    uint64_t net_send_batches;     /* times queued packets went to the kernel (a few system calls each) */
    /* one-sided commands this rank ran on the transport's native RMA (SHOAL_RMA_NATIVE) */
    uint64_t rma_native_puts, rma_native_gets, rma_native_atomics; /* commands, not pieces */
    uint64_t rma_native_refused;   /* of this rank's native commands, refused by its own check (key, bounds, permission) */
    /* messages and payload bytes sent, by class: [0] short, [1] medium, [2] long */
    uint64_t am_class_sent[3], bytes_class_sent[3];
    uint64_t wait_ns;              /* time in blocking calls that had to wait; counted with SHOAL_STATS=1 only */
    uint64_t am_bcast_frames;      /* shoal_am_bcast_* calls sent as one frame every other rank took (eth, udp) */
};
SHOAL_API int shoal_stats_get(struct shoal_stats *out);

#ifdef __cplusplus
}
#endif
#endif
