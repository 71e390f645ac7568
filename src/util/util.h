/* util layer: errors, configuration, logging, time.  Internal to libshoal. */
#ifndef SHOAL_UTIL_H
#define SHOAL_UTIL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>

#define UTIL_LIKELY(x) __builtin_expect(!!(x), 1)
#define UTIL_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- configuration: every SHOAL_* variable is read here and only here ---- */
enum util_cfg_id {
    CFG_LOG,            /* log level */
    CFG_STRICT,         /* abort on handler-rule violations */
    CFG_SHM_RING_SLOTS, /* slots per ring */
    CFG_SHM_MEDIUM_MAX, /* largest medium payload */
    CFG_SHM_LANES,      /* request rings per sender for MULTIPLE's threads */
    CFG_SHM_OUTBOX_BYTES, /* each outbox pool: mediums that do not fit their ring */
    CFG_SHM_WATCHED,    /* senders an inbox's owner polls directly */
    CFG_SPIN,           /* spins before yielding in a wait */
    CFG_SEG_SIZE,       /* default segment size for tools/benchmarks */
    CFG_TRANSPORT,      /* transport selection */
    CFG_RMA_HEAP,       /* per-rank shared heap for segments */
    CFG_RMA_DIRECT,     /* one-sided commands on mapped memory run directly */
    CFG_RMA_NATIVE,     /* one-sided commands on the transport's native RMA */
    CFG_FAULTS,         /* fault injection on the cluster carriers */
    CFG_NET_LOCAL,      /* ranks on one host also use the cluster transport */
    CFG_IFACE,          /* interface of the cluster transport */
    CFG_PORT_RANGE,     /* UDP ports the cluster transport may bind */
    CFG_NET_SOCKBUF,    /* socket buffer bytes of the cluster transport */
    CFG_NET_CONNECTED,  /* peers that get a connected udp send socket */
    CFG_NET_DEAD_MS,    /* silence after which a peer is dead */
    CFG_NET_WAIT,       /* how waits receive from the network: spin or block */
    CFG_NET_THREAD,     /* progress thread for the cluster transport */
    CFG_NET_BCAST,      /* collectives use the network's broadcast */
    CFG_NET_GSO,        /* udp: runs of equal datagrams in one send (UDP_SEGMENT) */
    CFG_NET_AUTH,       /* what the packets' MAC covers */
    CFG_ETH_RING,       /* eth: receive through a PACKET_MMAP ring */
    CFG_CRL_URC_SIZE,   /* CRL unmapped region cache entries */
    CFG_CRL_STATS,      /* CRL counters printed at crl_exit */
    CFG_COSMOS_TRACE,   /* directory of the coherence-message traces */
    CFG_COSMOS,         /* the coherence-message predictor runs in-line */
    CFG_COSMOS_DEPTH,   /* its history depth */
    CFG_COSMOS_FILTER,  /* its filter's max count */
    CFG_COSMOS_SENDER_INDEX, /* its sender-indexed variant */
    CFG_COSMOS_ACT,     /* actions driven by its predictions */
    CFG_HANG_REPORT,    /* seconds without progress before a waiting rank reports */
    CFG_BACKTRACE,      /* a crashing rank prints its backtrace */
    CFG_STATS,          /* statistics table at shoal_finalize */
    CFG_AM_LARGE_MAX,   /* largest internal medium that am cuts into pieces */
    CFG_PROGRESS,       /* who runs handlers: the application's calls (poll) or a progress thread */
    CFG_PROGRESS_SPIN_US, /* how long the progress thread polls before it sleeps */
    CFG_PROGRESS_SLICE_US, /* the scheduler slice the progress thread asks for */
    CFG_BARRIER,        /* the barrier's algorithm across hosts */
    CFG_BARRIER_CHAINS, /* K of the K-chain barrier */
    CFG_RANK,           /* set by shoalrun */
    CFG_SIZE,           /* set by shoalrun */
    CFG_BOOT_FD,        /* set by shoalrun */
    CFG_JOB_FD,         /* set by shoalrun */
    CFG_JOB_ID,         /* set by shoalrun */
    CFG_COUNT
};

struct util_cfg_entry {
    const char *name;        /* full variable name */
    const char *default_str; /* default, as text */
    const char *meaning;     /* one line */
};

/* Reads and validates every variable once; returns SHOAL_ECONFIG with a log
 * line naming the bad one. */
int util_config_load(void);
/* Validates every variable without logging: SHOAL_ECONFIG and, in err,
 * "invalid NAME=\"value\": ...; accepted: <the setting's description>"
 * (the launcher checks before it starts any rank). */
int util_config_check(char *err, size_t n);
/* Calls report for every SHOAL_* variable of the environment that is not a
 * setting, with the nearest setting's name (NULL if none is close);
 * returns how many. */
int util_config_unknown(void (*report)(const char *var, const char *nearest, void *arg), void *arg);
/* The value as text (default if unset); never NULL. */
const char *util_config_str(enum util_cfg_id id);
/* Integer value, accepting K/M/G suffixes; *set tells whether the user set it. */
long long util_config_int(enum util_cfg_id id);
int util_config_is_set(enum util_cfg_id id);
const struct util_cfg_entry *util_config_table(size_t *count);
/* Parses a SHOAL_PORT_RANGE value ("0", or "LO-HI" with 0 < LO <= HI <=
 * 65535) into *lo, *hi (either may be NULL); -1 if malformed. */
int util_port_range(const char *v, uint16_t *lo, uint16_t *hi);
/* SHOAL_COSMOS_ACT's comma-separated list -> a bit per action, in the
 * order of util_cosmos_act_names (dsm's enum dsm_act_kind); -1 for a name
 * not among them. */
#define UTIL_COSMOS_ACTS 6
extern const char *const util_cosmos_act_names[UTIL_COSMOS_ACTS];
int util_cosmos_act_mask(const char *v);

/* SHOAL_FAULTS, the fault-injection spec (syntax: net/faults.h). */
struct util_fault_spec {
    double loss, dup, reorder, corrupt; /* probabilities per packet */
    uint64_t delay_ns;                  /* added to every packet */
    uint64_t seed;                      /* PRNG seed, mixed with the stream id */
};

/* Parses spec into *c.  Returns SHOAL_OK, or SHOAL_EINVAL with a message
 * naming the bad item in err (errlen bytes; err may be NULL). */
int util_fault_parse(const char *spec, struct util_fault_spec *c, char *err, size_t errlen);


/* The smallest SHOAL_SHM_MEDIUM_MAX: one message must carry the largest
 * one-sided command that is never split (a 4096-byte FIFO entry, signal
 * datum or z-buffer, RMA_MAX_STRUCT_DATA) on the served path. */
#define UTIL_MEDIUM_MIN 4096u

/* The most SHOAL_SHM_LANES: each lane adds a request ring per sender to an
 * inbox, memory that is populated, so 16 lanes make a MULTIPLE rank's inbox
 * 9 times a lane-less one (18 MiB at 2 ranks with the default rings, up to
 * 1.1 GiB per host where the default rule holds all rings to 128 MiB), and
 * a poll walks 16 rings per local sender once a lane is used; more threads
 * than that sending at once on one host outnumber its cores anyway. */
#define UTIL_SHM_LANES_MAX 16u

/* SHOAL_SHM_OUTBOX_BYTES, when not 0: at least four 4096-byte mediums in
 * flight, at most 1 GiB per pool. */
#define UTIL_SHM_OUTBOX_MIN 16384u
#define UTIL_SHM_OUTBOX_MAX (1ll << 30)

/* ---- sizes --------------------------------------------------------------- */
/* v rounded up to a multiple of a; SIZE_MAX when that does not fit, which
 * every size check after it then refuses as too large. */
static inline size_t util_round_up(size_t v, size_t a)
{
    size_t r = v % a;
    return r == 0 ? v : v > SIZE_MAX - (a - r) ? SIZE_MAX : v + (a - r);
}

/* ---- logging ---------------------------------------------------------- */
enum util_log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG, LOG_TRACE };
extern int util_log_level;
void util_log_set_identity(int rank);
void util_log(enum util_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define LOG(lvl, ...) do { if ((lvl) <= util_log_level) util_log((lvl), __VA_ARGS__); } while (0)

/* Prints "shoal: rank R on HOST: <cause>" to stderr, tells the launcher,
 * and exits the process with status 1 (the launcher ends the others). */
_Noreturn void util_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void util_fatal_v(int exitcode, const char *fmt, va_list ap);
/* With report, makes a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT)
 * print the signal, the faulting address and a symbolized backtrace,
 * naming rank, before the process dies of the signal; without, only makes
 * sure it dies of it (crash.c).  Signals the program handles itself are
 * left alone; nothing changes in sanitizer builds.  Calling it again
 * updates the rank. */
void util_crash_init(int rank, int report);
/* Called by util_fatal before exiting (set by core to notify the launcher). */
extern void (*util_fatal_hook)(int exitcode, const char *msg);
/* util_fatal for "peer `rank` failed" (-1: the launcher ended the job):
 * first runs util_peer_failure_hook once per process (the application's
 * failure handler).  A second thread that gets here meanwhile waits for
 * the first to exit. */
_Noreturn void util_peer_fatal(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern void (*util_peer_failure_hook)(int rank, const char *msg);
const char *util_hostname(void);

/* ---- time -------------------------------------------------------------- */
static inline uint64_t util_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- spinning ------------------------------------------------------------ */
static inline void util_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* A wait loop's back-off: spin SHOAL_SPIN times, then sched_yield, then
 * short sleeps, so oversubscribed jobs never livelock. */
struct util_backoff { uint32_t spins; uint32_t limit; };
#define UTIL_BACKOFF_HOT 4096u /* polls without pause before pausing */
void util_backoff_init(struct util_backoff *b);
void util_backoff_slow(struct util_backoff *b);

/* No pause at first: on Zen and Skylake+ a pause costs 60-140 cycles, which
 * would be added to the latency of a message that arrives during it; each
 * poll between two calls is itself a few loads. */
static inline void util_backoff_wait(struct util_backoff *b)
{
    if (UTIL_LIKELY(b->spins < UTIL_BACKOFF_HOT && b->spins < b->limit)) {
        b->spins++;
        return;
    }
    util_backoff_slow(b);
}


/* A lock held for a few stores (a ring's sender state, an allocator): spin
 * on a plain load, backing off as a wait does, unless its holder lost its
 * core. */
static inline void util_spin_lock(_Atomic uint32_t *lock)
{
    while (atomic_exchange_explicit(lock, 1, memory_order_acquire)) {
        struct util_backoff b;
        util_backoff_init(&b);
        while (atomic_load_explicit(lock, memory_order_relaxed))
            util_backoff_wait(&b);
    }
}

static inline void util_spin_unlock(_Atomic uint32_t *lock)
{
    atomic_store_explicit(lock, 0, memory_order_release);
}


#endif
