/* The reliability engine on a simulated network (sim.h): exactly-once
 * in-order delivery under loss, duplication and reordering; flow control
 * with a stalled receiver; dead and restarted peers; malformed packets;
 * RTT estimation; sequence numbers wrapping.  Virtual time, seeded
 * faults: every run is the same. */
#include "../common/check.h"
#include "sim.h"

#include <shoal.h>
#include <stdio.h>
#include <string.h>

#define MS 1000000ull
#define SEC 1000000000ull
#define MSG_MAX 1408 /* largest test message: the default max_payload */
#define MAX_BCASTS 1024 /* broadcasts per sender in a test */

/* ---- traffic: numbered messages of random sizes, checked on arrival ------- */

struct traffic {
    uint32_t count[SIM_MAX_NODES][SIM_MAX_NODES]; /* messages src -> dst to send */
    uint32_t sent[SIM_MAX_NODES][SIM_MAX_NODES];
    uint32_t recvd[SIM_MAX_NODES][SIM_MAX_NODES];
    int stalled[SIM_MAX_NODES];                   /* the node's AM layer takes nothing */
    uint32_t first_refusal[SIM_MAX_NODES][SIM_MAX_NODES]; /* sent when EAGAIN first came, +1 */
    uint32_t max_len;                             /* <= MSG_MAX */
    unsigned char next[SIM_MAX_NODES][SIM_MAX_NODES][MSG_MAX]; /* the message to send next */
    size_t next_len[SIM_MAX_NODES][SIM_MAX_NODES];             /* 0: not made yet */
    uint32_t bcasts_sent[SIM_MAX_NODES];
    uint8_t bcast_got[SIM_MAX_NODES][SIM_MAX_NODES][MAX_BCASTS]; /* [receiver][sender][idx]: times */
};

static uint64_t mix64(uint64_t z)
{
    z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ z >> 27) * 0x94d049bb133111ebull;
    return z ^ z >> 31;
}

/* Message idx from src to dst: 12 bytes naming it, then bytes from a hash
 * of the name; 12 to max_len bytes. */
static size_t make_msg(const struct traffic *t, uint32_t src, uint32_t dst, uint32_t idx, unsigned char *buf)
{
    uint64_t h = mix64((uint64_t)src << 48 ^ (uint64_t)dst << 32 ^ idx);
    size_t len = 12 + h % (t->max_len - 11);
    uint32_t name[3] = {src, dst, idx};
    memcpy(buf, name, 12);
    for (size_t i = 12; i < len; i++) {
        if (i % 8 == 4)
            h = mix64(h + i);
        buf[i] = (unsigned char)(h >> (i % 8 * 8));
    }
    return len;
}

/* A broadcast is message idx from src to WIRE_BROADCAST. */
static void take_bcast(struct traffic *t, uint32_t self, const struct rel_msg *m)
{
    static unsigned char want[MSG_MAX];
    uint32_t name[3];
    CHECK(m->len >= 12, "node %u: a %zu-byte broadcast", self, m->len);
    memcpy(name, m->data, 12);
    CHECK(name[0] == m->peer && name[1] == WIRE_BROADCAST && name[2] < t->bcasts_sent[m->peer],
          "node %u: broadcast %u from %u is not one it sent", self, name[2], m->peer);
    size_t len = make_msg(t, m->peer, WIRE_BROADCAST, name[2], want);
    CHECK(m->len == len && !memcmp(m->data, want, len), "node %u: broadcast %u from %u corrupted", self, name[2],
          m->peer);
    t->bcast_got[self][m->peer][name[2]]++;
}

static void take(struct traffic *t, struct sim *s, uint32_t self)
{
    static unsigned char want[MSG_MAX];
    struct rel_msg m;
    struct rel *r = s->nodes[self].rel;
    while (rel_recv(r, &m) == SHOAL_OK) {
        CHECK(m.peer < s->n && m.peer != self, "node %u got a message from %u", self, m.peer);
        if (m.bcast) {
            take_bcast(t, self, &m);
            rel_release(r, s->now);
            continue;
        }
        uint32_t idx = t->recvd[m.peer][self]++;
        CHECK(idx < t->count[m.peer][self], "node %u: message %u from %u beyond the %u sent", self, idx, m.peer,
              t->count[m.peer][self]);
        size_t len = make_msg(t, m.peer, self, idx, want);
        CHECK(m.len == len && !memcmp(m.data, want, len), "node %u: message %u from %u wrong (len %zu, want %zu%s)",
              self, idx, m.peer, m.len, len, m.len >= 12 ? ", out of order or corrupted" : "");
        rel_release(r, s->now);
    }
}

/* Sends what the engine takes; a refused message is kept for the retry. */
static void give(struct traffic *t, struct sim *s, uint32_t self)
{
    for (uint32_t j = 0; j < s->n; j++) {
        while (t->sent[self][j] < t->count[self][j]) {
            unsigned char *buf = t->next[self][j];
            if (!t->next_len[self][j])
                t->next_len[self][j] = make_msg(t, self, j, t->sent[self][j], buf);
            int rc = rel_send(s->nodes[self].rel, j, buf, t->next_len[self][j], s->now);
            if (rc == SHOAL_EAGAIN || rc == SHOAL_EPEERDEAD) {
                if (!t->first_refusal[self][j])
                    t->first_refusal[self][j] = t->sent[self][j] + 1;
                break;
            }
            CHECK_RC(rc, SHOAL_OK);
            t->sent[self][j]++;
            t->next_len[self][j] = 0;
        }
    }
}

static int all_arrived(const struct traffic *t, const struct sim *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        for (uint32_t j = 0; j < s->n; j++)
            if (!s->nodes[j].down && t->recvd[i][j] != t->count[i][j])
                return 0;
    return 1;
}

static uint64_t traffic_app(struct sim *s, void *ctx, int *done)
{
    struct traffic *t = ctx;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->nodes[i].down)
            continue;
        if (!t->stalled[i])
            take(t, s, i);
        give(t, s, i);
    }
    *done = all_arrived(t, s);
    return REL_NEVER;
}

/* Four nodes, each sending `count` messages of up to max_len bytes to every
 * other, over a network with the given faults. */
static void all_to_all(struct traffic *t, struct sim *s, const struct rel_config *rc, uint32_t max_len,
                       uint32_t count, const char *faults)
{
    memset(t, 0, sizeof *t);
    t->max_len = max_len;
    for (unsigned i = 0; i < 4; i++)
        for (unsigned j = 0; j < 4; j++)
            t->count[i][j] = i == j ? 0 : count;
    sim_init(s, 4, rc, faults);
}

/* Runs until idle time has passed with nothing for the app to do. */
struct idle {
    uint64_t until;
    struct traffic *t;
};

static uint64_t idle_app(struct sim *s, void *ctx, int *done)
{
    struct idle *w = ctx;
    if (w->t)
        traffic_app(s, w->t, done);
    *done = s->now >= w->until;
    return w->until;
}

static void run_idle(struct sim *s, struct traffic *t, uint64_t duration)
{
    struct idle w = {.until = s->now + duration, .t = t};
    sim_run(s, idle_app, &w, w.until);
}

static void print_stats(const char *what, const struct sim *s, uint64_t start)
{
    printf("%-28s %8.2f ms virtual, %7llu on wire: %7llu sent, %6llu retransmitted (%llu fast, %llu timeouts), "
           "%6llu explicit acks, %llu keepalives, %llu probes, %llu rtt samples, dropped: %llu duplicate, %llu window, "
           "%llu incarnation\n",
           what, (double)(s->now - start) / MS, (unsigned long long)s->wire_packets,
           (unsigned long long)SIM_SUM(s, sent), (unsigned long long)SIM_SUM(s, retransmits),
           (unsigned long long)SIM_SUM(s, fast_retransmits), (unsigned long long)SIM_SUM(s, timeouts),
           (unsigned long long)SIM_SUM(s, acks_sent), (unsigned long long)SIM_SUM(s, keepalives_sent),
           (unsigned long long)SIM_SUM(s, probes_sent), (unsigned long long)SIM_SUM(s, rtt_samples),
           (unsigned long long)SIM_SUM(s, dropped[WIRE_DROP_DUPLICATE]),
           (unsigned long long)SIM_SUM(s, dropped[WIRE_DROP_WINDOW]),
           (unsigned long long)SIM_SUM(s, dropped[WIRE_DROP_INCARNATION]));
}

static void check_no_deaths(const struct sim *s)
{
    for (unsigned i = 0; i < s->n; i++)
        for (unsigned j = 0; j < s->n; j++)
            CHECK(!s->nodes[i].dead_reports[j], "node %u declared %u dead at %.3f s", i, j,
                  (double)s->nodes[i].dead_at[j] / SEC);
}

/* Messages at a steady pace: every gap, one more for each pair in
 * pairs[][] (if the previous one went). */
struct paced {
    struct traffic t;
    int pairs[SIM_MAX_NODES][SIM_MAX_NODES];
    uint64_t next, gap, until;
};

static uint64_t paced_app(struct sim *s, void *ctx, int *done)
{
    struct paced *p = ctx;
    if (s->now >= p->next) {
        for (unsigned i = 0; i < s->n; i++)
            for (unsigned j = 0; j < s->n; j++)
                if (p->pairs[i][j] && p->t.count[i][j] == p->t.sent[i][j])
                    p->t.count[i][j]++;
        p->next = s->now + p->gap;
    }
    traffic_app(s, &p->t, done);
    *done = s->now >= p->until;
    return p->next < p->until ? p->next : p->until;
}

/* ---- exactly once, in order, all to all ------------------------------------ */

struct transfer_case {
    const char *name, *faults;
    uint32_t count;
    uint32_t first_seq;
    uint64_t ceiling; /* virtual time allowed */
    int checksum;     /* send and require header checksums (raw frames) */
    uint32_t window;  /* 0: the default */
};

static void transfer(const struct transfer_case *c)
{
    static struct traffic t;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    rc.first_seq = c->first_seq;
    rc.need_checksum = c->checksum;
    rc.window = c->window ? c->window : rc.window;
    all_to_all(&t, &s, &rc, rc.max_payload, c->count, c->faults);
    sim_run(&s, traffic_app, &t, c->ceiling);
    print_stats(c->name, &s, 0);
    uint64_t rtx = SIM_SUM(&s, retransmits), lost = 0, corrupted = 0;
    for (unsigned i = 0; i < 4; i++) {
        lost += s.nodes[i].fsend.stats.dropped + s.nodes[i].frecv.stats.dropped;
        corrupted += s.nodes[i].fsend.stats.corrupted + s.nodes[i].frecv.stats.corrupted;
    }
    /* every corrupted header is dropped, by magic, version or checksum
     * (fewer drops: a packet corrupted twice, or corrupted then lost) */
    uint64_t bad = SIM_SUM(&s, dropped[WIRE_DROP_CHECKSUM]) + SIM_SUM(&s, dropped[WIRE_DROP_MAGIC]) +
                   SIM_SUM(&s, dropped[WIRE_DROP_VERSION]);
    CHECK(bad <= corrupted && bad + corrupted / 20 >= corrupted, "%llu corrupted packets, %llu dropped as such",
          (unsigned long long)corrupted, (unsigned long long)bad);
    printf("%-28s faults: %llu packets lost, %llu corrupted (%llu dropped as such)\n", "", (unsigned long long)lost,
           (unsigned long long)corrupted, (unsigned long long)bad);
    lost += bad;
    CHECK(SIM_SUM(&s, sent) == 12ull * c->count, "%llu sent", (unsigned long long)SIM_SUM(&s, sent));
    CHECK(SIM_SUM(&s, delivered) == 12ull * c->count, "%llu delivered", (unsigned long long)SIM_SUM(&s, delivered));
    if (lost)
        CHECK(rtx > 0, "%llu packets lost and none retransmitted", (unsigned long long)lost);
    else
        CHECK(rtx == 0 && SIM_SUM(&s, dropped[WIRE_DROP_DUPLICATE]) == 0, "no loss, yet %llu retransmitted",
              (unsigned long long)rtx);
    /* retransmissions plausible: at most a few per packet lost, or a few
     * percent when the losses were all acks */
    CHECK(rtx <= 4 * lost + SIM_SUM(&s, sent) / 50, "%llu retransmissions for %llu losses", (unsigned long long)rtx,
          (unsigned long long)lost);
    check_no_deaths(&s);
    sim_fini(&s);
}

/* The faults apply on the send and the receive path of every node: a
 * packet meets them twice (loss=0.2: 36% of packets lost end to end).
 * Ceilings: each node sends 46 MB, 37 ms at the simulated 10 Gb/s. */
static const struct transfer_case cases[] = {
    {"clean", "", 20000, 1, 40 * MS, 0, 0},
    {"loss", "loss=0.01,reorder=0.01,dup=0.001,seed=11", 20000, 1, 60 * MS, 0, 0},
    {"heavy", "loss=0.2,dup=0.05,reorder=0.1,seed=12", 20000, 1, 2500 * MS, 0, 0},
    {"wrap", "loss=0.01,reorder=0.01,dup=0.001,seed=13", 3000, 0xffffff00u, 15 * MS, 0, 0},
    /* 0.8 ms more round trip: the window of 256, not the link, is the limit */
    {"delay", "loss=0.01,reorder=0.01,delay=200us,seed=14", 20000, 1, 300 * MS, 0, 0},
    /* corrupted headers are caught by the checksum raw frames require */
    {"corrupt", "corrupt=0.01,loss=0.005,seed=15", 20000, 1, 60 * MS, 1, 0},
    /* a window of 16 against 0.8 ms more round trip: the window is the
     * limit (16 packets per round trip to each peer: 250 ms), and a loss
     * must not stall it for a round trip (the packets SACKed beyond the
     * hole are not in flight: 262 ms here, 312 counting them) */
    {"window", "loss=0.01,reorder=0.01,delay=200us,seed=16", 5000, 1, 280 * MS, 0, 16},
};

/* ---- acks: piggybacked on two-way traffic, explicit on one-way ------------- */

/* 20000 messages of up to 256 bytes one way, one every 2 us (a tenth of
 * the link: not window-bound), then the same both ways. */
static void acks(void)
{
    static struct paced p;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    double per_msg[2];
    for (int twoway = 0; twoway < 2; twoway++) {
        memset(&p, 0, sizeof p);
        p.t.max_len = 256;
        p.pairs[0][1] = 1;
        p.pairs[1][0] = twoway;
        p.gap = 2000;
        p.until = 20000 * p.gap;
        sim_init(&s, 2, &rc, "");
        sim_run(&s, paced_app, &p, p.until);
        print_stats(twoway ? "two-way" : "one-way", &s, 0);
        uint64_t msgs = p.t.count[0][1] + p.t.count[1][0];
        CHECK(SIM_SUM(&s, retransmits) == 0 && SIM_SUM(&s, dropped[WIRE_DROP_DUPLICATE]) == 0,
              "retransmissions or duplicates without faults");
        CHECK(SIM_SUM(&s, delivered) + 4 >= msgs, "%llu of %llu delivered", (unsigned long long)SIM_SUM(&s, delivered),
              (unsigned long long)msgs);
        per_msg[twoway] = (double)SIM_SUM(&s, acks_sent) / (double)msgs;
        sim_fini(&s);
    }
    printf("explicit acks per message: one-way %.4f, two-way %.4f\n", per_msg[0], per_msg[1]);
    /* one way: about one per ack delay (25 messages); two ways: the data
     * going back carries them */
    CHECK(per_msg[0] > 0.02 && per_msg[0] < 0.1, "one-way: %.4f explicit acks per message", per_msg[0]);
    CHECK(per_msg[1] < per_msg[0] / 10, "two-way traffic sent %.4f explicit acks per message (one-way %.4f)",
          per_msg[1], per_msg[0]);
}

/* ---- an ack for the first copy of a resent packet ---------------------------- */

struct counter {
    unsigned data; /* DATA packets sent */
};

static void count_xmit(void *ctx, uint32_t dst, const void *pkt, size_t len, int stable)
{
    struct counter *c = ctx;
    (void)dst, (void)len, (void)stable;
    c->data += ((const unsigned char *)pkt)[5] == WIRE_DATA;
}

static void ack_from_peer(struct rel *r, uint32_t ack, uint64_t now)
{
    struct wire_header h = {.type = WIRE_ACK, .job = SIM_JOB, .src = 1, .dst = 0, .src_inc = 2,
                            .dst_inc = 1, .ack = ack, .credits = 256};
    unsigned char pkt[WIRE_HEADER_BYTES];
    CHECK(wire_encode(pkt, sizeof pkt, &h, NULL, &SIM_KEY, 0) == sizeof pkt, "encode");
    CHECK(rel_input(r, pkt, sizeof pkt, now) == WIRE_OK, "the ACK of %u was refused", ack);
}

/* Ten packets go out at once into a queue far longer than the round trip
 * measured before (the receiver of a stream is behind, or was not
 * scheduled); the timer resends the oldest unacknowledged one; then the
 * receiver, catching up, acknowledges the first copy of it, later than
 * min_rtt after the resend.  That ack does not show that the packets sent
 * before the resend were lost (only an ack of a packet sent once does):
 * nothing more is resent. */
static void spurious(void)
{
    struct rel_config rc;
    rel_config_default(&rc);
    sim_identity(&rc, 0, 2, 1);
    struct counter c = {0};
    const struct rel_io io = {.xmit = count_xmit};
    struct rel *r;
    CHECK_RC(rel_create(&r, &rc, &io, &c), SHOAL_OK);
    uint64_t t = 1000000;
    CHECK_RC(rel_send(r, 1, "x", 1, t), SHOAL_OK);
    ack_from_peer(r, 1, t + 30000); /* min_rtt 30 us */
    t += 100000;
    for (int i = 0; i < 10; i++)
        CHECK_RC(rel_send(r, 1, "y", 1, t), SHOAL_OK);
    uint64_t due = rel_next_deadline(r);
    CHECK(due > t && due < t + 10 * MS, "retransmission timer at %+lld ns", (long long)(due - t));
    rel_tick(r, due);
    CHECK(c.data == 12 && rel_stats(r)->timeouts == 1, "%u DATA packets sent, %llu timeouts", c.data,
          (unsigned long long)rel_stats(r)->timeouts);
    ack_from_peer(r, 2, due + 200000);
    CHECK(c.data == 12, "%u packets resent after the ack of a resent packet's first copy", c.data - 12);
    struct rel_peer_info info;
    rel_peer_info(r, 1, &info);
    CHECK(info.unacked == 9, "%u unacknowledged", info.unacked);
    rel_destroy(r);
}

/* ---- two channels: each carries the other's acks --------------------------- */

/* Node 0 keeps `depth` requests out to node 1, which answers each with a
 * reply on its reply channel, as active messages do. */
struct exchange {
    uint32_t count, depth;
    uint32_t requested, served, answered, replied; /* requests sent, taken; replies sent, taken */
};

static int msg_idx(const struct rel_msg *m)
{
    uint32_t idx;
    CHECK(m->len == sizeof idx, "a %zu-byte message", m->len);
    memcpy(&idx, m->data, sizeof idx);
    return (int)idx;
}

static uint64_t exchange_app(struct sim *s, void *ctx, int *done)
{
    struct exchange *x = ctx;
    struct rel_msg m;
    struct rel *req0 = s->nodes[0].rel, *req1 = s->nodes[1].rel, *rep0 = s->nodes[0].reply, *rep1 = s->nodes[1].reply;
    while (x->served > x->answered &&
           rel_send(rep1, 0, &x->answered, sizeof x->answered, s->now) == SHOAL_OK)
        x->answered++;
    while (x->answered == x->served && rel_recv(req1, &m) == SHOAL_OK) {
        CHECK(m.peer == 0 && msg_idx(&m) == (int)x->served, "request %d, expected %u", msg_idx(&m), x->served);
        rel_release(req1, s->now);
        x->served++;
        if (rel_send(rep1, 0, &x->answered, sizeof x->answered, s->now) == SHOAL_OK)
            x->answered++;
    }
    while (rel_recv(rep0, &m) == SHOAL_OK) {
        CHECK(m.peer == 1 && msg_idx(&m) == (int)x->replied, "reply %d, expected %u", msg_idx(&m), x->replied);
        rel_release(rep0, s->now);
        x->replied++;
    }
    while (x->requested < x->count && x->requested - x->replied < x->depth &&
           rel_send(req0, 1, &x->requested, sizeof x->requested, s->now) == SHOAL_OK)
        x->requested++;
    *done = x->replied == x->count;
    return REL_NEVER;
}

/* Request/reply exchanges, one at a time and eight deep: clean, every
 * packet's acknowledgement rides on the other channel's data (no explicit
 * ACK but for the last reply's); under faults, every request and reply
 * arrives once and in order.  An engine with no channel linked drops DATA
 * that carries the other channel's acks. */
static void channels(void)
{
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    static const char *const faults[] = {"", "loss=0.01,reorder=0.01,dup=0.001,seed=7"};
    for (int f = 0; f < 2; f++)
        for (uint32_t depth = 1; depth <= 8; depth *= 8) {
            struct exchange x = {.count = 20000, .depth = depth};
            sim_init(&s, 2, &rc, faults[f]);
            sim_add_reply_channels(&s);
            sim_run(&s, exchange_app, &x, 60 * SEC);
            char what[64];
            snprintf(what, sizeof what, "depth %u%s", depth, f ? ", faults" : "");
            print_stats(what, &s, 0);
            check_no_deaths(&s);
            uint64_t acks = SIM_SUM(&s, acks_sent);
            if (!f)
                CHECK(acks <= 2 && SIM_SUM(&s, retransmits) == 0, "%s: %llu explicit acks", what,
                      (unsigned long long)acks);
            else
                CHECK(SIM_SUM(&s, retransmits) > 0, "%s: no retransmission", what);
            sim_fini(&s);
        }

    sim_identity(&rc, 1, 2, 7);
    static const struct rel_io io = {0};
    struct rel *lone;
    CHECK_RC(rel_create(&lone, &rc, &io, NULL), SHOAL_OK);
    struct wire_header h = {.type = WIRE_DATA, .flags = WIRE_F_ACK_REPLY, .job = SIM_JOB, .src = 0,
                            .dst = 1, .src_inc = 9, .seq = 1, .credits = 16, .len = 4};
    unsigned char pkt[WIRE_HEADER_BYTES + 4];
    CHECK(wire_encode(pkt, sizeof pkt, &h, "data", &SIM_KEY, 0) == sizeof pkt, "encode");
    CHECK(rel_input(lone, pkt, sizeof pkt, 0) == WIRE_DROP_TYPE, "an unlinked engine took the reply channel's acks");
    rel_destroy(lone);
}

/* ---- broadcasts --------------------------------------------------------------- */

/* The traffic, plus `left` broadcasts from node 0, one every 20 us. */
struct bcaster {
    struct traffic *t;
    uint32_t left;
    uint64_t next;
};

static uint64_t bcast_app(struct sim *s, void *ctx, int *done)
{
    struct bcaster *b = ctx;
    static unsigned char buf[MSG_MAX];
    if (b->left && s->now >= b->next) {
        CHECK(b->t->bcasts_sent[0] < MAX_BCASTS, "too many broadcasts for the test's tally");
        size_t len = make_msg(b->t, 0, WIRE_BROADCAST, b->t->bcasts_sent[0]++, buf);
        CHECK_RC(rel_bcast(s->nodes[0].rel, buf, len, NULL, 0), SHOAL_OK);
        b->left--;
        b->next = s->now + 20000;
    }
    traffic_app(s, b->t, done);
    *done = *done && !b->left && !s->heap_len;
    return b->left ? b->next : REL_NEVER;
}

/* Broadcasts reach every other node once, without disturbing the
 * sequenced traffic; a receiver whose AM layer stalls keeps rcv_buf of
 * them and drops the rest as beyond its window. */
static void bcast(void)
{
    static struct traffic t;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    all_to_all(&t, &s, &rc, 1000, 2000, "");
    struct bcaster b = {.t = &t, .left = 200};
    sim_run(&s, bcast_app, &b, SEC);
    print_stats("broadcasts and traffic", &s, 0);
    for (unsigned i = 1; i < 4; i++)
        for (uint32_t k = 0; k < 200; k++)
            CHECK(t.bcast_got[i][0][k] == 1, "node %u got broadcast %u %u times", i, k, t.bcast_got[i][0][k]);
    CHECK(rel_stats(s.nodes[0].rel)->bcasts_sent == 200 && SIM_SUM(&s, dropped[WIRE_DROP_RANK]) == 0,
          "broadcasts sent or dropped");
    CHECK_RC(rel_bcast(s.nodes[0].rel, t.next[0][0], rc.max_payload + 1, NULL, 0), SHOAL_EINVAL);

    t.stalled[3] = 1;
    b.left = rc.rcv_buf + 44;
    sim_run(&s, bcast_app, &b, s.now + SEC);
    CHECK(rel_stats(s.nodes[3].rel)->dropped[WIRE_DROP_WINDOW] == 44, "stalled node 3 dropped %llu broadcasts",
          (unsigned long long)rel_stats(s.nodes[3].rel)->dropped[WIRE_DROP_WINDOW]);
    t.stalled[3] = 0;
    traffic_app(&s, &t, &(int){0});
    uint32_t got = 0;
    for (uint32_t k = 200; k < 200 + rc.rcv_buf + 44; k++)
        got += t.bcast_got[3][0][k];
    CHECK(got == rc.rcv_buf, "stalled node 3 kept %u broadcasts", got);
    check_no_deaths(&s);
    sim_fini(&s);
}

/* ---- one packet to all (MULTI) -------------------------------------------------- */

/* Node 0 sends numbered messages to every other node, in turn as one
 * MULTI packet (rel_send_all) and as a packet to each (rel_send); each
 * receiver must take 0, 1, 2, ... once each and in order, whatever is lost. */
struct multi {
    uint32_t left, sent;     /* messages still to send, sent */
    uint32_t got[SIM_MAX_NODES];
    const unsigned char *frame; /* a MULTI packet node 0 sent (captured by multi_tap), and its length */
    size_t frame_len;
    unsigned char copy[WIRE_HEADER_BYTES + 2 * WIRE_MULTI_MAX_RANKS * WIRE_MULTI_ENTRY + 64];
};

static size_t multi_msg(uint32_t k, unsigned char *buf)
{
    size_t len = 8 + k % 40;
    memcpy(buf, &k, 4);
    for (size_t i = 4; i < len; i++)
        buf[i] = (unsigned char)(k * 31 + i);
    return len;
}

static uint64_t multi_app(struct sim *s, void *ctx, int *done)
{
    struct multi *m = ctx;
    unsigned char buf[64], want[64];
    for (; m->left; m->left--, m->sent++) {
        size_t len = multi_msg(m->sent, buf);
        int rc = SHOAL_OK;
        if (m->sent % 2 == 0)
            rc = rel_send_all(s->nodes[0].rel, buf, 4, buf + 4, len - 4, s->now);
        else /* all or none, as rel_send_all: a refusal leaves nothing half sent */
            for (uint32_t j = 1; j < s->n && rc == SHOAL_OK; j++)
                rc = rel_room(s->nodes[0].rel, j) ? SHOAL_OK : SHOAL_EAGAIN;
        for (uint32_t j = 1; j < s->n && rc == SHOAL_OK && m->sent % 2; j++)
            CHECK_RC(rel_send(s->nodes[0].rel, j, buf, len, s->now), SHOAL_OK);
        if (rc == SHOAL_EAGAIN)
            break;
        CHECK_RC(rc, SHOAL_OK);
    }
    *done = 1;
    for (uint32_t j = 1; j < s->n; j++) {
        struct rel_msg msg;
        while (rel_recv(s->nodes[j].rel, &msg) == SHOAL_OK) {
            size_t len = multi_msg(m->got[j], want);
            CHECK(msg.peer == 0 && !msg.bcast && msg.len == len && !memcmp(msg.data, want, len),
                  "node %u: message %u from %u wrong (%zu bytes, lost, repeated or out of order)", j, m->got[j],
                  msg.peer, msg.len);
            m->got[j]++;
            rel_release(s->nodes[j].rel, s->now);
        }
        *done &= m->got[j] == m->sent && !m->left;
    }
    return REL_NEVER;
}

/* Keeps the first MULTI packet node 0 sends, for the forgeries. */
static int multi_tap(struct sim *s, void *ctx, uint32_t src, uint32_t dst, const void *pkt, size_t len)
{
    struct multi *m = ctx;
    (void)s, (void)dst;
    if (src == 0 && !m->frame_len && len >= WIRE_HEADER_BYTES && ((const unsigned char *)pkt)[5] == WIRE_MULTI &&
        len <= sizeof m->copy) {
        memcpy(m->copy, pkt, len);
        m->frame = m->copy;
        m->frame_len = len;
    }
    return 0;
}

static void multi_run(const char *faults, uint32_t n, uint32_t count, struct multi *m, struct sim *s)
{
    struct rel_config rc;
    rel_config_default(&rc);
    sim_init(s, n, &rc, faults);
    s->tap = multi_tap;
    s->tap_ctx = m;
    *m = (struct multi){.left = count};
    sim_run(s, multi_app, m, 20 * SEC);
    check_no_deaths(s);
}

static void multi(void)
{
    static struct sim s;
    struct multi m;
    /* clean: one packet per message, nothing resent */
    multi_run("", 8, 2000, &m, &s);
    const struct rel_stats *st = rel_stats(s.nodes[0].rel);
    CHECK(st->multis_sent == 1000 && st->sent == 1000 * 7 + 1000 * 7 && st->retransmits == 0,
          "8 nodes: %llu MULTI packets, %llu DATA, %llu resent", (unsigned long long)st->multis_sent,
          (unsigned long long)st->sent, (unsigned long long)st->retransmits);
    CHECK(SIM_SUM(&s, dropped[WIRE_DROP_DUPLICATE]) == 0, "duplicates without loss");
    static unsigned char big[MSG_MAX]; /* the message and the vector one byte above max_payload */
    CHECK_RC(rel_send_all(s.nodes[0].rel, big, MSG_MAX - wire_multi_vector_bytes(8) + 1, NULL, 0, s.now),
             SHOAL_EINVAL);

    /* forgeries of the captured packet: altered vector, altered message,
     * another job's secret, and a replay (a duplicate) */
    CHECK(m.frame_len > WIRE_HEADER_BYTES, "no MULTI packet captured");
    struct rel *r1 = s.nodes[1].rel;
    unsigned char f[sizeof m.copy];
    size_t vec = wire_multi_vector_bytes(8);
    uint64_t auth = rel_stats(r1)->dropped[WIRE_DROP_AUTH];
    memcpy(f, m.frame, m.frame_len);
    f[WIRE_HEADER_BYTES + 1 * WIRE_MULTI_ENTRY] ^= 1; /* node 1's sequence number */
    CHECK(rel_input(r1, f, m.frame_len, s.now) == WIRE_DROP_AUTH, "a MULTI with a forged vector was taken");
    memcpy(f, m.frame, m.frame_len);
    f[WIRE_HEADER_BYTES + vec] ^= 0x40; /* the message */
    CHECK(rel_input(r1, f, m.frame_len, s.now) == WIRE_DROP_AUTH, "a MULTI with a forged message was taken");
    struct wire_key other;
    CHECK_RC(wire_key_init(&other, SIM_KEY.k0, SIM_KEY.k1 ^ 1, 0), SHOAL_OK);
    struct wire_header h;
    struct wire_expect e = *rel_expect(r1);
    e.key = other;
    memcpy(f, m.frame, m.frame_len);
    CHECK(wire_decode(f, m.frame_len, &e, &h) == WIRE_DROP_AUTH, "the tag does not depend on the secret");
    wire_encode_header(f, &h, &other, 0);
    CHECK(rel_input(r1, f, m.frame_len, s.now) == WIRE_DROP_AUTH, "a MULTI under another secret was taken");
    wire_key_fini(&other);
    CHECK(rel_stats(r1)->dropped[WIRE_DROP_AUTH] == auth + 3, "forged MULTI packets not counted");
    CHECK(rel_input(r1, m.frame, m.frame_len, s.now) == WIRE_DROP_DUPLICATE, "a replayed MULTI was taken again");
    struct rel_msg msg;
    CHECK(rel_recv(r1, &msg) == SHOAL_EAGAIN, "a forged or replayed MULTI was delivered");
    sim_fini(&s);

    /* loss, duplication and reordering on every path: what a receiver
     * misses of a MULTI comes back as that sequence number alone */
    multi_run("loss=0.1,dup=0.01,reorder=0.05,seed=5", 4, 2000, &m, &s);
    print_stats("MULTI under faults", &s, 0);
    st = rel_stats(s.nodes[0].rel);
    CHECK(st->multis_sent == 1000 && st->retransmits > 0, "%llu MULTI packets, %llu resent",
          (unsigned long long)st->multis_sent, (unsigned long long)st->retransmits);
    sim_fini(&s);

    /* above WIRE_MULTI_MAX_RANKS there is no vector: the sender refuses
     * (its caller sends to each) and a receiver drops one as bad length */
    struct rel_config wide;
    rel_config_default(&wide);
    sim_identity(&wide, 1, WIRE_MULTI_MAX_RANKS + 1, 7);
    static const struct rel_io io = {0};
    struct rel *lone;
    CHECK_RC(rel_create(&lone, &wide, &io, NULL), SHOAL_OK);
    CHECK_RC(rel_send_all(lone, "x", 1, NULL, 0, 0), SHOAL_EINVAL);
    static const unsigned char zeros[1024];
    unsigned char pkt[WIRE_HEADER_BYTES + sizeof zeros];
    struct wire_header mh = {.type = WIRE_MULTI, .job = SIM_JOB, .src = 0, .dst = WIRE_BROADCAST, .src_inc = 9,
                             .len = (uint16_t)wire_multi_vector_bytes(WIRE_MULTI_MAX_RANKS + 1)};
    size_t n = wire_encode(pkt, sizeof pkt, &mh, zeros, &SIM_KEY, 0);
    CHECK(n == WIRE_HEADER_BYTES + mh.len, "encode");
    CHECK(rel_input(lone, pkt, n, 0) == WIRE_DROP_LENGTH, "a MULTI in a job of 65 ranks was taken");
    rel_destroy(lone);
}

/* ---- a stalled receiver ------------------------------------------------------ */

/* Loses the first ACK node 1 sends after it starts taking messages again:
 * the one announcing the room (a window update). */
struct update_tap {
    int armed, dropped;
};

static int drop_update(struct sim *s, void *ctx, uint32_t src, uint32_t dst, const void *pkt, size_t len)
{
    struct update_tap *u = ctx;
    struct wire_header h;
    struct wire_expect e = {.job = SIM_JOB, .key = SIM_KEY, .self = dst, .nranks = s->n};
    if (!u->armed || src != 1 || wire_decode(pkt, len, &e, &h) != WIRE_OK || h.type != WIRE_ACK || h.credits == 0)
        return 0;
    u->armed = 0;
    u->dropped++;
    return 1;
}

static void stall(void)
{
    static struct traffic t;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    rc.rcv_buf = 64; /* credits bind before the window of 256 */
    memset(&t, 0, sizeof t);
    t.max_len = 1000;
    t.count[0][1] = 2000;
    t.stalled[1] = 1;
    sim_init(&s, 2, &rc, "");
    run_idle(&s, &t, 2 * SEC);
    struct rel_peer_info snd, rcv;
    rel_peer_info(s.nodes[0].rel, 1, &snd);
    rel_peer_info(s.nodes[1].rel, 0, &rcv);
    const struct rel_stats *st0 = rel_stats(s.nodes[0].rel);
    printf("stalled: %u accepted, first refusal after %u, %u unacked, %u held, %llu probes, %llu refusals\n",
           t.sent[0][1], t.first_refusal[0][1] - 1, snd.unacked, rcv.held, (unsigned long long)st0->probes_sent,
           (unsigned long long)st0->eagain_credits);
    CHECK(t.sent[0][1] == rc.rcv_buf && t.first_refusal[0][1] == rc.rcv_buf + 1,
          "the sender got %u packets accepted (EAGAIN first after %u), receive buffer %u", t.sent[0][1],
          t.first_refusal[0][1] - 1, rc.rcv_buf);
    CHECK(snd.unacked == 0 && rcv.held == rc.rcv_buf, "unacked %u, held %u", snd.unacked, rcv.held);
    CHECK(st0->probes_sent >= 3 && st0->eagain_credits > 0 && st0->retransmits == 0, "%llu probes",
          (unsigned long long)st0->probes_sent);
    check_no_deaths(&s);

    struct update_tap u = {.armed = 1};
    s.tap = drop_update;
    s.tap_ctx = &u;
    t.stalled[1] = 0;
    uint64_t probes = st0->probes_sent, resumed = s.now;
    sim_run(&s, traffic_app, &t, s.now + SEC);
    print_stats("stalled, then resumed", &s, resumed);
    CHECK(u.dropped == 1, "the window update was not dropped (%d)", u.dropped);
    CHECK(st0->probes_sent > probes, "the sender found the open window without a probe");
    CHECK(s.now - resumed < rc.rto_max_ns + 50 * MS, "recovery took %.1f ms", (double)(s.now - resumed) / MS);
    CHECK(SIM_SUM(&s, delivered) == 2000, "%llu delivered", (unsigned long long)SIM_SUM(&s, delivered));
    check_no_deaths(&s);
    sim_fini(&s);
}

/* ---- the window in bytes ------------------------------------------------------- */

/* Sends packets of len bytes to node 1, with nothing delivered (the
 * simulation does not run): how many the engine takes before SHOAL_EAGAIN,
 * and rel_room before the first. */
static uint32_t fill_window(uint64_t window_bytes, size_t len, uint32_t *room)
{
    static struct sim s;
    static unsigned char payload[1408]; /* the default max_payload */
    struct rel_config rc;
    rel_config_default(&rc);
    rc.window_bytes = window_bytes;
    sim_init(&s, 2, &rc, "");
    *room = rel_room(s.nodes[0].rel, 1);
    uint32_t taken = 0;
    int rc_send;
    while ((rc_send = rel_send(s.nodes[0].rel, 1, payload, len, 0)) == SHOAL_OK)
        taken++;
    CHECK_RC(rc_send, SHOAL_EAGAIN);
    CHECK(rel_stats(s.nodes[0].rel)->eagain_window == 1, "the refusal was not the window's");
    sim_fini(&s);
    return taken;
}

/* window_bytes bounds the payload in flight (the packet that reaches it is
 * the last taken), and small packets still get the whole window of 256. */
static void bytes(void)
{
    uint32_t room, taken = fill_window(4000, 1000, &room);
    CHECK(taken == 4, "4000 bytes of window took %u packets of 1000", taken);
    CHECK(room == 3, "rel_room said %u packets of the largest size (1408) fit 4000 bytes", room);
    taken = fill_window(4000, 1001, &room);
    CHECK(taken == 4, "4000 bytes of window took %u packets of 1001", taken);
    taken = fill_window(4000, 10, &room);
    CHECK(taken == 256, "small packets: %u taken, the window is 256", taken);
    taken = fill_window(0, 1000, &room);
    CHECK(taken == 256 && room == 256, "no byte limit: %u taken, room %u", taken, room);
}

/* ---- a dead peer -------------------------------------------------------------- */

static void dead(void)
{
    static struct traffic t;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    all_to_all(&t, &s, &rc, 500, 2000, "loss=0.01,seed=21");
    sim_run(&s, traffic_app, &t, SEC);
    run_idle(&s, NULL, 10 * SEC); /* silence: keepalives keep everyone alive */
    print_stats("traffic, then 10 s idle", &s, 0);
    CHECK(SIM_SUM(&s, keepalives_sent) > 0, "no keepalives during 10 s of silence");
    check_no_deaths(&s);
    /* every engine misses 5 s of timers (the host was stopped): they ask
     * before they conclude */
    s.now += 5 * SEC;
    run_idle(&s, NULL, 2 * SEC);
    check_no_deaths(&s);

    uint64_t stop = s.now;
    s.nodes[3].down = 1; /* node 3 stops answering; node 0 still has data for it */
    t.count[0][3] += 100;
    run_idle(&s, &t, rc.dead_after_ns + rc.keepalive_ns + 2 * SEC);
    for (unsigned i = 0; i < 3; i++) {
        struct sim_node *n = &s.nodes[i];
        printf("node %u reported node 3 dead %.3f s after it stopped\n", i, (double)(n->dead_at[3] - stop) / SEC);
        CHECK(n->dead_reports[3] == 1 && n->dead_why[3] == REL_DEAD_SILENT, "node %u: %u reports of node 3", i,
              n->dead_reports[3]);
        CHECK(n->dead_at[3] <= stop + rc.dead_after_ns + rc.keepalive_ns &&
                  n->dead_at[3] + rc.keepalive_ns >= stop + rc.dead_after_ns,
              "node %u reported node 3 %.3f s after it stopped", i, (double)(n->dead_at[3] - stop) / SEC);
        for (unsigned j = 0; j < 3; j++)
            CHECK(!n->dead_reports[j], "node %u declared live node %u dead", i, j);
        CHECK_RC(rel_send(n->rel, 3, "x", 1, s.now), SHOAL_EPEERDEAD);
    }
    /* the others still talk */
    t.count[0][1] += 500;
    t.count[2][0] += 500;
    sim_run(&s, traffic_app, &t, s.now + SEC);
    CHECK(s.nodes[0].dead_reports[3] == 1, "node 3 reported again");
    sim_fini(&s);
}

/* ---- liveness under heavy loss ---------------------------------------------- */

/* At 30 % loss on each of a round trip's four fault points (three of four
 * round trips fail), idle peers stay alive through many deadlines, and
 * through a stop of every engine, also one that came while a peer was
 * being probed; a peer that goes silent is still dead at
 * the deadline after the last packet heard from it, plus at most one probe
 * interval (keepalive_ns / 32). */
static void lossy(void)
{
    static struct traffic t;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    all_to_all(&t, &s, &rc, 500, 200, "loss=0.3,seed=31");
    sim_run(&s, traffic_app, &t, 20 * SEC);
    run_idle(&s, NULL, 20 * rc.dead_after_ns);
    print_stats("traffic, then 20 deadlines idle", &s, 0);
    check_no_deaths(&s);
    s.now += 5 * SEC; /* every engine misses 5 s of timers */
    run_idle(&s, NULL, 2 * rc.dead_after_ns);
    check_no_deaths(&s);
    /* the same while the others are probing node 1 (its host stopped
     * first): they ask afresh, not conclude from probes sent 5 s ago */
    s.nodes[1].down = 1;
    run_idle(&s, NULL, rc.keepalive_ns + 100 * MS);
    s.nodes[1].down = 0;
    s.now += 5 * SEC;
    run_idle(&s, NULL, 2 * rc.dead_after_ns);
    check_no_deaths(&s);

    uint64_t stop = s.now, probe = rc.keepalive_ns / 32;
    s.nodes[3].down = 1;
    run_idle(&s, NULL, rc.dead_after_ns + rc.keepalive_ns);
    for (unsigned i = 0; i < 3; i++) {
        struct sim_node *n = &s.nodes[i];
        uint64_t heard = n->heard_at[3];
        printf("node %u last heard node 3 %.3f s before it stopped, reported it dead %.3f s after that\n", i,
               (double)(stop - heard) / SEC, (double)(n->dead_at[3] - heard) / SEC);
        CHECK(n->dead_reports[3] == 1 && n->dead_why[3] == REL_DEAD_SILENT, "node %u: %u reports of node 3", i,
              n->dead_reports[3]);
        CHECK(n->dead_at[3] >= heard + rc.dead_after_ns && n->dead_at[3] <= heard + rc.dead_after_ns + probe,
              "node %u reported node 3 dead %.3f s after it last heard from it", i,
              (double)(n->dead_at[3] - heard) / SEC);
        for (unsigned j = 0; j < 3; j++)
            CHECK(!n->dead_reports[j], "node %u declared live node %u dead", i, j);
    }
    sim_fini(&s);
}

/* ---- a restarted peer ------------------------------------------------------------ */

/* Keeps a copy of the first DATA packet node 1 sends to node 2. */
struct capture {
    unsigned char pkt[2048];
    size_t len;
};

static int capture_1to2(struct sim *s, void *ctx, uint32_t src, uint32_t dst, const void *pkt, size_t len)
{
    struct capture *c = ctx;
    (void)s;
    if (!c->len && src == 1 && dst == 2 && len <= sizeof c->pkt && ((const unsigned char *)pkt)[5] == WIRE_DATA) {
        memcpy(c->pkt, pkt, len);
        c->len = len;
    }
    return 0;
}

static void restart(void)
{
    static struct traffic t, t2;
    static struct sim s;
    static struct capture cap;
    struct rel_config rc;
    rel_config_default(&rc);
    memset(&t, 0, sizeof t);
    t.max_len = 500;
    t.count[0][1] = t.count[1][0] = t.count[1][2] = 300;
    sim_init(&s, 3, &rc, "");
    s.tap = capture_1to2;
    s.tap_ctx = &cap;
    sim_run(&s, traffic_app, &t, SEC);
    CHECK(cap.len, "nothing captured");

    /* node 1 restarts while node 0 has packets in flight to the old one;
     * node 0 keeps resending them, to the old incarnation */
    t.count[0][1] += 200;
    give(&t, &s, 0);
    uint32_t old_inc = s.nodes[1].incarnation;
    sim_restart(&s, 1, old_inc + 1);
    run_idle(&s, NULL, 10 * MS);
    const struct rel_stats *st1 = rel_stats(s.nodes[1].rel);
    uint64_t stale = st1->dropped[WIRE_DROP_INCARNATION];
    printf("the new node 1 dropped %llu packets addressed to its old incarnation\n", (unsigned long long)stale);
    CHECK(stale > 0 && st1->received == 0, "%llu stale drops, %llu accepted", (unsigned long long)stale,
          (unsigned long long)st1->received);

    /* the new node 1 speaks: nodes 0 and 2 see a new incarnation */
    memset(&t2, 0, sizeof t2);
    t2.max_len = 500;
    t2.count[1][0] = t2.count[1][2] = 10;
    run_idle(&s, &t2, 10 * MS);
    for (unsigned i = 0; i < 3; i += 2) {
        struct sim_node *n = &s.nodes[i];
        CHECK(n->dead_reports[1] == 1 && n->dead_why[1] == REL_DEAD_RESTARTED, "node %u: %u reports of node 1", i,
              n->dead_reports[1]);
        CHECK(rel_stats(n->rel)->dropped[WIRE_DROP_INCARNATION] > 0, "node %u counted no incarnation drop", i);
        CHECK_RC(rel_send(n->rel, 1, "x", 1, s.now), SHOAL_EPEERDEAD);
        struct rel_peer_info in;
        rel_peer_info(n->rel, 1, &in);
        CHECK(in.known && in.dead && in.incarnation == old_inc && in.unacked == 0,
              "node %u's view of node 1: known %d dead %d incarnation %u unacked %u", i, in.known, in.dead,
              in.incarnation, in.unacked);
    }

    /* node 2 restarts too and first hears the new node 1 (which resends the
     * 10 messages node 2 refused); then a packet of the old node 1 comes:
     * dropped, and nobody is declared dead */
    sim_restart(&s, 2, s.nodes[2].incarnation + 1);
    run_idle(&s, &t2, 300 * MS);
    CHECK(t2.recvd[1][2] == 10, "the new node 2 got %u messages from the new node 1", t2.recvd[1][2]);
    struct sim_node *n2 = &s.nodes[2];
    uint64_t before = rel_stats(n2->rel)->dropped[WIRE_DROP_INCARNATION];
    memset(cap.pkt + 36, 0, 4); /* dst_inc 0: only its source is stale */
    CHECK(rel_input(n2->rel, cap.pkt, cap.len, s.now) == WIRE_DROP_INCARNATION, "old packet accepted");
    CHECK(rel_stats(n2->rel)->dropped[WIRE_DROP_INCARNATION] == before + 1, "old packet not counted");
    CHECK(!n2->dead_reports[1], "an old packet declared the new node 1 dead");
    sim_fini(&s);
}

/* ---- malformed and foreign packets ------------------------------------------------ */

static void malformed(void)
{
    static struct traffic t;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    memset(&t, 0, sizeof t);
    t.max_len = 500;
    t.count[0][1] = 20000;
    t.count[1][0] = 100;
    sim_init(&s, 2, &rc, "");
    run_idle(&s, &t, 1 * MS); /* traffic under way */
    struct rel *r1 = s.nodes[1].rel;
    CHECK(t.recvd[0][1] > 0 && t.recvd[0][1] < 20000, "%u arrived", t.recvd[0][1]);

    /* a well-formed DATA packet from 0 to 1 to derive the others from */
    struct wire_header good = {.type = WIRE_DATA, .job = SIM_JOB, .src = 0, .dst = 1,
                               .src_inc = s.nodes[0].incarnation, .dst_inc = s.nodes[1].incarnation,
                               .seq = 1u << 30, .ack = 0, .len = 8};
    unsigned char pkt[WIRE_HEADER_BYTES + 64], rnd[200];
    struct {
        const char *what;
        enum wire_verdict want;
        struct wire_header h;
        int csum;
        int cut;  /* bytes removed from the end */
        int flip; /* byte to change after encoding, +1 */
    } cases[] = {
        {"other job", WIRE_DROP_JOB, good, 0, 0, 0},
        {"payload altered after tagging", WIRE_DROP_AUTH, good, 0, 0, WIRE_HEADER_BYTES + 1},
        {"header altered after tagging", WIRE_DROP_AUTH, good, 0, 0, 41},
        {"bad checksum", WIRE_DROP_CHECKSUM, good, 1, 0, 9},
        {"truncated header", WIRE_DROP_SHORT, good, 0, 30, 0},
        {"truncated payload", WIRE_DROP_LENGTH, good, 0, 3, 0},
        {"other version", WIRE_DROP_VERSION, good, 0, 0, 5},
        {"unknown source", WIRE_DROP_RANK, good, 0, 0, 0},
        {"unknown type", WIRE_DROP_TYPE, good, 0, 0, 0},
        {"old incarnation of 1", WIRE_DROP_INCARNATION, good, 0, 0, 0},
        {"beyond the window", WIRE_DROP_WINDOW, good, 0, 0, 0},
        {"acks the unsent", WIRE_DROP_WINDOW, good, 0, 0, 0},
    };
    cases[0].h.job++;
    cases[7].h.src = 7;
    cases[8].h.type = 9;
    cases[9].h.dst_inc--;
    cases[11].h.ack = 1u << 20;
    cases[11].h.seq = 5;
    uint64_t counted[WIRE_VERDICTS];
    memcpy(counted, rel_stats(r1)->dropped, sizeof counted);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = wire_encode(pkt, sizeof pkt, &cases[i].h, "payload!", &SIM_KEY, cases[i].csum);
        if (cases[i].flip)
            pkt[cases[i].flip - 1] ^= 0x40;
        enum wire_verdict v = rel_input(r1, pkt, n - (size_t)cases[i].cut, s.now);
        CHECK(v == cases[i].want, "%s: %s, expected %s", cases[i].what, wire_verdict_name(v),
              wire_verdict_name(cases[i].want));
        counted[v]++;
    }
    /* random bytes */
    uint64_t x = 99;
    for (int k = 0; k < 100; k++) {
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(x = mix64(x + 1));
        enum wire_verdict v = rel_input(r1, rnd, 20 + (size_t)k, s.now);
        CHECK(v != WIRE_OK, "random bytes accepted");
        counted[v]++;
    }
    CHECK(!memcmp(counted, rel_stats(r1)->dropped, sizeof counted), "drop counters disagree with the verdicts");
    for (int v = 1; v < WIRE_VERDICTS; v++)
        if (counted[v])
            printf("  dropped as %-16s %llu\n", wire_verdict_name((enum wire_verdict)v),
                   (unsigned long long)counted[v]);
    sim_run(&s, traffic_app, &t, s.now + SEC);
    CHECK(t.recvd[0][1] == 20000 && t.recvd[1][0] == 100, "delivery disturbed");
    check_no_deaths(&s);
    sim_fini(&s);
}

/* ---- RTT and RTO ---------------------------------------------------------------- */

static void rtt_case(uint64_t one_way, uint64_t want_rto_lo, uint64_t want_rto_hi)
{
    static struct paced p;
    static struct sim s;
    struct rel_config rc;
    rel_config_default(&rc);
    char spec[64];
    snprintf(spec, sizeof spec, "delay=%lluns", (unsigned long long)one_way);
    memset(&p, 0, sizeof p);
    p.t.max_len = 200;
    p.pairs[0][1] = 1;
    p.gap = 20000;
    p.until = 500 * MS + 100 * one_way;
    sim_init(&s, 2, &rc, "");
    /* the fixed delay on the send path only, so each way has it once */
    for (unsigned i = 0; i < 2; i++) {
        struct util_fault_spec fc;
        CHECK_RC(util_fault_parse(spec, &fc, NULL, 0), SHOAL_OK);
        fault_init(&s.nodes[i].fsend, &fc, 2 * i);
    }
    p.until /= 2;
    sim_run(&s, paced_app, &p, p.until);
    uint64_t warm_rtx = rel_stats(s.nodes[0].rel)->retransmits;
    p.until *= 2;
    sim_run(&s, paced_app, &p, p.until);
    struct rel_peer_info in;
    rel_peer_info(s.nodes[0].rel, 1, &in);
    const struct rel_stats *st = rel_stats(s.nodes[0].rel);
    uint64_t var4 = 4 * in.rttvar_ns > rc.rto_min_ns ? 4 * in.rttvar_ns : rc.rto_min_ns;
    printf("one-way delay %6.0f us: srtt %7.1f us, rttvar %6.1f us, rto %7.1f us; %llu samples, %llu retransmitted "
           "while warming up, %llu after; %u messages\n",
           (double)one_way / 1e3, (double)in.srtt_ns / 1e3, (double)in.rttvar_ns / 1e3, (double)in.rto_ns / 1e3,
           (unsigned long long)st->rtt_samples, (unsigned long long)warm_rtx,
           (unsigned long long)(st->retransmits - warm_rtx), p.t.count[0][1]);
    CHECK(in.rto_ns >= rc.rto_min_ns, "rto %llu below rto_min", (unsigned long long)in.rto_ns);
    CHECK(in.rto_ns == in.srtt_ns + var4, "rto %llu is not srtt + max(4 rttvar, rto_min)",
          (unsigned long long)in.rto_ns);
    CHECK(in.srtt_ns >= 2 * one_way && in.srtt_ns <= 2 * one_way + rc.ack_delay_ns + 20000,
          "srtt %llu for a round trip of %llu", (unsigned long long)in.srtt_ns, (unsigned long long)(2 * one_way));
    CHECK(in.rto_ns >= want_rto_lo && in.rto_ns <= want_rto_hi, "rto %llu outside [%llu, %llu]",
          (unsigned long long)in.rto_ns, (unsigned long long)want_rto_lo, (unsigned long long)want_rto_hi);
    CHECK(st->retransmits == warm_rtx, "%llu spurious retransmissions in steady state",
          (unsigned long long)(st->retransmits - warm_rtx));
    CHECK(SIM_SUM(&s, delivered) + rc.window >= p.t.count[0][1], "%llu delivered of %u",
          (unsigned long long)SIM_SUM(&s, delivered), p.t.count[0][1]);
    sim_fini(&s);
}

static void rtt(void)
{
    rtt_case(10000, 200000, 300000);       /* LAN: near the floor */
    rtt_case(100000, 400000, 500000);      /* srtt + rto_min */
    rtt_case(5000000, 10200000, 11000000); /* adapts upward */
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    int found = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!strcmp(what, cases[i].name)) {
            transfer(&cases[i]);
            found = 1;
        }
    static const struct test_case others[] = {
        {"acks", acks},       {"channels", channels}, {"spurious", spurious}, {"bcast", bcast}, {"multi", multi},         {"stall", stall}, {"dead", dead}, {"lossy", lossy},
        {"restart", restart}, {"malformed", malformed}, {"rtt", rtt}, {"bytes", bytes}};
    if (!found)
        TEST_RUN_CASE(others, what);
    printf("net rel %s: ok\n", what);
    return 0;
}
