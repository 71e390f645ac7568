/* Minimal assertion helpers for shoal tests: a failed check prints where
 * and what, and exits non-zero (under shoalrun this ends the whole job). */
#ifndef SHOAL_TEST_CHECK_H
#define SHOAL_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

#define CHECK_RC(expr, want)                                                          \
    do {                                                                              \
        int rc_ = (expr);                                                             \
        CHECK(rc_ == (want), "%s returned %d (%s), expected %d", #expr, rc_,         \
              shoal_strerror(rc_), (want));                                           \
    } while (0)

static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A deadline for wait loops: fails the test with `what` once passed. */
#define TEST_DEADLINE(start, seconds, what)                                           \
    CHECK(test_now() - (start) < (seconds), "timed out after %d s waiting for %s",   \
          (int)(seconds), (what))

#endif
