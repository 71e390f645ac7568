/* hello_am: the smallest complete active-message program.
 *
 * Every rank sends a short request carrying its rank to its right
 * neighbour; the request handler there records it and replies with the
 * receiver's own rank.  Each rank prints whom it heard from, all meet in a
 * barrier, and rank 0 prints a summary.
 *
 *   shoalrun -n 4 build/apps/hello_am */
#include "example.h"

#include <stdio.h>

/* Handler indices: the same number names the same function on every rank. */
enum { H_HELLO = 1, H_HELLO_REPLY = 2 };

static volatile uint64_t hellos;  /* requests received (from the left neighbour) */
static volatile uint64_t replies; /* replies received (from the right neighbour) */
static int left_rank = -1, right_rank = -1;

/* Request handler: runs at the right neighbour.  It may reply once, to the
 * sender; it must not block, poll or send requests. */
static void on_hello(shoal_token_t token, void *buf, size_t nbytes, const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)nbytes; (void)nargs;
    left_rank = (int)args[0];
    hellos++;
    int rc = shoal_am_reply_short(token, H_HELLO_REPLY, 0, shoal_args((uint64_t)shoal_rank()));
    if (rc)
        shoal_abort(1, "reply to rank %d failed: %s", left_rank, shoal_strerror(rc));
}

/* Reply handler: runs back at the sender; it may not send anything. */
static void on_hello_reply(shoal_token_t token, void *buf, size_t nbytes, const uint64_t *args,
                           unsigned nargs)
{
    (void)token; (void)buf; (void)nbytes; (void)nargs;
    right_rank = (int)args[0];
    replies++;
}

int main(int argc, char **argv)
{
    /* Register before shoal_init: a faster rank may send as soon as its own
     * init returns, and this rank runs handlers inside init's barrier. */
    check(shoal_am_register(H_HELLO, on_hello), "register H_HELLO");
    check(shoal_am_register(H_HELLO_REPLY, on_hello_reply), "register H_HELLO_REPLY");
    check(shoal_init(&argc, &argv), "shoal_init");

    int me = shoal_rank(), n = shoal_size();
    int right = (me + 1) % n;
    double t0 = shoal_wtime();
    check(shoal_am_request_short(right, H_HELLO, 0, shoal_args((uint64_t)me)), "request");
    /* Both waits run handlers, so the neighbours' messages are served here. */
    check(shoal_wait_until(&replies, 1), "waiting for the reply");
    double rtt_us = (shoal_wtime() - t0) * 1e6;
    check(shoal_wait_until(&hellos, 1), "waiting for the left neighbour");

    int left = (me + n - 1) % n;
    if (left_rank != left || right_rank != right)
        shoal_abort(1, "expected hello from %d and reply from %d, got %d and %d", left, right,
                    left_rank, right_rank);
    printf("rank %d of %d: hello from rank %d, reply from rank %d after %.1f us\n", me, n, left_rank,
           right_rank, rtt_us);
    fflush(stdout);

    check(shoal_barrier(), "shoal_barrier");
    if (me == 0)
        printf("hello_am: all %d ranks said hello around the ring (%d requests, %d replies)\n", n, n, n);
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
