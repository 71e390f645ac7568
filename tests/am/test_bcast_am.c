/* shoal_am_bcast_short/medium: each broadcast runs its handler exactly once
 * at every other rank, never at the sender, in order per sender and with
 * the sender's requests to that rank (one numbering for both), with its
 * arguments and payload; misuse is refused before anything is sent.
 * Argument "one": every broadcast left as one frame (shoal_stats
 * am_bcast_frames); "emulated": none did. */
#include <shoal.h>

#include "../common/check.h"

#include <string.h>

enum { H_SHORT = 1, H_MEDIUM = 2 };
#define ROUNDS 200
#define MAXR 64

static int me, np;
static uint64_t next_short[MAXR], next_medium[MAXR];
static uint64_t got;

static void on_short(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    int src = shoal_token_source(tok);
    CHECK(src != me && nargs == 2 && args[0] == (uint64_t)src, "short from %d with %u args", src, nargs);
    CHECK(args[1] == next_short[src], "short %llu from %d, expected %llu (a broadcast lost, repeated or "
          "out of order with the requests)", (unsigned long long)args[1], src, (unsigned long long)next_short[src]);
    next_short[src]++;
    got++;
}

static void on_medium(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    int src = shoal_token_source(tok);
    CHECK(src != me && nargs == 1 && n == 1000, "medium from %d: %zu bytes", src, n);
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == (unsigned char)(args[0] + i), "medium byte %zu from %d", i, src);
    CHECK(args[0] == next_medium[src], "medium %llu from %d", (unsigned long long)args[0], src);
    next_medium[src]++;
    got++;
}

int main(int argc, char **argv)
{
    const char *expect = argc > 1 ? argv[1] : "";
    CHECK_RC(shoal_am_bcast_short(H_SHORT, 0, shoal_noargs), SHOAL_ENOTINIT);
    shoal_am_register(H_SHORT, on_short);
    shoal_am_register(H_MEDIUM, on_medium);
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = shoal_rank();
    np = shoal_size();
    CHECK(np <= MAXR, "at most %d ranks", MAXR);
    CHECK_RC(shoal_am_bcast_short(H_SHORT, SHOAL_IMMEDIATE, shoal_args(me, 0)), SHOAL_EINVAL);
    CHECK_RC(shoal_am_bcast_short(7, 0, shoal_noargs), SHOAL_ENOHANDLER);
    CHECK_RC(shoal_am_bcast_short(SHOAL_AM_MAX_HANDLERS, 0, shoal_noargs), SHOAL_EINVAL);
    CHECK_RC(shoal_am_bcast_medium(H_MEDIUM, 0, NULL, 10, shoal_args(0)), SHOAL_EINVAL);
    CHECK_RC(shoal_am_bcast_medium(H_MEDIUM, 0, "x", shoal_am_max_medium() + 1, shoal_args(0)), SHOAL_ETOOBIG);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    unsigned char payload[1000];
    for (uint64_t r = 0; r < ROUNDS; r++) {
        CHECK_RC(shoal_am_bcast_short(H_SHORT, r % 3 == 0 ? SHOAL_MORE : 0, shoal_args(me, 2 * r)), SHOAL_OK);
        for (int p = 0; p < np; p++)
            if (p != me)
                CHECK_RC(shoal_am_request_short(p, H_SHORT, 0, shoal_args(me, 2 * r + 1)), SHOAL_OK);
        for (size_t i = 0; i < sizeof payload; i++)
            payload[i] = (unsigned char)(r + i);
        CHECK_RC(shoal_am_bcast_medium(H_MEDIUM, 0, payload, sizeof payload, shoal_args(r)), SHOAL_OK);
    }
    double t0 = test_now();
    uint64_t want = 3ull * ROUNDS * (uint64_t)(np - 1);
    while (got < want) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, 30, "every broadcast");
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK(got == want, "%llu handlers ran", (unsigned long long)got);
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    uint64_t frames = np > 1 && !strcmp(expect, "one") ? 2 * ROUNDS : 0;
    if (expect[0])
        CHECK(st.am_bcast_frames == frames, "%llu broadcasts as one frame, expected %llu (%s)",
              (unsigned long long)st.am_bcast_frames, (unsigned long long)frames, expect);
    CHECK(next_short[me] == 0 && next_medium[me] == 0, "a broadcast ran at its sender");
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    if (me == 0)
        printf("test_bcast_am passed on %d ranks\n", np);
    return 0;
}
