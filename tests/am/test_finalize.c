/* shoal_finalize delivers everything sent before it: every rank sends
 * TEST_FINALIZE_K requests (default 1,000) to every other rank and calls
 * shoal_finalize at once, without waiting for anything; each request's
 * handler replies.  After finalize every request and every reply must have
 * run, exactly once, also when packets are lost, duplicated and reordered.
 * Usage: test_finalize replies|oneway|medium */
#include "shoal.h"
#include "../common/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { H_REQ = 1, H_REP, H_ONEWAY, H_MED };

static uint64_t requests_run, replies_run, oneway_run, medium_run;
static uint64_t *from; /* [np]: requests run per source, to name who lost what */

static void req(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf, (void)n;
    CHECK(na == 1, "request with %u arguments", na);
    requests_run++;
    from[shoal_token_source(t)]++;
    uint64_t back = a[0] + 1;
    CHECK_RC(shoal_am_reply_short(t, H_REP, 0, 1, &back), SHOAL_OK);
}

static void rep(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    replies_run++;
}

static void oneway(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf, (void)n, (void)a, (void)na;
    oneway_run++;
    from[shoal_token_source(t)]++;
}

static void medium(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)na;
    const unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        CHECK(p[i] == (unsigned char)(a[0] + i), "medium byte %zu of %zu from rank %d", i, n, shoal_token_source(t));
    medium_run++;
    from[shoal_token_source(t)]++;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_finalize replies|oneway|medium");
    const char *mode = argv[1];
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    int me = shoal_rank(), np = shoal_size();
    const char *k_env = getenv("TEST_FINALIZE_K");
    uint64_t k = k_env ? strtoull(k_env, NULL, 10) : 1000;
    from = calloc((size_t)np, sizeof *from);
    CHECK(from != NULL, "out of memory");
    CHECK_RC(shoal_am_register(H_REQ, req), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_REP, rep), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_ONEWAY, oneway), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_MED, medium), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK); /* every handler registered everywhere */
    size_t med = shoal_am_max_medium() < 3000 ? shoal_am_max_medium() : 3000; /* two packets over the network */
    unsigned char *buf = malloc(med);
    CHECK(buf != NULL, "out of memory");
    for (uint64_t i = 0; i < k; i++)
        for (int d = 0; d < np; d++) {
            if (d == me)
                continue;
            uint64_t arg = i;
            if (!strcmp(mode, "replies")) {
                CHECK_RC(shoal_am_request_short(d, H_REQ, 0, 1, &arg), SHOAL_OK);
            } else if (!strcmp(mode, "oneway")) {
                CHECK_RC(shoal_am_request_short(d, H_ONEWAY, i + 1 < k ? SHOAL_MORE : 0, 1, &arg), SHOAL_OK);
            } else {
                CHECK(!strcmp(mode, "medium"), "unknown mode %s", mode);
                for (size_t j = 0; j < med; j++)
                    buf[j] = (unsigned char)(i + j);
                CHECK_RC(shoal_am_request_medium(d, H_MED, 0, buf, med, 1, &arg), SHOAL_OK);
            }
        }
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    uint64_t want = k * (uint64_t)(np - 1);
    for (int s = 0; s < np; s++)
        CHECK(s == me || from[s] == k, "rank %d: %llu of %llu messages from rank %d ran before finalize returned",
              me, (unsigned long long)from[s], (unsigned long long)k, s);
    if (!strcmp(mode, "replies")) {
        CHECK(requests_run == want, "rank %d ran %llu of %llu requests", me, (unsigned long long)requests_run,
              (unsigned long long)want);
        CHECK(replies_run == want, "rank %d ran %llu of %llu replies", me, (unsigned long long)replies_run,
              (unsigned long long)want);
    }
    free(buf);
    free(from);
    return 0;
}
