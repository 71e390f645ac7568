/* A rank dies with SIGKILL after init; the survivors are blocked in the
 * barrier (mode "blocked") or computing without polling ("compute").  In
 * mode "busy" (3 ranks) rank 1 waits for rank 2 while rank 0 streams
 * one-way requests at it, so its polls are never empty; rank 1 then has
 * rank 2 killed and its failure handler must run naming rank 2.  Run by
 * check_kill.py, which times how fast the job ends and what it says. */
#include "shoal.h"
#include "../common/check.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

enum { H_STREAM, H_DIE };
#define STREAM_S 10.0 /* far beyond check_kill.py's deadline */

static volatile uint64_t streamed, from_victim;

static void stream(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    streamed++;
}

static void die(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    raise(SIGKILL);
}

static void on_failure(int rank, const char *reason, void *arg)
{
    (void)arg;
    fprintf(stderr, "failure handler of rank %d: rank %d: %s\n", shoal_rank(), rank, reason);
}

static void busy(void)
{
    CHECK(shoal_size() == 3, "run busy with 3 ranks");
    if (shoal_rank() == 1)
        shoal_on_peer_failure(on_failure, NULL);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (shoal_rank() == 0) {
        double t0 = test_now();
        while (test_now() - t0 < STREAM_S)
            CHECK_RC(shoal_am_request_short(1, H_STREAM, 0, shoal_noargs), SHOAL_OK);
    } else if (shoal_rank() == 1) {
        CHECK_RC(shoal_wait_until(&streamed, 1000), SHOAL_OK); /* the stream flows */
        CHECK_RC(shoal_am_request_short(2, H_DIE, 0, shoal_noargs), SHOAL_OK);
        CHECK_RC(shoal_wait_until(&from_victim, 1), SHOAL_OK);
    } else {
        CHECK_RC(shoal_wait_until(&from_victim, 1), SHOAL_OK);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "blocked";
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    shoal_am_register(H_STREAM, stream);
    shoal_am_register(H_DIE, die);
    int victim = shoal_size() - 1;
    if (!strcmp(mode, "busy")) {
        busy();
    } else if (shoal_rank() == victim) {
        raise(SIGKILL);
    } else if (!strcmp(mode, "compute")) {
        volatile unsigned long x = 0;
        double t0 = test_now();
        while (test_now() - t0 < 30)
            x++;
    } else {
        shoal_barrier();
    }
    fprintf(stderr, "rank %d survived the death of rank %d\n", shoal_rank(), victim);
    return 0;
}
