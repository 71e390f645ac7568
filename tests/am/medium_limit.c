/* A medium one byte above the job's limit (issue 20 item 6): the send
 * returns SHOAL_ETOOBIG and the rank says once, at warn level, the limit,
 * the ranks on its host and the setting that raises it. */
#include <shoal.h>

#include <stdio.h>
#include <stdlib.h>

static void on_medium(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t; (void)buf; (void)n; (void)a; (void)na;
}

int main(int argc, char **argv)
{
    shoal_am_register(1, on_medium);
    if (shoal_init(&argc, &argv) != SHOAL_OK)
        return 2;
    size_t n = shoal_am_max_medium() + 1;
    char *buf = calloc(1, n);
    int rc = shoal_am_request_medium((shoal_rank() + 1) % shoal_size(), 1, 0, buf, n, shoal_noargs);
    int again = shoal_am_request_medium((shoal_rank() + 1) % shoal_size(), 1, 0, buf, n, shoal_noargs);
    free(buf);
    if (rc != SHOAL_ETOOBIG || again != SHOAL_ETOOBIG) {
        fprintf(stderr, "rank %d: %zu bytes gave %d and %d, not SHOAL_ETOOBIG\n", shoal_rank(), n, rc, again);
        return 1;
    }
    return shoal_finalize() == SHOAL_OK ? 0 : 1;
}
