/* Runs a command (shoalrun) and checks how it ended: exit status, time
 * taken, what it printed, and that every process it started is gone.
 * usage: boot_expect [checks] -- command [args...]
 *   --status N|nonzero     exit status
 *   --within S             the command exits within S seconds
 *   --gone-within S        every process that inherited a marker descriptor
 *                          from the command has exited S seconds after it
 *   --stdout-has TEXT      (repeatable) substring of stdout
 *   --stderr-has TEXT      (repeatable) substring of stderr
 *   --signal-after MS SIG  send signal SIG to the command after MS ms
 *                          (repeatable, in increasing MS order)
 *   --stdout-after MS      leave the command's stdout unread until MS ms
 *                          after the start or until it exits, to stall it
 *   --tagged RANKS LINES   stdout is boot_victim's "print LINES" output of
 *                          RANKS ranks, each line tagged and whole
 *   --retry-if TEXT        when the checks fail and stderr has TEXT (a
 *                          launcher's own known crash, not shoal's), run
 *                          the command once more, saying so; the second
 *                          run's checks decide */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_HAS 8
#define MAX_SIGNALS 4
#define HARD_LIMIT_EXTRA 10.0 /* seconds past --within before we kill it */

struct buf {
    char *p;
    size_t n, cap;
};

static struct {
    int status;          /* -1: any non-zero; -2: not checked */
    double within, gone_within;
    const char *out_has[MAX_HAS], *err_has[MAX_HAS];
    int nout, nerr;
    long signal_ms[MAX_SIGNALS], stdout_ms;
    int signal_no[MAX_SIGNALS], nsignals;
    int tag_ranks;
    long tag_lines;
    const char *retry_if;
    char **cmd;
} o = {.status = -2, .within = 60};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: boot_expect [--status N|nonzero] [--within S] [--gone-within S]\n"
                    "  [--stdout-has T] [--stderr-has T] [--signal-after MS SIG]\n"
                    "  [--stdout-after MS] [--tagged RANKS LINES] [--retry-if T] -- command [args...]\n");
    exit(2);
}

static void parse(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i];
        int more = argc - i - 1;
        if (!strcmp(a, "--status") && more >= 1)
            o.status = !strcmp(argv[++i], "nonzero") ? -1 : atoi(argv[i]);
        else if (!strcmp(a, "--within") && more >= 1)
            o.within = atof(argv[++i]);
        else if (!strcmp(a, "--gone-within") && more >= 1)
            o.gone_within = atof(argv[++i]);
        else if (!strcmp(a, "--stdout-has") && more >= 1 && o.nout < MAX_HAS)
            o.out_has[o.nout++] = argv[++i];
        else if (!strcmp(a, "--stderr-has") && more >= 1 && o.nerr < MAX_HAS)
            o.err_has[o.nerr++] = argv[++i];
        else if (!strcmp(a, "--stdout-after") && more >= 1)
            o.stdout_ms = atol(argv[++i]);
        else if (!strcmp(a, "--signal-after") && more >= 2) {
            if (o.nsignals == MAX_SIGNALS)
                usage();
            o.signal_ms[o.nsignals] = atol(argv[++i]);
            o.signal_no[o.nsignals++] = atoi(argv[++i]);
        } else if (!strcmp(a, "--tagged") && more >= 2) {
            o.tag_ranks = atoi(argv[++i]);
            o.tag_lines = atol(argv[++i]);
        } else if (!strcmp(a, "--retry-if") && more >= 1)
            o.retry_if = argv[++i];
        else
            usage();
    }
    if (i + 1 >= argc)
        usage();
    o.cmd = argv + i + 1;
}

static void append(struct buf *b, const char *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            exit(2);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* Reads fd into b; returns 0 at end of stream. */
static int drain(int fd, struct buf *b)
{
    char tmp[65536];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n > 0)
        append(b, tmp, (size_t)n);
    return n != 0 && !(n < 0 && errno != EINTR && errno != EAGAIN);
}

static int failures;

static void fail(const char *fmt, const char *arg)
{
    fprintf(stderr, "boot_expect: FAIL: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    failures++;
}

/* Each line must be "[r] rank r line i " plus i*997+r*131 mod 3000 copies
 * of one letter, and each rank's lines must come in order. */
static void check_tagged(const struct buf *out)
{
    long *next = calloc((size_t)o.tag_ranks, sizeof *next);
    char *line = out->p, *end;
    for (; line && line < out->p + out->n; line = end + 1) {
        end = strchr(line, '\n');
        if (!end) {
            fail("unterminated last line: %.80s", line);
            break;
        }
        int r1, r2, off = 0;
        long i;
        if (sscanf(line, "[%d] rank %d line %ld%n", &r1, &r2, &i, &off) != 3 || r1 != r2 ||
            r1 < 0 || r1 >= o.tag_ranks || i != next[r1] || line[off++] != ' ') {
            fail("line out of place or garbled: %.120s", line);
            break;
        }
        size_t fill = (size_t)(i * 997 + r1 * 131) % 3000;
        int ok = (size_t)(end - line - off) == fill;
        for (size_t k = 0; ok && k < fill; k++)
            ok = line[off + (long)k] == 'a' + r1 % 26;
        if (!ok) {
            fail("line body garbled: %.120s", line);
            break;
        }
        next[r1]++;
    }
    for (int r = 0; r < o.tag_ranks; r++)
        if (next[r] != o.tag_lines) {
            char msg[64];
            snprintf(msg, sizeof msg, "rank %d printed %ld lines", r, next[r]);
            fail("%s", msg);
        }
    free(next);
}

static void check(int status, double took, int gone, const struct buf *out, const struct buf *err)
{
    char msg[128];
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    snprintf(msg, sizeof msg, "%d after %.3f s", code, took);
    fprintf(stderr, "boot_expect: command exited with status %s\n", msg);
    if ((o.status == -1 && code == 0) || (o.status >= 0 && code != o.status))
        fail("unexpected exit status %s", msg);
    if (took > o.within)
        fail("took too long: %s", msg);
    if (!gone)
        fail("%s", "processes started by the command outlived it");
    for (int i = 0; i < o.nout; i++)
        if (!strstr(out->p ? out->p : "", o.out_has[i]))
            fail("stdout lacks \"%s\"", o.out_has[i]);
    for (int i = 0; i < o.nerr; i++)
        if (!strstr(err->p ? err->p : "", o.err_has[i]))
            fail("stderr lacks \"%s\"", o.err_has[i]);
    if (o.tag_ranks)
        check_tagged(out);
}

/* Waits for EOF on the marker pipe: every holder has exited. */
static int all_gone(int hold, double deadline)
{
    for (;;) {
        char c;
        struct pollfd p = {.fd = hold, .events = POLLIN};
        int ms = (int)((deadline - now()) * 1000);
        if (poll(&p, 1, ms > 0 ? ms : 0) > 0 && read(hold, &c, 1) == 0)
            return 1;
        if (now() >= deadline)
            return 0;
    }
}

/* Runs the command once and checks how it ended, adding to failures;
 * *known_crash: stderr has the --retry-if text. */
static void run_once(int *known_crash)
{
    int out[2], err[2], hold[2];
    /* hold's write end is inherited by every process the command starts. */
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe(hold))
        exit(2);
    fcntl(hold[0], F_SETFD, FD_CLOEXEC);
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        execvp(o.cmd[0], o.cmd);
        perror(o.cmd[0]);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    close(hold[1]);
    struct buf bo = {0}, be = {0};
    int open_out = 1, open_err = 1, status = 0, exited = 0, signalled = 0; /* signalled: how many sent */
    double t_exit = 0;
    while (!exited || open_out || open_err) {
        int read_out = open_out && (exited || now() - t0 >= (double)o.stdout_ms / 1000);
        struct pollfd p[2] = {{.fd = read_out ? out[0] : -1, .events = POLLIN},
                              {.fd = open_err ? err[0] : -1, .events = POLLIN}};
        poll(p, 2, 5);
        if (p[0].revents)
            open_out = drain(out[0], &bo);
        if (p[1].revents)
            open_err = drain(err[0], &be);
        if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
            exited = 1;
            t_exit = now();
        }
        if (!exited && signalled < o.nsignals && now() - t0 >= (double)o.signal_ms[signalled] / 1000) {
            kill(pid, o.signal_no[signalled]);
            signalled++;
        }
        if (!exited && now() - t0 > o.within + HARD_LIMIT_EXTRA) {
            kill(pid, SIGKILL);
            fprintf(stderr, "boot_expect: command still running after %.1f s; killed it\n",
                    now() - t0);
        }
    }
    int gone = all_gone(hold[0], t_exit + o.gone_within);
    fprintf(stderr, "---- stdout ----\n%.8000s\n---- stderr ----\n%.8000s\n----\n",
            bo.p ? bo.p : "", be.p ? be.p : "");
    check(status, t_exit - t0, gone, &bo, &be);
    *known_crash = o.retry_if && be.p && strstr(be.p, o.retry_if);
    free(bo.p);
    free(be.p);
    close(out[0]);
    close(err[0]);
    close(hold[0]);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    int known_crash;
    run_once(&known_crash);
    if (failures && known_crash) {
        fprintf(stderr, "boot_expect: stderr has \"%s\", the launcher's own known crash; running once more\n",
                o.retry_if);
        failures = 0;
        run_once(&known_crash);
    }
    fprintf(stderr, "boot_expect: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
