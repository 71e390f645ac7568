/* Wait back-off shared by every blocking loop in the library. */
#include "util.h"

#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

/* Worked out by the first wait, which at MULTIPLE may be two threads' at
 * once (they compute the same value): relaxed atomics, plain loads on x86. */
static _Atomic uint32_t spin_limit;

void util_backoff_init(struct util_backoff *b)
{
    uint32_t limit = atomic_load_explicit(&spin_limit, memory_order_relaxed);
    if (UTIL_UNLIKELY(limit == 0)) {
        long long cfg = util_config_int(CFG_SPIN);
        if (cfg > 0) {
            limit = (uint32_t)cfg;
        } else {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            long long ranks = util_config_int(CFG_SIZE);
            limit = (ranks > cores && cores > 0) ? 64 : 20000;
        }
        atomic_store_explicit(&spin_limit, limit, memory_order_relaxed);
    }
    b->spins = 0;
    b->limit = limit;
}

void util_backoff_slow(struct util_backoff *b)
{
    b->spins++;
    if (b->spins <= b->limit) {
        util_cpu_relax();
        return;
    }
    /* Past the spin budget: give the core to a rank that can make progress.
     * After many yields, sleep briefly so a descheduled peer gets the CPU even
     * under a scheduler that keeps re-picking us. */
    if (b->spins < b->limit + 1000)
        sched_yield();
    else
        usleep(50);
}
