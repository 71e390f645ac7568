/* A rank dies with SIGKILL after init; the survivors are blocked in the
 * barrier (mode "blocked") or computing without polling ("compute").  Run
 * by check_kill.py, which times how fast the job ends and what it says. */
#include "shoal.h"
#include "../common/check.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "blocked";
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    int victim = shoal_size() - 1;
    if (shoal_rank() == victim)
        raise(SIGKILL);
    if (!strcmp(mode, "compute")) {
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
