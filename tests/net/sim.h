/* A simulated network for the reliability engine: N rel engines in one
 * process on a virtual clock (no sleeping).  Each packet an engine sends
 * goes through its send-side fault injector, then its NIC (serialized at
 * a fixed byte rate), then a fixed wire latency, then the receiver's
 * receive-side fault injector, then rel_input.  The application of each
 * node is a callback that runs between events.  Everything is
 * deterministic: a run depends only on its configuration. */
#ifndef SHOAL_TEST_NET_SIM_H
#define SHOAL_TEST_NET_SIM_H

#include "net/faults.h"
#include "net/rel.h"

#include <stddef.h>

#define SIM_MAX_NODES 8
#define SIM_JOB 0x5348u  /* job and key of every simulated engine */
/* The simulated job's secret (its NH key derived on first use). */
const struct wire_key *sim_key(void);
#define SIM_KEY (*sim_key())

struct sim;

/* Called between events; returns the next time it wants to run even if
 * nothing arrives (REL_NEVER: only after events), and sets *done when the
 * scenario is complete. */
typedef uint64_t (*sim_app_fn)(struct sim *s, void *ctx, int *done);

/* Sees every packet leaving a NIC (after send-side faults); returns 1 to
 * lose it.  For tests that drop or capture one particular packet. */
typedef int (*sim_tap_fn)(struct sim *s, void *ctx, uint32_t src, uint32_t dst, const void *pkt, size_t len);

struct sim_node {
    struct sim *sim;
    uint32_t index;
    struct rel *rel;             /* the request channel, or the only one */
    struct rel *reply;           /* the reply channel, linked to rel; NULL unless sim_add_reply_channels */
    struct faults fsend, frecv;
    uint32_t incarnation;
    uint64_t nic_free;           /* when the NIC finishes what it was given */
    int down;                    /* sends and receives nothing, runs no timers */
    unsigned dead_reports[SIM_MAX_NODES];
    uint64_t dead_at[SIM_MAX_NODES];
    uint64_t heard_at[SIM_MAX_NODES]; /* when rel_input last accepted a packet from each node */
    enum rel_dead_reason dead_why[SIM_MAX_NODES];
};

struct sim_event;

struct sim {
    unsigned n;
    uint64_t now;
    uint64_t latency_ns;
    double ns_per_byte;
    struct rel_config rel_cfg;   /* template: self and incarnation set per node */
    struct util_fault_spec faults;
    struct sim_node nodes[SIM_MAX_NODES];
    struct sim_event *heap;      /* packets on the wire, by arrival time */
    size_t heap_len, heap_cap;
    uint64_t order;              /* ties in arrival time keep sending order */
    uint64_t wire_packets;
    sim_tap_fn tap;
    void *tap_ctx;
};

/* Fills the identity fields of *c: node self of nranks in the simulated job,
 * with this incarnation. */
void sim_identity(struct rel_config *c, uint32_t self, uint32_t nranks, uint32_t incarnation);

/* n nodes with rel configuration *rc (identity fields filled here) and the
 * SHOAL_FAULTS-style spec applied to both paths of every node; 2 us wire
 * latency, 10 Gb/s NICs. */
void sim_init(struct sim *s, unsigned n, const struct rel_config *rc, const char *faults);
void sim_fini(struct sim *s);

/* Gives every node a reply channel (reply_channel set, rel_link'ed to its
 * engine), as the transport has; packets go to the engine of their
 * channel, and sim_restart restarts both. */
void sim_add_reply_channels(struct sim *s);

/* Runs until the app says done; fails the test if virtual time would pass
 * `limit` ns. */
void sim_run(struct sim *s, sim_app_fn app, void *ctx, uint64_t limit);

/* Replaces node i's engine with a fresh one (a restarted process) with a
 * new incarnation; packets in flight to it still arrive. */
void sim_restart(struct sim *s, unsigned i, uint32_t incarnation);

/* Sum of one rel_stats counter over the engines (both channels):
 * sim_sum(s, offsetof(struct rel_stats, retransmits)). */
uint64_t sim_sum(const struct sim *s, size_t counter);
#define SIM_SUM(s, field) sim_sum((s), offsetof(struct rel_stats, field))

#endif
