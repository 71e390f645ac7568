/* The transport interface: what the AM layer needs of a transport that
 * reaches ranks whose memory is not mapped here (udp and eth in net/, ofi
 * in ofi/).  Shared memory is the other kind of transport: its rings are
 * inline in am.c behind one local-peer test, because its fast path is a
 * handful of instructions an indirect call would double.
 *
 * A message transport moves opaque messages of up to max_payload() bytes,
 * reliably and in order per (peer, channel), on two channels: requests and
 * replies, each with its own credits, so a reply never waits for room only
 * the peer's request handlers free (von Eicken's Active Messages thesis: CMAM's two networks).  Framing
 * active messages into messages is the AM layer's (am/am_net.c), the same
 * over every transport.
 *
 * Progress is the caller's: nothing is delivered except inside poll(), on
 * the calling thread.  A transport may keep a thread of its own for acks and
 * keepalives, never for delivery.  With SHOAL_PROGRESS=thread am's progress
 * thread is one more caller (am/progress.c): it calls poll() holding am's
 * lock, never at the same time as the application, and sleeps outside it
 * on wait_fd(), which no other operation touches.
 *
 * This header depends on nothing but the C library, so a transport's folder
 * includes it and util/util.h, and no layer above am includes a transport. */
#ifndef SHOAL_TRANSPORT_H
#define SHOAL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

enum tp_channel { TP_REQUEST = 0, TP_REPLY = 1 };

/* One delivered message, valid only during the deliver call. */
struct tp_msg {
    uint32_t peer;
    enum tp_channel channel;
    int bcast; /* arrived by best-effort broadcast (on the request channel) */
    const void *data;
    size_t len;
};

/* Runs one delivered message; it may call send() (a reply). */
typedef void (*tp_deliver_fn)(const struct tp_msg *m);

/* What a transport did (shoal_get_stats, shoal-info, tests).  A transport
 * fills the counters that mean something for it and leaves the rest 0. */
struct tp_stats {
    uint64_t packets_sent, packets_received, bytes_sent, bytes_received;
    uint64_t retransmits, acks_sent, send_overflows; /* send_overflows: the socket buffer was full */
    uint64_t dropped;           /* packets the decoder or the engines refused, all reasons */
    uint64_t dropped_foreign;   /* of which not this job's (magic, job, key, version) */
    uint64_t dropped_malformed; /* of which damaged (length, checksum, type, rank) */
    uint64_t faults_dropped;    /* lost on purpose by SHOAL_FAULTS */
    uint64_t thread_runs;       /* times a progress thread worked for an absent application */
    uint64_t send_batches;      /* flushes of the send queue that had packets */
    uint64_t rx_coalesced;      /* udp: receive buffers that held several datagrams the kernel coalesced */
};

/* What init is given.  serves[r] is 1 for every rank this transport must
 * reach (the others are on shared memory, or this rank); the transport may
 * still open an endpoint to every rank.  init is collective over the whole
 * job (every rank calls it, through the bootstrap's allgather), even on a
 * rank whose serves[] is all 0. */
struct tp_init {
    int rank, nranks;
    uint64_t job_id;
    const char *name;       /* the SHOAL_TRANSPORT value that chose it ("udp", "eth", "ofi") */
    const uint8_t *serves;  /* [nranks] */
    tp_deliver_fn deliver;
};

/* Optional native one-sided commands of a transport (ofi: docs/OFI.md §8),
 * on memory each rank exposes, run without the target's handlers.  A
 * command's request goes from SHOAL_PENDING to SHOAL_OK or a SHOAL_E code
 * inside the transport's poll() or flush(), which then calls done (when
 * set): that is how the layer above learns of it without polling each.
 * A get or an atomic is then complete.  A put completed at the initiator
 * has not necessarily arrived: a message sent to the target after put()
 * returned is delivered after the written data (available() promises
 * that order), which is how the layer above learns that a put is done. */
struct tp_rma_req {
    volatile int32_t status; /* SHOAL_PENDING, then SHOAL_OK or a SHOAL_E code */
    void (*done)(struct tp_rma_req *req);
};

enum tp_amo { TP_AMO_FETCH_ADD, TP_AMO_CSWAP };

struct tp_rma_ops {
    /* 1 when put and get are native here; *atomics (may be NULL) 1 when
     * fetch-add and compare-swap on 64-bit words are too. */
    int (*available)(int *atomics);
    /* 1 when the provider moves one-sided data without the target's calls
     * (automatic data progress, as on RDMA hardware); 0 when a command
     * advances only while the target polls, so a target that waits with
     * backoff (sleeping after a while without messages) slows it. */
    int (*autonomous)(void);
    /* The largest put or get (the layer above splits longer ones). */
    size_t (*max_bytes)(void);
    /* Collective: registers [base, base + len) for remote reads, writes
     * and atomics and publishes what peers need through the bootstrap;
     * *id names it on every rank.  SHOAL_OK, SHOAL_EINVAL (not available),
     * SHOAL_ENOMEM (no more regions), SHOAL_ESYS (a rank's registration
     * failed; logged). */
    int (*expose)(void *base, size_t len, uint32_t *id);
    /* Start one command at offset of dest's region id.  SHOAL_OK (req is
     * then pending), SHOAL_EAGAIN (no room now: poll and retry),
     * SHOAL_ERANK, SHOAL_ESEGMENT (no region id), SHOAL_ERANGE (outside
     * dest's region), SHOAL_ETOOBIG (above max_bytes), SHOAL_EALIGN (an
     * atomic's offset not 8-byte aligned), SHOAL_EINVAL (not available). */
    int (*put)(int dest, uint32_t id, uint64_t offset, const void *src, size_t len, struct tp_rma_req *req);
    int (*get)(int dest, uint32_t id, uint64_t offset, void *dst, size_t len, struct tp_rma_req *req);
    /* *old receives the word before the operation (compare-swap writes
     * operand where the word equals compare). */
    int (*amo)(int dest, uint32_t id, uint64_t offset, enum tp_amo op, uint64_t operand, uint64_t compare,
               uint64_t *old, struct tp_rma_req *req);
};

struct tp_ops {
    /* Collective.  SHOAL_OK or a negative SHOAL_E code after logging why. */
    int (*init)(const struct tp_init *in);
    /* Waits (bounded) until what this rank sent is acknowledged, then closes. */
    void (*fini)(void);
    /* 1 when everything this rank sent to a live peer has arrived there. */
    int (*settled)(void);
    /* The largest message send() takes, head and body together. */
    size_t (*max_payload)(void);
    /* Queues one message for dest: head then body (copied; either may be
     * empty).  SHOAL_OK, SHOAL_EAGAIN (no room or credits: poll and retry),
     * SHOAL_EPEERDEAD. */
    int (*send)(int dest, enum tp_channel ch, const void *head, size_t hlen, const void *body, size_t blen);
    /* Messages send() to dest would take right now without SHOAL_EAGAIN. */
    uint32_t (*room)(int dest, enum tp_channel ch);
    /* Hands queued messages to the network (sends with SHOAL_MORE queue). */
    void (*flush)(void);
    /* Receives, runs timers and delivers messages (only replies when
     * replies_only); returns the events that happened (0: nothing, so a
     * waiter may back off). */
    unsigned (*poll)(int replies_only);
    /* Sleeps until something arrives, a timer is due, or max_ns pass. */
    void (*wait)(uint64_t max_ns);
    /* "udp 10.0.0.2:40001": this rank's endpoint. */
    const char *(*describe)(char *buf, size_t cap);
    void (*stats)(struct tp_stats *out);

    /* Optional (NULL: not offered).  Best-effort message to every other
     * rank, delivered with bcast set (SHOAL_EINVAL above max_payload). */
    int (*bcast)(const void *head, size_t hlen, const void *body, size_t blen);
    /* Optional: queues one message for every other rank as ONE
     * transmission, delivered reliably and in order with send()'s to each
     * (as if sent to each).  SHOAL_OK, SHOAL_EAGAIN (some rank has no room),
     * SHOAL_EPEERDEAD, SHOAL_EINVAL (not possible in this job: no native
     * broadcast, too many ranks, too large; send to each instead). */
    int (*send_all)(enum tp_channel ch, const void *head, size_t hlen, const void *body, size_t blen);
    /* 1 when bcast is one transmission every other host receives. */
    int (*bcast_native)(void);
    /* A collective starts (1) or stops (0) waiting for broadcasts (nests). */
    void (*bcast_listen)(int on);
    /* Native one-sided commands (NULL: none; then, or when available()
     * says 0, the AM layer's users execute commands at the target). */
    const struct tp_rma_ops *rma;
    /* A descriptor that polls readable when a message may have arrived, for
     * a thread to sleep on while another may be inside the other operations
     * (am's progress thread); -1 or NULL: none, that thread naps instead. */
    int (*wait_fd)(void);
};

#endif
