/* Minimal assertion helpers for shoal tests: a failed check prints where
 * and what, and exits non-zero (under shoalrun this ends the whole job). */
#ifndef SHOAL_TEST_CHECK_H
#define SHOAL_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Sleeps s seconds, through signals. */
static inline void test_nap(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Work that calls nothing (no shoal call, no system call), for s seconds. */
static inline void test_busy(double s)
{
    volatile double x = 1.0;
    double t0 = test_now();
    while (test_now() - t0 < s)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
}

/* A deadline for wait loops: fails the test with `what` once passed. */
#define TEST_DEADLINE(start, seconds, what)                                           \
    CHECK(test_now() - (start) < (seconds), "timed out after %d s waiting for %s",   \
          (int)(seconds), (what))

/* A test program's named cases: its argument says which one runs. */
struct test_case {
    const char *name;
    void (*run)(void);
};

/* Runs the case called name, or fails naming it and the cases there are. */
static inline void test_run_case(const struct test_case *cases, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, cases[i].name)) {
            cases[i].run();
            return;
        }
    fprintf(stderr, "unknown test \"%s\"; the cases are:", name);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %s", cases[i].name);
    fprintf(stderr, "\n");
    exit(1);
}
#define TEST_RUN_CASE(cases, name) test_run_case((cases), sizeof(cases) / sizeof((cases)[0]), (name))

#endif
