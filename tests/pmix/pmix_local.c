/* Under a PMIx launcher on one host: every rank is local (locality from
 * PMIx), and messages between them go over shared memory, never the
 * cluster transport.  Run by mpirun (tests/pmix/CMakeLists.txt). */
#include "shoal.h"
#include "../common/check.h"

enum { H_PING };

static volatile uint64_t pings;

static void ping(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    pings++;
}

int main(int argc, char **argv)
{
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    int me = shoal_rank(), size = shoal_size();
    CHECK(size >= 2, "run with at least 2 ranks (got %d)", size);
    for (int r = 0; r < size; r++)
        CHECK(shoal_rank_local(r) == 1, "rank %d: rank %d is not reached over shared memory", me, r);
    shoal_am_register(H_PING, ping);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    for (int r = 0; r < size; r++)
        if (r != me)
            CHECK_RC(shoal_am_request_short(r, H_PING, 0, shoal_noargs), SHOAL_OK);
    CHECK_RC(shoal_wait_until(&pings, (uint64_t)size - 1), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    CHECK(st.net_packets_sent == 0 && st.net_packets_received == 0,
          "rank %d: %llu packets sent, %llu received over the cluster transport", me,
          (unsigned long long)st.net_packets_sent, (unsigned long long)st.net_packets_received);
    CHECK(st.am_received[0] >= (uint64_t)size - 1, "rank %d: %llu requests received", me,
          (unsigned long long)st.am_received[0]);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    printf("rank %d of %d: every rank local, %d pings over shared memory\n", me, size, size - 1);
    return 0;
}
