/* shoalrun: starts an N-rank shoal job.  One single-threaded poll loop
 * serves three roles (docs/BOOT.md):
 *   local  (-n N alone): runs every rank on this host;
 *   head   (--hosts, --hostfile): runs no rank; starts one agent per host
 *          through a remote shell and talks to it over that shell's stdin
 *          and stdout (chan.h);
 *   agent  (started by a head): runs the ranks of its host as the local
 *          launcher does and reports what they do to the head.
 * The rank-facing half (job control block, one socket and two pipes per
 * rank, line-wise output) serves local and agent.  The judge (collectives,
 * the failure rules, the verdict) runs where every rank is seen: in local,
 * fed directly, and in the head, fed by the agents' reports.  An agent
 * applies the judge's results and verdicts to its ranks, so every rule
 * exists once. */
#include "boot/boot.h"
#include "boot/proto.h"
#include "chan.h"
#include "hosts.h"
#include "waitgraph.h"
#include "shoal.h"
#include "util/transports.h"
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
/* How long the head waits for an agent to go once its ranks were sent
 * SIGKILL, or for its remote shell to exit once the channel closed, before
 * it kills the remote shell: an agent that hangs cannot hang the head. */
#define AGENT_GRACE_MS 1000
/* How long a host's agent may stay silent after its remote shell started
 * (ssh's own connection attempts, a slow login) before the job fails. */
#define CONNECT_TIMEOUT_S 60
/* An agent that gets no job description this long after it started gives up. */
#define JOB_WAIT_MS 60000
/* How long the launcher waits for the ranks' hang reports once it asked
 * (SIGQUIT, --timeout): a waiting rank answers at its next wait step. */
#define HANG_COLLECT_MS 2000
/* Retry delay when the kernel refuses more descriptors in flight. */
#define RETRY_MS 1
/* Longest line forwarded whole; longer ones are split. */
#define LINE_BUF 16384
/* Reads per readiness event, so one chatty rank cannot starve the rest. */
#define READS_PER_EVENT 4
/* Output queued for our stdout or stderr beyond which the ranks feeding it
 * are no longer read: they block on their full pipes, we keep our memory. */
#define QUEUE_LIMIT (1u << 20)
/* BatchMode: an ssh that wanted a password or a host-key answer would wait
 * on a terminal it does not own (its process group is not the terminal's);
 * it fails with a message instead. */
#define DEFAULT_RSH "ssh -o BatchMode=yes {host}"
#define AGENT_FLAG "--agent"
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_NOEXEC 127
#define MS 1000000ull
/* Descriptors of the launcher's own: standard streams, /dev/null, the
 * control block, a rank's ends between socketpair and fork. */
#define FD_SPARE 16

enum role { ROLE_LOCAL, ROLE_HEAD, ROLE_AGENT };

enum coll_kind { COLL_FD, COLL_GATHER };

/* One collective: the ranks' contributions, then the result sent to all. */
struct coll {
    enum coll_kind kind;
    int refs;             /* the open slot plus every rank still being sent it */
    int arrived;
    uint32_t len;         /* bytes per rank (gather) */
    unsigned char *data;  /* size * len bytes (gather) */
    int *fds;             /* one per rank of this host, in rank order (exchange) */
};

struct outq {             /* bytes waiting for a descriptor we write */
    int fd;
    int broken;           /* a write failed: later output is dropped */
    size_t off, n, cap;   /* buf[off, n) is still to be written */
    char *buf;
};

struct stream {           /* a rank's stdout or stderr */
    int fd;               /* our read end; -1 once closed */
    int k;                /* 0 stdout, 1 stderr */
    struct outq *to;      /* where it is forwarded */
    size_t left;          /* bytes still taken once the job is over (SIZE_MAX
                             before, which no output uses up) */
    size_t n;             /* bytes of an unfinished line in buf */
    char *buf;
};

struct rank {
    pid_t pid;            /* our child; 0 for a rank on another host */
    int host, local;      /* host index; place among its host's ranks */
    int sock;             /* -1 once closed */
    int hello, finalized, exited, status;
    int joined;           /* has fully contributed to the open collective */
    uint32_t got;         /* gather bytes received so far */
    struct coll *reply;   /* result still being sent to this rank */
    size_t sent;          /* descriptors or bytes of reply already sent */
    int want_write;       /* reply waits for socket space */
    struct stream out[2];
    int hang_ok;          /* said in HELLO that it reports hangs on SIGQUIT */
    int hang_seen;        /* reported since the launcher last asked */
    struct boot_hang hang;
};

struct inbuf {            /* frames read from a channel, not yet handled */
    unsigned char *p;
    size_t n, cap;
};

struct agent {            /* the head's view of one host */
    const char *name;
    pid_t pid;            /* the remote shell */
    int in;               /* channel from the agent; -1 once it closed */
    struct outq out;      /* channel to the agent */
    struct inbuf rx;
    int nranks, nexited;  /* ranks placed there; their exits reported */
    int reaped, status;   /* the remote shell's end */
    int ended;
    uint64_t close_at;    /* channel closed, shell still running: kill it then */
    uint64_t answer_by;   /* the agent has said nothing yet: the job fails then (0: it has) */
};

static struct {
    enum role role;
    int np, tag, bind;
    double timeout, connect_timeout;
    char **argv;
    const char *hostlist, *hostfile, *rsh;
    char **xvars;             /* names given with -x, passed to remote hosts */
    int nxvars;

    struct boot_job_block *job;
    int jobfd, sigfd, devnull;
    pid_t self;
    sigset_t oldmask;
    struct sigaction oldpipe;
    struct rlimit oldnofile;

    struct outq q[2];         /* our stdout and stderr (an agent's stdout is its channel) */
    struct outq *dest[2];     /* the queue for each: one if both are one file */
    int abandoned;            /* gave up delivering output */

    struct rank *r;
    int nlocal;               /* ranks on this host (local, agent) */
    struct pollfd *pfd;
    int nlive;                /* ranks not known to have exited */
    struct coll *open;
    int retry;

    /* head */
    struct agent *ag;
    int nag;
    unsigned flow_sent;       /* streams the agents were told to hold back */
    uint64_t agent_kill_at;
    /* agent */
    struct inbuf up;          /* from the head */
    unsigned paused;          /* streams the head holds back */
    struct coll *xchg;        /* descriptors of the exchange in progress */
    struct coll *gres;        /* allgather result arriving from the head */
    size_t gres_got;
    int reported;             /* a failure went up to the head */
    uint64_t job_by;          /* the job description must have come by then */

    int failed, exit_code;
    int nofin_rank;
    uint64_t timeout_at, nofin_at, term_at, kill_at, stall_at;  /* 0: not armed */
    uint64_t stall_ns;
    /* hang reports being collected (until hang_until; 0: none) */
    uint64_t hang_until;
    int hang_then_fail;       /* the timeout asked: end the job afterwards */
    char hang_why[160];
} L;

static struct chan_buf msg;   /* the channel message being built */

static void fail_job(int rank, int status, int code, unsigned term_ms, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- command line -------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: shoalrun [options] -n N [--] program [args...]\n"
        "Starts N ranks of program as one shoal job, on this host or on several.\n"
        "  -n, --np N        number of ranks, 1..%d\n"
        "      --hosts LIST  run on these hosts: h1,h2:SLOTS,... (numeric addresses\n"
        "                    or names the remote shell knows; never resolved here)\n"
        "      --hostfile F  the hosts, one a line: \"name\", \"name:K\" or \"name slots=K\"\n"
        "      --rsh CMD     remote-shell template, {host} replaced by the host\n"
        "                    (default \"%s\"; e.g. \"ip netns exec {host}\")\n"
        "      --connect-timeout S  end the job when a host's agent has not answered\n"
        "                    S seconds after its remote shell started (default %g)\n"
        "      --tag-output  prefix every output line with [rank]\n"
        "      --timeout S   after S seconds print what each rank waits for, then end\n"
        "                    the job (exit status 124); SIGQUIT prints it at any time\n"
        "      --bind        pin each rank to one allowed CPU of its host (by its index there)\n"
        "  -x VAR=VALUE      set VAR in the ranks' environment (-x VAR: pass it on)\n"
        "      --transport T between hosts: %s (default udp; shm: one host only)\n"
        "  -h, --help        show this help\n"
        "      --version     show the version\n"
        "Exit status: 0 if every rank exited 0; otherwise the first failing rank's\n"
        "status (128+N if killed by signal N), 124 on timeout, 128+N if shoalrun\n"
        "got signal N, 2 for bad usage, 127 if program cannot be run.\n",
        BOOT_MAX_RANKS, DEFAULT_RSH, (double)CONNECT_TIMEOUT_S, util_transport_names());
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

static double parse_seconds(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 1e8)
        bad_usage("%s needs a positive number of seconds, not \"%s\"", opt, s);
    return v;
}

/* -x VAR alone is accepted for mpirun habits: on this host the whole
 * environment is passed to the ranks anyway; other hosts get VAR's value. */
static void parse_env(const char *s)
{
    const char *eq = strchr(s, '=');
    if (eq == s || !*s)
        bad_usage("-x needs VAR=VALUE, not \"%s\"", s);
    char *name = strndup(s, eq ? (size_t)(eq - s) : strlen(s));
    L.xvars = realloc(L.xvars, (size_t)(L.nxvars + 1) * sizeof *L.xvars);
    if (!name || !L.xvars || (eq && setenv(name, eq + 1, 1)))
        bad_usage("cannot set \"%s\": %s", s, strerror(errno));
    L.xvars[L.nxvars++] = name;
}

/* Checked here too, so a typo is a usage error rather than every rank's. */
static void parse_transport(const char *s)
{
    if (util_transport_find(s) < 0)
        bad_usage("--transport is %s, not \"%s\"", util_transport_names(), s);
    setenv(util_config_table(&(size_t){0})[CFG_TRANSPORT].name, s, 1);
}

/* A bad SHOAL_* value (after -x) is reported once, here, rather than by
 * every rank: the ranks would all refuse it. */
static void check_settings(void)
{
    char err[512];
    if (util_config_check(err, sizeof err)) {
        fprintf(stderr, "shoalrun: %s\n", err);
        exit(2);
    }
}

static void parse_args(int argc, char **argv)
{
    enum { OPT_TAG = 256, OPT_TIMEOUT, OPT_BIND, OPT_VERSION, OPT_TRANSPORT, OPT_HOSTS,
           OPT_HOSTFILE, OPT_RSH, OPT_CONNECT_TIMEOUT };
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"tag-output", no_argument, NULL, OPT_TAG},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"bind", no_argument, NULL, OPT_BIND},
        {"transport", required_argument, NULL, OPT_TRANSPORT},
        {"hosts", required_argument, NULL, OPT_HOSTS},
        {"hostfile", required_argument, NULL, OPT_HOSTFILE},
        {"rsh", required_argument, NULL, OPT_RSH},
        {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    L.connect_timeout = CONNECT_TIMEOUT_S;
    /* '+': options end at the program name, which keeps its own options. */
    while ((c = getopt_long(argc, argv, "+:n:x:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (!strcmp(argv[optind - 1], "-np")) { /* mpirun's spelling: getopt read it as -n "p" */
                if (optind >= argc)
                    bad_usage("option -np needs a value");
                optarg = argv[optind++];
            }
            L.np = parse_np(optarg);
            break;
        case 'x': parse_env(optarg); break;
        case OPT_TAG: L.tag = 1; break;
        case OPT_TIMEOUT: L.timeout = parse_seconds("--timeout", optarg); break;
        case OPT_CONNECT_TIMEOUT: L.connect_timeout = parse_seconds("--connect-timeout", optarg); break;
        case OPT_BIND: L.bind = 1; break;
        case OPT_TRANSPORT: parse_transport(optarg); break;
        case OPT_HOSTS: L.hostlist = optarg; break;
        case OPT_HOSTFILE: L.hostfile = optarg; break;
        case OPT_RSH: L.rsh = optarg; break;
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
    if (L.hostlist && L.hostfile)
        bad_usage("give --hosts or --hostfile, not both");
    if (L.rsh && !L.hostlist && !L.hostfile)
        bad_usage("--rsh needs --hosts or --hostfile");
    L.role = L.hostlist || L.hostfile ? ROLE_HEAD : ROLE_LOCAL;
    L.argv = argv + optind;
}

/* Whether prog can be run here, searched once as execvp would; 0 or -1
 * with the reason in why. */
static int find_program(const char *prog, char *why, size_t n)
{
    if (strchr(prog, '/')) {
        if (access(prog, X_OK) == 0)
            return 0;
        snprintf(why, n, "cannot run %s: %s", prog, strerror(errno));
        return -1;
    }
    const char *path = getenv("PATH");
    if (!path)
        return 0; /* execvp falls back to its default search path */
    for (const char *p = path;; p++) {
        const char *end = strchrnul(p, ':');
        char full[4096];
        int k = snprintf(full, sizeof full, "%.*s/%s", end == p ? 1 : (int)(end - p),
                         end == p ? "." : p, prog);
        if (k > 0 && (size_t)k < sizeof full && access(full, X_OK) == 0)
            return 0;
        if (!*end)
            break;
        p = end;
    }
    snprintf(why, n, "%s: command not found", prog);
    return -1;
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
 * take it a little at a time, which waits for the device, not for a user.)
 * The launch channels are written the same way. */

static void queue_init(void)
{
    struct stat so, se;
    L.q[0] = (struct outq){.fd = 1};
    L.q[1] = (struct outq){.fd = 2};
    L.dest[0] = &L.q[0];
    /* One queue for "2>&1" and the like keeps each line whole and stdout
     * and stderr in the order they were forwarded, as one writer would.
     * An agent's stdout is its channel, which carries only frames. */
    int same = fstat(1, &so) == 0 && fstat(2, &se) == 0 && so.st_dev == se.st_dev &&
               so.st_ino == se.st_ino;
    L.dest[1] = same && L.role != ROLE_AGENT ? &L.q[0] : &L.q[1];
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

/* ---- launch channel -------------------------------------------------------- */

/* Queues the message built in msg on a channel. */
static void chan_send(struct outq *q)
{
    if (chan_end(&msg)) {
        fputs("shoalrun: out of memory or a launch message too big\n", stderr);
        exit(1);
    }
    queue_put(q, msg.p, msg.n);
}

/* The head's channel to every agent still there. */
static void chan_broadcast(void)
{
    for (int i = 0; i < L.nag; i++)
        if (!L.ag[i].ended)
            chan_send(&L.ag[i].out);
}

/* An agent's channel to the head is its stdout. */
#define UPLINK (&L.q[0])

static void send_event(const struct rank *r, enum chan_event ev, uint32_t value)
{
    chan_begin(&msg, CHAN_EVENT);
    chan_u32(&msg, (uint32_t)rank_of(r));
    chan_u32(&msg, ev);
    chan_u32(&msg, value);
    chan_send(UPLINK);
}

/* Reads what fd has now (a few reads at most) and hands every complete frame
 * to fn.  Returns 1 while the channel is open, 0 at its end or on a read
 * error, -1 with *why for a malformed frame or one fn refused. */
static int read_channel(int fd, struct inbuf *b, int (*fn)(void *, uint16_t, struct chan_reader *),
                        void *ctx, const char **why)
{
    for (int i = 0; i < READS_PER_EVENT; i++) {
        if (b->cap - b->n < 65536) {
            b->cap = b->cap ? 2 * b->cap : 131072;
            b->p = need(realloc(b->p, b->cap));
        }
        ssize_t got = read(fd, b->p + b->n, b->cap - b->n);
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            return 1;
        if (got <= 0)
            return 0;
        b->n += (size_t)got;
        size_t off = 0;
        for (;;) {
            uint16_t type;
            struct chan_reader m;
            long k = chan_frame(b->p + off, b->n - off, &type, &m, why);
            if (k < 0)
                return -1;
            if (k == 0)
                break;
            off += (size_t)k;
            if (fn(ctx, type, &m)) {
                *why = "a message that does not fit its type";
                return -1;
            }
        }
        memmove(b->p, b->p + off, b->n - off);
        b->n -= off;
    }
    return 1;
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

/* Whole lines (or pieces of an overlong one) of rank's stream k, to where
 * the user sees them; an agent sends them to the head, which tags them. */
static void emit(int rank, int k, const char *p, size_t n)
{
    if (L.role == ROLE_AGENT) {
        chan_begin(&msg, CHAN_OUTPUT);
        chan_u32(&msg, (uint32_t)rank);
        chan_u32(&msg, (uint32_t)k);
        chan_bytes(&msg, p, n);
        chan_send(UPLINK);
    } else if (L.tag) {
        emit_tagged(L.dest[k], rank, p, n);
    } else {
        queue_put(L.dest[k], p, n);
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
    emit(rank, s->k, s->buf, done);
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

/* The head holds an agent's streams back while its own queue for them is
 * full; once the ranks are gone what their pipes held is taken regardless,
 * which is bounded, so the agent can finish. */
static int wants_input(const struct stream *s)
{
    return s->fd >= 0 && queued(s->to) < QUEUE_LIMIT &&
           (!(L.paused >> s->k & 1) || s->left != SIZE_MAX);
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

static void take_all_pending(struct rank *r)
{
    take_pending(&r->out[0], rank_of(r));
    take_pending(&r->out[1], rank_of(r));
}

/* ---- ending the job -------------------------------------------------------- */

/* The head's ranks are the agents' to signal. */
static void signal_ranks(int sig)
{
    for (int i = 0; i < L.np; i++) {
        const struct rank *r = &L.r[i];
        /* SIGQUIT asks for a hang report: only of a rank that has the
         * handler (it would dump core otherwise), is not done, and has not
         * reported already (its own report started the collection). */
        if (sig == SIGQUIT && (!r->hang_ok || r->finalized || r->hang_seen))
            continue;
        if (r->pid > 0 && !r->exited)
            kill(r->pid, sig);
    }
    if (L.nag == 0)
        return;
    chan_begin(&msg, CHAN_SIGNAL);
    chan_u32(&msg, (uint32_t)sig);
    chan_broadcast();
    if (sig == SIGKILL && !L.agent_kill_at)
        L.agent_kill_at = util_now_ns() + AGENT_GRACE_MS * MS;
}

static void coll_put(struct coll *c)
{
    if (!c || --c->refs > 0)
        return;
    if (c->fds)
        for (int i = 0; i < L.nlocal; i++)
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
    struct coll **slots[] = {&L.open, &L.xchg, &L.gres};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        coll_put(*slots[i]);
        *slots[i] = NULL;
    }
}

/* Records the job's first failure where the ranks look for it (and, from
 * the head, in every agent's control block) and stops serving them. */
static void record_failure(int rank, int status, const char *reason)
{
    struct boot_job_block *j = L.job;
    snprintf(j->failed_reason, sizeof j->failed_reason, "%s", reason);
    j->failed_rank = rank;
    j->failed_status = status;
    atomic_store_explicit(&j->failed, 1, memory_order_release);
    L.failed = 1;
    cut_off_ranks();
    if (L.nag == 0)
        return;
    chan_begin(&msg, CHAN_FAILED);
    chan_u32(&msg, (uint32_t)rank);
    chan_u32(&msg, (uint32_t)status);
    chan_bytes(&msg, reason, strlen(reason));
    chan_broadcast();
}

/* The pid to name in a verdict: our child's, or the one an agent reported. */
static int verdict_pid(int rank)
{
    return L.role == ROLE_HEAD ? L.job->pid[rank] : (int)L.r[rank].pid;
}

/* The judge's decision that the job failed: recorded, reported on our
 * stderr, the remaining ranks ended after term_ms and KILL_GRACE_MS.  rank
 * is -1 when the launcher itself ends the job (timeout, signal, start-up
 * failure).  An agent only reports its finding; the head decides. */
static void fail_job(int rank, int status, int code, unsigned term_ms, const char *fmt, ...)
{
    if (L.failed || L.reported)
        return;
    char why[sizeof L.job->failed_reason];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    /* Whatever the rank said about its failure comes before the verdict. */
    if (rank >= 0)
        take_all_pending(&L.r[rank]);
    if (L.role == ROLE_AGENT) {
        chan_begin(&msg, CHAN_REPORT);
        chan_u32(&msg, (uint32_t)rank);
        chan_u32(&msg, (uint32_t)status);
        chan_u32(&msg, (uint32_t)code);
        chan_u32(&msg, term_ms);
        chan_bytes(&msg, why, strlen(why));
        chan_send(UPLINK);
        L.reported = 1;
        return;
    }
    L.exit_code = code;
    if (rank >= 0 && L.role == ROLE_HEAD)
        say("rank %d (pid %d on host %s) %s%s", rank, verdict_pid(rank),
            L.ag[L.r[rank].host].name, why, L.nlive > 0 ? "; ending the job" : "");
    else if (rank >= 0)
        say("rank %d (pid %d) %s%s", rank, verdict_pid(rank), why,
            L.nlive > 0 ? "; ending the job" : "");
    else
        say("%s%s", why, L.nlive > 0 ? "; ending ranks" : "");
    L.term_at = util_now_ns() + term_ms * MS;
    L.kill_at = L.term_at + KILL_GRACE_MS * MS;
    record_failure(rank, status, why);
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
        c->fds = xcalloc((size_t)L.nlocal, sizeof *c->fds);
        memset(c->fds, -1, (size_t)L.nlocal * sizeof *c->fds);
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
            total = (size_t)L.nlocal;
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

/* A complete result to every agent: the head keeps no descriptors, so an
 * exchange's result is only the news that everyone joined. */
static void send_result(const struct coll *c)
{
    if (c->kind == COLL_FD) {
        chan_begin(&msg, CHAN_EXCHANGED);
        chan_broadcast();
        return;
    }
    size_t total = (size_t)L.np * c->len, off = 0;
    do {
        size_t step = total - off < BOOT_PROTO_MAX_PAYLOAD ? total - off : BOOT_PROTO_MAX_PAYLOAD;
        chan_begin(&msg, CHAN_GATHERED);
        chan_u32(&msg, c->len);
        chan_bytes(&msg, c->data + off, step);
        chan_broadcast();
        off += step;
    } while (off < total);
}

/* Hands a complete result to the ranks here and the agents there. */
static void deliver(struct coll *c)
{
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
    if (L.nag > 0)
        send_result(c);
    coll_put(c);
    for (int i = 0; i < L.np; i++)
        flush_reply(&L.r[i]);
}

static void coll_arrive(struct rank *r)
{
    struct coll *c = L.open;
    r->joined = 1;
    if (++c->arrived < L.np)
        return;
    L.open = NULL;
    deliver(c);
}

/* ---- the judge: what ranks do, wherever they run --------------------------- */

/* fd is -1 in the head: descriptors stay on their host. */
static void judge_fd(struct rank *r, int fd)
{
    struct coll *c = coll_join(r, COLL_FD, 0);
    if (!c) {
        if (fd >= 0)
            close(fd);
        return;
    }
    if (fd >= 0)
        c->fds[r->local] = fd;
    coll_arrive(r);
}

static void judge_gather(struct rank *r, uint32_t len, const void *p, size_t n)
{
    struct coll *c = coll_join(r, COLL_GATHER, len);
    if (!c)
        return;
    if (n > c->len - r->got) {
        protocol_error(r, "more allgather data than announced");
        return;
    }
    memcpy(c->data + (size_t)rank_of(r) * c->len + r->got, p, n);
    r->got += (uint32_t)n;
    if (r->got == c->len)
        coll_arrive(r);
}

static void judge_abort(struct rank *r, uint32_t arg, const char *text, size_t len)
{
    int code = (int)(arg & 0xff);
    while (len > 0 && text[len - 1] == '\n')
        len--;
    fail_job(rank_of(r), W_EXITCODE(code, 0), code ? code : 1, TERM_GRACE_MS,
             "aborted with status %d: %.*s", code, (int)len, text);
}

static int unfinalized_live_rank(void)
{
    for (int i = 0; i < L.np; i++)
        if (!L.r[i].exited && !L.r[i].finalized)
            return 1;
    return 0;
}

static void rank_gone(struct rank *r, int status)
{
    r->exited = 1;
    r->status = status;
    L.nlive--;
}

static void judge_exit(struct rank *r)
{
    if (L.failed)
        return;
    char why[128];
    int status = r->status;
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

/* ---- hang reports (docs/BOOT.md "When a job hangs") -------------------------- */

/* A rank whose report the collection still waits for: joined, running,
 * not finalized, silent so far. */
static int hang_awaited(const struct rank *r)
{
    return r->hang_ok && !r->finalized && !r->exited && !r->hang_seen;
}

static void hang_say_rank(const struct rank *r)
{
    int i = rank_of(r);
    char st[128];
    if (r->exited) {
        describe_status(r->status, st, sizeof st);
        say("  rank %d %s: %s", i, r->finalized ? "finished" : "ended without finalizing", st);
    } else if (r->finalized) {
        say("  rank %d finished (finalized)", i);
    } else if (r->hang_seen && L.open && r->joined) {
        char who[160];
        size_t at = 0;
        for (int j = 0; j < L.np && at < sizeof who - 16; j++)
            if (!L.r[j].joined && !L.r[j].exited)
                at += (size_t)snprintf(who + at, sizeof who - at, "%s%d", at ? ", " : "", j);
        say("  rank %d waits in %s: %s; the launcher's exchange waits for rank%s %s", i, r->hang.call, r->hang.what,
            strchr(who, ',') ? "s" : "", at ? who : "(none)");
    } else if (r->hang_seen) {
        say("  rank %d waits in %s: %s", i, r->hang.call, r->hang.what);
    } else if (r->hang_ok) {
        say("  rank %d did not report (computing outside shoal's waits, or stopped)", i);
    } else if (r->hello) {
        say("  rank %d does not report hangs (not started by shoal_init)", i);
    } else {
        say("  rank %d has not joined the job (before shoal_init)", i);
    }
}

/* The job-wide summary: every rank's state, the wait-for graph, cycles. */
static void hang_summary(void)
{
    int *waits_for = xcalloc((size_t)L.np, sizeof *waits_for);
    say("what the ranks wait for (%s):", L.hang_why);
    for (int i = 0; i < L.np; i++) {
        const struct rank *r = &L.r[i];
        hang_say_rank(r);
        waits_for[i] = r->hang_seen && !r->exited && !r->finalized ? r->hang.waits_for : -1;
        for (int j = 0; waits_for[i] < 0 && r->hang_seen && L.open && r->joined && j < L.np; j++)
            if (!L.r[j].joined && !L.r[j].exited)
                waits_for[i] = j; /* in the launcher's exchange: the first rank it lacks */
    }
    char text[400];
    if (waitgraph_edges(waits_for, L.np, text, sizeof text))
        say("wait-for graph: %s", text);
    else
        say("wait-for graph: no rank names the rank it waits for");
    if (waitgraph_cycles(waits_for, L.np, text, sizeof text))
        say("deadlock: cycle %s", text);
    free(waits_for);
}

static void hang_finish(void)
{
    L.hang_until = 0;
    hang_summary();
    if (L.hang_then_fail)
        fail_job(-1, 0, EXIT_TIMEOUT, 0, "job timed out after %g s", L.timeout);
    L.hang_then_fail = 0;
}

static void hang_check_done(void)
{
    if (!L.hang_until)
        return;
    for (int i = 0; i < L.np; i++)
        if (hang_awaited(&L.r[i]))
            return;
    hang_finish();
}

/* Asks every running rank for its report (SIGQUIT) and collects them for
 * at most HANG_COLLECT_MS; then_fail: end the job after the summary;
 * reporter: the rank whose own report started it (not asked again). */
static void hang_ask(int then_fail, struct rank *reporter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void hang_ask(int then_fail, struct rank *reporter, const char *fmt, ...)
{
    if (L.failed)
        return; /* the job is ending already */
    L.hang_then_fail |= then_fail;
    if (L.hang_until)
        return; /* already collecting: this ask joins it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L.hang_why, sizeof L.hang_why, fmt, ap);
    va_end(ap);
    say("%s; asking the ranks what they wait for", L.hang_why);
    for (int i = 0; i < L.np; i++)
        L.r[i].hang_seen = &L.r[i] == reporter;
    L.hang_until = util_now_ns() + HANG_COLLECT_MS * MS;
    signal_ranks(SIGQUIT);
    hang_check_done();
}

/* A report from rank r.  One of its own (SHOAL_HANG_REPORT) asks all the
 * others; an answer that comes after its collection ended (the rank was
 * computing) was printed by the rank and is left at that: taking it as a
 * new ask would chain collections for as long as some rank answers late. */
static void judge_hang(struct rank *r, uint32_t why, const struct boot_hang *report)
{
    if (L.failed || (!L.hang_until && why != BOOT_HANG_TIMER))
        return;
    r->hang = *report;
    r->hang.call[sizeof r->hang.call - 1] = '\0';
    r->hang.what[sizeof r->hang.what - 1] = '\0';
    if (!L.hang_until)
        hang_ask(0, r, "rank %d made no progress for SHOAL_HANG_REPORT seconds", rank_of(r));
    r->hang_seen = 1;
    hang_check_done();
}

/* ---- messages from ranks on this host --------------------------------------- */

/* Each request goes to the judge: here in a local launcher, up the channel
 * in an agent (which keeps only the descriptors, which cannot travel). */

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
    r->hang_ok = (h->arg & BOOT_HELLO_HANG) != 0;
    /* The process that joined, which differs from the one we started when
     * the program runs under a wrapper (sh -c, valgrind, ...). */
    L.job->pid[rank_of(r)] = (int32_t)hello.pid;
    if (L.role == ROLE_AGENT)
        send_event(r, CHAN_EV_HELLO, h->arg & BOOT_HELLO_HANG);
}

static void on_fd(struct rank *r, int fd)
{
    if (L.role != ROLE_AGENT) {
        judge_fd(r, fd);
        return;
    }
    if (!L.xchg)
        L.xchg = coll_new(COLL_FD, 0);
    if (L.xchg->fds[r->local] >= 0)
        close(fd); /* a second request: the head's judge says so */
    else
        L.xchg->fds[r->local] = fd;
    send_event(r, CHAN_EV_FD, 0);
}

/* An agent passes a rank's message up to the head as it came: the rank,
 * the message's argument, its bytes. */
static void forward_up(enum chan_type type, struct rank *r, const struct boot_msg_hdr *h, const void *p)
{
    chan_begin(&msg, type);
    chan_u32(&msg, (uint32_t)rank_of(r));
    chan_u32(&msg, h->arg);
    chan_bytes(&msg, p, h->len);
    chan_send(UPLINK);
}

static void on_gather(struct rank *r, const struct boot_msg_hdr *h, const void *p)
{
    if (L.role != ROLE_AGENT)
        judge_gather(r, h->arg, p, h->len);
    else
        forward_up(CHAN_GATHER, r, h, p);
}

static void on_abort(struct rank *r, const struct boot_msg_hdr *h, const char *text)
{
    if (L.role != ROLE_AGENT) {
        judge_abort(r, h->arg, text, h->len);
        return;
    }
    take_all_pending(r); /* its complaint goes up before its abort */
    forward_up(CHAN_ABORT, r, h, text);
}

static void on_finalize(struct rank *r)
{
    r->finalized = 1;
    if (L.role == ROLE_AGENT)
        send_event(r, CHAN_EV_FINALIZE, 0);
}

static void on_hang(struct rank *r, const struct boot_msg_hdr *h, const void *p)
{
    if (h->len != sizeof(struct boot_hang)) {
        protocol_error(r, "HANG of the wrong length");
        return;
    }
    take_all_pending(r); /* the rank's own report comes before the summary */
    if (L.role != ROLE_AGENT) {
        struct boot_hang report;
        memcpy(&report, p, sizeof report);
        judge_hang(r, h->arg, &report);
        return;
    }
    forward_up(CHAN_HANG, r, h, p);
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
    case BOOT_MSG_FINALIZE: on_finalize(r); break;
    case BOOT_MSG_HANG: on_hang(r, h, p); break;
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

static void rank_exited(struct rank *r, int status)
{
    rank_gone(r, status);
    /* Its last messages (ABORT, FINALIZE) were sent before it exited; take
     * them in before judging the exit.  fail_job takes in its last output. */
    serve(r);
    close_sock(r);
    if (L.role != ROLE_AGENT) {
        judge_exit(r);
        return;
    }
    take_all_pending(r);
    send_event(r, CHAN_EV_EXIT, (uint32_t)status);
}

/* ---- an agent's channel from the head --------------------------------------- */

static void make_job_block(uint64_t job_id, int nhosts);
static void spawn_ranks(void);
static nfds_t npfd(void);
static int fd_shortage(char *why, size_t len);

static int agent_job(struct chan_reader *m)
{
    if (L.job)
        return -1;
    uint64_t id = chan_get_u64(m);
    uint32_t np = chan_get_u32(m), nhosts = chan_get_u32(m), me = chan_get_u32(m);
    uint32_t flags = chan_get_u32(m);
    if (m->bad || np < 1 || np > BOOT_MAX_RANKS || nhosts < 1 || nhosts > np || me >= nhosts)
        return -1;
    L.np = (int)np;
    L.bind = flags & 1;
    L.r = xcalloc(np, sizeof *L.r);
    for (uint32_t i = 0; i < np; i++) {
        uint16_t h = chan_get_u16(m);
        if (h >= nhosts)
            return -1;
        /* Only this host's ranks have a place here (-1: spawn skips it). */
        L.r[i] = (struct rank){.sock = -1, .host = h, .local = h == me ? L.nlocal++ : -1,
                               .out = {{.fd = -1}, {.fd = -1}}};
    }
    uint32_t argc = chan_get_u32(m);
    if (argc < 1 || argc > m->n)
        return -1;
    /* Copies: the channel's buffer is reused for the next frames. */
    L.argv = xcalloc(argc + 1, sizeof *L.argv);
    for (uint32_t i = 0; i < argc; i++)
        L.argv[i] = need(strdup(chan_get_str(m)));
    const char *cwd = chan_get_str(m);
    uint32_t nenv = chan_get_u32(m);
    for (uint32_t i = 0; i < nenv && !m->bad; i++) {
        const char *var = chan_get_str(m), *eq = strchr(var, '=');
        char *name = eq && eq > var ? need(strndup(var, (size_t)(eq - var))) : NULL;
        if (!name || setenv(name, eq + 1, 1))
            m->bad = 1;
        free(name);
    }
    if (!chan_done(m))
        return -1;
    make_job_block(id, (int)nhosts);
    for (int i = 0; i < L.np; i++)
        L.job->host[i] = (uint16_t)L.r[i].host;
    L.pfd = need(realloc(L.pfd, npfd() * sizeof *L.pfd));
    char why[256];
    if (chdir(cwd))
        fail_job(-1, 0, 1, 0, "cannot change to directory %s: %s", cwd, strerror(errno));
    else if (find_program(L.argv[0], why, sizeof why) || fd_shortage(why, sizeof why))
        fail_job(-1, 0, EXIT_NOEXEC, 0, "%s", why);
    else
        spawn_ranks();
    return 0;
}

/* An allgather result arrives in pieces; the ranks get it once it is whole. */
static int agent_gathered(struct chan_reader *m)
{
    uint32_t len = chan_get_u32(m);
    size_t n;
    const void *p = chan_get_rest(m, &n);
    if (m->bad)
        return -1;
    if (L.failed)
        return 0;
    if (!L.gres) {
        L.gres = coll_new(COLL_GATHER, len);
        L.gres_got = 0;
    }
    size_t total = (size_t)L.np * len;
    if (len != L.gres->len || n > total - L.gres_got)
        return -1;
    memcpy(L.gres->data + L.gres_got, p, n);
    L.gres_got += n;
    if (L.gres_got == total) {
        struct coll *c = L.gres;
        L.gres = NULL;
        deliver(c);
    }
    return 0;
}

static int agent_exchanged(struct chan_reader *m)
{
    if (!chan_done(m) || (!L.xchg && !L.failed))
        return -1;
    if (L.xchg) {
        struct coll *c = L.xchg;
        L.xchg = NULL;
        deliver(c);
    }
    return 0;
}

static int on_head_msg(void *ctx, uint16_t type, struct chan_reader *m)
{
    (void)ctx;
    if (type != CHAN_JOB && !L.job)
        return -1;
    switch (type) {
    case CHAN_JOB: return agent_job(m);
    case CHAN_GATHERED: return agent_gathered(m);
    case CHAN_EXCHANGED: return agent_exchanged(m);
    case CHAN_FAILED: {
        int32_t rank = (int32_t)chan_get_u32(m);
        int32_t status = (int32_t)chan_get_u32(m);
        size_t n;
        const char *text = chan_get_rest(m, &n);
        char why[sizeof L.job->failed_reason];
        snprintf(why, sizeof why, "%.*s", (int)n, text ? text : "");
        if (m->bad || rank < -1 || rank >= L.np)
            return -1;
        if (!L.failed)
            record_failure(rank, status, why);
        return 0;
    }
    case CHAN_SIGNAL: {
        uint32_t sig = chan_get_u32(m);
        if (!chan_done(m) || sig == 0 || sig >= 65)
            return -1;
        signal_ranks((int)sig);
        return 0;
    }
    case CHAN_FLOW:
        L.paused = chan_get_u32(m) & 3;
        return chan_done(m) ? 0 : -1;
    default:
        return -1;
    }
}

/* Without its head the job is over: the ranks go at once. */
static _Noreturn void head_gone(const char *why)
{
    fprintf(stderr, "shoalrun: agent: %s; ending the ranks on this host\n", why);
    signal_ranks(SIGKILL);
    exit(1);
}

static void read_head(void)
{
    const char *why = "the head closed the launch channel";
    if (read_channel(0, &L.up, on_head_msg, NULL, &why) <= 0)
        head_gone(why);
}

/* ---- the head's channels from its agents ------------------------------------ */

static void agent_ended(struct agent *a);

/* The rank a message from agent a names, which must live on a's host. */
static struct rank *agent_rank(struct agent *a, uint32_t rank)
{
    if (rank >= (uint32_t)L.np || L.r[rank].host != (int)(a - L.ag))
        return NULL;
    return &L.r[rank];
}

static int on_event(struct agent *a, struct chan_reader *m)
{
    struct rank *r = agent_rank(a, chan_get_u32(m));
    uint32_t ev = chan_get_u32(m), value = chan_get_u32(m);
    if (!chan_done(m) || !r || r->exited)
        return -1;
    switch (ev) {
    case CHAN_EV_STARTED: L.job->pid[rank_of(r)] = (int32_t)value; break;
    case CHAN_EV_HELLO:
        r->hello = 1;
        r->hang_ok = (value & BOOT_HELLO_HANG) != 0;
        break;
    case CHAN_EV_FINALIZE: r->finalized = 1; break;
    case CHAN_EV_FD:
        if (!L.failed)
            judge_fd(r, -1);
        break;
    case CHAN_EV_EXIT:
        a->nexited++;
        rank_gone(r, (int)value);
        judge_exit(r);
        break;
    default: return -1;
    }
    return 0;
}

static int on_agent_msg(void *ctx, uint16_t type, struct chan_reader *m)
{
    struct agent *a = ctx;
    a->answer_by = 0;
    if (type == CHAN_EVENT)
        return on_event(a, m);
    if (type == CHAN_REPORT) {
        int32_t rank = (int32_t)chan_get_u32(m);
        int status = (int)chan_get_u32(m), code = (int)chan_get_u32(m);
        uint32_t term_ms = chan_get_u32(m);
        size_t n;
        const char *text = chan_get_rest(m, &n);
        if (m->bad || (rank != -1 && !agent_rank(a, (uint32_t)rank)) || term_ms > TERM_GRACE_MS)
            return -1;
        if (rank >= 0)
            fail_job(rank, status, code, term_ms, "%.*s", (int)n, text);
        else
            fail_job(-1, status, code, term_ms, "host %s: %.*s", a->name, (int)n, text);
        return 0;
    }
    struct rank *r = agent_rank(a, chan_get_u32(m));
    uint32_t arg = chan_get_u32(m);
    size_t n;
    const char *p = chan_get_rest(m, &n);
    if (m->bad || !r)
        return -1;
    switch (type) {
    case CHAN_GATHER:
        if (!L.failed)
            judge_gather(r, arg, p, n);
        return 0;
    case CHAN_ABORT:
        if (!L.failed)
            judge_abort(r, arg, p, n);
        return 0;
    case CHAN_OUTPUT:
        if (arg > 1)
            return -1;
        emit(rank_of(r), (int)arg, p, n);
        return 0;
    case CHAN_HANG: {
        struct boot_hang report;
        if (n != sizeof report)
            return -1;
        memcpy(&report, p, sizeof report);
        judge_hang(r, arg, &report);
        return 0;
    }
    default:
        return -1;
    }
}

static void read_agent(struct agent *a)
{
    const char *why = NULL;
    int open = read_channel(a->in, &a->rx, on_agent_msg, a, &why);
    if (open > 0)
        return;
    if (open < 0) {
        fail_job(-1, 0, 1, 0, "host %s: the agent broke the launch protocol: %s", a->name, why);
        kill(a->pid, SIGKILL);
    }
    close(a->in);
    a->in = -1;
    if (a->reaped)
        agent_ended(a);
    else
        a->close_at = util_now_ns() + AGENT_GRACE_MS * MS;
}

/* The agent of a is gone (its channel closed and its shell reaped, or not
 * reaped in time).  Before all its ranks were reported gone, that fails the
 * job, and its ranks count as gone: they die with their agent. */
static void agent_ended(struct agent *a)
{
    if (a->ended)
        return;
    a->ended = 1;
    a->close_at = 0;
    close(a->out.fd);
    a->out.broken = 1;
    if (a->nexited == a->nranks)
        return;
    char how[160] = "its channel closed, the remote shell did not exit";
    if (a->reaped) {
        char st[128];
        describe_status(a->status, st, sizeof st);
        snprintf(how, sizeof how, "the remote shell %s", st);
    }
    /* Like a rank failure: the others get the grace to notice and say so. */
    fail_job(-1, 0, 1, TERM_GRACE_MS, "lost the agent on host %s (%s)", a->name, how);
    for (int i = 0; i < L.np; i++)
        if (L.r[i].host == (int)(a - L.ag) && !L.r[i].exited)
            rank_gone(&L.r[i], 0);
    a->nexited = a->nranks;
}

/* The head holds an agent's output back while its own queue for that
 * stream is full (never the channel itself: collectives and verdicts must
 * keep flowing). */
static void update_flow(void)
{
    unsigned mask = 0;
    for (int k = 0; k < 2; k++)
        mask |= (unsigned)(queued(L.dest[k]) >= QUEUE_LIMIT) << k;
    if (mask == L.flow_sent)
        return;
    L.flow_sent = mask;
    chan_begin(&msg, CHAN_FLOW);
    chan_u32(&msg, mask);
    chan_broadcast();
}

/* ---- exits and signals ----------------------------------------------------- */

static void reap(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < L.np; i++)
            if (L.r[i].pid == pid && !L.r[i].exited)
                rank_exited(&L.r[i], status);
        for (int i = 0; i < L.nag; i++) {
            struct agent *a = &L.ag[i];
            if (a->pid != pid || a->reaped)
                continue;
            a->reaped = 1;
            a->status = status;
            if (a->in < 0)
                agent_ended(a);
        }
    }
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
        if (sig == SIGQUIT) { /* a report, not an end: the head collects them */
            if (L.role == ROLE_AGENT)
                signal_ranks(SIGQUIT);
            else if (!L.failed)
                hang_ask(0, NULL, "asked by SIGQUIT");
            continue;
        }
        if (L.failed || L.reported)
            signal_ranks(SIGKILL); /* asked again: stop waiting for them */
        else
            fail_job(-1, 0, 128 + sig, 0, "interrupted by signal %d (%s)", sig, strsignal(sig));
        if (L.nlive == 0 && !L.abandoned && L.role != ROLE_AGENT)
            abandon_output("interrupted"); /* only our output was left to wait for */
    }
    reap();
}

/* The remote shell of a runs but its agent never spoke: a host that took
 * the connection and never ran the command, or a shell that waits for a
 * password.  Without this the job would wait for ever. */
static void agent_silent(struct agent *a)
{
    a->answer_by = 0;
    fail_job(-1, 0, 1, 0,
             "host %s: no answer from shoalrun's agent there %g s after its remote shell started (%s): "
             "it took the connection but never ran the command, or asks for a password (--connect-timeout)",
             a->name, L.connect_timeout, L.rsh ? L.rsh : DEFAULT_RSH);
    kill(a->pid, SIGKILL);
}

static void run_timers(uint64_t now)
{
    if (L.timeout_at && now >= L.timeout_at) {
        L.timeout_at = 0;
        hang_ask(1, NULL, "job timed out after %g s", L.timeout);
    }
    if (L.hang_until && now >= L.hang_until)
        hang_finish();
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
    if (L.agent_kill_at && now >= L.agent_kill_at) {
        L.agent_kill_at = 0;
        for (int i = 0; i < L.nag; i++)
            if (!L.ag[i].ended && !L.ag[i].reaped)
                kill(L.ag[i].pid, SIGKILL);
    }
    for (int i = 0; i < L.nag; i++)
        if (L.ag[i].answer_by && now >= L.ag[i].answer_by)
            agent_silent(&L.ag[i]);
    for (int i = 0; i < L.nag; i++)
        if (L.ag[i].close_at && now >= L.ag[i].close_at) {
            kill(L.ag[i].pid, SIGKILL);
            agent_ended(&L.ag[i]);
        }
    if (L.job_by && now >= L.job_by && !L.job)
        head_gone("no job description from the head");
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
    uint64_t t[] = {L.timeout_at, L.nofin_at, L.term_at, L.kill_at, L.stall_at, L.agent_kill_at,
                    L.job ? 0 : L.job_by, L.hang_until};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i] && t[i] < next)
            next = t[i];
    for (int i = 0; i < L.nag; i++) {
        if (L.ag[i].close_at && L.ag[i].close_at < next)
            next = L.ag[i].close_at;
        if (L.ag[i].answer_by && L.ag[i].answer_by < next)
            next = L.ag[i].answer_by;
    }
    if (L.retry)
        return RETRY_MS;
    if (next == UINT64_MAX)
        return -1;
    return next <= now ? 0 : (int)((next - now + MS - 1) / MS);
}

/* ---- main loop ----------------------------------------------------------- */

/* pfd[0] is the signalfd, pfd[1] and pfd[2] our stdout and stderr (an
 * agent's stdout is its channel to the head), pfd[3] the channel from the
 * head; agent i owns pfd[4 + 2i ..]: channel in, channel out; rank i owns
 * the three after those: socket, stdout, stderr.  A descriptor we do not
 * want to hear from is left out (-1), as a hung-up pipe would wake poll
 * anyway. */
static struct pollfd *rank_pfd(int i)
{
    return &L.pfd[4 + 2 * L.nag + 3 * i];
}

static nfds_t npfd(void)
{
    return 4 + 2 * (nfds_t)L.nag + 3 * (nfds_t)L.np;
}

/* 0 when the launcher's descriptors at their peak fit its limit: its poll
 * set (whose length counts against the limit too), one descriptor per rank
 * of this host during an exchange, and its own.  Else what to raise, in
 * why: past the limit the job would fail later, and misleadingly. */
static int fd_shortage(char *why, size_t len)
{
    struct rlimit rl;
    unsigned long long need = npfd() + (unsigned long long)L.nlocal + FD_SPARE;
    if (getrlimit(RLIMIT_NOFILE, &rl) || need <= rl.rlim_cur)
        return 0;
    snprintf(why, len, "%d ranks need %llu open files in the launcher, more than RLIMIT_NOFILE's hard "
             "limit of %llu allows: raise it (ulimit -n %llu or more) before starting shoalrun",
             L.np, need, (unsigned long long)rl.rlim_max, need);
    return -1;
}

static void fill_pollfds(void)
{
    L.pfd[0] = (struct pollfd){.fd = L.sigfd, .events = POLLIN};
    for (int k = 0; k < 2; k++)
        L.pfd[1 + k] = (struct pollfd){.fd = queued(&L.q[k]) ? L.q[k].fd : -1, .events = POLLOUT};
    L.pfd[3] = (struct pollfd){.fd = L.role == ROLE_AGENT ? 0 : -1, .events = POLLIN};
    for (int i = 0; i < L.nag; i++) {
        struct agent *a = &L.ag[i];
        int writing = !a->ended && queued(&a->out);
        L.pfd[4 + 2 * i] = (struct pollfd){.fd = a->in, .events = POLLIN};
        L.pfd[5 + 2 * i] = (struct pollfd){.fd = writing ? a->out.fd : -1, .events = POLLOUT};
    }
    for (int i = 0; i < L.np; i++) {
        struct rank *r = &L.r[i];
        struct pollfd *p = rank_pfd(i);
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
    if (L.pfd[3].revents)
        read_head();
    for (int i = 0; i < L.nag; i++) {
        if (L.pfd[5 + 2 * i].revents)
            flush_queue(&L.ag[i].out);
        if (L.pfd[4 + 2 * i].revents && L.ag[i].in >= 0)
            read_agent(&L.ag[i]);
    }
    for (int i = 0; i < L.np; i++) {
        struct rank *r = &L.r[i];
        const struct pollfd *p = rank_pfd(i);
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
    if (L.nag > 0)
        update_flow();
    fill_pollfds();
    int n = poll(L.pfd, npfd(), poll_timeout_ms(util_now_ns()));
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
     * --timeout; a signal gives up at once (on_signals).  An agent's reader
     * is the head, which always reads. */
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

static int agents_running(void)
{
    for (int i = 0; i < L.nag; i++)
        if (!L.ag[i].ended)
            return 1;
    return 0;
}

static void run(void)
{
    while (L.nlive > 0 || agents_running() || (L.role == ROLE_AGENT && !L.job))
        step();
    if (L.hang_until) /* the ranks ended while asked: what was heard, and a timeout's verdict */
        hang_finish();
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

static uint64_t new_job_id(void)
{
    uint64_t id;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = util_now_ns() ^ ((uint64_t)getpid() << 32);
    /* 63 bits: SHOAL_JOB_ID is validated as a signed 64-bit number. */
    return id & (uint64_t)INT64_MAX;
}

/* The block the ranks of this host map; the head keeps its failure record
 * in the same layout, in plain memory. */
static void make_job_block(uint64_t job_id, int nhosts)
{
    if (L.role == ROLE_HEAD) {
        L.job = xcalloc(1, sizeof *L.job);
    } else {
        L.jobfd = memfd_create("shoal-job", MFD_CLOEXEC);
        if (L.jobfd < 0 || ftruncate(L.jobfd, sizeof *L.job))
            die("cannot create the job control block");
        L.job = mmap(NULL, sizeof *L.job, PROT_READ | PROT_WRITE, MAP_SHARED, L.jobfd, 0);
        if (L.job == MAP_FAILED)
            die("cannot map the job control block");
    }
    L.job->magic = BOOT_JOB_MAGIC;
    L.job->version = BOOT_JOB_VERSION;
    L.job->size = (uint32_t)L.np;
    L.job->nhosts = (uint32_t)nhosts;
    L.job->job_id = job_id;
}

static void setup_process(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
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
}

/* What a child of ours undoes before exec, and its tie to our life. */
static int child_setup(void)
{
    sigprocmask(SIG_SETMASK, &L.oldmask, NULL);
    sigaction(SIGPIPE, &L.oldpipe, NULL);
    /* Die with the launcher even if it is SIGKILLed, and do not start at
     * all if it died before the request was in place. */
    return prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != L.self ? -1 : 0;
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

/* Pins the rank-th rank of this host to one of the CPUs we may use. */
static void bind_cpu(int rank, int local)
{
    cpu_set_t cs;
    int cpus[CPU_SETSIZE], n = 0;
    if (sched_getaffinity(0, sizeof cs, &cs))
        return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &cs))
            cpus[n++] = c;
    if (n == 0)
        return;
    CPU_ZERO(&cs);
    CPU_SET(cpus[local % n], &cs);
    if (sched_setaffinity(0, sizeof cs, &cs))
        dprintf(2, "shoalrun: rank %d: cannot bind to CPU %d: %s\n", rank, cpus[local % n],
                strerror(errno));
}

/* In the forked child: becomes rank `rank` of the job.  The launcher is
 * single-threaded, so the child may use ordinary library calls.  Only a
 * local launcher's rank 0 shares its stdin; an agent's stdin is its
 * channel. */
static _Noreturn void become_rank(int rank, int sock, int out, int err)
{
    if (child_setup())
        _exit(EXIT_NOEXEC);
    int keep_stdin = rank == 0 && L.role == ROLE_LOCAL;
    if (dup2(out, 1) < 0 || dup2(err, 2) < 0 || (!keep_stdin && dup2(L.devnull, 0) < 0))
        child_fail(rank, "cannot set up standard streams");
    /* dup() leaves close-on-exec off, so these two survive the exec. */
    int bfd = dup(sock), jfd = dup(L.jobfd);
    if (bfd < 0 || jfd < 0)
        child_fail(rank, "cannot pass the boot descriptors");
    /* Only now: until exec we hold the launcher's descriptors, more than
     * the original limit may allow a dup to number past. */
    setrlimit(RLIMIT_NOFILE, &L.oldnofile);
    set_boot_env(rank, bfd, jfd);
    if (L.bind)
        bind_cpu(rank, L.r[rank].local);
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
    /* An agent's ranks feed its channel, so a slow head holds them back. */
    struct outq *to[2] = {L.role == ROLE_AGENT ? UPLINK : L.dest[0],
                          L.role == ROLE_AGENT ? UPLINK : L.dest[1]};
    for (int k = 0; k < 2; k++)
        r->out[k] = (struct stream){.fd = k ? pe[0] : po[0], .k = k, .to = to[k],
                                    .left = SIZE_MAX};
    L.nlive++;
    if (L.role == ROLE_AGENT)
        send_event(r, CHAN_EV_STARTED, (uint32_t)pid);
    return 0;
}

/* Starts the ranks of this host, in rank order, until one cannot start. */
static void spawn_ranks(void)
{
    for (int i = 0; i < L.np; i++)
        if (L.r[i].local >= 0 && spawn(i))
            return;
}

/* ---- head: one agent per host ---------------------------------------------- */

/* The job description for agent h (docs/BOOT.md, CHAN_JOB). */
static void send_job(struct agent *a)
{
    extern char **environ;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        die("cannot name the current directory");
    chan_begin(&msg, CHAN_JOB);
    chan_u64(&msg, L.job->job_id);
    chan_u32(&msg, (uint32_t)L.np);
    chan_u32(&msg, (uint32_t)L.nag);
    chan_u32(&msg, (uint32_t)(a - L.ag));
    chan_u32(&msg, (uint32_t)L.bind);
    for (int i = 0; i < L.np; i++)
        chan_u16(&msg, (uint16_t)L.r[i].host);
    int argc = 0;
    while (L.argv[argc])
        argc++;
    chan_u32(&msg, (uint32_t)argc);
    for (int i = 0; i < argc; i++)
        chan_str(&msg, L.argv[i]);
    chan_str(&msg, cwd);
    /* The remote shell gives the agent its own environment; the job's
     * settings (SHOAL_*) and the -x variables come from here. */
    const char **vars = xcalloc((size_t)L.nxvars + 1, sizeof *vars);
    int nvars = 0, nenv = 0;
    for (int i = 0; i < L.nxvars; i++) {
        const char *v = getenv(L.xvars[i]);
        if (v && strncmp(L.xvars[i], "SHOAL_", 6))
            vars[nvars++] = L.xvars[i];
    }
    for (char **e = environ; *e; e++)
        nenv += !strncmp(*e, "SHOAL_", 6);
    chan_u32(&msg, (uint32_t)(nenv + nvars));
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, "SHOAL_", 6))
            chan_str(&msg, *e);
    for (int i = 0; i < nvars; i++) {
        chan_bytes(&msg, vars[i], strlen(vars[i]));
        chan_bytes(&msg, "=", 1);
        chan_str(&msg, getenv(vars[i]));
    }
    free(vars);
    chan_send(&a->out);
}

/* Starts the remote shell for agent a: its stdin and stdout are the
 * channel, its stderr is ours.  Its own process group keeps a terminal's
 * Ctrl-C to us, who end the job in order. */
static int start_agent(struct agent *a, const char *exe)
{
    char *extra[] = {(char *)exe, AGENT_FLAG};
    char **argv = hosts_rsh_argv(L.rsh ? L.rsh : DEFAULT_RSH, a->name, extra, 2);
    int to[2] = {-1, -1}, from[2] = {-1, -1};
    pid_t pid = -1;
    if (argv && pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0)
        pid = fork();
    if (pid == 0) {
        if (child_setup() || setpgid(0, 0) || dup2(to[0], 0) < 0 || dup2(from[1], 1) < 0)
            _exit(EXIT_NOEXEC);
        setrlimit(RLIMIT_NOFILE, &L.oldnofile);
        execvp(argv[0], argv);
        dprintf(2, "shoalrun: cannot run the remote shell %s for host %s: %s\n", argv[0],
                a->name, strerror(errno));
        _exit(EXIT_NOEXEC);
    }
    int err = argv ? errno : ENOMEM;
    for (int i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
    int ends[] = {to[0], from[1], pid < 0 ? to[1] : -1, pid < 0 ? from[0] : -1};
    for (int k = 0; k < 4; k++)
        if (ends[k] >= 0)
            close(ends[k]);
    if (pid < 0) {
        fail_job(-1, 0, 1, 0, "cannot start the agent for host %s: %s", a->name, strerror(err));
        return -1;
    }
    set_nonblock(from[0]);
    a->pid = pid;
    a->answer_by = util_now_ns() + (uint64_t)(L.connect_timeout * 1e9);
    a->in = from[0];
    a->out = (struct outq){.fd = to[1]};
    return 0;
}

static void run_head(struct host *hosts, int nhosts)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        die("cannot find shoalrun's own path in /proc/self/exe");
    exe[n] = '\0';
    L.nag = nhosts;
    char why[256];
    if (fd_shortage(why, sizeof why)) {
        fprintf(stderr, "shoalrun: %s\n", why);
        exit(EXIT_NOEXEC);
    }
    L.ag = xcalloc((size_t)nhosts, sizeof *L.ag);
    L.r = xcalloc((size_t)L.np, sizeof *L.r);
    for (int h = 0, rank = 0; h < nhosts; h++) {
        L.ag[h] = (struct agent){.name = hosts[h].name, .in = -1, .out = {.fd = -1},
                                 .nranks = hosts[h].nranks};
        for (int k = 0; k < hosts[h].nranks; k++, rank++)
            L.r[rank] = (struct rank){.host = h, .local = k, .sock = -1,
                                      .out = {{.fd = -1}, {.fd = -1}}};
    }
    L.nlive = L.np;
    make_job_block(new_job_id(), nhosts);
    L.pfd = xcalloc(npfd(), sizeof *L.pfd);
    for (int h = 0; h < nhosts; h++) {
        if (start_agent(&L.ag[h], exe)) {
            for (int rest = h; rest < nhosts; rest++)
                agent_ended(&L.ag[rest]);
            break;
        }
        send_job(&L.ag[h]);
    }
    run();
}

static void run_local(void)
{
    char why[256];
    if (find_program(L.argv[0], why, sizeof why)) {
        fprintf(stderr, "shoalrun: %s\n", why);
        exit(EXIT_NOEXEC);
    }
    L.nlocal = L.np;
    if (fd_shortage(why, sizeof why)) {
        fprintf(stderr, "shoalrun: %s\n", why);
        exit(EXIT_NOEXEC);
    }
    L.r = xcalloc((size_t)L.np, sizeof *L.r);
    for (int i = 0; i < L.np; i++)
        L.r[i] = (struct rank){.local = i, .sock = -1, .out = {{.fd = -1}, {.fd = -1}}};
    make_job_block(new_job_id(), 1); /* every rank on this host: host[] stays 0 */
    L.pfd = xcalloc(npfd(), sizeof *L.pfd);
    spawn_ranks();
    run();
}

/* The agent learns everything from the head's first message (agent_job). */
static void run_agent(void)
{
    set_nonblock(0);
    L.pfd = xcalloc(npfd(), sizeof *L.pfd);
    L.job_by = util_now_ns() + JOB_WAIT_MS * MS;
    run();
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], AGENT_FLAG))
        L.role = ROLE_AGENT;
    else {
        parse_args(argc, argv);
        check_settings();
    }
    static struct host *hosts; /* the agents name their host from it until exit */
    int nhosts = 0;
    if (L.role == ROLE_HEAD) {
        char err[1200];
        if ((L.hostlist ? hosts_parse_list(L.hostlist, &hosts, &nhosts, err, sizeof err)
                        : hosts_parse_file(L.hostfile, &hosts, &nhosts, err, sizeof err)) ||
            hosts_place(hosts, &nhosts, L.np, err, sizeof err))
            bad_usage("%s", err);
    }
    ensure_std_fds();
    setup_process();
    queue_init();
    if (L.timeout > 0)
        L.timeout_at = util_now_ns() + (uint64_t)(L.timeout * 1e9);
    if (L.role == ROLE_HEAD)
        run_head(hosts, nhosts);
    else if (L.role == ROLE_AGENT)
        run_agent();
    else
        run_local();
    return L.failed ? L.exit_code : 0;
}
