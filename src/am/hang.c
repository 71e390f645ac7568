/* Hang diagnosis: the report a waiting rank prints, and sends to the
 * launcher, when asked (SIGQUIT) or after SHOAL_HANG_REPORT seconds
 * without progress.  hang.h says what is recorded where. */
#include "am/hang.h"
#include "am/state.h"
#include "boot/boot.h"
#include "boot/proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct hang_state hang;

/* The waits of threads that gave shoal's lock back (under the lock). */
#define HANG_PARKED 64
static struct hang_stash *parked[HANG_PARKED];
static unsigned parked_n; /* one past the last slot in use */

const struct hang_thread *hang_thread_self(void)
{
    static _Thread_local struct hang_thread self;
    if (!self.tid) {
        self.tid = (int)syscall(SYS_gettid);
        if (prctl(PR_GET_NAME, self.name) != 0)
            self.name[0] = '\0';
        self.name[sizeof self.name - 1] = '\0';
    }
    return &self;
}

void hang_thread_text(const struct hang_thread *t, char *buf, size_t n)
{
    if (t->name[0])
        snprintf(buf, n, "%d (%s)", t->tid, t->name);
    else
        snprintf(buf, n, "%d", t->tid);
}

void hang_park(struct hang_stash *s)
{
    s->thread = hang_thread_self();
    s->parked = 0;
    if (s->depth == 0)
        return; /* nothing to report */
    for (unsigned i = 0; i < HANG_PARKED; i++)
        if (!parked[i]) {
            parked[i] = s;
            s->parked = i + 1;
            if (parked_n < i + 1)
                parked_n = i + 1;
            return;
        }
}

void hang_unpark(struct hang_stash *s)
{
    if (!s->parked)
        return;
    parked[s->parked - 1] = NULL;
    while (parked_n && !parked[parked_n - 1])
        parked_n--;
}

static int installed;
/* The timer's view: what progress looked like at its last look, since when. */
static uint64_t idle_since_ns, idle_mark;
static int idle_reported;

static void hang_on_signal(int sig)
{
    (void)sig;
    atomic_store_explicit(&hang.asked, 1, memory_order_relaxed);
}

void hang_init(void)
{
    hang.depth = 0;
    atomic_store_explicit(&hang.asked, 0, memory_order_relaxed);
    hang.timer_ns = (uint64_t)util_config_int(CFG_HANG_REPORT) * 1000000000ull;
    hang.timing = (int)util_config_int(CFG_STATS);
    hang.wait_ns = hang.wait_from = 0;
    idle_since_ns = 0;
    idle_reported = 0;
    if (!installed) {
        /* SA_RESTART: the application's own system calls never see EINTR */
        struct sigaction sa = {.sa_handler = hang_on_signal, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        installed = sigaction(SIGQUIT, &sa, NULL) == 0;
    }
    if (installed)
        boot_hang_ready();
}

void hang_fini(void)
{
    hang.depth = 0;
    hang.timer_ns = 0;
    memset(parked, 0, sizeof parked);
    parked_n = 0;
}

/* ---- the report ----------------------------------------------------------- */

static const char *hang_handler_name(unsigned h, char *buf, size_t n)
{
    if (h >= AM_INTERNAL_BASE)
        snprintf(buf, n, "internal handler %u", h - AM_INTERNAL_BASE);
    else
        snprintf(buf, n, "handler %u", h);
    return buf;
}

/* "sent request handler 3 to rank 1" and the like. */
static void hang_event_text(const struct hang_event *e, char *buf, size_t n)
{
    static const char *cls[] = {"request", "reply"};
    char h[40];
    hang_handler_name(e->handler, h, sizeof h);
    unsigned c = (e->what >> 2) & 1;
    switch (e->what & 3) {
    case HANG_EV_SENT:
        snprintf(buf, n, "sent %s %s to rank %d", cls[c], h, (int)e->peer);
        break;
    case HANG_EV_RECEIVED:
        if (e->aux == 1)
            snprintf(buf, n, "received %s %s from rank %d", cls[c], h, (int)e->peer);
        else if (e->aux > 1)
            snprintf(buf, n, "received %d %ss from rank %d, the first for %s", e->aux, cls[c], (int)e->peer, h);
        else
            snprintf(buf, n, "received %ss from rank %d, the first for %s", cls[c], (int)e->peer, h);
        break;
    default:
        snprintf(buf, n, "%s %s to rank %d refused: %s", cls[c], h, (int)e->peer, shoal_strerror(e->aux));
        break;
    }
}

/* The newest event that is a request of the application's that this rank
 * sent or tried to send: whoever a wait for a flag most likely waits on
 * (the library's own messages, a barrier's flags, say nothing of that). */
static const struct hang_event *hang_last_request(void)
{
    uint32_t kept = hang.nev < HANG_EVENTS ? hang.nev : HANG_EVENTS;
    for (uint32_t i = 1; i <= kept; i++) {
        const struct hang_event *e = &hang.ev[(hang.nev - i) & (HANG_EVENTS - 1)];
        if ((e->what & 3) != HANG_EV_RECEIVED && ((e->what >> 2) & 1) == AM_REQ && e->handler < AM_INTERNAL_BASE)
            return e;
    }
    return NULL;
}

int hang_describe_flag(const struct hang_wait *w, char *buf, size_t n)
{
    const volatile uint64_t *flag = w->obj;
    int k = snprintf(buf, n, "the flag at %p is %llu, waits for it to reach %llu", w->obj,
                     (unsigned long long)*flag, (unsigned long long)w->value);
    const struct hang_event *e = hang_last_request();
    if (!e || k < 0 || (size_t)k >= n)
        return -1;
    char h[40];
    hang_handler_name(e->handler, h, sizeof h);
    if ((e->what & 3) == HANG_EV_REFUSED)
        snprintf(buf + k, n - (size_t)k, " (a reply from rank %d? the last request to it, %s, was refused: %s)",
                 (int)e->peer, h, shoal_strerror(e->aux));
    else
        snprintf(buf + k, n - (size_t)k, " (a reply from rank %d? the last request went there, %s)",
                 (int)e->peer, h);
    return (int)e->peer;
}

/* What record w waits for; returns the rank (-1 unknown). */
static int hang_what(const struct hang_wait *w, char *buf, size_t n)
{
    if (w->describe)
        return w->describe(w, buf, n);
    if (w->peer >= 0)
        snprintf(buf, n, "waits for rank %d", w->peer);
    else if (n > 0)
        buf[0] = '\0';
    return w->peer;
}

/* The report, built whole and written at once, so lines of several ranks
 * sharing one stderr (under any launcher) do not interleave. */
struct hang_text {
    char buf[4096];
    size_t n;
};

static void hang_say(struct hang_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hang_say(struct hang_text *t, const char *fmt, ...)
{
    size_t room = sizeof t->buf - t->n;
    int m = snprintf(t->buf + t->n, room, "shoal: rank %d on %s: hang report: ", am.rank, util_hostname());
    if (m < 0 || (size_t)m >= room)
        return;
    size_t k = t->n + (size_t)m;
    va_list ap;
    va_start(ap, fmt);
    m = vsnprintf(t->buf + k, sizeof t->buf - k, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)m + 1 >= sizeof t->buf - k)
        return; /* no room for the whole line: leave it out */
    k += (size_t)m;
    t->buf[k++] = '\n';
    t->n = k;
}

static void hang_say_events(struct hang_text *t)
{
    uint32_t kept = hang.nev < HANG_EVENTS ? hang.nev : HANG_EVENTS;
    if (kept == 0)
        hang_say(t, "no message sent or received yet");
    for (uint32_t i = kept; i > 0; i--) {
        char text[160];
        hang_event_text(&hang.ev[(hang.nev - i) & (HANG_EVENTS - 1)], text, sizeof text);
        hang_say(t, "  %s %s", i == kept ? "last messages, oldest first:" : "                            ", text);
    }
}

/* The records kept of a stack `depth` deep. */
static unsigned hang_kept(unsigned depth)
{
    return depth < HANG_DEPTH ? depth : HANG_DEPTH;
}

/* One thread's waits, outermost first: "HEAD blocked in CALL: what", then
 * "INDENT inside it: what" for each inner one.  Returns the innermost's
 * peer (-1: none) and leaves its text in last. */
static int hang_say_stack(struct hang_text *t, const char *head, const char *indent, const struct hang_wait *stack,
                          unsigned depth, char *last, size_t n)
{
    int peer = -1;
    for (unsigned d = 0; d < depth; d++) {
        peer = hang_what(&stack[d], last, n);
        if (d == 0)
            hang_say(t, "%sblocked in %s%s%s", head, stack[d].call, last[0] ? ": " : "", last);
        else
            hang_say(t, "%sinside it: %s", indent, last);
    }
    return peer;
}

/* The waits of other threads (SHOAL_THREAD_MULTIPLE) that gave the lock
 * back to let this one in. */
static void hang_say_parked(struct hang_text *t)
{
    char who[48], head[64], what[160];
    if (!parked_n)
        return;
    hang_thread_text(hang_thread_self(), who, sizeof who);
    hang_say(t, "  (this is thread %s; other threads wait inside shoal)", who);
    for (unsigned i = 0; i < parked_n; i++) {
        const struct hang_stash *s = parked[i];
        if (!s || !s->depth)
            continue;
        hang_thread_text(s->thread, who, sizeof who);
        snprintf(head, sizeof head, "  thread %s: ", who);
        hang_say_stack(t, head, "    ", s->stack, hang_kept(s->depth), what, sizeof what);
    }
}

/* Prints the report and sends its summary to the launcher (if any). */
static void hang_report(const char *why, unsigned boot_why)
{
    static struct hang_text t; /* 4 KiB: off the stack of a deep wait */
    struct boot_hang msg = {.waits_for = -1};
    unsigned depth = hang_kept(hang.depth);
    char head[64];
    t.n = 0;
    if (depth == 0) {
        hang_say(&t, "%s: waiting inside shoal (no blocking call recorded)", why);
        snprintf(msg.call, sizeof msg.call, "?");
        snprintf(msg.what, sizeof msg.what, "a wait inside shoal with no record");
    }
    /* the innermost wait is the one that blocks: the launcher hears of it */
    snprintf(head, sizeof head, "%s: ", why);
    int peer = hang_say_stack(&t, head, "  ", hang.stack, depth, msg.what, sizeof msg.what);
    if (depth > 0) {
        msg.waits_for = peer;
        snprintf(msg.call, sizeof msg.call, "%s", hang.stack[0].call);
    }
    hang_say_parked(&t);
    hang_say_events(&t);
    /* before the launcher hears of it: its summary comes after */
    for (size_t off = 0; off < t.n;) {
        ssize_t w = write(2, t.buf + off, t.n - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    boot_hang_report(&msg, boot_why);
}

void hang_check_slow(void)
{
    uint64_t now = util_now_ns(), mark = (uint64_t)hang.seq << 32 | hang.nev;
    hang.steps = 0;
    if (atomic_exchange_explicit(&hang.asked, 0, memory_order_relaxed)) {
        hang_report("asked (SIGQUIT)", BOOT_HANG_ASKED);
        /* this stretch is reported: the timer stays quiet until progress */
        idle_mark = mark;
        idle_since_ns = now;
        idle_reported = 1;
        return;
    }
    if (mark != idle_mark || idle_since_ns == 0) {
        idle_mark = mark;
        idle_since_ns = now;
        idle_reported = 0;
    } else if (!idle_reported && now - idle_since_ns >= hang.timer_ns) {
        char why[64];
        idle_reported = 1;
        snprintf(why, sizeof why, "no progress for %llu s (SHOAL_HANG_REPORT)",
                 (unsigned long long)(hang.timer_ns / 1000000000ull));
        hang_report(why, BOOT_HANG_TIMER);
    }
}
