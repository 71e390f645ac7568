/* shoal_am_bcast_short/medium: each broadcast runs its handler exactly once
 * at every other rank, never at the sender, in order per sender, with its
 * arguments and payload; misuse is refused before anything is sent. */
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
    CHECK(args[1] == next_short[src], "short %llu from %d, expected %llu", (unsigned long long)args[1], src,
          (unsigned long long)next_short[src]);
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
        CHECK_RC(shoal_am_bcast_short(H_SHORT, r % 3 == 0 ? SHOAL_MORE : 0, shoal_args(me, r)), SHOAL_OK);
        for (size_t i = 0; i < sizeof payload; i++)
            payload[i] = (unsigned char)(r + i);
        CHECK_RC(shoal_am_bcast_medium(H_MEDIUM, 0, payload, sizeof payload, shoal_args(r)), SHOAL_OK);
    }
    double t0 = test_now();
    while (got < 2ull * ROUNDS * (uint64_t)(np - 1)) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, 30, "every broadcast");
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK(got == 2ull * ROUNDS * (uint64_t)(np - 1), "%llu handlers ran", (unsigned long long)got);
    CHECK(next_short[me] == 0 && next_medium[me] == 0, "a broadcast ran at its sender");
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    if (me == 0)
        printf("test_bcast_am passed on %d ranks\n", np);
    return 0;
}
