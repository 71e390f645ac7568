/* Tutorial §2's two cases of an unregistered handler index: a send naming
 * an index the sender did not register returns SHOAL_ENOHANDLER and sends
 * nothing; an index only the sender registered (rank 0 registers 9, rank 1
 * does not) ends the job at the receiver, naming sender and index. */
#include <shoal.h>

#include <stdio.h>

static void on_nine(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
}

int main(int argc, char **argv)
{
    if (shoal_init(&argc, &argv) != SHOAL_OK)
        return 2;
    int me = shoal_rank();
    if (shoal_am_request_short(1, 7, 0, shoal_noargs) != SHOAL_ENOHANDLER) {
        fprintf(stderr, "rank %d: a send to unregistered index 7 was not refused\n", me);
        return 3;
    }
    if (me == 0) {
        shoal_am_register(9, on_nine);
        if (shoal_am_request_short(1, 9, 0, shoal_noargs) != SHOAL_OK)
            return 4;
    }
    shoal_barrier(); /* rank 1 meets the request here and ends the job */
    shoal_barrier();
    return shoal_finalize() == SHOAL_OK ? 0 : 1;
}
