/* Unit tests of the cachable queue: wrap-around, full ring, every message
 * size, pads, and concurrent producers/consumers (also run under TSan). */
#include "shm/ring.h"
#include "shoal.h"
#include "../common/check.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct test_ring {
    struct ring_head head;
    struct ring_slot *slots;
    uint32_t nslots;
    struct ring_tx tx;
    struct ring_rx rx;
};

static void test_ring_init(struct test_ring *r, uint32_t nslots)
{
    memset(&r->head, 0, sizeof r->head);
    r->nslots = nslots;
    r->slots = aligned_alloc(RING_SLOT_BYTES, (size_t)nslots * RING_SLOT_BYTES);
    CHECK(r->slots, "out of memory");
    memset(r->slots, 0, (size_t)nslots * RING_SLOT_BYTES);
    CHECK(ring_tx_init(&r->tx, r->slots, &r->head, nslots) == SHOAL_OK, "ring_tx_init");
    /* a new ring is cold: its first reserve is refused (not counted as
     * full) until its sender has backed it, here malloc's memory */
    CHECK(ring_tx_reserve(&r->tx, 1) == NULL && r->tx.cold && r->tx.full_events == 0,
          "a cold ring took a message");
    ring_tx_warm(&r->tx);
    ring_rx_init(&r->rx, r->slots, &r->head, nslots);
}

/* Body word i of message seq.  Words that start a slot hold a control word
 * that would be valid on the ring's next pass: if the sender ever let stale
 * body bytes stand where the receiver looks for a header, the receiver would
 * take them for a message and the order check would fail. */
static uint64_t body_word(const struct test_ring *r, uint64_t first, uint64_t seq, size_t i)
{
    if ((i + 1) % 8 == 0) {
        uint64_t slot = first + (i + 1) / 8;
        return ring_ctl(slot + r->nslots, r->tx.shift, RING_TYPE_MSG, 1, 0xbadull);
    }
    return seq * 1000003u + i;
}

static void fill(struct test_ring *r, struct ring_slot *s, uint32_t m, uint64_t seq)
{
    uint64_t first = r->tx.tail; /* reserve has already stepped over any pad */
    size_t words = (size_t)m * 8 - 1;
    for (size_t i = 0; i < words; i++)
        ring_msg_body(s)[i] = body_word(r, first, seq, i);
}

static void verify(const struct test_ring *r, const struct ring_slot *s, uint32_t m, uint64_t seq)
{
    uint64_t first = r->rx.head;
    size_t words = (size_t)m * 8 - 1;
    for (size_t i = 0; i < words; i++)
        CHECK(ring_msg_body(s)[i] == body_word(r, first, seq, i), "message %llu word %zu corrupt",
              (unsigned long long)seq, i);
}

static int try_send(struct test_ring *r, uint32_t m, uint64_t seq)
{
    struct ring_slot *s = ring_tx_reserve(&r->tx, m);
    if (!s)
        return 0;
    fill(r, s, m, seq);
    ring_tx_commit(&r->tx, m, seq & ((1ull << 44) - 1));
    return 1;
}

static int try_recv(struct test_ring *r, uint64_t want_seq, uint32_t *m_out)
{
    uint64_t ctl;
    const struct ring_slot *s = ring_rx_peek(&r->rx, &ctl);
    if (!s)
        return 0;
    uint32_t m = ring_ctl_slots(ctl);
    CHECK(ring_ctl_tag(ctl) == (want_seq & ((1ull << 44) - 1)), "out of order: got tag %llu want %llu",
          (unsigned long long)ring_ctl_tag(ctl), (unsigned long long)want_seq);
    verify(r, s, m, want_seq);
    ring_rx_release(&r->rx, m);
    if (m_out)
        *m_out = m;
    return 1;
}

/* Fill to full with 1-slot messages: exactly nslots-1 fit (one marker slot). */
static void test_full_and_wrap(uint32_t nslots)
{
    struct test_ring r;
    test_ring_init(&r, nslots);
    uint64_t sent = 0, recvd = 0;
    for (int pass = 0; pass < 5; pass++) {
        while (try_send(&r, 1, sent))
            sent++;
        CHECK(sent - recvd == nslots - 1, "ring of %u held %llu messages, expected %u", nslots,
              (unsigned long long)(sent - recvd), nslots - 1);
        CHECK(!try_send(&r, 1, sent), "send into a full ring succeeded");
        /* drain half, refill: exercises the lazy head refresh and wrap */
        for (uint32_t i = 0; i < nslots / 2; i++)
            CHECK(try_recv(&r, recvd++, NULL), "message %llu missing", (unsigned long long)recvd);
    }
    while (try_recv(&r, recvd, NULL))
        recvd++;
    CHECK(recvd == sent, "received %llu of %llu", (unsigned long long)recvd, (unsigned long long)sent);
    CHECK(!try_recv(&r, recvd, NULL), "empty ring returned a message");
    free(r.slots);
    ring_tx_fini(&r.tx);
}

/* Every message size from 1 slot to the maximum, many passes, so every
 * size meets the end of the ring (pads) at every offset. */
static void test_every_size(uint32_t nslots)
{
    struct test_ring r;
    test_ring_init(&r, nslots);
    uint32_t maxm = ring_max_msg_slots(nslots);
    uint64_t seq = 0;
    for (int rep = 0; rep < 3; rep++) {
        for (uint32_t m = 1; m <= maxm; m++) {
            CHECK(try_send(&r, m, seq), "%u-slot message did not fit an empty ring of %u", m, nslots);
            uint32_t got;
            CHECK(try_recv(&r, seq, &got), "%u-slot message lost", m);
            CHECK(got == m, "slot count %u, expected %u", got, m);
            seq++;
        }
    }
    /* Back-to-back maximum messages: two never fit, one always does. */
    CHECK(try_send(&r, maxm, seq), "max message rejected by an empty ring");
    CHECK(!try_send(&r, maxm, seq + 1), "two max messages fit a ring of %u", nslots);
    CHECK(try_recv(&r, seq, NULL), "max message lost");
    free(r.slots);
    ring_tx_fini(&r.tx);
}

struct stress {
    struct test_ring *rings;
    int nprod;
    uint64_t per_prod;
    int id;
};

static uint32_t msg_size(uint64_t seq, uint32_t maxm)
{
    /* deterministic mix of mostly small and some large messages */
    uint64_t x = seq * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t pick = (uint32_t)(x >> 33);
    return (pick % 8 == 0) ? 1 + pick % maxm : 1 + pick % 3;
}

static void *producer(void *arg)
{
    struct stress *s = arg;
    struct test_ring *r = &s->rings[s->id];
    uint32_t maxm = ring_max_msg_slots(r->nslots);
    double t0 = test_now();
    for (uint64_t seq = 0; seq < s->per_prod;) {
        if (try_send(r, msg_size(seq, maxm), seq)) {
            seq++;
        } else {
            sched_yield(); /* more threads than cores: let the consumer run */
            TEST_DEADLINE(t0, 60, "ring space");
        }
    }
    return NULL;
}

/* nprod producers, each with its own SPSC ring, one consumer polling all:
 * the shape of one rank's inbox. */
static void test_concurrent(int nprod, uint32_t nslots, uint64_t per_prod)
{
    /* struct ring_head wants 128-byte alignment, which calloc does not give */
    struct test_ring *rings = aligned_alloc(RING_HEAD_BLOCK, (size_t)nprod * sizeof *rings);
    struct stress *args = calloc((size_t)nprod, sizeof *args);
    pthread_t *th = calloc((size_t)nprod, sizeof *th);
    uint64_t *next = calloc((size_t)nprod, sizeof *next);
    CHECK(rings && args && th && next, "out of memory");
    for (int i = 0; i < nprod; i++) {
        test_ring_init(&rings[i], nslots);
        args[i] = (struct stress){rings, nprod, per_prod, i};
        CHECK(pthread_create(&th[i], NULL, producer, &args[i]) == 0, "pthread_create");
    }
    uint64_t total = 0, want = (uint64_t)nprod * per_prod;
    double t0 = test_now();
    while (total < want) {
        uint64_t before = total;
        for (int i = 0; i < nprod; i++) {
            uint32_t maxm = ring_max_msg_slots(nslots), got;
            while (next[i] < per_prod && try_recv(&rings[i], next[i], &got)) {
                CHECK(got == msg_size(next[i], maxm), "size mismatch");
                next[i]++;
                total++;
            }
        }
        if (total == before)
            sched_yield();
        TEST_DEADLINE(t0, 60, "messages from producers");
    }
    for (int i = 0; i < nprod; i++) {
        pthread_join(th[i], NULL);
        free(rings[i].slots);
        ring_tx_fini(&rings[i].tx);
    }
    free(rings);
    free(args);
    free(th);
    free(next);
}

int main(void)
{
    const uint32_t sizes[] = {64, 128, 256, 1024, 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        test_full_and_wrap(sizes[i]);
        test_every_size(sizes[i]);
    }
    test_concurrent(1, 64, 200000);
    test_concurrent(1, 4096, 200000);
    test_concurrent(4, 128, 50000);
    test_concurrent(15, 256, 10000);
    printf("ring tests passed\n");
    return 0;
}
