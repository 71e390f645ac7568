/* A second thread calling shoal at SHOAL_THREAD_SINGLE: where checks are on (SHOAL_STRICT=1
 * or a debug build) the job ends with a message naming the rank and the
 * call instead of hanging.  On rank 0 a second thread polls
 * while the main thread runs barriers; the other ranks run barriers.
 * Usage: test_threads (under shoalrun, 2 ranks or more) */
#include "shoal.h"
#include "../common/check.h"

#include <pthread.h>
#include <stdatomic.h>

#define RUN_SECONDS 20 /* the check fires within milliseconds; this bounds a miss */

static atomic_int stop;

static void *poller(void *arg)
{
    (void)arg;
    double t0 = test_now();
    while (!atomic_load(&stop) && test_now() - t0 < RUN_SECONDS)
        shoal_poll();
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    pthread_t t;
    if (shoal_rank() == 0)
        CHECK(pthread_create(&t, NULL, poller, NULL) == 0, "cannot start the polling thread");
    double t0 = test_now();
    while (test_now() - t0 < RUN_SECONDS)
        shoal_barrier();
    atomic_store(&stop, 1);
    if (shoal_rank() == 0)
        pthread_join(t, NULL);
    CHECK(0, "two threads called shoal at once for %d s and nothing noticed", RUN_SECONDS);
    return 1;
}
