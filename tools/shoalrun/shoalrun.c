/* shoalrun: starts an N-rank shoal job on this host.  It owns the job
 * control block, serves the boot protocol on one socket per rank (both
 * specified in docs/BOOT.md), forwards the ranks' output line by line, and
 * ends the whole job as soon as one rank fails, so no rank is left waiting
 * for a dead peer. */
#include "boot/boot.h"
#include "boot/proto.h"
#include "shoal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* After a rank fails the others get TERM_GRACE_MS to notice the flag and
 * leave with their own message, then SIGTERM, then SIGKILL KILL_GRACE_MS
 * later: the whole job is gone within a second. */
#define TERM_GRACE_MS 300
#define KILL_GRACE_MS 500
/* A rank that exits 0 without finalizing is only a failure if others keep
 * running; this window keeps ranks that all exit at once from tripping it. */
#define NOFIN_GRACE_MS 100
/* Retry delay when the kernel refuses more descriptors in flight. */
#define RETRY_MS 1
/* Longest line forwarded whole; longer ones are split. */
#define LINE_BUF 16384
/* Reads per readiness event, so one chatty rank cannot starve the rest. */
#define READS_PER_EVENT 4
/* Output queued for our stdout or stderr beyond which the ranks feeding it
 * are no longer read: they block on their full pipes, we keep our memory. */
#define QUEUE_LIMIT (1u << 20)
/* Once the ranks are gone, how long a reader that takes nothing is waited
 * for (or the --timeout if shorter) before the rest of the output is lost. */
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_NOEXEC 127
#define MS 1000000ull

enum coll_kind { COLL_FD, COLL_GATHER };

/* One collective: the ranks' contributions, then the result sent to all. */
struct coll {
    enum coll_kind kind;
    int refs;             /* the open slot plus every rank still being sent it */
    int arrived;
    uint32_t len;         /* bytes per rank (gather) */
    unsigned char *data;  /* size * len bytes (gather) */
    int *fds;             /* one per rank (exchange) */
};

struct outq {             /* output waiting for our stdout or stderr */
    int fd;
    int broken;           /* a write failed: later output is dropped */
    size_t off, n, cap;   /* buf[off, n) is still to be written */
    char *buf;
};

struct stream {           /* a rank's stdout or stderr */
    int fd;               /* our read end; -1 once closed */
    struct outq *to;      /* where it is forwarded */
    size_t left;          /* bytes still taken once the job is over (SIZE_MAX
                             before, which no output uses up) */
    size_t n;             /* bytes of an unfinished line in buf */
    char *buf;
};

struct rank {
    pid_t pid;
    int sock;             /* -1 once closed */
    int hello, finalized, exited, status;
    int joined;           /* has fully contributed to the open collective */
    uint32_t got;         /* gather bytes received so far */
    struct coll *reply;   /* result still being sent to this rank */
    size_t sent;          /* descriptors or bytes of reply already sent */
    int want_write;       /* reply waits for socket space */
    struct stream out[2];
};

static struct {
    int np, tag, bind;
    double timeout;
    char **argv;

    struct boot_job_block *job;
    int jobfd, sigfd, devnull;
    pid_t self;
    sigset_t oldmask;
    struct sigaction oldpipe;
    struct rlimit oldnofile;
    int cpus[CPU_SETSIZE], ncpus;

    struct outq q[2];         /* our stdout and stderr */
    struct outq *dest[2];     /* the queue for each: one if both are one file */
    int abandoned;            /* gave up delivering output */

    struct rank *r;
    struct pollfd *pfd;
    int nlive;
    struct coll *open;
    int retry;

    int failed, exit_code;
    int nofin_rank;
    uint64_t timeout_at, nofin_at, term_at, kill_at, stall_at;  /* 0: not armed */
    uint64_t stall_ns;
} L;

/* ---- command line -------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: shoalrun [options] -n N [--] program [args...]\n"
        "Starts N ranks of program on this host as one shoal job.\n"
        "  -n, --np N        number of ranks, 1..%d\n"
        "      --tag-output  prefix every output line with [rank]\n"
        "      --timeout S   end the job after S seconds (exit status 124)\n"
        "      --bind        pin rank r to allowed CPU r modulo their count\n"
        "  -x VAR=VALUE      set VAR in the ranks' environment\n"
        "      --transport T between hosts: shm, udp or eth (sets SHOAL_TRANSPORT)\n"
        "  -h, --help        show this help\n"
        "      --version     show the version\n"
        "Exit status: 0 if every rank exited 0; otherwise the first failing rank's\n"
        "status (128+N if killed by signal N), 124 on timeout, 128+N if shoalrun\n"
        "got signal N, 2 for bad usage, 127 if program cannot be run.\n",
        BOOT_MAX_RANKS);
}

static _Noreturn __attribute__((format(printf, 1, 2))) void bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("shoalrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    usage(stderr);
    exit(EXIT_USAGE);
}

static int parse_np(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > BOOT_MAX_RANKS)
        bad_usage("-n needs a rank count in 1..%d, not \"%s\"", BOOT_MAX_RANKS, s);
    return (int)v;
}

static double parse_timeout(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 1e8)
        bad_usage("--timeout needs a positive number of seconds, not \"%s\"", s);
    return v;
}

/* -x VAR alone is accepted for mpirun habits: the whole environment is
 * passed to the ranks anyway. */
static void parse_env(const char *s)
{
    const char *eq = strchr(s, '=');
    if (eq == s || !*s)
        bad_usage("-x needs VAR=VALUE, not \"%s\"", s);
    if (!eq)
        return;
    char *name = strndup(s, (size_t)(eq - s));
    if (!name || setenv(name, eq + 1, 1))
        bad_usage("cannot set \"%s\": %s", s, strerror(errno));
    free(name);
}

/* Checked here too, so a typo is a usage error rather than every rank's. */
static void parse_transport(const char *s)
{
    if (strcmp(s, "shm") && strcmp(s, "udp") && strcmp(s, "eth"))
        bad_usage("--transport is shm, udp or eth, not \"%s\"", s);
    setenv(util_config_table(&(size_t){0})[CFG_TRANSPORT].name, s, 1);
}

static void parse_args(int argc, char **argv)
{
    enum { OPT_TAG = 256, OPT_TIMEOUT, OPT_BIND, OPT_VERSION, OPT_TRANSPORT };
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"tag-output", no_argument, NULL, OPT_TAG},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"bind", no_argument, NULL, OPT_BIND},
        {"transport", required_argument, NULL, OPT_TRANSPORT},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    /* '+': options end at the program name, which keeps its own options. */
    while ((c = getopt_long(argc, argv, "+:n:x:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': L.np = parse_np(optarg); break;
        case 'x': parse_env(optarg); break;
        case OPT_TAG: L.tag = 1; break;
        case OPT_TIMEOUT: L.timeout = parse_timeout(optarg); break;
        case OPT_BIND: L.bind = 1; break;
        case OPT_TRANSPORT: parse_transport(optarg); break;
        case 'h': usage(stdout); exit(0);
        case OPT_VERSION: printf("shoalrun (shoal) %s\n", SHOAL_VERSION_STRING); exit(0);
        case ':': bad_usage("option %s needs a value", argv[optind - 1]);
        default: bad_usage("unknown option %s", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        bad_usage("no program given");
    if (L.np == 0)
        bad_usage("the number of ranks, -n N, is required");
    L.argv = argv + optind;
}

/* Checked once up front so a typo gives one message, not one per rank. */
static void check_program(const char *prog)
{
    if (strchr(prog, '/')) {
        if (access(prog, X_OK) == 0)
            return;
        fprintf(stderr, "shoalrun: cannot run %s: %s\n", prog, strerror(errno));
        exit(EXIT_NOEXEC);
    }
    const char *path = getenv("PATH");
    if (!path)
        return; /* execvp falls back to its default search path */
    for (const char *p = path;; p++) {
        const char *end = strchrnul(p, ':');
        char full[4096];
        int n = snprintf(full, sizeof full, "%.*s/%s", end == p ? 1 : (int)(end - p),
                         end == p ? "." : p, prog);
        if (n > 0 && (size_t)n < sizeof full && access(full, X_OK) == 0)
            return;
        if (!*end)
            break;
        p = end;
    }
    fprintf(stderr, "shoalrun: %s: command not found\n", prog);
    exit(EXIT_NOEXEC);
}

/* ---- small helpers --------------------------------------------------------- */

static void *need(void *p)
{
    if (!p) {
        fputs("shoalrun: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    return need(calloc(n ? n : 1, size ? size : 1));
}

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "shoalrun: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void set_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static int rank_of(const struct rank *r)
{
    return (int)(r - L.r);
}

static void describe_status(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(buf, n, "killed by signal %d (%s)%s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
}

static int status_code(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status) ? WEXITSTATUS(status) : 1;
}

/* ---- output queues --------------------------------------------------------- */

/* Our stdout and stderr are written from the poll loop, so a reader that
 * stops reading stalls only the output, never the timeout, signals,
 * collectives or failure detection.  They are not made O_NONBLOCK: that flag
 * belongs to the open file description, which we usually share with the
 * shell (a terminal, a pipe), and it would stay set for the shell if we died
 * without restoring it.  Instead we write only when poll says the descriptor
 * is writable, and at most PIPE_BUF bytes at a time: a writable pipe has a
 * free page, so such a write never waits for the reader.  (A terminal may
 * take it a little at a time, which waits for the device, not for a user.) */

static void queue_init(void)
{
    struct stat so, se;
    L.q[0] = (struct outq){.fd = 1};
    L.q[1] = (struct outq){.fd = 2};
    L.dest[0] = &L.q[0];
    /* One queue for "2>&1" and the like keeps each line whole and stdout
     * and stderr in the order they were forwarded, as one writer would. */
    int same = fstat(1, &so) == 0 && fstat(2, &se) == 0 && so.st_dev == se.st_dev &&
               so.st_ino == se.st_ino;
    L.dest[1] = same ? &L.q[0] : &L.q[1];
}

static size_t queued(const struct outq *q)
{
    return q->n - q->off;
}

static void queue_put(struct outq *q, const void *p, size_t n)
{
    if (q->broken)
        return;
    if (q->n + n > q->cap) {
        size_t live = queued(q);
        /* Half the buffer stays free, so compacting costs O(1) per byte. */
        if (live + n > q->cap / 2) {
            q->cap = 2 * (live + n);
            q->buf = need(realloc(q->buf, q->cap));
        }
        memmove(q->buf, q->buf + q->off, live);
        q->n = live;
        q->off = 0;
    }
    memcpy(q->buf + q->n, p, n);
    q->n += n;
}

/* Our own messages go through the stderr queue, after the ranks' output. */
static __attribute__((format(printf, 1, 2))) void say(const char *fmt, ...)
{
    char line[512] = "shoalrun: ";
    size_t k = strlen(line), room = sizeof line - k - 1; /* one byte kept for the newline */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + k, room, fmt, ap);
    va_end(ap);
    k += n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
    line[k++] = '\n';
    queue_put(L.dest[1], line, k);
}

static int writable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 0) > 0;
}

/* Writes what q's descriptor takes now without waiting for its reader. */
static void flush_queue(struct outq *q)
{
    while (queued(q) > 0 && writable(q->fd)) {
        ssize_t w = write(q->fd, q->buf + q->off, queued(q) < PIPE_BUF ? queued(q) : PIPE_BUF);
        if (w < 0 && errno != EINTR && errno != EAGAIN) {
            q->broken = 1; /* reader gone: the output has nowhere to go */
            q->off = q->n;
        }
        if (w <= 0)
            break;
        q->off += (size_t)w;
        if (L.stall_at)
            L.stall_at = util_now_ns() + L.stall_ns;
    }
    if (queued(q) == 0)
        q->off = q->n = 0;
}

/* ---- output forwarding ----------------------------------------------------- */

static void emit_tagged(struct outq *q, int rank, const char *p, size_t n)
{
    char tag[16];
    int t = snprintf(tag, sizeof tag, "[%d] ", rank);
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t len = nl ? (size_t)(nl - p) + 1 : n;
        queue_put(q, tag, (size_t)t);
        queue_put(q, p, len);
        if (!nl)
            queue_put(q, "\n", 1); /* keep the next tagged line at a line start */
        p += len;
        n -= len;
    }
}

/* Forwards the complete lines in s; an unfinished line waits for its end
 * unless the stream ended or the line outgrew the buffer. */
static void forward(struct stream *s, int rank, int eof)
{
    if (s->n == 0)
        return;
    const char *last = memrchr(s->buf, '\n', s->n);
    size_t done = last ? (size_t)(last - s->buf) + 1 : 0;
    if (eof || (done == 0 && s->n == LINE_BUF))
        done = s->n;
    if (done == 0)
        return;
    if (L.tag)
        emit_tagged(s->to, rank, s->buf, done);
    else
        queue_put(s->to, s->buf, done);
    memmove(s->buf, s->buf + done, s->n - done);
    s->n -= done;
}

static void close_stream(struct stream *s, int rank)
{
    forward(s, rank, 1);
    close(s->fd);
    s->fd = -1;
    free(s->buf);
    s->buf = NULL;
}

/* One read of at most max (> 0) bytes, forwarding the complete lines;
 * returns what read returned. */
static ssize_t read_stream(struct stream *s, int rank, size_t max)
{
    if (!s->buf)
        s->buf = xcalloc(1, LINE_BUF);
    size_t room = LINE_BUF - s->n; /* never 0: forward() empties a full buffer */
    room = room < s->left ? room : s->left; /* never 0 either: s closes then */
    ssize_t n = read(s->fd, s->buf + s->n, max < room ? max : room);
    if (n > 0) {
        s->n += (size_t)n;
        s->left -= (size_t)n;
        forward(s, rank, 0);
    }
    if ((n < 0 && errno != EINTR && errno != EAGAIN) || n == 0 || s->left == 0)
        close_stream(s, rank);
    return n;
}

static int wants_input(const struct stream *s)
{
    return s->fd >= 0 && queued(s->to) < QUEUE_LIMIT;
}

static void pump(struct stream *s, int rank)
{
    for (int i = 0; i < READS_PER_EVENT && wants_input(s); i++)
        if (read_stream(s, rank, SIZE_MAX) < 0)
            return;
}

static size_t pipe_bytes(const struct stream *s)
{
    int n = 0;
    return s->fd >= 0 && ioctl(s->fd, FIONREAD, &n) == 0 && n > 0 ? (size_t)n : 0;
}

/* Takes in what s's pipe holds now, past the queue limit if need be (by at
 * most the pipe's size), so a verdict on the rank follows all it said. */
static void take_pending(struct stream *s, int rank)
{
    for (size_t want = pipe_bytes(s); want > 0 && s->fd >= 0;) {
        ssize_t n = read_stream(s, rank, want);
        if (n <= 0)
            return;
        want -= (size_t)n;
    }
}

/* ---- ending the job -------------------------------------------------------- */

static void signal_ranks(int sig)
{
    for (int i = 0; i < L.np; i++)
        if (L.r[i].pid > 0 && !L.r[i].exited)
            kill(L.r[i].pid, sig);
}

static void coll_put(struct coll *c)
{
    if (!c || --c->refs > 0)
        return;
    if (c->fds)
        for (int i = 0; i < L.np; i++)
            if (c->fds[i] >= 0)
                close(c->fds[i]);
    free(c->fds);
    free(c->data);
    free(c);
}

static void drop_reply(struct rank *r)
{
    coll_put(r->reply);
    r->reply = NULL;
    r->want_write = 0;
}

/* Ranks waiting on the launcher see end-of-stream at once instead of
 * waiting for their next look at the failed flag. */
static void cut_off_ranks(void)
{
    for (int i = 0; i < L.np; i++) {
        drop_reply(&L.r[i]);
        if (L.r[i].sock >= 0)
            shutdown(L.r[i].sock, SHUT_WR);
    }
    coll_put(L.open);
    L.open = NULL;
}

/* Records the job's first failure where the ranks look for it, reports it,
 * and schedules the end of the remaining ranks.  rank is -1 when the
 * launcher itself ends the job (timeout, signal, start-up failure). */
static __attribute__((format(printf, 5, 6))) void fail_job(int rank, int status, int code,
                                                           unsigned term_ms, const char *fmt, ...)
{
    if (L.failed)
        return;
    struct boot_job_block *j = L.job;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->failed_reason, sizeof j->failed_reason, fmt, ap);
    va_end(ap);
    j->failed_rank = rank;
    j->failed_status = status;
    atomic_store_explicit(&j->failed, 1, memory_order_release);
    L.failed = 1;
    L.exit_code = code;
    if (rank >= 0) {
        /* Whatever the rank said about its failure comes before ours. */
        take_pending(&L.r[rank].out[0], rank);
        take_pending(&L.r[rank].out[1], rank);
        say("rank %d (pid %d) %s%s", rank, (int)L.r[rank].pid, j->failed_reason,
            L.nlive > 0 ? "; ending the job" : "");
    } else {
        say("%s%s", j->failed_reason, L.nlive > 0 ? "; ending ranks" : "");
    }
    L.term_at = util_now_ns() + term_ms * MS;
    L.kill_at = L.term_at + KILL_GRACE_MS * MS;
    cut_off_ranks();
}

static void protocol_error(struct rank *r, const char *what)
{
    fail_job(rank_of(r), W_EXITCODE(1, 0), 1, TERM_GRACE_MS, "broke the boot protocol: %s", what);
}

/* ---- collectives ----------------------------------------------------------- */

static const char *coll_name(enum coll_kind k)
{
    return k == COLL_FD ? "boot_exchange_fd" : "boot_allgather/boot_barrier";
}

static int first_exited(void)
{
    for (int i = 0; i < L.np; i++)
        if (L.r[i].exited)
            return i;
    return -1;
}

static struct coll *coll_new(enum coll_kind kind, uint32_t len)
{
    struct coll *c = xcalloc(1, sizeof *c);
    c->kind = kind;
    c->refs = 1;
    c->len = len;
    if (kind == COLL_FD) {
        c->fds = xcalloc((size_t)L.np, sizeof *c->fds);
        memset(c->fds, -1, (size_t)L.np * sizeof *c->fds);
    } else {
        c->data = xcalloc((size_t)L.np, len);
    }
    return c;
}

/* The collective r's request belongs to, opening one if none is; NULL
 * after failing the job when the request cannot be served. */
static struct coll *coll_join(struct rank *r, enum coll_kind kind, uint32_t len)
{
    if (r->reply || r->joined) {
        protocol_error(r, "a new request before the previous collective finished");
        return NULL;
    }
    if (!L.open) {
        int gone = first_exited();
        if (gone >= 0) {
            /* A rank that has left can never join: the collective would hang. */
            fail_job(gone, L.r[gone].status, status_code(L.r[gone].status), TERM_GRACE_MS,
                     "exited before joining %s", coll_name(kind));
            return NULL;
        }
        L.open = coll_new(kind, len);
    }
    if (L.open->kind != kind) {
        fail_job(rank_of(r), W_EXITCODE(1, 0), 1, TERM_GRACE_MS,
                 "called %s while other ranks are in %s", coll_name(kind), coll_name(L.open->kind));
        return NULL;
    }
    if (L.open->len != len) {
        fail_job(rank_of(r), W_EXITCODE(1, 0), 1, TERM_GRACE_MS,
                 "gave %u bytes to %s while other ranks gave %u", len, coll_name(kind), L.open->len);
        return NULL;
    }
    return L.open;
}

/* Sends as much of r's pending result as the socket takes. */
static void flush_reply(struct rank *r)
{
    while (r->reply) {
        struct coll *c = r->reply;
        size_t total, step;
        ssize_t n;
        if (c->kind == COLL_FD) {
            total = (size_t)L.np;
            step = total - r->sent < BOOT_PROTO_MAX_FDS ? total - r->sent : BOOT_PROTO_MAX_FDS;
            n = boot_proto_send(r->sock, MSG_DONTWAIT, BOOT_MSG_FDS, (uint32_t)r->sent, NULL, 0,
                                c->fds + r->sent, (int)step);
        } else {
            total = (size_t)L.np * c->len;
            step = total - r->sent < BOOT_PROTO_MAX_PAYLOAD ? total - r->sent : BOOT_PROTO_MAX_PAYLOAD;
            n = boot_proto_send(r->sock, MSG_DONTWAIT, BOOT_MSG_GATHERED, c->len,
                                c->data + r->sent, (uint32_t)step, NULL, 0);
        }
        if (n < 0) {
            r->want_write = errno == EAGAIN;
            L.retry |= errno == ETOOMANYREFS;
            if (errno != EAGAIN && errno != ETOOMANYREFS)
                drop_reply(r); /* the rank closed its end; its exit is judged when reaped */
            return;
        }
        r->sent += step;
        if (r->sent >= total)
            drop_reply(r);
    }
}

static void coll_arrive(struct rank *r)
{
    struct coll *c = L.open;
    r->joined = 1;
    if (++c->arrived < L.np)
        return;
    L.open = NULL;
    for (int i = 0; i < L.np; i++) {
        struct rank *q = &L.r[i];
        q->joined = 0;
        q->got = 0;
        if (q->sock < 0)
            continue;
        q->reply = c;
        q->sent = 0;
        c->refs++;
    }
    coll_put(c);
    for (int i = 0; i < L.np; i++)
        flush_reply(&L.r[i]);
}

/* ---- messages from ranks --------------------------------------------------- */

static void on_hello(struct rank *r, const struct boot_msg_hdr *h, const void *p)
{
    struct boot_hello hello;
    if (r->hello) {
        protocol_error(r, "a second HELLO");
        return;
    }
    if (h->len != sizeof hello) {
        protocol_error(r, "HELLO of the wrong length");
        return;
    }
    memcpy(&hello, p, sizeof hello);
    if (hello.job_id != L.job->job_id || hello.rank != (uint32_t)rank_of(r)) {
        protocol_error(r, "HELLO for another job or rank");
        return;
    }
    r->hello = 1;
    /* The process that joined, which differs from the one we started when
     * the program runs under a wrapper (sh -c, valgrind, ...). */
    L.job->pid[rank_of(r)] = (int32_t)hello.pid;
}

static void on_fd(struct rank *r, int fd)
{
    struct coll *c = coll_join(r, COLL_FD, 0);
    if (!c) {
        close(fd);
        return;
    }
    c->fds[rank_of(r)] = fd;
    coll_arrive(r);
}

static void on_gather(struct rank *r, const struct boot_msg_hdr *h, const void *p)
{
    struct coll *c = coll_join(r, COLL_GATHER, h->arg);
    if (!c)
        return;
    if (h->len > c->len - r->got) {
        protocol_error(r, "more allgather data than announced");
        return;
    }
    memcpy(c->data + (size_t)rank_of(r) * c->len + r->got, p, h->len);
    r->got += h->len;
    if (r->got == c->len)
        coll_arrive(r);
}

static void on_abort(struct rank *r, const struct boot_msg_hdr *h, const char *text)
{
    int code = (int)(h->arg & 0xff);
    int len = (int)h->len;
    while (len > 0 && text[len - 1] == '\n')
        len--;
    fail_job(rank_of(r), W_EXITCODE(code, 0), code ? code : 1, TERM_GRACE_MS,
             "aborted with status %d: %.*s", code, len, text);
}

static void handle(struct rank *r, const struct boot_msg_hdr *h, const void *p, int *fds, int nfds)
{
    int fds_ok = nfds == (h->type == BOOT_MSG_FD && h->len == 0 ? 1 : 0);
    if (L.failed || !fds_ok) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        if (!L.failed)
            protocol_error(r, "wrong descriptors or payload for the message type");
        return;
    }
    switch (h->type) {
    case BOOT_MSG_HELLO: on_hello(r, h, p); break;
    case BOOT_MSG_FD: on_fd(r, fds[0]); break;
    case BOOT_MSG_GATHER: on_gather(r, h, p); break;
    case BOOT_MSG_ABORT: on_abort(r, h, p); break;
    case BOOT_MSG_FINALIZE: r->finalized = 1; break;
    default: protocol_error(r, "unknown message type");
    }
}

static void close_sock(struct rank *r)
{
    drop_reply(r);
    if (r->sock >= 0)
        close(r->sock);
    r->sock = -1;
}

/* Handles every message r has queued. */
static void serve(struct rank *r)
{
    static unsigned char buf[BOOT_PROTO_MAX_PAYLOAD];
    while (r->sock >= 0) {
        struct boot_msg_hdr h;
        int fds[BOOT_PROTO_MAX_FDS], nfds = 0;
        int got = boot_proto_recv(r->sock, MSG_DONTWAIT, &h, buf, sizeof buf, fds, &nfds);
        if (got > 0) {
            handle(r, &h, buf, fds, nfds);
        } else if (got < 0 && errno == EAGAIN) {
            return;
        } else {
            if (got < 0 && errno != ECONNRESET && !L.failed)
                protocol_error(r, strerror(errno));
            close_sock(r);
        }
    }
}

/* ---- rank exits and signals ------------------------------------------------ */

static int unfinalized_live_rank(void)
{
    for (int i = 0; i < L.np; i++)
        if (!L.r[i].exited && !L.r[i].finalized)
            return 1;
    return 0;
}

static void rank_exited(struct rank *r, int status)
{
    r->exited = 1;
    r->status = status;
    L.nlive--;
    /* Its last messages (ABORT, FINALIZE) were sent before it exited; take
     * them in before judging the exit.  fail_job takes in its last output. */
    serve(r);
    close_sock(r);
    if (L.failed)
        return;
    char why[128];
    describe_status(status, why, sizeof why);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_job(rank_of(r), status, status_code(status), TERM_GRACE_MS, "%s", why);
    else if (L.open && !r->joined)
        fail_job(rank_of(r), status, 1, TERM_GRACE_MS, "%s while the other ranks wait in %s",
                 why, coll_name(L.open->kind));
    else if (r->hello && !r->finalized && !L.nofin_at) {
        L.nofin_rank = rank_of(r);
        L.nofin_at = util_now_ns() + NOFIN_GRACE_MS * MS;
    }
}

static void reap(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (int i = 0; i < L.np; i++)
            if (L.r[i].pid == pid && !L.r[i].exited)
                rank_exited(&L.r[i], status);
}

/* Stops waiting for the reader of our output: what it has not taken is lost. */
static void abandon_output(const char *why)
{
    for (int i = 0; i < L.np; i++)
        for (int k = 0; k < 2; k++)
            if (L.r[i].out[k].fd >= 0)
                close_stream(&L.r[i].out[k], i);
    say("output not delivered: %s", why);
    flush_queue(&L.q[0]);
    flush_queue(&L.q[1]);
    L.abandoned = 1;
}

static void on_signals(void)
{
    struct signalfd_siginfo si;
    while (read(L.sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD)
            continue;
        if (L.failed)
            signal_ranks(SIGKILL); /* asked again: stop waiting for them */
        else
            fail_job(-1, 0, 128 + sig, 0, "interrupted by signal %d (%s)", sig, strsignal(sig));
        if (L.nlive == 0 && !L.abandoned)
            abandon_output("interrupted"); /* only our output was left to wait for */
    }
    reap();
}

static void run_timers(uint64_t now)
{
    if (L.timeout_at && now >= L.timeout_at) {
        L.timeout_at = 0;
        fail_job(-1, 0, EXIT_TIMEOUT, 0, "job timed out after %g s", L.timeout);
    }
    if (L.nofin_at && now >= L.nofin_at) {
        L.nofin_at = 0;
        if (unfinalized_live_rank())
            fail_job(L.nofin_rank, 0, 1, TERM_GRACE_MS, "exited with status 0 without finalizing");
    }
    if (L.term_at && now >= L.term_at) {
        L.term_at = 0;
        signal_ranks(SIGTERM);
    }
    if (L.kill_at && now >= L.kill_at) {
        L.kill_at = 0;
        signal_ranks(SIGKILL);
    }
    if (L.stall_at && now >= L.stall_at) {
        char why[64];
        L.stall_at = 0;
        snprintf(why, sizeof why, "nothing was read for %g s", (double)L.stall_ns / 1e9);
        abandon_output(why);
    }
}

static int poll_timeout_ms(uint64_t now)
{
    uint64_t next = UINT64_MAX;
    uint64_t t[] = {L.timeout_at, L.nofin_at, L.term_at, L.kill_at, L.stall_at};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i] && t[i] < next)
            next = t[i];
    if (L.retry)
        return RETRY_MS;
    if (next == UINT64_MAX)
        return -1;
    return next <= now ? 0 : (int)((next - now + MS - 1) / MS);
}

/* ---- main loop ----------------------------------------------------------- */

/* pfd[0] is the signalfd, pfd[1] and pfd[2] our stdout and stderr; rank i
 * owns pfd[3 + 3i ..]: socket, stdout, stderr.  A descriptor we do not want
 * to hear from is left out (-1), as a hung-up pipe would wake poll anyway. */
static void fill_pollfds(void)
{
    for (int k = 0; k < 2; k++)
        L.pfd[1 + k] = (struct pollfd){.fd = queued(&L.q[k]) ? L.q[k].fd : -1, .events = POLLOUT};
    for (int i = 0; i < L.np; i++) {
        struct rank *r = &L.r[i];
        struct pollfd *p = &L.pfd[3 + 3 * i];
        p[0] = (struct pollfd){.fd = r->sock, .events = POLLIN | (r->want_write ? POLLOUT : 0)};
        for (int k = 0; k < 2; k++)
            p[1 + k] = (struct pollfd){.fd = wants_input(&r->out[k]) ? r->out[k].fd : -1,
                                       .events = POLLIN};
    }
}

static void dispatch(void)
{
    for (int k = 0; k < 2; k++)
        if (L.pfd[1 + k].revents)
            flush_queue(&L.q[k]);
    for (int i = 0; i < L.np; i++) {
        struct rank *r = &L.r[i];
        const struct pollfd *p = &L.pfd[3 + 3 * i];
        /* Output first: a rank prints its complaint before it aborts. */
        for (int k = 0; k < 2; k++)
            if (p[1 + k].revents)
                pump(&r->out[k], i);
        if (p[0].revents & POLLOUT)
            flush_reply(r);
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
            serve(r);
    }
    if (L.pfd[0].revents)
        on_signals();
}

static void step(void)
{
    if (L.retry) {
        L.retry = 0;
        for (int i = 0; i < L.np; i++)
            flush_reply(&L.r[i]);
    }
    fill_pollfds();
    int n = poll(L.pfd, 3 + 3 * (nfds_t)L.np, poll_timeout_ms(util_now_ns()));
    if (n < 0 && errno != EINTR)
        die("poll");
    if (n > 0)
        dispatch();
    run_timers(util_now_ns());
}

/* Descendants of a rank may still hold its pipes and write on: forward
 * only what is there now.  The timeout no longer applies; a reader that
 * takes nothing is waited for a while (at most the timeout). */
static void end_of_job(void)
{
    for (int i = 0; i < L.np; i++)
        for (int k = 0; k < 2; k++) {
            struct stream *s = &L.r[i].out[k];
            s->left = pipe_bytes(s);
            if (s->fd >= 0 && s->left == 0)
                close_stream(s, i);
        }
    L.timeout_at = 0;
    /* Like any program writing to a pipe, wait for the reader (`| less`
     * must not lose output), unless the user bounded the job with
     * --timeout; a signal gives up at once (on_signals). */
    L.stall_ns = L.timeout > 0 ? (uint64_t)(L.timeout * 1e9) : 0;
    L.stall_at = L.stall_ns ? util_now_ns() + L.stall_ns : 0;
}

static int output_pending(void)
{
    for (int i = 0; i < L.np; i++)
        if (L.r[i].out[0].fd >= 0 || L.r[i].out[1].fd >= 0)
            return 1;
    return queued(&L.q[0]) || queued(&L.q[1]);
}

static void run(void)
{
    L.pfd[0] = (struct pollfd){.fd = L.sigfd, .events = POLLIN};
    while (L.nlive > 0)
        step();
    end_of_job();
    while (!L.abandoned && output_pending())
        step();
}

/* ---- start-up ------------------------------------------------------------- */

/* Descriptors 0-2 must be taken before we create any, or a pipe could land
 * on them and be mistaken for the ranks' standard streams. */
static void ensure_std_fds(void)
{
    int fd;
    while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
        ;
    if (fd > 2)
        close(fd);
}

static void make_job_block(void)
{
    L.jobfd = memfd_create("shoal-job", MFD_CLOEXEC);
    if (L.jobfd < 0 || ftruncate(L.jobfd, sizeof *L.job))
        die("cannot create the job control block");
    L.job = mmap(NULL, sizeof *L.job, PROT_READ | PROT_WRITE, MAP_SHARED, L.jobfd, 0);
    if (L.job == MAP_FAILED)
        die("cannot map the job control block");
    uint64_t id;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = util_now_ns() ^ ((uint64_t)getpid() << 32);
    L.job->magic = BOOT_JOB_MAGIC;
    L.job->version = BOOT_JOB_VERSION;
    L.job->size = (uint32_t)L.np;
    L.job->nhosts = 1; /* every rank on this host: host[] stays 0 */
    /* 63 bits: SHOAL_JOB_ID is validated as a signed 64-bit number. */
    L.job->job_id = id & (uint64_t)INT64_MAX;
}

static void setup_process(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, &L.oldmask);
    L.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (L.sigfd < 0)
        die("signalfd");
    /* A rank that closed its socket or pipe must not kill the launcher. */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, &L.oldpipe);
    /* Three pipes and a socket per rank, plus exchanged descriptors. */
    getrlimit(RLIMIT_NOFILE, &L.oldnofile);
    struct rlimit raised = L.oldnofile;
    raised.rlim_cur = raised.rlim_max;
    setrlimit(RLIMIT_NOFILE, &raised);
    L.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    L.self = getpid();
    cpu_set_t cs;
    if (L.bind && sched_getaffinity(0, sizeof cs, &cs) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &cs))
                L.cpus[L.ncpus++] = c;
}

static _Noreturn void child_fail(int rank, const char *what)
{
    dprintf(2, "shoalrun: rank %d: %s: %s\n", rank, what, strerror(errno));
    _exit(EXIT_NOEXEC);
}

static void set_boot_env(int rank, int bfd, int jfd)
{
    size_t n;
    const struct util_cfg_entry *t = util_config_table(&n);
    char v[32];
    snprintf(v, sizeof v, "%d", rank);
    setenv(t[CFG_RANK].name, v, 1);
    snprintf(v, sizeof v, "%d", L.np);
    setenv(t[CFG_SIZE].name, v, 1);
    snprintf(v, sizeof v, "%d", bfd);
    setenv(t[CFG_BOOT_FD].name, v, 1);
    snprintf(v, sizeof v, "%d", jfd);
    setenv(t[CFG_JOB_FD].name, v, 1);
    snprintf(v, sizeof v, "0x%016llx", (unsigned long long)L.job->job_id);
    setenv(t[CFG_JOB_ID].name, v, 1);
}

static void bind_cpu(int rank)
{
    if (L.ncpus == 0)
        return;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(L.cpus[rank % L.ncpus], &cs);
    if (sched_setaffinity(0, sizeof cs, &cs))
        dprintf(2, "shoalrun: rank %d: cannot bind to CPU %d: %s\n", rank,
                L.cpus[rank % L.ncpus], strerror(errno));
}

/* In the forked child: becomes rank `rank` of the job.  The launcher is
 * single-threaded, so the child may use ordinary library calls. */
static _Noreturn void become_rank(int rank, int sock, int out, int err)
{
    sigprocmask(SIG_SETMASK, &L.oldmask, NULL);
    sigaction(SIGPIPE, &L.oldpipe, NULL);
    setrlimit(RLIMIT_NOFILE, &L.oldnofile);
    /* Die with the launcher even if it is SIGKILLed, and do not start at
     * all if it died before the request was in place. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != L.self)
        _exit(EXIT_NOEXEC);
    if (dup2(out, 1) < 0 || dup2(err, 2) < 0 || (rank > 0 && dup2(L.devnull, 0) < 0))
        child_fail(rank, "cannot set up standard streams");
    /* dup() leaves close-on-exec off, so these two survive the exec. */
    int bfd = dup(sock), jfd = dup(L.jobfd);
    if (bfd < 0 || jfd < 0)
        child_fail(rank, "cannot pass the boot descriptors");
    set_boot_env(rank, bfd, jfd);
    if (L.bind)
        bind_cpu(rank);
    L.job->pid[rank] = getpid();
    execvp(L.argv[0], L.argv);
    child_fail(rank, L.argv[0]);
}

static int spawn(int i)
{
    struct rank *r = &L.r[i];
    int sv[2] = {-1, -1}, po[2] = {-1, -1}, pe[2] = {-1, -1};
    pid_t pid = -1;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0 &&
        pipe2(po, O_CLOEXEC) == 0 && pipe2(pe, O_CLOEXEC) == 0)
        pid = fork();
    if (pid == 0)
        become_rank(i, sv[1], po[1], pe[1]);
    int err = errno;
    int ends[] = {sv[1], po[1], pe[1]};
    for (int k = 0; k < 3; k++)
        if (ends[k] >= 0)
            close(ends[k]);
    if (pid < 0) {
        int ours[] = {sv[0], po[0], pe[0]};
        for (int k = 0; k < 3; k++)
            if (ours[k] >= 0)
                close(ours[k]);
        fail_job(-1, 0, 1, 0, "cannot start rank %d: %s", i, strerror(err));
        return -1;
    }
    set_nonblock(sv[0]);
    set_nonblock(po[0]);
    set_nonblock(pe[0]);
    r->pid = pid;
    r->sock = sv[0];
    r->out[0] = (struct stream){.fd = po[0], .to = L.dest[0], .left = SIZE_MAX};
    r->out[1] = (struct stream){.fd = pe[0], .to = L.dest[1], .left = SIZE_MAX};
    L.nlive++;
    return 0;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    check_program(L.argv[0]);
    ensure_std_fds();
    setup_process();
    queue_init();
    make_job_block();
    L.r = xcalloc((size_t)L.np, sizeof *L.r);
    for (int i = 0; i < L.np; i++)
        L.r[i] = (struct rank){.sock = -1, .out = {{.fd = -1}, {.fd = -1}}};
    L.pfd = xcalloc(3 + 3 * (size_t)L.np, sizeof *L.pfd);
    if (L.timeout > 0)
        L.timeout_at = util_now_ns() + (uint64_t)(L.timeout * 1e9);
    for (int i = 0; i < L.np && spawn(i) == 0; i++)
        ;
    run();
    return L.failed ? L.exit_code : 0;
}
