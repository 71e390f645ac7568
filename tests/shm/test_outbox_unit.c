/* Unit tests of the outbox allocator (shm/outbox.h): chunks are line-aligned
 * and never wrap, space comes back only once the consumer heads have passed
 * the descriptors, oldest first (a consumed chunk behind an unconsumed one
 * stays taken), a cancelled chunk is free, and the receiver's bounds check
 * refuses what lies outside the pool, overflow included. */
#include "shm/outbox.h"
#include "shoal.h"
#include "../common/check.h"

#include <stdint.h>
#include <stdlib.h>

#define POOL 65536u

static void test_wrap_and_order(void)
{
    struct outbox ob;
    char *mem = aligned_alloc(64, POOL);
    CHECK(mem && outbox_init(&ob, mem, POOL) == SHOAL_OK, "init");
    _Atomic uint64_t head_a = 0, head_b = 0; /* two receivers' rings */
    size_t off;
    int64_t c[8];
    /* 3 chunks of 20000 bytes (20032 rounded to lines): 60096 of 65536 */
    for (int i = 0; i < 3; i++) {
        c[i] = outbox_take(&ob, 20000, &off);
        CHECK(c[i] == i && off == (size_t)i * 20032, "chunk %d at %zu", i, off);
        outbox_sent(&ob, c[i], i == 1 ? &head_b : &head_a, (uint64_t)i + 1);
    }
    CHECK(outbox_take(&ob, 20000, &off) < 0, "a fourth fits only once one is free");
    CHECK(ob.full_events == 1, "full counted");
    atomic_store(&head_b, 2); /* the middle chunk consumed: still behind chunk 0 */
    CHECK(outbox_take(&ob, 20000, &off) < 0, "freed out of order, not reusable before the oldest");
    atomic_store(&head_a, 1); /* chunk 0 consumed: 0 and 1 come back */
    c[3] = outbox_take(&ob, 20000, &off);
    CHECK(c[3] == 3 && off == 0, "wrapped to the start (the 5440 bytes at the end skipped), got %zu", off);
    c[4] = outbox_take(&ob, 20000, &off);
    CHECK(c[4] == 4 && off == 20032, "second after the wrap at %zu", off);
    CHECK(outbox_take(&ob, 20000, &off) < 0, "chunk 2 still taken");
    outbox_cancel(&ob, c[4]);
    CHECK(outbox_take(&ob, 20000, &off) < 0, "a cancelled chunk behind a live one stays until its turn");
    atomic_store(&head_a, 3); /* chunk 2 consumed */
    outbox_sent(&ob, c[3], &head_a, 4);
    atomic_store(&head_a, 4);
    c[5] = outbox_take(&ob, 30000, &off);
    CHECK(c[5] == 5 && off == 0, "everything free: 30016 bytes from 40064 do not fit the pass, so at 0, got %zu", off);
    CHECK(outbox_take(&ob, POOL / 2 + 1, &off) < 0, "more than half a pool is refused outright");
    outbox_fini(&ob);
    free(mem);
}

/* A pending chunk (taken, descriptor not yet in a ring) is never given
 * back, whatever the heads say. */
static void test_pending(void)
{
    struct outbox ob;
    char *mem = aligned_alloc(64, POOL);
    CHECK(mem && outbox_init(&ob, mem, POOL) == SHOAL_OK, "init");
    size_t off;
    int64_t a = outbox_take(&ob, 30000, &off);
    int64_t b = outbox_take(&ob, 30000, &off);
    CHECK(a == 0 && b == 1, "two chunks");
    CHECK(outbox_take(&ob, 30000, &off) < 0, "full while both pend");
    _Atomic uint64_t head = 10;
    outbox_sent(&ob, b, &head, 5);
    CHECK(outbox_take(&ob, 30000, &off) < 0, "the consumed second waits behind the pending first");
    outbox_sent(&ob, a, &head, 4);
    CHECK(outbox_take(&ob, 30000, &off) == 2, "both consumed");
    outbox_fini(&ob);
    free(mem);
}

static void test_bounds(void)
{
    CHECK(outbox_in_bounds(POOL, 0, POOL), "the whole pool");
    CHECK(outbox_in_bounds(POOL, POOL, 0), "empty at the end");
    CHECK(!outbox_in_bounds(POOL, POOL - 10, 11), "one past the end");
    CHECK(!outbox_in_bounds(POOL, POOL + 64, 0), "offset past the end");
    CHECK(!outbox_in_bounds(POOL, 64, UINT64_MAX - 32), "a length that overflows offset + length");
    CHECK(!outbox_in_bounds(0, 0, 1), "no pool at all");
}

int main(void)
{
    test_wrap_and_order();
    test_pending();
    test_bounds();
    printf("outbox unit tests passed\n");
    return 0;
}
