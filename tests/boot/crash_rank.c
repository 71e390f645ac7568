/* A rank that dereferences NULL in crash_here (issue 20 item 8): the rank
 * prints the signal, the faulting address and a symbolized backtrace that
 * names crash_here, then dies of SIGSEGV, which shoalrun reports. */
#include <shoal.h>

static int *volatile nowhere;

__attribute__((noinline)) void crash_here(int rank)
{
    if (rank == 1)
        *nowhere = 42;
}

int main(int argc, char **argv)
{
    if (shoal_init(&argc, &argv) != SHOAL_OK)
        return 2;
    crash_here(shoal_rank());
    shoal_barrier();
    return shoal_finalize() == SHOAL_OK ? 0 : 1;
}
