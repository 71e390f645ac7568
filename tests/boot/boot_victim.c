/* A rank program that misbehaves on request, for the launcher's failure
 * tests.  usage: boot_victim MODE [RANK [CODE|LINES]]
 *   ok                 join, barrier, finalize
 *   kill R             rank R SIGKILLs itself; the others wait in a barrier
 *   kill-sleep R       same, but the others sleep outside shoal
 *   kill-ignore R      same, and the others ignore SIGTERM
 *   kill-launcher R    rank R SIGKILLs its launcher (its parent: under
 *                      shoalrun --hosts, the agent of its host); the
 *                      others wait in a barrier
 *   exit R CODE        rank R exits with CODE; the others wait in a barrier
 *   abort R CODE       rank R reports an abort, then exits with CODE
 *   fatal R            rank R calls util_fatal with the abort hook set
 *   nofinalize R       rank R exits 0 without finalizing; the others sleep
 *   nofinalize-all     every rank exits 0 without finalizing
 *   early R            rank R exits 0 before joining; the others barrier
 *   mismatch           rank 0 enters a barrier, the others an fd exchange
 *   hang               every rank sleeps after joining
 *   print LINES        every rank writes LINES long lines in pieces
 *   flood R            rank R SIGKILLs itself after 200 ms; the others
 *                      print long lines without end (R = -1: nobody dies)
 *   bind               every rank checks it is pinned to one CPU
 *   init-fails         boot_init must fail with SHOAL_EBOOT */
#include "boot/boot.h"
#include "shoal.h"
#include "util/util.h"

#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct boot_info bi;

static void join(void)
{
    int rc = boot_init(&bi);
    if (rc == SHOAL_OK)
        rc = boot_barrier();
    if (rc != SHOAL_OK) {
        fprintf(stderr, "victim: cannot join: %s\n", shoal_strerror(rc));
        exit(1);
    }
}

/* What a rank blocked in shoal does when a peer dies: notice, name the dead
 * rank, leave. */
static _Noreturn void wait_for_failure(void)
{
    int rc;
    while ((rc = boot_barrier()) == SHOAL_OK)
        ;
    int dead = -1;
    const char *why = "?";
    boot_peer_failed(&dead, &why);
    fprintf(stderr, "victim rank %d: %s; peer rank %d: %s\n", bi.rank, shoal_strerror(rc), dead, why);
    exit(rc == SHOAL_EPEERDEAD ? 1 : 2);
}

static _Noreturn void sleep_then_fail(void)
{
    sleep(30);
    fprintf(stderr, "victim rank %d: was not ended\n", bi.rank);
    exit(3);
}

static void ignore_sigterm(void)
{
    signal(SIGTERM, SIG_IGN);
}

static void print_lines(long lines)
{
    char buf[4096];
    for (long i = 0; i < lines; i++) {
        int n = snprintf(buf, sizeof buf, "rank %d line %ld ", bi.rank, i);
        size_t fill = (size_t)(i * 997 + bi.rank * 131) % 3000;
        memset(buf + n, 'a' + bi.rank % 26, fill);
        buf[(size_t)n + fill] = '\n';
        size_t len = (size_t)n + fill + 1, third = len / 3;
        /* Three writes per line: a forwarder that did not reassemble lines
         * would interleave the ranks mid-line. */
        if (write(1, buf, third) < 0 || write(1, buf + third, third) < 0 ||
            write(1, buf + 2 * third, len - 2 * third) < 0)
            exit(1);
    }
    fprintf(stderr, "rank %d stderr\n", bi.rank);
}

static int check_bound(void)
{
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs) || CPU_COUNT(&cs) != 1) {
        fprintf(stderr, "victim rank %d: not bound to one CPU\n", bi.rank);
        return 1;
    }
    return 0;
}

static int victim(const char *mode, int target, long n)
{
    if (!strcmp(mode, "early") && util_config_int(CFG_RANK) == target)
        return 0;
    if (!strcmp(mode, "init-fails"))
        return boot_init(&bi) == SHOAL_EBOOT ? 0 : 1;
    join();
    int me = bi.rank == target;
    if (!strcmp(mode, "ok") || !strcmp(mode, "early")) {
        if (boot_barrier() != SHOAL_OK)
            return 1;
    } else if (!strcmp(mode, "kill-launcher")) {
        if (me)
            kill(getppid(), SIGKILL);
        wait_for_failure();
    } else if (!strncmp(mode, "kill", 4)) {
        if (me)
            raise(SIGKILL);
        if (!strcmp(mode, "kill-ignore"))
            ignore_sigterm();
        if (strcmp(mode, "kill"))
            sleep_then_fail();
        wait_for_failure();
    } else if (!strcmp(mode, "exit") || !strcmp(mode, "abort")) {
        if (me && !strcmp(mode, "abort"))
            boot_abort_notify((int)n, "victim abort text\n");
        if (me)
            exit((int)n);
        wait_for_failure();
    } else if (!strcmp(mode, "fatal")) {
        util_fatal_hook = boot_abort_notify;
        if (me)
            util_fatal("victim fatal error %d", 42);
        wait_for_failure();
    } else if (!strcmp(mode, "nofinalize-all")) {
        exit(0);
    } else if (!strcmp(mode, "nofinalize")) {
        if (me)
            exit(0);
        sleep_then_fail();
    } else if (!strcmp(mode, "mismatch")) {
        /* The launcher must refuse this, so both calls fail. */
        int fds[BOOT_MAX_RANKS];
        int rc = bi.rank == 0 ? boot_barrier() : boot_exchange_fd(1, fds);
        return rc == SHOAL_EPEERDEAD ? 1 : 2;
    } else if (!strcmp(mode, "hang")) {
        sleep_then_fail();
    } else if (!strcmp(mode, "print")) {
        print_lines(n);
    } else if (!strcmp(mode, "flood")) {
        if (me) {
            usleep(200000);
            raise(SIGKILL);
        }
        print_lines(LONG_MAX);
    } else if (!strcmp(mode, "bind")) {
        if (check_bound())
            return 1;
    } else {
        fprintf(stderr, "victim: unknown mode %s\n", mode);
        return 2;
    }
    boot_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: boot_victim MODE [RANK [N]]\n");
        return 2;
    }
    int target = argc > 2 ? atoi(argv[2]) : 0;
    long n = argc > 3 ? atol(argv[3]) : 0;
    if (!strcmp(argv[1], "print"))
        n = target;
    return victim(argv[1], target, n);
}
