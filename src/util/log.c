/* Logging and fatal-error reporting that names rank and host. */
#include "util.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int util_log_level = LOG_WARN;
void (*util_fatal_hook)(int exitcode, const char *msg);
static int log_rank = -1;
static char host[64];

const char *util_hostname(void)
{
    if (!host[0] && gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "unknown-host");
    return host;
}

void util_log_set_identity(int rank)
{
    log_rank = rank;
}

/* "rank R", or "pid P" before the process knows its rank (a bad setting
 * is found before the bootstrap runs), never a made-up rank. */
static const char *who(char *buf, size_t n)
{
    if (log_rank >= 0)
        snprintf(buf, n, "rank %d", log_rank);
    else
        snprintf(buf, n, "pid %d", (int)getpid());
    return buf;
}

static const char *level_name(enum util_log_level l)
{
    static const char *names[] = {"error", "warning", "info", "debug", "trace"};
    return names[l];
}

void util_log(enum util_log_level lvl, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char w[32];
    fprintf(stderr, "shoal: %s on %s: %s: %s\n", who(w, sizeof w), util_hostname(), level_name(lvl), msg);
}

_Noreturn void util_fatal_v(int exitcode, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char w[32];
    fprintf(stderr, "shoal: %s on %s: fatal: %s\n", who(w, sizeof w), util_hostname(), msg);
    fflush(NULL); /* _exit below would drop what stdio still holds */
    if (util_fatal_hook) {
        void (*hook)(int, const char *) = util_fatal_hook;
        util_fatal_hook = NULL; /* a failure inside the hook must not recurse */
        hook(exitcode, msg);
    }
    _exit(exitcode ? exitcode : 1);
}

void (*util_peer_failure_hook)(int rank, const char *msg);

_Noreturn void util_peer_fatal(int rank, const char *fmt, ...)
{
    static atomic_flag claimed = ATOMIC_FLAG_INIT;
    static _Thread_local int in_hook; /* the hook itself ran into the failure */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    void (*hook)(int, const char *) = util_peer_failure_hook;
    if (hook && !in_hook) {
        if (atomic_flag_test_and_set(&claimed))
            for (;;)
                pause(); /* the thread that claimed it runs the hook, then exits */
        in_hook = 1;
        hook(rank, msg);
    }
    util_fatal("%s", msg);
}

_Noreturn void util_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    util_fatal_v(1, fmt, ap);
}
