/* The ofi transport through its operations (ofi/ofi.h), every rank serving
 * every other over the libfabric provider FI_PROVIDER names, after a
 * shoal_init on shared memory (SHOAL_TRANSPORT=shm):
 *   all: ping-pong on both channels; bad arguments; a flood on both
 *        channels far past the credits, of every size from 0 B to
 *        max_payload, each message checked for its place in its
 *        (peer, channel) sequence and its bytes; then pairs of ranks fill
 *        each other's request channel and answer each request with one
 *        reply more than the reply channel has room for, from inside its
 *        delivery (no deadlock, and no request delivered while a handler
 *        waits); settled(), fini.
 *   rma: native one-sided commands (ofi/ofi_rma.h) on each rank's exposed
 *        region: bad arguments; puts into every peer, each followed by a
 *        message that the target, when it runs, finds the data before;
 *        gets of what this rank put and of max_bytes; fetch-add from every
 *        rank on rank 0's counter, compare-swap with one winner.
 *   lat: rank 0's half round trip of 8-byte messages to rank 1.
 * Skips (77) without libfabric or without a usable provider. */
#include "../common/check.h"
#include "boot/boot.h"
#ifdef SHOAL_HAVE_OFI
#include "ofi/ofi.h"
#include "ofi/ofi_rma.h"
#endif

#include <shoal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void skip(const char *why)
{
    printf("skipped: %s\n", why);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    exit(77);
}

#ifndef SHOAL_HAVE_OFI
int main(void)
{
    CHECK_RC(shoal_init(NULL, NULL), SHOAL_OK);
    skip("libfabric was not found when shoal was built");
}
#else

#define PINGS 200
#define FLOOD 1000
#define LAT_WARM 1000
#define LAT_ITERS 10000
#define WAIT_S 60
#define IDLE_POLLS 10000

enum kind { K_PING = 1, K_PONG, K_FLOOD, K_ECHO, K_ECHOED, K_ECHO_END, K_PUT_DONE, K_SYNC, K_STOP };

/* Every message of 8 bytes or more begins with this; shorter ones are
 * checked by their length and (1 B) their sequence number's low byte. */
struct head {
    uint16_t kind;
    uint16_t pad;
    uint32_t seq; /* its place among the sender's messages to this rank on its channel */
};

static const struct tp_ops *tp = &ofi_transport;
static int me, n;
static size_t maxp;
static uint32_t *sent_seq, *recv_seq; /* [peer * 2 + channel] */
static uint32_t *got[K_STOP + 1];     /* [kind][peer]: messages of a kind from a peer */
static unsigned char *body;           /* max_payload bytes to send from */
static int in_request;                /* a request's delivery runs */
static uint64_t nested_polls, eagains;
static uint64_t echo_waits;           /* polls of replies to requests of kind K_ECHO */
static unsigned char *region;         /* rma: this rank's exposed memory */
static void check_puts_from(uint32_t from);

static unsigned char pattern(uint32_t from, int ch, uint32_t seq, size_t i)
{
    uint64_t x = ((uint64_t)from << 40 ^ (uint64_t)ch << 32 ^ seq) * 0x9e3779b97f4a7c15ull + i * 0x2545f491ull;
    return (unsigned char)(x >> 56);
}

/* Sends a message of len bytes (0, 1, or a head and a patterned body) to
 * dest; SHOAL_EAGAIN passes up. */
static int try_send(int dest, int ch, enum kind k, size_t len)
{
    uint32_t seq = sent_seq[dest * 2 + ch];
    int rc;
    if (len < sizeof(struct head)) {
        unsigned char b = (unsigned char)seq;
        rc = tp->send(dest, (enum tp_channel)ch, NULL, 0, len ? &b : NULL, len);
    } else {
        struct head h = {.kind = (uint16_t)k, .seq = seq};
        size_t blen = len - sizeof h;
        for (size_t i = 0; i < blen; i++)
            body[i] = pattern((uint32_t)me, ch, seq, i);
        rc = tp->send(dest, (enum tp_channel)ch, &h, sizeof h, blen ? body : NULL, blen);
    }
    if (rc == SHOAL_OK)
        sent_seq[dest * 2 + ch]++;
    else
        CHECK(rc == SHOAL_EAGAIN, "send to rank %d: %s", dest, shoal_strerror(rc));
    return rc;
}

/* A send that waits for room: polling everything from the main program,
 * replies only from inside a request's delivery (as am does). */
static void send_wait(int dest, int ch, enum kind k, size_t len)
{
    double t0 = test_now();
    while (try_send(dest, ch, k, len) == SHOAL_EAGAIN) {
        eagains++;
        nested_polls += in_request;
        tp->poll(in_request);
        TEST_DEADLINE(t0, WAIT_S, "room to send");
    }
}

static void deliver(const struct tp_msg *m)
{
    int ch = m->channel;
    uint32_t seq = recv_seq[m->peer * 2 + ch]++;
    CHECK(!(ch == TP_REQUEST && in_request), "a request from rank %u delivered while a request's delivery "
          "waited for room (poll(replies_only) delivered a request)", m->peer);
    CHECK(!m->bcast, "a message from rank %u marked as a broadcast", m->peer);
    if (m->len < sizeof(struct head)) {
        CHECK(m->len == 0 || *(const unsigned char *)m->data == (unsigned char)seq,
              "a %zu-byte message from rank %u on channel %d out of order (expected #%u)", m->len, m->peer, ch, seq);
        got[K_FLOOD][m->peer]++;
        return;
    }
    struct head h;
    memcpy(&h, m->data, sizeof h);
    CHECK(h.seq == seq && h.kind >= K_PING && h.kind <= K_STOP,
          "message #%u (kind %u) from rank %u on channel %d arrived as #%u", h.seq, h.kind, m->peer, ch, seq);
    const unsigned char *b = (const unsigned char *)m->data + sizeof h;
    for (size_t i = 0; i < m->len - sizeof h; i++)
        CHECK(b[i] == pattern(m->peer, ch, seq, i), "byte %zu of message #%u from rank %u on channel %d is wrong",
              i, seq, m->peer, ch);
    got[h.kind][m->peer]++;
    if (h.kind == K_PUT_DONE)
        check_puts_from(m->peer);
    if (ch != TP_REQUEST)
        return;
    in_request = 1;
    if (h.kind == K_PING)
        send_wait((int)m->peer, TP_REPLY, K_PONG, m->len);
    if (h.kind == K_ECHO) { /* one reply more than there is room for: one must wait */
        uint64_t polls = nested_polls;
        for (uint32_t i = tp->room((int)m->peer, TP_REPLY); i > 0; i--)
            send_wait((int)m->peer, TP_REPLY, K_ECHOED, maxp);
        send_wait((int)m->peer, TP_REPLY, K_ECHO_END, maxp);
        echo_waits += nested_polls - polls;
    }
    in_request = 0;
}

/* Polls until got[k][from] reaches want; after IDLE_POLLS polls in a row
 * without an event, sleeps in wait() (bounded by its argument). */
static void wait_for(enum kind k, int from, uint32_t want, const char *what)
{
    double t0 = test_now();
    unsigned idle = 0;
    while (got[k][from] < want) {
        idle = tp->poll(0) ? 0 : idle + 1;
        if (idle > IDLE_POLLS) {
            double w = test_now();
            tp->wait(1000000);
            /* bounded, not sleeping to a far timer; loose: CI runs 4-rank jobs two at a time on 2 cores */
            CHECK(test_now() - w < 5, "wait(1 ms) slept %.3f s", test_now() - w);
            idle = 0;
        }
        TEST_DEADLINE(t0, WAIT_S, what);
    }
}

/* Every rank tells every other it got here, and waits for theirs: what
 * each sent on the request channel before has then arrived. */
static void sync_all(void)
{
    static uint32_t round;
    round++;
    for (int p = 0; p < n; p++)
        if (p != me)
            send_wait(p, TP_REQUEST, K_SYNC, sizeof(struct head));
    for (int p = 0; p < n; p++)
        if (p != me)
            wait_for(K_SYNC, p, round, "the other ranks' sync");
}

static void ping_pong(void)
{
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        for (uint32_t i = 1; i <= PINGS; i++) {
            send_wait(p, TP_REQUEST, K_PING, sizeof(struct head) + i % 64);
            wait_for(K_PONG, p, got[K_PONG][p] + 1, "a pong");
        }
    }
    sync_all();
}

static void bad_arguments(void)
{
    CHECK_RC(tp->send(me, TP_REQUEST, NULL, 0, NULL, 0), SHOAL_ERANK);
    CHECK_RC(tp->send(n, TP_REQUEST, NULL, 0, NULL, 0), SHOAL_ERANK);
    CHECK(tp->room(me, TP_REQUEST) == 0, "room to send to itself");
    int p = (me + 1) % n;
    CHECK_RC(tp->send(p, TP_REQUEST, body, 1, body, maxp), SHOAL_ETOOBIG);
    CHECK(tp->room(p, TP_REQUEST) > 0 && tp->room(p, TP_REPLY) > 0, "no room on an idle channel");
}

/* The size of flood message #i: 0 B, 1 B, max_payload, the head alone, and
 * sizes in between. */
static size_t flood_size(uint32_t i)
{
    switch (i % 8) {
    case 0: return 0;
    case 1: return 1;
    case 2: return maxp;
    case 3: return sizeof(struct head);
    default: return sizeof(struct head) + (i * 2654435761u) % (maxp - sizeof(struct head));
    }
}

static void flood(void)
{
    uint64_t before = eagains;
    for (uint32_t i = 0; i < FLOOD; i++)
        for (int p = 0; p < n; p++)
            for (int ch = 0; p != me && ch < 2; ch++)
                send_wait(p, ch, K_FLOOD, flood_size(i));
    for (int p = 0; p < n; p++)
        if (p != me)
            wait_for(K_FLOOD, p, 2 * FLOOD, "the flood");
    /* FLOOD messages to a peer that frees them only when polled: the
     * sender must have run out of credits and waited */
    CHECK(eagains > before, "a flood of %d messages per peer never ran out of credits", FLOOD);
    sync_all();
}

/* Ranks 2k and 2k+1: each fills the other's request channel without
 * polling, then polls, and each request's delivery sends one reply more
 * than the reply channel has room for, polling for replies only. */
static void echo_pairs(void)
{
    int p = me ^ 1;
    if (p < n) {
        uint32_t sent = 0;
        while (try_send(p, TP_REQUEST, K_ECHO, sizeof(struct head)) == SHOAL_OK)
            sent++;
        CHECK(sent > 0 && tp->room(p, TP_REQUEST) == 0, "the request channel took %u messages and has room %u",
              sent, tp->room(p, TP_REQUEST));
        wait_for(K_ECHO_END, p, sent, "replies to requests sent into a full request channel");
    }
    sync_all(); /* after the partner's requests, which this rank's deliveries answered */
    CHECK(p >= n || echo_waits > 0, "the replies to rank %d's requests never waited for room", p);
}

static void finish(void)
{
    double t0 = test_now();
    while (!tp->settled()) {
        tp->poll(0);
        TEST_DEADLINE(t0, WAIT_S, "every send to complete");
    }
    sync_all();
    t0 = test_now();
    while (!tp->settled()) {
        tp->poll(0);
        TEST_DEADLINE(t0, WAIT_S, "the syncs to complete");
    }
    struct tp_stats st;
    tp->stats(&st);
    CHECK(st.packets_sent > 0 && st.packets_received > 0, "no traffic counted");
    tp->fini();
}

/* ---- native one-sided commands ------------------------------------------ */

#define REGION (64u << 10)
#define PUTS 8
#define PUT_BYTES 1024u
#define COUNTER (60u << 10) /* rank 0's fetch-add word, then its compare-swap word */
#define ADDS 100

static unsigned char put_pattern(uint32_t from, uint32_t to, size_t i)
{
    return pattern(from, 7, to, i);
}

/* A message sent after from's puts into this rank: their data is here. */
static void check_puts_from(uint32_t from)
{
    const unsigned char *at = region + (size_t)from * PUTS * PUT_BYTES;
    for (size_t i = 0; i < PUTS * PUT_BYTES; i++)
        CHECK(at[i] == put_pattern(from, (uint32_t)me, i), "byte %zu of rank %u's puts is not here when the "
              "message it sent after them runs", i, from);
}

static void rma_wait(struct tp_rma_req *req, const char *what)
{
    double t0 = test_now();
    while (req->status == SHOAL_PENDING) {
        tp->poll(0);
        TEST_DEADLINE(t0, WAIT_S, what);
    }
    CHECK(req->status == SHOAL_OK, "%s: %s", what, shoal_strerror(req->status));
}

/* Starts a command, polling while it finds no room. */
#define RMA_START(call, what)                                        \
    do {                                                             \
        double t0_ = test_now();                                     \
        int rc_;                                                     \
        while ((rc_ = (call)) == SHOAL_EAGAIN) {                     \
            tp->poll(0);                                             \
            TEST_DEADLINE(t0_, WAIT_S, what);                        \
        }                                                            \
        CHECK(rc_ == SHOAL_OK, "%s: %s", what, shoal_strerror(rc_)); \
    } while (0)

static void rma_bad_arguments(uint32_t id, int atomics)
{
    struct tp_rma_req req = {0};
    uint64_t old;
    int p = (me + 1) % n;
    CHECK_RC(ofi_rma.put(me, id, 0, body, 8, &req), SHOAL_ERANK);
    CHECK_RC(ofi_rma.put(p, id + 1, 0, body, 8, &req), SHOAL_ESEGMENT);
    CHECK_RC(ofi_rma.put(p, id, REGION - 4, body, 8, &req), SHOAL_ERANGE);
    CHECK_RC(ofi_rma.get(p, id, 0, body, ofi_rma.max_bytes() + 1, &req), SHOAL_ETOOBIG);
    CHECK_RC(ofi_rma.amo(p, id, COUNTER + 4, TP_AMO_FETCH_ADD, 1, 0, &old, &req),
             atomics ? SHOAL_EALIGN : SHOAL_EINVAL);
}

static void rma_puts(uint32_t id)
{
    static struct tp_rma_req req[PUTS];
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        for (int k = 0; k < PUTS; k++) {
            for (size_t i = 0; i < PUT_BYTES; i++)
                body[i] = put_pattern((uint32_t)me, (uint32_t)p, k * PUT_BYTES + i);
            RMA_START(ofi_rma.put(p, id, ((size_t)me * PUTS + k) * PUT_BYTES, body, PUT_BYTES, &req[k]), "a put");
        }
        /* at once: the message must not overtake the data */
        send_wait(p, TP_REQUEST, K_PUT_DONE, sizeof(struct head));
        for (int k = 0; k < PUTS; k++)
            rma_wait(&req[k], "a put's completion");
    }
    for (int p = 0; p < n; p++)
        if (p != me)
            wait_for(K_PUT_DONE, p, 1, "the other ranks' puts");
    sync_all();
}

static void rma_gets(uint32_t id)
{
    struct tp_rma_req req = {0};
    size_t big = ofi_rma.max_bytes() < REGION ? ofi_rma.max_bytes() : REGION;
    unsigned char *back = malloc(big);
    CHECK(back != NULL, "out of memory");
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        RMA_START(ofi_rma.get(p, id, (size_t)me * PUTS * PUT_BYTES, back, PUTS * PUT_BYTES, &req), "a get");
        rma_wait(&req, "a get");
        for (size_t i = 0; i < PUTS * PUT_BYTES; i++)
            CHECK(back[i] == put_pattern((uint32_t)me, (uint32_t)p, i), "byte %zu got back from rank %d", i, p);
        RMA_START(ofi_rma.get(p, id, 0, back, big, &req), "a get of max_bytes");
        rma_wait(&req, "a get of max_bytes");
        for (size_t i = 0; i < big && i < (size_t)n * PUTS * PUT_BYTES; i++) {
            uint32_t from = (uint32_t)(i / (PUTS * PUT_BYTES));
            CHECK(from == (uint32_t)p || back[i] == put_pattern(from, (uint32_t)p, i % (PUTS * PUT_BYTES)),
                  "byte %zu of rank %d's region", i, p);
        }
    }
    free(back);
    sync_all();
}

static void rma_atomics(uint32_t id)
{
    struct tp_rma_req req = {0};
    uint64_t old, last = 0;
    if (me != 0) {
        for (int i = 0; i < ADDS; i++) {
            RMA_START(ofi_rma.amo(0, id, COUNTER, TP_AMO_FETCH_ADD, 1, 0, &old, &req), "a fetch-add");
            rma_wait(&req, "a fetch-add");
            CHECK(i == 0 || old > last, "fetch-add #%d returned %llu after %llu", i, (unsigned long long)old,
                  (unsigned long long)last);
            last = old;
        }
        RMA_START(ofi_rma.amo(0, id, COUNTER + 8, TP_AMO_CSWAP, (uint64_t)me, 0, &old, &req), "a compare-swap");
        rma_wait(&req, "a compare-swap");
        CHECK(old < (uint64_t)n && old != (uint64_t)me, "compare-swap returned %llu", (unsigned long long)old);
        uint64_t now;
        RMA_START(ofi_rma.get(0, id, COUNTER + 8, &now, 8, &req), "a get of the compare-swap word");
        rma_wait(&req, "a get of the compare-swap word");
        CHECK(now != 0 && (old != 0 || now == (uint64_t)me), "compare-swap: old %llu, now %llu",
              (unsigned long long)old, (unsigned long long)now);
    }
    sync_all();
    if (me == 0) {
        uint64_t sum = __atomic_load_n((uint64_t *)(void *)(region + COUNTER), __ATOMIC_ACQUIRE);
        uint64_t won = __atomic_load_n((uint64_t *)(void *)(region + COUNTER + 8), __ATOMIC_ACQUIRE);
        CHECK(sum == (uint64_t)(n - 1) * ADDS, "the counter is %llu after %d fetch-adds",
              (unsigned long long)sum, (n - 1) * ADDS);
        CHECK(won >= 1 && won < (uint64_t)n, "compare-swap word %llu", (unsigned long long)won);
    }
}

/* with_atomics 0: puts and gets only (mode rma_puts), for a provider whose
 * atomics are broken (tests/ofi/CMakeLists.txt says which). */
static void rma(int with_atomics)
{
    int atomics;
    if (!ofi_rma.available(&atomics)) {
        tp->fini();
        skip("the provider has no native one-sided commands");
    }
    region = aligned_alloc(4096, REGION);
    CHECK(region != NULL, "out of memory");
    memset(region, 0, REGION);
    uint32_t id;
    CHECK_RC(ofi_rma.expose(region, REGION, &id), SHOAL_OK);
    CHECK(ofi_rma.max_bytes() >= PUTS * PUT_BYTES, "max_bytes %zu", ofi_rma.max_bytes());
    rma_bad_arguments(id, atomics);
    rma_puts(id);
    rma_gets(id);
    if (atomics && with_atomics)
        rma_atomics(id);
    else if (me == 0)
        printf("%s: atomics not tested\n", atomics ? "rma_puts" : "the provider has no 64-bit fetch-add and compare-swap");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 8-byte messages: a request, answered by a reply from its delivery. */
static void latency(void)
{
    CHECK(n == 2, "lat runs on 2 ranks");
    if (me == 1) {
        wait_for(K_STOP, 0, 1, "rank 0's stop");
        return;
    }
    static double t[LAT_ITERS];
    for (int i = 0; i < LAT_WARM + LAT_ITERS; i++) {
        double t0 = test_now();
        send_wait(1, TP_REQUEST, K_PING, sizeof(struct head));
        wait_for(K_PONG, 1, got[K_PONG][1] + 1, "a pong");
        if (i >= LAT_WARM)
            t[i - LAT_WARM] = (test_now() - t0) / 2;
    }
    double sum = 0;
    for (int i = 0; i < LAT_ITERS; i++)
        sum += t[i];
    qsort(t, LAT_ITERS, sizeof *t, cmp_double);
    char where[128];
    printf("%s: 8-byte half round trip median %.2f us (mean %.2f, min %.2f)\n", tp->describe(where, sizeof where),
           t[LAT_ITERS / 2] * 1e6, sum / LAT_ITERS * 1e6, t[0] * 1e6);
    send_wait(1, TP_REQUEST, K_STOP, sizeof(struct head));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    if (!ofi_usable())
        skip("libfabric offers no usable provider (FI_PROVIDER)");
    me = shoal_rank();
    n = shoal_size();
    uint8_t *serves = calloc((size_t)n, 1);
    sent_seq = calloc((size_t)n * 2, sizeof *sent_seq);
    recv_seq = calloc((size_t)n * 2, sizeof *recv_seq);
    for (int k = 0; k <= K_STOP; k++)
        CHECK((got[k] = calloc((size_t)n, sizeof *got[k])) != NULL, "out of memory");
    CHECK(serves && sent_seq && recv_seq, "out of memory");
    for (int r = 0; r < n; r++)
        serves[r] = r != me;
    struct tp_init in = {.rank = me, .nranks = n, .name = "ofi", .serves = serves, .deliver = deliver};
    CHECK_RC(tp->init(&in), SHOAL_OK);
    maxp = tp->max_payload();
    CHECK(maxp >= 4096 && (body = malloc(maxp + 1)) != NULL, "max_payload %zu", maxp);
    if (strcmp(mode, "lat") == 0) {
        latency();
    } else if (strncmp(mode, "rma", 3) == 0) {
        rma(strcmp(mode, "rma_puts") != 0);
    } else {
        ping_pong();
        bad_arguments();
        flood();
        echo_pairs();
    }
    finish();
    free(body);
    free(region);
    free(serves);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    return 0;
}
#endif
