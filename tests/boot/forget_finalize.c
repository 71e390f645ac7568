/* A program that returns from main without shoal_finalize on every rank,
 * after sending requests that may still be in flight (issue 20 item 3): the
 * library reports it at exit (on_exit), the rank exits 1, and shoalrun ends
 * the job with a non-zero status instead of 0. */
#include <shoal.h>

#include <stdio.h>

static void on_request(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
}

int main(int argc, char **argv)
{
    shoal_am_register(1, on_request);
    if (shoal_init(&argc, &argv) != SHOAL_OK)
        return 2;
    int right = (shoal_rank() + 1) % shoal_size();
    for (int i = 0; i < 1000; i++)
        if (shoal_am_request_short(right, 1, 0, shoal_args((uint64_t)i)) != SHOAL_OK)
            return 3;
    printf("rank %d returns from main without shoal_finalize\n", shoal_rank());
    return 0;
}
