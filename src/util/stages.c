/* Cycle stamps (util/stages.h); empty unless built with SHOAL_STAGES. */
#include "util/stages.h"

#if defined(SHOAL_STAGES) && defined(__x86_64__)
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

/* per thread: a progress thread's receives must not cut the application's
 * chains; the thread that exits reports its own */
#define STAGES_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static STAGES_TLS uint64_t stamp[UTIL_STAGES], sum[UTIL_STAGES], chains;
static STAGES_TLS uint64_t first_tsc, first_ns;

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The chain since the last arrival, when it reached a send. */
static void close_chain(void)
{
    if (stamp[UTIL_STAGE_SYSCALL] > stamp[UTIL_STAGE_RECEIVED] && stamp[UTIL_STAGE_RECEIVED]) {
        uint64_t prev = stamp[UTIL_STAGE_RECEIVED];
        for (int s = 1; s < UTIL_STAGES; s++) {
            if (stamp[s] >= prev) {
                sum[s] += stamp[s] - prev;
                prev = stamp[s];
            }
        }
        chains++;
    }
    for (int s = 0; s < UTIL_STAGES; s++)
        stamp[s] = 0;
}

void util_stage(enum util_stage s)
{
    uint64_t t = __rdtsc();
    if (!first_tsc) {
        first_tsc = t;
        first_ns = mono_ns();
    }
    if (s == UTIL_STAGE_RECEIVED)
        close_chain();
    stamp[s] = t;
}

__attribute__((destructor)) static void util_stages_report(void)
{
    static const char *const names[UTIL_STAGES] = {"received", "accepted", "handler", "send",
                                                   "encode",   "flush",    "syscall"};
    if (!chains)
        return;
    double ghz = (double)(__rdtsc() - first_tsc) / (double)(mono_ns() - first_ns);
    fprintf(stderr, "shoal stages, pid %d: %llu chains, TSC %.2f GHz, mean cycles:", (int)getpid(),
            (unsigned long long)chains, ghz);
    for (int s = 1; s < UTIL_STAGES; s++)
        fprintf(stderr, " %s %.0f", names[s], (double)sum[s] / (double)chains);
    fprintf(stderr, "\n");
}
#else
typedef int util_stages_unused; /* ISO C wants a translation unit to declare something */
#endif
