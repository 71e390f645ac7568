// cmam.h from C++ (built at C++11 and C++20 with -pedantic): Fig. 4-18's
// fetch&add with a handler of mixed word types, every rank on rank 0's
// counter, whose address comes from rank 0 first (addresses differ by rank).
#include <shoal/cmam.h>

#include <cstdio>

namespace {

struct fetch_add_sync {
    volatile int flag, value;
};
volatile int counter, have_addr;
int *target;

void fail(const char *what)
{
    shoal_abort(1, "cmam_cxx (C++ %ld): %s", static_cast<long>(__cplusplus), what);
}

void addr_rh(int *where)
{
    target = where;
    have_addr = 1;
}
void addr_h(int src)
{
    CMAM_reply_4(src, addr_rh, const_cast<int *>(&counter));
}

void fetch_add_rh(fetch_add_sync *sync, int value, double check)
{
    if (check != 0.5 * value)
        fail("the double word");
    sync->value = value;
    sync->flag = 1;
}
void fetch_add_h(int ret_node, void *sync, int *addr, int incr)
{
    int value = *addr + incr;
    *addr = value;
    CMAM_reply_4(ret_node, fetch_add_rh, sync, value, 0.5 * value);
}

int fetch_add(int node, int *addr, int incr)
{
    fetch_add_sync sync;
    sync.flag = 0;
    CMAM_4(node, fetch_add_h, MYPROC, &sync, addr, incr);
    CMAM_wait(&sync.flag, 1);
    return sync.value;
}

} // namespace

int main(int argc, char **argv)
{
    if (shoal_init(&argc, &argv) != SHOAL_OK)
        return 1;
    CMAM_4(0, addr_h, MYPROC);
    CMAM_wait(&have_addr, 1);
    int last = 0;
    for (int k = 0; k < 100; k++) {
        int v = fetch_add(0, target, 1);
        if (v <= last)
            fail("fetch&add values do not grow");
        last = v;
    }
    shoal_barrier();
    if (MYPROC == 0 && counter != 100 * PROCS)
        fail("the counter");
    int me = MYPROC, procs = PROCS;
    shoal_finalize();
    if (me == 0)
        std::printf("cmam_cxx: C++ %ld, %d ranks ok\n", static_cast<long>(__cplusplus), procs);
    return 0;
}
