/* The DSM observer on the simulated network (tests/dsm/sim.c): a hand-run
 * scenario of three nodes on one region homed at node 0 yields, at each
 * node, exactly the records the mapping of docs/CRL.md §8.1 gives, with
 * their roles, senders, causes and receive order; mapping messages are
 * not recorded. */
#include "../dsm/sim.h"
#include "../common/check.h"
#include "dsm/observe.h"

#include <stdio.h>
#include <string.h>

#define MAX_RECS 16

struct collected {
    struct cosmos_rec recs[MAX_RECS];
    unsigned n;
};

static void collect(void *ctx, const struct cosmos_rec *rec, struct cosmos_blk *blk)
{
    struct collected *c = ctx;
    (void)blk; /* the predictor's: this test checks the records */
    CHECK(c->n < MAX_RECS, "more than %d records", MAX_RECS);
    c->recs[c->n++] = *rec;
}

static void map(struct sim *s, unsigned n)
{
    sim_arrive(s, DSM_MSG_RGN_INFO_REQ, n, 0);
    sim_arrive(s, DSM_MSG_RGN_INFO_ACK, 0, n);
}

/* Node 1 writes, node 0 (the home) then reads, node 2 then reads. */
static void run_scenario(struct sim *s)
{
    sim_step(s, 1);                                      /* map miss */
    map(s, 1);
    sim_step(s, 1);                                      /* start_write: MsgExclusiveReq */
    sim_arrive(s, DSM_MSG_EXCLUSIVE_REQ, 1, 0);
    sim_arrive(s, DSM_MSG_EXCLUSIVE_ACK_DATA, 0, 1);
    sim_step(s, 1);                                      /* the write runs */
    sim_step(s, 1);                                      /* end_write: RemoteModified */
    sim_step(s, 0);                                      /* home start_read: MsgRInvalidate */
    sim_arrive(s, DSM_MSG_RINVALIDATE, 0, 1);
    sim_arrive(s, DSM_MSG_INVALIDATE_ACK_DATA, 1, 0);    /* the dirty copy comes back */
    sim_step(s, 0);                                      /* the read runs */
    dsm_observe_mark(&s->nodes[0], COSMOS_MARK_BARRIER);
    sim_step(s, 2);                                      /* map miss */
    map(s, 2);
    sim_step(s, 2);                                      /* start_read: MsgSharedReq */
    sim_arrive(s, DSM_MSG_SHARED_REQ, 2, 0);
    sim_arrive(s, DSM_MSG_SHARED_ACK_DATA, 0, 2);
}

#define REC(blk, snd, rl, ty, pr, ca, sq) \
    {.block = (blk), .sender = (snd), .role = (rl), .type = (ty), .proto = (pr), .cause = (ca), .seq = (sq)}

int main(void)
{
    struct sim s;
    sim_init(&s, 3, 1, 0);
    const struct sim_step script[3][SIM_MAX_OPS] = {
        {{SIM_READ, 0}}, {{SIM_WRITE, 0}}, {{SIM_READ, 0}}};
    for (unsigned n = 0; n < 3; n++) {
        memcpy(s.script[n], script[n], sizeof s.script[n]);
        s.script_len[n] = 1;
        s.phase[n] = SIM_IDLE;
    }
    struct collected got[3] = {{.n = 0}};
    struct dsm_observer obs[3];
    for (unsigned n = 0; n < 3; n++) {
        obs[n] = (struct dsm_observer){.fn = collect, .ctx = &got[n]};
        s.nodes[n].observer = &obs[n];
    }
    run_scenario(&s);
    const dsm_rid_t b = s.rids[0];
    const struct cosmos_rec want0[] = {
        REC(b, 1, COSMOS_ROLE_HOME, COSMOS_GET_RW_REQ, DSM_MSG_EXCLUSIVE_REQ, COSMOS_CAUSE_NONE, 0),
        REC(b, 1, COSMOS_ROLE_HOME, COSMOS_INVAL_RW_RESP, DSM_MSG_INVALIDATE_ACK_DATA, COSMOS_CAUSE_START_READ, 1),
        REC(0, 0, COSMOS_ROLE_MARKER, COSMOS_MARK_BARRIER, 0, COSMOS_CAUSE_NONE, 0),
        REC(b, 2, COSMOS_ROLE_HOME, COSMOS_GET_RO_REQ, DSM_MSG_SHARED_REQ, COSMOS_CAUSE_NONE, 2),
    };
    const struct cosmos_rec want1[] = {
        REC(b, 0, COSMOS_ROLE_REMOTE, COSMOS_GET_RW_RESP, DSM_MSG_EXCLUSIVE_ACK_DATA, COSMOS_CAUSE_START_WRITE, 0),
        REC(b, 0, COSMOS_ROLE_REMOTE, COSMOS_INVAL_RO_REQ, DSM_MSG_RINVALIDATE, COSMOS_CAUSE_NONE, 1),
    };
    const struct cosmos_rec want2[] = {
        REC(b, 0, COSMOS_ROLE_REMOTE, COSMOS_GET_RO_RESP, DSM_MSG_SHARED_ACK_DATA, COSMOS_CAUSE_START_READ, 0),
    };
    const struct cosmos_rec *want[3] = {want0, want1, want2};
    const unsigned nwant[3] = {4, 2, 1};
    for (unsigned n = 0; n < 3; n++) {
        for (unsigned i = 0; i < got[n].n; i++) {
            const struct cosmos_rec *r = &got[n].recs[i];
            printf("node %u: block %llx sender %u role %u %-18s proto %-18s cause %u seq %llu\n", n,
                   (unsigned long long)r->block, r->sender, r->role,
                   r->role == COSMOS_ROLE_MARKER ? "marker" : cosmos_type_name(r->type),
                   r->role == COSMOS_ROLE_MARKER ? "-" : dsm_msg_name(r->proto), r->cause,
                   (unsigned long long)r->seq);
        }
        CHECK(got[n].n == nwant[n], "node %u: %u records, expected %u", n, got[n].n, nwant[n]);
        for (unsigned i = 0; i < nwant[n]; i++) {
            const struct cosmos_rec *g = &got[n].recs[i], *w = &want[n][i];
            CHECK(g->block == w->block && g->sender == w->sender && g->role == w->role &&
                  g->type == w->type && g->proto == w->proto && g->cause == w->cause && g->seq == w->seq,
                  "node %u record %u differs from the expected one", n, i);
        }
    }
    /* the observer detached, the engine records nothing */
    for (unsigned n = 0; n < 3; n++)
        s.nodes[n].observer = NULL;
    unsigned acts[SIM_MAX_FLIGHT + SIM_MAX_NODES];
    while (sim_enabled(&s, acts, sizeof acts / sizeof acts[0]) > 0) {
        sim_do(&s, acts[0]);
        sim_check_step(&s);
    }
    CHECK(sim_all_done(&s), "scripts did not finish");
    sim_check_quiescent(&s);
    CHECK(got[0].n == 4 && got[1].n == 2 && got[2].n == 1, "records after the observer was detached");
    sim_fini(&s);
    printf("ok\n");
    return 0;
}
