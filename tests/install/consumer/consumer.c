/* Smallest useful shoal program: joins the job (alone it is rank 0 of 1),
 * sends itself a request, waits for the reply, and leaves.  Built by the
 * install test against an installed shoal, once through find_package and
 * once through pkg-config. */
#include <shoal.h>

#include <stdio.h>

enum { H_PING = 1, H_PONG = 2 };

static volatile uint64_t pongs;

static void ping(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf; (void)n; (void)nargs;
    int rc = shoal_am_reply_short(t, H_PONG, 0, shoal_args(args[0] + 1));
    if (rc)
        shoal_abort(1, "reply failed: %s", shoal_strerror(rc));
}

static void pong(shoal_token_t t, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)t; (void)buf; (void)n; (void)nargs;
    if (args[0] != 42)
        shoal_abort(1, "pong carried %llu, expected 42", (unsigned long long)args[0]);
    pongs++;
}

int main(int argc, char **argv)
{
    shoal_am_register(H_PING, ping);
    shoal_am_register(H_PONG, pong);
    int rc = shoal_init(&argc, &argv);
    if (rc) {
        fprintf(stderr, "shoal_init: %s\n", shoal_strerror(rc));
        return 1;
    }
    rc = shoal_am_request_short(shoal_rank(), H_PING, 0, shoal_args(41));
    if (rc == SHOAL_OK)
        rc = shoal_wait_until(&pongs, 1);
    if (rc) {
        fprintf(stderr, "ping: %s\n", shoal_strerror(rc));
        return 1;
    }
    printf("shoal %s: rank %d of %d got its pong\n", SHOAL_VERSION_STRING, shoal_rank(), shoal_size());
    return shoal_finalize() == SHOAL_OK ? 0 : 1;
}
