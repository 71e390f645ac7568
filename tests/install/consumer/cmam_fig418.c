/* Fetch&add as Fig. 4-18 of von Eicken's thesis prints it, on the
 * prototypes of §4.3.3 only (plus shoal_init/shoal_finalize around it),
 * compiled by the install test against the installed <shoal/cmam.h>.
 * Every rank adds 1 to its right neighbour's counter K times, blocking and
 * split-phase, after asking the neighbour where the counter is (ranks'
 * addresses differ). */
#include <shoal/cmam.h>

#include <stdio.h>

#define K 50

typedef struct { volatile int flag, value; } fetch_add_sync;

void fetch_add_h(int ret_node, void *sync, int *addr, int incr);
void fetch_add_rh(fetch_add_sync *sync, int value);

void fetch_add_initiate(int node, int *addr, int incr, fetch_add_sync *sync)
{
    sync->flag = 0;
    CMAM_4(node, fetch_add_h, MYPROC, sync, addr, incr);
}

int fetch_add_complete(fetch_add_sync *sync)
{
    CMAM_wait(&sync->flag, 1);
    return sync->value;
}

int fetch_add(int node, int *addr, int incr)
{
    fetch_add_sync sync;
    fetch_add_initiate(node, addr, incr, &sync);
    return fetch_add_complete(&sync);
}

void fetch_add_h(int ret_node, void *sync, int *addr, int incr)
{
    int value = *addr + incr;
    *addr = value;
    CMAM_reply_4(ret_node, fetch_add_rh, sync, value);
}

void fetch_add_rh(fetch_add_sync *sync, int value)
{
    sync->value = value;
    sync->flag = 1;
}

static int counter;
static int *right_counter;
static volatile int told;

void where_rh(int *addr)
{
    right_counter = addr;
    told = 1;
}

void where_h(int ret_node)
{
    CMAM_reply_4(ret_node, where_rh, &counter);
}

int main(int argc, char **argv)
{
    shoal_init(&argc, &argv);
    int right = (MYPROC + 1) % PROCS, bad = 0;
    CMAM_4(right, where_h, MYPROC);
    CMAM_wait(&told, 1);
    for (int k = 1; k <= K; k++)
        bad |= fetch_add(right, right_counter, 1) != k;
    fetch_add_sync s[K];
    for (int k = 0; k < K; k++)
        fetch_add_initiate(right, right_counter, 2, &s[k]);
    for (int k = 0; k < K; k++)
        bad |= fetch_add_complete(&s[k]) != K + 2 * (k + 1);
    while (counter < 3 * K)
        CMAM_poll();
    int me = MYPROC, procs = PROCS;
    shoal_finalize();
    printf("cmam_fig418: rank %d of %d: %s\n", me, procs, bad ? "WRONG" : "fetch&add ok");
    return bad;
}
