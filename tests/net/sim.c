/* The simulated network (sim.h). */
#include "sim.h"

#include "../common/check.h"

#include <shoal.h>
#include <stdlib.h>
#include <string.h>

struct sim_event {
    uint64_t t, order;
    uint32_t src, dst;
    size_t len;
    unsigned char *pkt;
};

static int before(const struct sim_event *a, const struct sim_event *b)
{
    return a->t != b->t ? a->t < b->t : a->order < b->order;
}

static void heap_push(struct sim *s, struct sim_event e)
{
    if (s->heap_len == s->heap_cap) {
        s->heap_cap = s->heap_cap ? 2 * s->heap_cap : 1024;
        s->heap = realloc(s->heap, s->heap_cap * sizeof *s->heap);
        CHECK(s->heap, "out of memory");
    }
    size_t i = s->heap_len++;
    for (; i && before(&e, &s->heap[(i - 1) / 2]); i = (i - 1) / 2)
        s->heap[i] = s->heap[(i - 1) / 2];
    s->heap[i] = e;
}

static struct sim_event heap_pop(struct sim *s)
{
    struct sim_event top = s->heap[0], last = s->heap[--s->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_len)
            break;
        if (c + 1 < s->heap_len && before(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!before(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_len)
        s->heap[i] = last;
    return top;
}

static void wire_send(struct sim *s, uint32_t src, uint32_t dst, const void *pkt, size_t len, uint64_t arrival)
{
    unsigned char *copy = malloc(len);
    CHECK(copy, "out of memory");
    memcpy(copy, pkt, len);
    heap_push(s, (struct sim_event){.t = arrival, .order = s->order++, .src = src, .dst = dst, .len = len,
                                    .pkt = copy});
    s->wire_packets++;
}

/* After the send-side faults: the NIC serializes, the wire delays; a
 * broadcast is one transmission the switch copies to every other node. */
static void emit_send(void *ctx, uint32_t dst, const void *pkt, size_t len)
{
    struct sim_node *node = ctx;
    struct sim *s = node->sim;
    if (s->tap && s->tap(s, s->tap_ctx, node->index, dst, pkt, len))
        return;
    uint64_t start = node->nic_free > s->now ? node->nic_free : s->now;
    node->nic_free = start + (uint64_t)((double)len * s->ns_per_byte);
    uint64_t arrival = node->nic_free + s->latency_ns;
    for (uint32_t j = 0; j < s->n; j++)
        if (j != node->index && (dst == WIRE_BROADCAST || dst == j))
            wire_send(s, node->index, j, pkt, len, arrival);
}

static void xmit(void *ctx, uint32_t dst, const void *pkt, size_t len, int stable)
{
    struct sim_node *node = ctx;
    (void)stable; /* the simulated wire copies every packet */
    fault_pass(&node->fsend, node->sim->now, dst, pkt, len, emit_send, node);
}

static void emit_recv(void *ctx, uint32_t src, const void *pkt, size_t len)
{
    struct sim_node *node = ctx;
    struct rel *r = node->reply && rel_packet_is_reply(pkt, len) ? node->reply : node->rel;
    if (rel_input(r, pkt, len, node->sim->now) == WIRE_OK && src < SIM_MAX_NODES)
        node->heard_at[src] = node->sim->now;
}

static void peer_dead(void *ctx, uint32_t peer, enum rel_dead_reason why)
{
    struct sim_node *node = ctx;
    CHECK(peer < node->sim->n, "peer_dead(%u)", peer);
    if (!node->dead_reports[peer]++) {
        node->dead_at[peer] = node->sim->now;
        node->dead_why[peer] = why;
    }
}

static const struct rel_io sim_io = {.xmit = xmit, .peer_dead = peer_dead};

const struct wire_key *sim_key(void)
{
    static struct wire_key k;
    if (!k.nh && wire_key_init(&k, 0x6b6579u, 0x736563726574u, 0) != SHOAL_OK)
        abort();
    return &k;
}

void sim_identity(struct rel_config *c, uint32_t self, uint32_t nranks, uint32_t incarnation)
{
    c->self = self;
    c->nranks = nranks;
    c->job = SIM_JOB;
    c->key = SIM_KEY;
    c->incarnation = incarnation;
}

static void node_engine(struct sim *s, unsigned i, uint32_t incarnation, int channels)
{
    struct rel_config c = s->rel_cfg;
    sim_identity(&c, i, s->n, incarnation);
    s->nodes[i].incarnation = incarnation;
    CHECK_RC(rel_create(&s->nodes[i].rel, &c, &sim_io, &s->nodes[i]), SHOAL_OK);
    if (!channels)
        return;
    c.reply_channel = 1;
    CHECK_RC(rel_create(&s->nodes[i].reply, &c, &sim_io, &s->nodes[i]), SHOAL_OK);
    rel_link(s->nodes[i].rel, s->nodes[i].reply);
}

void sim_init(struct sim *s, unsigned n, const struct rel_config *rc, const char *faults)
{
    CHECK(n >= 2 && n <= SIM_MAX_NODES, "%u nodes", n);
    *s = (struct sim){.n = n, .latency_ns = 2000, .ns_per_byte = 0.8, .rel_cfg = *rc};
    char err[160];
    CHECK(util_fault_parse(faults, &s->faults, err, sizeof err) == SHOAL_OK, "faults \"%s\": %s", faults, err);
    for (unsigned i = 0; i < n; i++) {
        struct sim_node *node = &s->nodes[i];
        node->sim = s;
        node->index = i;
        fault_init(&node->fsend, &s->faults, 2 * i);
        fault_init(&node->frecv, &s->faults, 2 * i + 1);
        node_engine(s, i, 1000 + i, 0);
    }
}

void sim_add_reply_channels(struct sim *s)
{
    for (unsigned i = 0; i < s->n; i++) {
        rel_destroy(s->nodes[i].rel);
        node_engine(s, i, s->nodes[i].incarnation, 1);
    }
}

void sim_restart(struct sim *s, unsigned i, uint32_t incarnation)
{
    struct sim_node *node = &s->nodes[i];
    memset(node->dead_reports, 0, sizeof node->dead_reports); /* a new process */
    int channels = node->reply != NULL;
    rel_destroy(node->rel);
    rel_destroy(node->reply);
    node->reply = NULL;
    node_engine(s, i, incarnation, channels);
}

void sim_fini(struct sim *s)
{
    for (unsigned i = 0; i < s->n; i++) {
        rel_destroy(s->nodes[i].rel);
        rel_destroy(s->nodes[i].reply);
        fault_fini(&s->nodes[i].fsend);
        fault_fini(&s->nodes[i].frecv);
    }
    while (s->heap_len)
        free(heap_pop(s).pkt);
    free(s->heap);
}

uint64_t sim_sum(const struct sim *s, size_t counter)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < s->n; i++) {
        for (int ch = 0; ch < 2; ch++) {
            const struct rel *r = ch ? s->nodes[i].reply : s->nodes[i].rel;
            uint64_t v;
            if (!r)
                continue;
            memcpy(&v, (const char *)rel_stats(r) + counter, sizeof v);
            sum += v;
        }
    }
    return sum;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t next_time(const struct sim *s, uint64_t wake)
{
    uint64_t t = wake;
    if (s->heap_len)
        t = min64(t, s->heap[0].t);
    for (unsigned i = 0; i < s->n; i++) {
        const struct sim_node *node = &s->nodes[i];
        if (node->down)
            continue;
        t = min64(t, rel_next_deadline(node->rel));
        if (node->reply)
            t = min64(t, rel_next_deadline(node->reply));
        t = min64(t, min64(fault_next_deadline(&node->fsend), fault_next_deadline(&node->frecv)));
    }
    return t;
}

/* Packets arriving at s->now, and delayed ones the receive side releases. */
static void deliver(struct sim *s)
{
    while (s->heap_len && s->heap[0].t <= s->now) {
        struct sim_event e = heap_pop(s);
        struct sim_node *node = &s->nodes[e.dst];
        if (!node->down)
            fault_pass(&node->frecv, s->now, e.src, e.pkt, e.len, emit_recv, node);
        free(e.pkt);
    }
    for (unsigned i = 0; i < s->n; i++)
        if (!s->nodes[i].down)
            fault_flush(&s->nodes[i].frecv, s->now, emit_recv, &s->nodes[i]);
}

/* Delayed sends the send side releases, and the engines' timers. */
static void timers(struct sim *s)
{
    for (unsigned i = 0; i < s->n; i++) {
        struct sim_node *node = &s->nodes[i];
        if (node->down)
            continue;
        fault_flush(&node->fsend, s->now, emit_send, node);
        rel_tick(node->rel, s->now);
        if (node->reply)
            rel_tick(node->reply, s->now);
    }
}

/* As a carrier's progress loop: input, then the application (whose
 * packets carry the acks input asked for), then the timers. */
void sim_run(struct sim *s, sim_app_fn app, void *ctx, uint64_t limit)
{
    unsigned stuck = 0;
    int done = 0;
    uint64_t wake = app(s, ctx, &done);
    while (!done) {
        uint64_t t = next_time(s, wake);
        CHECK(t != REL_NEVER, "nothing left to happen at %.6f s", (double)s->now * 1e-9);
        CHECK(t <= limit, "virtual time limit %.3f s passed (next event at %.6f s)", (double)limit * 1e-9,
              (double)t * 1e-9);
        stuck = t > s->now ? 0 : stuck + 1;
        CHECK(stuck < 1000000, "no progress at %.6f s", (double)s->now * 1e-9);
        if (t > s->now)
            s->now = t;
        deliver(s);
        wake = app(s, ctx, &done);
        timers(s);
    }
}
