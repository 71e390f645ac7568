/* A forged outbox descriptor (docs/SHM_QUEUE.md, "The outbox"): rank 0
 * writes straight into its request ring to rank 1 a kind-3 medium whose
 * payload would run past the end of rank 0's request pool.  Rank 1 must end
 * the job naming rank 0 and the range, never run the handler on bytes
 * outside the pool.  Built against the internals to reach the ring. */
#include "am/state.h"
#include "shm/shm.h"
#include "../common/check.h"

static int ran;

static void on_medium(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
    ran = 1;
}

int main(int argc, char **argv)
{
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    CHECK_RC(shoal_am_register(1, on_medium), SHOAL_OK);
    CHECK(shoal_size() == 2, "two ranks");
    CHECK(am.shm->outbox_bytes > 0, "no outbox: run with small rings");
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (shoal_rank() == 0) {
        struct ring_tx *tx = &am.shm->tx[1 * SHM_CLASSES + AM_REQ];
        if (tx->cold) /* the ring is backed at its first message (docs/SHM_QUEUE.md) */
            CHECK_RC(shm_tx_first_contact(tx, 1), SHOAL_OK);
        struct ring_slot *slot = ring_tx_reserve(tx, 1);
        CHECK(slot != NULL, "an empty ring has room");
        uint64_t off = am.shm->outbox_bytes - 64, len = 4096;
        ring_msg_body(slot)[0] = off;
        /* the tag: handler | nargs << 10 | kind << 15 | length << 17 */
        ring_tx_commit(tx, 1, 1u | 0u << 10 | (uint64_t)AM_KIND_OUTBOX << 15 | len << 17);
    }
    double end = test_now() + 30;
    while (test_now() < end && !ran)
        shoal_poll(); /* rank 0: until rank 1's abort ends the job */
    CHECK(!ran, "rank %d ran the handler of a forged descriptor", shoal_rank());
    CHECK(0, "rank %d: the job was not ended in 30 s", shoal_rank());
    return 1;
}
