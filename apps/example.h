/* Helpers every example program uses. */
#ifndef SHOAL_EXAMPLE_H
#define SHOAL_EXAMPLE_H

#include <shoal.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Ends the job naming the call that failed. */
static inline void check(int rc, const char *what)
{
    if (rc)
        shoal_abort(1, "%s: %s", what, shoal_strerror(rc));
}

/* argv[i] as a positive integer, dflt when absent; exit 2 on anything else. */
static inline uint64_t parse_arg(int argc, char **argv, int i, uint64_t dflt, const char *name)
{
    if (argc <= i)
        return dflt;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(argv[i], &end, 0);
    if (errno || *end || v == 0 || argv[i][0] == '-')
        shoal_abort(2, "%s must be a positive integer, got '%s'", name, argv[i]);
    return v;
}

#endif
