/* shm transport: per-rank inbox regions holding the rings every local peer
 * sends into, made of mem/'s memfd allocations.  am reaches it inline (its
 * fast path is too short for an indirect call); no layer above am includes
 * this.  Layout: docs/SHM_QUEUE.md. */
#ifndef SHOAL_SHM_H
#define SHOAL_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "mem/mem.h"
#include "shm/outbox.h"
#include "shm/ring.h"

#define SHM_MAGIC 0x4d4853414f4853ull /* "SHOASHM" */
#define SHM_LAYOUT_VERSION 5u
#define SHM_CLASSES 2u                /* 0 = requests, 1 = replies */
#define SHM_LANES_OFFSET 6272u
#define SHM_SUMMARY_TOP_OFFSET 6400u  /* a byte per 64 senders: that line of the summary has a byte set */
#define SHM_BARRIER_ROUNDS 16u        /* dissemination rounds: 2^16 ranks */
#define SHM_BARRIER_OFFSET 4096u
#define SHM_DOORBELL_OFFSET 6144u
#define SHM_HEADS_OFFSET 8192u
#define SHM_RING_BUDGET_MIN (4u << 20) /* a rank's rings may always take this much */

struct shm_region_header {
    uint64_t magic;
    uint32_t version;
    uint32_t owner_rank;
    uint32_t nranks;         /* ranks of this host: senders with rings here */
    uint32_t ring_slots;
    uint64_t rings_offset;
    uint64_t total_bytes;
    int32_t owner_pid;
    uint32_t lanes;          /* per sender: SHOAL_SHM_LANES at MULTIPLE, else 0 */
    uint64_t outbox_offset;  /* the owner's outbox: its request pool, then its reply pool */
    uint64_t outbox_bytes;   /* per pool (SHOAL_SHM_OUTBOX_BYTES); 0: no outbox */
    uint32_t watch_max;      /* W: senders polled directly when more are local (SHOAL_SHM_WATCHED) */
};

/* One dissemination-barrier flag, written by one peer per round. */
struct shm_barrier_flag {
    _Atomic uint64_t epoch;
    char pad[RING_HEAD_BLOCK - sizeof(uint64_t)];
} __attribute__((aligned(RING_HEAD_BLOCK)));

/* The owner's progress thread (SHOAL_PROGRESS=thread) sleeps on this word
 * when it has nothing to do: 1 says so, and the first sender to see it
 * clears it and wakes the thread (a futex shared between processes).  0
 * the rest of the time, so senders to a rank that polls only look. */
struct shm_doorbell {
    _Atomic uint32_t asleep;
    /* 0: the owner sleeps on asleep as a futex; else it sleeps on its
     * network socket, and a sender ends that sleep with a signal to this
     * thread (tgkill) of process pid */
    _Atomic int32_t pid;
    _Atomic int32_t tid;
    char pad[RING_HEAD_BLOCK - 3 * sizeof(uint32_t)];
} __attribute__((aligned(RING_HEAD_BLOCK)));

/* What a sender needs of one local peer's inbox beyond the rings: its own
 * byte of the peer's summary, and its own watched flag there, which only
 * the peer writes (docs/SHM_QUEUE.md, "Watched senders and the summary"). */
struct shm_peer {
    uint8_t *summary;
    uint8_t *top;            /* the byte of the peer's summary top for this sender's line */
    const uint8_t *watched;
};

/* The receiver's side of the summary: which senders it polls directly. */
struct shm_watch {
    int on;                  /* more local senders than watch_max: some are not watched */
    int sender_fence;        /* no membarrier: senders fence before they read their flag */
    int *list;               /* [nlocal]: local indices of the watched senders */
    int n;                   /* how many */
    uint64_t *seen;          /* [nlocal]: a watched sender's ring heads' sum at the last pass */
    uint8_t *flag;           /* [nlocal] in this rank's inbox: 1 = watched */
    uint8_t *member;         /* [nlocal]: in list (a demotion candidate is, with its flag clear) */
    uint64_t *summary;       /* [words] in this rank's inbox: byte s set by sender s */
    int words;
    uint64_t *top;           /* [top_words] in this rank's inbox: byte L set when line L of the summary may be */
    int top_words;
    unsigned polls;          /* since the last demotion pass */
    uint64_t promotions, demotions, passes; /* counted for tests and stats */
};

struct shm_state {
    int rank;
    int nranks;
    int nlocal;              /* ranks reached over shared memory, this one included */
    int *local;              /* [nlocal]: those ranks, in rank order */
    int *local_index;        /* [nranks]: index in local[], -1 for ranks on other hosts */
    uint32_t ring_slots;
    /* Request rings per sender that one sending thread each owns (a lane:
     * single producer, so no lock) in this rank's inbox: SHOAL_SHM_LANES
     * at SHOAL_THREAD_MULTIPLE, else 0; this rank's threads use as many in
     * every peer's inbox that has lanes (shm_init checks they agree). */
    uint32_t lanes;
    void **regions;          /* regions[r]: rank r's inbox, mapped here (NULL: other host) */
    size_t *region_sizes;    /* as mapped (a peer's may differ if misconfigured) */
    size_t region_bytes;     /* this rank's */
    struct ring_tx *tx;      /* [dest * SHM_CLASSES + class]; local dests only */
    struct ring_rx *rx;      /* [local index * SHM_CLASSES + class] */
    struct ring_tx *lane_tx; /* [lane * nranks + dest] (a thread's lane is a row); local dests with lanes only (slots NULL: none) */
    struct ring_rx *lane_rx; /* [local index * lanes + lane] */
    size_t outbox_bytes;     /* per pool, the same in every inbox (shm_init checks) */
    char **outbox;           /* [nranks]: rank r's request pool, its reply pool after it (NULL: other host) */
    struct outbox out[SHM_CLASSES]; /* this rank's pools, by class */
    uint32_t watch_max;      /* W */
    struct shm_peer *peer;   /* [nranks]; local dests only */
    struct shm_watch watch;
};

/* Geometry for nranks ranks on one host: slots per ring
 * (SHOAL_SHM_RING_SLOTS or the default rule) and the region size. */
uint32_t shm_default_ring_slots(int nranks);
size_t shm_region_bytes(int nranks, uint32_t ring_slots, uint32_t lanes);
/* Bytes of each of a rank's two outbox pools for nranks ranks on a host:
 * SHOAL_SHM_OUTBOX_BYTES, or 0 where rings hold every medium. */
size_t shm_outbox_bytes(int nranks);
/* Bytes before the payload of a medium with the most arguments in its ring
 * (control word and 16 arguments, rounded up to a slot): am's layout. */
#define SHM_MEDIUM_HEAD_MAX 192u
/* The part of an inbox backed at start-up: everything before the rings. */
size_t shm_region_eager_bytes(int nranks, uint32_t lanes);


/* Collective: creates this rank's inbox, exchanges descriptors, maps the
 * inbox of every peer on this host (boot_rank_local) and validates it. */
/* lanes: per sender in this rank's inbox (0 below SHOAL_THREAD_MULTIPLE). */
int shm_init(struct shm_state *st, int rank, int nranks, unsigned lanes);
void shm_fini(struct shm_state *st);

/* Rank r's doorbell, in its inbox (r on this host). */
static inline struct shm_doorbell *shm_doorbell(const struct shm_state *st, int r)
{
    return (struct shm_doorbell *)((char *)st->regions[r] + SHM_DOORBELL_OFFSET);
}

/* Nonzero in rank r's inbox once a sender has written into one of its
 * lanes: until then its owner polls none of them. */
struct shm_lanes {
    _Atomic uint32_t used;
    char pad[RING_HEAD_BLOCK - sizeof(uint32_t)];
} __attribute__((aligned(RING_HEAD_BLOCK)));

static inline struct shm_lanes *shm_lanes(const struct shm_state *st, int r)
{
    return (struct shm_lanes *)((char *)st->regions[r] + SHM_LANES_OFFSET);
}

/* Demotion's fence: after it, every sender's store before its last load
 * of its watched flag is visible here (membarrier, or a fence when the
 * senders fence themselves). */
void shm_watch_fence(const struct shm_state *st);
/* Makes local index i watched: its flag set, in the list (once). */
void shm_watch_add(struct shm_state *st, int i);

/* First contact: backs and maps the ring tx writes into, whose pages
 * nobody has touched yet; SHOAL_ENOMEM (logged, naming rank dest and the
 * bytes) when the host or its memory cgroup cannot. */
int shm_tx_first_contact(struct ring_tx *tx, int dest);

/* Barrier flag `round` in rank r's inbox. */
struct shm_barrier_flag *shm_barrier_flag(struct shm_state *st, int r, unsigned round);

#endif
