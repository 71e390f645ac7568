/* The bootstrap without a launcher: rank 0 of 1, every collective
 * completes locally. */
#include "impl.h"
#include "shoal.h"

#include <fcntl.h>
#include <string.h>

static int single_init(struct boot_info *out, const _Atomic uint32_t **failed)
{
    (void)failed; /* nobody else can fail */
    *out = (struct boot_info){.rank = 0, .size = 1, .host = 0, .nhosts = 1};
    return SHOAL_OK;
}

static int single_host_of(int rank)
{
    (void)rank;
    return 0;
}

static int single_exchange_fd(int my_fd, int *fds)
{
    fds[0] = fcntl(my_fd, F_DUPFD_CLOEXEC, 0);
    return fds[0] < 0 ? SHOAL_ESYS : SHOAL_OK;
}

static int single_allgather(const void *mine, size_t len, void *all)
{
    if (len)
        memmove(all, mine, len);
    return SHOAL_OK;
}

static void single_failure(int *rank, const char **reason)
{
    (void)rank, (void)reason; /* never called: the failed word stays 0 */
}

static void single_abort_notify(int exitcode, const char *msg)
{
    (void)exitcode, (void)msg; /* the message is already on stderr */
}

static void single_teardown(int finalized)
{
    (void)finalized;
}

const struct boot_ops boot_singleton_ops = {
    .name = "singleton",
    .init = single_init,
    .host_of = single_host_of,
    .exchange_fd = single_exchange_fd,
    .allgather = single_allgather,
    .failure = single_failure,
    .abort_notify = single_abort_notify,
    .teardown = single_teardown,
};
