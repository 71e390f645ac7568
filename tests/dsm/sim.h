/* A simulated network for the dsm protocol engine: every node's engine in
 * one process, messages held in flight until the test (or an explorer)
 * chooses which one arrives next, in any order (like UDP) or in order per
 * sender and receiver (like shm rings).  Nodes run scripts of read and
 * write operations, flushes and evictions; the checks enforce the
 * protocol's invariants after every step. */
#ifndef SHOAL_TEST_DSM_SIM_H
#define SHOAL_TEST_DSM_SIM_H

#include "dsm/proto.h"

#include <setjmp.h>
#include <stdint.h>

#define SIM_MAX_NODES 4
#define SIM_MAX_REGIONS 2
#define SIM_MAX_FLIGHT 64
#define SIM_MAX_OPS 8
#define SIM_DATA 8 /* every simulated region holds one uint64_t */
/* A node's region table: a region or two, and the explorers set every node
 * up once per state they visit, so 8192 buckets would be most of their time. */
#define SIM_TABLE_BITS 4u

/* A delete must be the last step on its region anywhere: it waits until
 * no other node has a step left on the region (rgn_delete's rule: no other
 * rank uses the region any more, D10). */
enum sim_op { SIM_READ, SIM_WRITE, SIM_FLUSH, SIM_EVICT, SIM_DELETE };

struct sim_step {
    enum sim_op op;
    unsigned region;
};

enum sim_phase { SIM_IDLE, SIM_MAPPING, SIM_PENDING, SIM_RETRY, SIM_IN_OP, SIM_DELETING, SIM_DONE };

struct sim_flight {
    struct dsm_msg m;
    uint64_t data;
    uint64_t serial; /* send order, for FIFO delivery */
};

struct sim {
    unsigned nnodes, nregions;
    struct dsm_node nodes[SIM_MAX_NODES];
    dsm_rid_t rids[SIM_MAX_REGIONS];
    uint64_t committed[SIM_MAX_REGIONS]; /* value of the last completed write */
    int deleted[SIM_MAX_REGIONS];        /* its rgn_delete has returned */
    struct sim_flight flight[SIM_MAX_FLIGHT];
    unsigned nflight;
    uint64_t serial;
    /* scripts */
    struct sim_step script[SIM_MAX_NODES][SIM_MAX_OPS];
    unsigned script_len[SIM_MAX_NODES];
    unsigned pc[SIM_MAX_NODES];
    enum sim_phase phase[SIM_MAX_NODES];
    int fifo; /* deliver in order per (src, dst) */
    /* a failed check or engine failure jumps here with the reason */
    jmp_buf *on_fail;
    char why[600];
};

/* The Cosmos actions every node of the next sim_init takes (DSM_ACT_BIT()s),
 * on an oracle that always predicts what triggers them: every legal point
 * takes its action, the most any misprediction can make the protocol do. */
extern unsigned sim_act;

/* Regions are homed round-robin from node 0. */
void sim_init(struct sim *s, unsigned nnodes, unsigned nregions, int fifo);
void sim_fini(struct sim *s);

/* Enabled actions: deliveries first (index into flight), then node steps
 * (SIM_ACT_NODE + node).  Returns the count written into acts. */
#define SIM_ACT_NODE 1000u
unsigned sim_enabled(const struct sim *s, unsigned *acts, unsigned cap);
void sim_do(struct sim *s, unsigned act);
int sim_all_done(const struct sim *s);

/* Invariants: single writer, readers see the last write (checked when an
 * operation starts), and at quiescence: directory = valid copies, no
 * blocked request, no pending invalidation, data consistent; a deleted
 * region is in no node's table. */
void sim_check_step(struct sim *s);
void sim_check_quiescent(struct sim *s);
/* A hash of everything that determines the future (for pruning). */
uint64_t sim_hash(const struct sim *s);

/* Direct access for hand-built scenarios. */
void sim_deliver_index(struct sim *s, unsigned i);
/* Scenario steps, each followed by the invariants: node n's next action;
 * the delivery of the one message of type from src to dst in flight (the
 * test fails if there is none). */
void sim_step(struct sim *s, unsigned n);
void sim_arrive(struct sim *s, enum dsm_msg_type type, unsigned src, unsigned dst);
int sim_find_flight(const struct sim *s, enum dsm_msg_type type, uint32_t src, uint32_t dst);
struct dsm_region *sim_region(struct sim *s, unsigned node, unsigned region);
uint64_t sim_value(const struct dsm_region *r);
_Noreturn void sim_fail(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
