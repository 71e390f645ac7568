/* The simulated network of sim.h. */
#include "sim.h"

#include "cosmos/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_fail(struct sim *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    if (s->on_fail)
        longjmp(*s->on_fail, 1);
    fprintf(stderr, "sim: %s\n", s->why);
    exit(1);
}

static void on_engine_fail(struct dsm_node *node, const char *what)
{
    sim_fail(node->ctx, "engine: %s", what);
}

static void on_send(struct dsm_node *node, const struct dsm_msg *m)
{
    struct sim *s = node->ctx;
    if (s->nflight == SIM_MAX_FLIGHT)
        sim_fail(s, "more than %d messages in flight", SIM_MAX_FLIGHT);
    if (m->dst >= s->nnodes || m->dst == m->src)
        sim_fail(s, "%s from %u to %u: bad destination", dsm_msg_name(m->type), m->src, m->dst);
    struct sim_flight *f = &s->flight[s->nflight++];
    f->m = *m;
    f->data = 0;
    if (m->len)
        memcpy(&f->data, m->data, m->len < SIM_DATA ? m->len : SIM_DATA);
    f->m.data = NULL;
    f->serial = s->serial++;
}

unsigned sim_act;

/* Predicts the message each action waits for: at a home the upgrade of a
 * rank with a copy (the upgrade ahead), else the requester's upgrade, or
 * with push (xpush) a read request from the rank asked about; an
 * invalidation at a remote. */
static int sim_oracle(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t *sender, unsigned *type)
{
    struct dsm_region *r = dsm_lookup(node, rid);
    int holds = 0; /* the sender stays the one asked about */
    for (uint32_t i = 0; r && i < r->ndir; i++)
        holds |= r->dir[i].node == *sender;
    if (home)
        *type = !holds && (node->act & DSM_ACT_PUSHES) ? COSMOS_GET_RO_REQ : COSMOS_UPGRADE_REQ;
    else
        *type = COSMOS_INVAL_RW_REQ;
    return 1;
}

/* xpush's question: after the pushed read, that reader's upgrade. */
static int sim_oracle_after(struct dsm_node *node, dsm_rid_t rid, int home, uint32_t after_sender,
                            unsigned after_type, uint32_t *sender, unsigned *type)
{
    (void)node, (void)rid, (void)after_type;
    *sender = after_sender;
    *type = home ? COSMOS_UPGRADE_REQ : COSMOS_INVAL_RW_REQ;
    return 1;
}

void sim_init(struct sim *s, unsigned nnodes, unsigned nregions, int fifo)
{
    jmp_buf *keep = s->on_fail;
    memset(s, 0, sizeof *s);
    s->on_fail = keep;
    s->nnodes = nnodes;
    s->nregions = nregions;
    s->fifo = fifo;
    for (unsigned n = 0; n < nnodes; n++)
        if (dsm_node_init(&s->nodes[n], n, nnodes, on_send, on_engine_fail, NULL, s, SIM_TABLE_BITS))
            sim_fail(s, "out of memory");
        else {
            s->nodes[n].act = sim_act;
            s->nodes[n].predict = sim_oracle;
            s->nodes[n].predict_after = sim_oracle_after;
        }
    for (unsigned k = 0; k < nregions; k++)
        s->rids[k] = dsm_create(&s->nodes[k % nnodes], SIM_DATA)->rid;
}

void sim_fini(struct sim *s)
{
    for (unsigned n = 0; n < s->nnodes; n++)
        dsm_node_fini(&s->nodes[n]);
}

struct dsm_region *sim_region(struct sim *s, unsigned node, unsigned region)
{
    return dsm_lookup(&s->nodes[node], s->rids[region]);
}

uint64_t sim_value(const struct dsm_region *r)
{
    uint64_t v;
    memcpy(&v, r->data, sizeof v);
    return v;
}

/* ---- delivery ----------------------------------------------------------------- */

void sim_deliver_index(struct sim *s, unsigned i)
{
    struct sim_flight f = s->flight[i];
    memmove(&s->flight[i], &s->flight[i + 1], (s->nflight - i - 1) * sizeof f);
    s->nflight--;
    f.m.data = f.m.len ? &f.data : NULL;
    dsm_deliver(&s->nodes[f.m.dst], &f.m);
}

int sim_find_flight(const struct sim *s, enum dsm_msg_type type, uint32_t src, uint32_t dst)
{
    for (unsigned i = 0; i < s->nflight; i++)
        if (s->flight[i].m.type == type && s->flight[i].m.src == src && s->flight[i].m.dst == dst)
            return (int)i;
    return -1;
}

/* With FIFO channels only the oldest message of each (src, dst) can arrive. */
static int deliverable(const struct sim *s, unsigned i)
{
    if (!s->fifo)
        return 1;
    for (unsigned j = 0; j < i; j++)
        if (s->flight[j].m.src == s->flight[i].m.src && s->flight[j].m.dst == s->flight[i].m.dst)
            return 0;
    return 1;
}

/* ---- node scripts ----------------------------------------------------------------- */

static const struct sim_step *current_step(const struct sim *s, unsigned n)
{
    return &s->script[n][s->pc[n]];
}

static void next_step(struct sim *s, unsigned n)
{
    s->pc[n]++;
    s->phase[n] = s->pc[n] == s->script_len[n] ? SIM_DONE : SIM_IDLE;
}

static void enter_op(struct sim *s, unsigned n, struct dsm_region *r)
{
    const struct sim_step *st = current_step(s, n);
    uint64_t v = sim_value(r);
    if (v != s->committed[st->region])
        sim_fail(s, "node %u %s region %u sees %llu, the last write left %llu", n,
                 st->op == SIM_WRITE ? "writing" : "reading", st->region, (unsigned long long)v,
                 (unsigned long long)s->committed[st->region]);
    if (st->op == SIM_WRITE) {
        v++;
        memcpy(r->data, &v, sizeof v);
    }
    s->phase[n] = SIM_IN_OP;
}

static void after_start(struct sim *s, unsigned n, struct dsm_region *r, enum dsm_start res)
{
    if (res == DSM_STARTED)
        enter_op(s, n, r);
    else
        s->phase[n] = res == DSM_PENDING ? SIM_PENDING : SIM_RETRY;
}

static void start_op(struct sim *s, unsigned n, struct dsm_region *r)
{
    struct dsm_node *node = &s->nodes[n];
    r->map_cnt = 1; /* mapped for the operation, as rgn_map would (a start retried keeps it) */
    after_start(s, n, r, current_step(s, n)->op == SIM_READ ? dsm_start_read(node, r) : dsm_start_write(node, r));
}

static void map_request(struct sim *s, unsigned n, dsm_rid_t rid)
{
    dsm_map_request(&s->nodes[n], rid);
    s->phase[n] = SIM_MAPPING;
}

static void deleted(struct sim *s, unsigned n)
{
    const struct sim_step *st = current_step(s, n);
    enum dsm_refusal why = dsm_delete_complete(&s->nodes[n]);
    if (why != DSM_REFUSE_NONE)
        sim_fail(s, "node %u: delete of region %u refused (%d)", n, st->region, why);
    s->deleted[st->region] = 1;
    next_step(s, n);
}

static void idle_step(struct sim *s, unsigned n)
{
    const struct sim_step *st = current_step(s, n);
    struct dsm_node *node = &s->nodes[n];
    struct dsm_region *r = sim_region(s, n, st->region);
    switch (st->op) {
    case SIM_READ:
    case SIM_WRITE:
        if (r)
            start_op(s, n, r);
        else
            map_request(s, n, s->rids[st->region]);
        return;
    case SIM_FLUSH:
        if (r)
            dsm_flush(node, r);
        break;
    case SIM_EVICT: /* what a URC eviction does */
        if (r && !dsm_is_home_state(r->state)) {
            dsm_flush(node, r);
            dsm_table_remove(node, r);
            dsm_region_free(r);
        }
        break;
    case SIM_DELETE:
        dsm_delete(node, s->rids[st->region]);
        if (node->ask_reply) /* at the home: done at once */
            deleted(s, n);
        else
            s->phase[n] = SIM_DELETING;
        return;
    }
    next_step(s, n);
}

static void node_step(struct sim *s, unsigned n)
{
    struct dsm_node *node = &s->nodes[n];
    const struct sim_step *st = current_step(s, n);
    struct dsm_region *r = sim_region(s, n, st->region);
    switch (s->phase[n]) {
    case SIM_IDLE:
        idle_step(s, n);
        return;
    case SIM_MAPPING:
        r = dsm_map_complete(node);
        if (!r)
            sim_fail(s, "node %u: map of region %u refused", n, st->region);
        start_op(s, n, r);
        return;
    case SIM_RETRY:
        start_op(s, n, r);
        return;
    case SIM_PENDING:
        enter_op(s, n, r);
        return;
    case SIM_IN_OP:
        if (st->op == SIM_WRITE) {
            s->committed[st->region]++;
            dsm_end_write(node, r);
        } else
            dsm_end_read(node, r);
        r->map_cnt = 0;
        next_step(s, n);
        return;
    case SIM_DELETING:
        deleted(s, n);
        return;
    case SIM_DONE:
        sim_fail(s, "node %u stepped after its script", n);
    }
}

/* No node but n has a step left on region k (rgn_delete's rule: every
 * other rank's last use of the region came before the delete). */
static int others_done_with(const struct sim *s, unsigned n, unsigned k)
{
    for (unsigned m = 0; m < s->nnodes; m++)
        for (unsigned i = s->pc[m]; m != n && i < s->script_len[m]; i++)
            if (s->script[m][i].region == k)
                return 0;
    return 1;
}

static int node_enabled(const struct sim *s, unsigned n)
{
    const struct dsm_region *r;
    switch (s->phase[n]) {
    case SIM_IDLE:
        return current_step(s, n)->op != SIM_DELETE || others_done_with(s, n, current_step(s, n)->region);
    case SIM_IN_OP:
        return 1;
    case SIM_MAPPING:
    case SIM_DELETING:
        return s->nodes[n].ask_reply != 0;
    case SIM_PENDING:
        r = dsm_lookup(&s->nodes[n], s->rids[current_step(s, n)->region]);
        return !r->waiting;
    case SIM_RETRY: /* retrying while the home is in an Iip state changes nothing */
        r = dsm_lookup(&s->nodes[n], s->rids[current_step(s, n)->region]);
        return r->state != DSM_HOME_IIP && r->state != DSM_HOME_IIP_SPECIAL;
    default:
        return 0;
    }
}

unsigned sim_enabled(const struct sim *s, unsigned *acts, unsigned cap)
{
    unsigned k = 0;
    for (unsigned i = 0; i < s->nflight && k < cap; i++)
        if (deliverable(s, i))
            acts[k++] = i;
    for (unsigned n = 0; n < s->nnodes && k < cap; n++)
        if (node_enabled(s, n))
            acts[k++] = SIM_ACT_NODE + n;
    return k;
}

void sim_do(struct sim *s, unsigned act)
{
    if (act >= SIM_ACT_NODE)
        node_step(s, act - SIM_ACT_NODE);
    else
        sim_deliver_index(s, act);
}

int sim_all_done(const struct sim *s)
{
    for (unsigned n = 0; n < s->nnodes; n++)
        if (s->phase[n] != SIM_DONE)
            return 0;
    return 1;
}

/* ---- invariants ----------------------------------------------------------------- */

void sim_check_step(struct sim *s)
{
    for (unsigned k = 0; k < s->nregions; k++) {
        unsigned readers = 0, writers = 0;
        for (unsigned n = 0; n < s->nnodes; n++)
            if (s->phase[n] == SIM_IN_OP && s->script[n][s->pc[n]].region == k) {
                if (s->script[n][s->pc[n]].op == SIM_WRITE)
                    writers++;
                else
                    readers++;
            }
        if (writers > 1 || (writers && readers))
            sim_fail(s, "region %u: %u writers and %u readers at once", k, writers, readers);
    }
}

static void check_copy(struct sim *s, unsigned k, unsigned n, const struct dsm_region *home,
                       const struct dsm_region *r)
{
    const struct dsm_ptr *e = NULL;
    for (uint32_t i = 0; i < home->ndir; i++)
        if (home->dir[i].node == n)
            e = &home->dir[i];
    if (r->rcvd_inv || r->waiting || r->read_cnt)
        sim_fail(s, "quiescent: region %u at node %u still has rcvd_inv/waiting/read_cnt", k, n);
    int valid = r->state == DSM_REMOTE_SHARED || r->state == DSM_REMOTE_MODIFIED;
    if (!valid && r->state != DSM_REMOTE_INVALID)
        sim_fail(s, "quiescent: region %u at node %u in %s", k, n, dsm_state_name(r->state));
    if (valid != (e != NULL))
        sim_fail(s, "quiescent: region %u: node %u %s a valid copy but %s in the directory (lost invalidation)", k,
                 n, valid ? "has" : "has not", e ? "is" : "is not");
    if (valid && e->version != r->version)
        sim_fail(s, "quiescent: region %u: node %u's copy is version %u, its entry %u", k, n, r->version,
                 e->version);
    if (valid && sim_value(r) != s->committed[k])
        sim_fail(s, "quiescent: region %u: node %u's valid copy holds a stale value", k, n);
    if (r->state == DSM_REMOTE_MODIFIED && home->state != DSM_HOME_INVALID)
        sim_fail(s, "quiescent: region %u: node %u modified while the home is %s", k, n,
                 dsm_state_name(home->state));
    if (r->state == DSM_REMOTE_SHARED && home->state != DSM_HOME_SHARED)
        sim_fail(s, "quiescent: region %u: node %u shared while the home is %s", k, n, dsm_state_name(home->state));
}

void sim_check_quiescent(struct sim *s)
{
    if (s->nflight)
        sim_fail(s, "quiescent check with %u messages in flight", s->nflight);
    for (unsigned k = 0; k < s->nregions; k++) {
        unsigned h = k % s->nnodes;
        if (s->deleted[k]) {
            for (unsigned n = 0; n < s->nnodes; n++)
                if (sim_region(s, n, k))
                    sim_fail(s, "quiescent: deleted region %u is still in node %u's table", k, n);
            continue;
        }
        const struct dsm_region *home = sim_region(s, h, k);
        if (home->queue_head || home->waiting || home->read_cnt || home->cont != DSM_CONT_NONE)
            sim_fail(s, "quiescent: region %u's home has a blocked request or an action in progress", k);
        if (home->state != DSM_HOME_EXCLUSIVE && home->state != DSM_HOME_SHARED && home->state != DSM_HOME_INVALID)
            sim_fail(s, "quiescent: region %u's home in %s", k, dsm_state_name(home->state));
        if ((home->state == DSM_HOME_EXCLUSIVE) != (home->ndir == 0) ||
            (home->state == DSM_HOME_INVALID && home->ndir != 1))
            sim_fail(s, "quiescent: region %u's home in %s with %u directory entries", k,
                     dsm_state_name(home->state), home->ndir);
        if (home->state != DSM_HOME_INVALID && sim_value(home) != s->committed[k])
            sim_fail(s, "quiescent: region %u's home holds %llu, the last write left %llu", k,
                     (unsigned long long)sim_value(home), (unsigned long long)s->committed[k]);
        for (unsigned n = 0; n < s->nnodes; n++) {
            const struct dsm_region *r = n == h ? NULL : sim_region(s, n, k);
            if (r)
                check_copy(s, k, n, home, r);
            else if (n != h)
                for (uint32_t i = 0; i < home->ndir; i++)
                    if (home->dir[i].node == n)
                        sim_fail(s, "quiescent: region %u: node %u has no copy but a directory entry", k, n);
        }
    }
}

/* ---- state hash ------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_flight(const struct sim_flight *f)
{
    uint64_t h = mix(0, f->m.type);
    h = mix(h, f->m.src);
    h = mix(h, f->m.dst);
    h = mix(h, f->m.rid);
    h = mix(h, f->m.version);
    h = mix(h, f->m.aux | (uint64_t)f->m.from << 32);
    h = mix(h, f->m.len);
    return mix(h, f->data);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t hash_region(const struct dsm_region *r)
{
    if (!r)
        return 1;
    uint64_t h = mix(2, r->state);
    h = mix(h, r->rcvd_inv | (uint64_t)r->waiting << 8 | (uint64_t)r->cont << 16 | (uint64_t)r->released << 24);
    h = mix(h, r->read_cnt);
    h = mix(h, r->version);
    h = mix(h, sim_value(r));
    h = mix(h, r->cont_node);
    h = mix(h, r->num_acks);
    h = mix(h, r->act | (uint64_t)r->dsi_from << 8 | (uint64_t)r->uses << 40 | (uint64_t)r->touches << 52);
    const struct dsm_act_trust *trusts[] = {&r->trust, &r->push_trust, &r->xpush_trust, &r->upgrade_trust};
    for (unsigned i = 0; i < sizeof trusts / sizeof trusts[0]; i++)
        h = mix(h, (uint8_t)trusts[i]->credit | (uint64_t)trusts[i]->skip << 8);
    h = mix(h, r->pushed | (uint64_t)r->push_xskip << 8);
    h = mix(h, r->push_writes | (uint64_t)r->push_writes_then << 16 | (uint64_t)r->push_after << 32);
    h = mix(h, r->up_reads | (uint64_t)r->up_after << 16 | (uint64_t)r->up_steady << 32 | (uint64_t)r->up_state << 40);
    h = mix(h, r->up_to | (uint64_t)r->up_from << 32);
    h = mix(h, r->up_held);
    uint64_t dir[SIM_MAX_NODES] = {0};
    for (uint32_t i = 0; i < r->ndir && i < SIM_MAX_NODES; i++)
        dir[i] = (uint64_t)r->dir[i].node << 36 | (uint64_t)r->dir[i].pushed << 32 | r->dir[i].version;
    qsort(dir, r->ndir, sizeof dir[0], cmp_u64);
    for (uint32_t i = 0; i < r->ndir; i++)
        h = mix(h, dir[i]);
    for (const struct dsm_queued *q = r->queue_head; q; q = q->next)
        h = mix(mix(h, (uint64_t)q->type << 32 | q->src), q->version);
    return h;
}

uint64_t sim_hash(const struct sim *s)
{
    uint64_t h = 0;
    for (unsigned n = 0; n < s->nnodes; n++) {
        h = mix(h, s->pc[n] | (uint64_t)s->phase[n] << 8);
        const struct dsm_node *nd = &s->nodes[n];
        for (unsigned i = 0; i < sizeof nd->act_trust / sizeof nd->act_trust[0]; i++) {
            h = mix(h, (uint8_t)nd->act_trust[i].credit | (uint64_t)nd->act_trust[i].skip << 8);
            h = mix(h, nd->act_untried[i].out | (uint64_t)nd->act_untried[i].declined << 16);
        }
        if (nd->ask_rid != DSM_NO_RID) /* a map or delete in progress; its leftovers mean nothing after */
            h = mix(mix(h, (uint64_t)(nd->ask_reply + 1) | nd->ask_rid << 2), nd->map_version);
        for (unsigned k = 0; k < s->nregions; k++)
            h = mix(h, hash_region(dsm_lookup(&s->nodes[n], s->rids[k])));
    }
    for (unsigned k = 0; k < s->nregions; k++)
        h = mix(h, s->committed[k] << 1 | (uint64_t)s->deleted[k]);
    /* in flight: a multiset (any order), or per-channel sequences (FIFO) */
    uint64_t fh[SIM_MAX_FLIGHT];
    for (unsigned i = 0; i < s->nflight; i++) {
        fh[i] = hash_flight(&s->flight[i]);
        if (s->fifo) /* position within its channel matters */
            for (unsigned j = 0; j < i; j++)
                if (s->flight[j].m.src == s->flight[i].m.src && s->flight[j].m.dst == s->flight[i].m.dst)
                    fh[i] = mix(fh[i], fh[j]);
    }
    qsort(fh, s->nflight, sizeof fh[0], cmp_u64);
    for (unsigned i = 0; i < s->nflight; i++)
        h = mix(h, fh[i]);
    return h;
}

void sim_step(struct sim *s, unsigned n)
{
    sim_do(s, SIM_ACT_NODE + n);
    sim_check_step(s);
}

void sim_arrive(struct sim *s, enum dsm_msg_type type, unsigned src, unsigned dst)
{
    int i = sim_find_flight(s, type, src, dst);
    if (i < 0)
        sim_fail(s, "no %s from %u to %u in flight", dsm_msg_name(type), src, dst);
    sim_deliver_index(s, (unsigned)i);
    sim_check_step(s);
}
