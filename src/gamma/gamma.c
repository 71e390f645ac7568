/* GAMMA's Active Ports (Ciaccio's thesis §4.4, §4.7) on shoal's active
 * messages.  A message sent through an output port is one internal request
 * of any size (am_request_large) to GAMMA_H_PORT at each destination,
 * carrying the destination port; there the input port's buffering rules of
 * §4.4.3.1 place it and its handlers run.  docs/GAMMA.md has the decisions
 * the thesis leaves open.
 *
 * Handlers run inside am's handler for the message, so on arrival with
 * SHOAL_PROGRESS=thread (the progress thread) and in any poll; one thread
 * at a time is inside shoal (AM_GUARD), so this file's state needs no lock
 * of its own. */
#include <shoal/gamma.h>

#include "am/am.h"
#include "boot/boot.h"
#include "coll/coll.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { GAMMA_H_PORT = AM_LAYER_BASE(AM_BLOCK_GAMMA) }; /* (port) and the message */
#define GAMMA_PORTS 256
#define GAMMA_MAX_NODES 255 /* instance numbers are unsigned char, 255 is BROADCAST */

/* A message that reached a port while its receiver handler ran (a handler
 * that sends polls, so messages may arrive inside it): it waits until the
 * handler returns (§4.4.3.2: nothing new enters the port's buffer before). */
struct gamma_held {
    struct gamma_held *next;
    int src;
    size_t len;
    unsigned char data[];
};

struct gamma_port {
    int bound;                                   /* gamma_setport ran for it */
    unsigned char dest_node, dest_pid, dest_port; /* the output side */
    void (*handler_in)(void), (*handler_err)(void);
    unsigned char *buf;                          /* the input side: NULL, or len bytes */
    unsigned long len, off;                      /* off: where the next message goes */
    int busy;                                    /* its handlers run now */
    struct gamma_held *held, **held_tail;
};

/* A send made in a handler that found no room: it leaves, in order, from
 * the next GAMMA call outside a handler (a handler must not wait: am runs
 * no request handler inside another's wait). */
struct gamma_out {
    struct gamma_out *next;
    int dest;
    unsigned char port, dest_port;
    size_t len, done; /* done: the bytes am_request_large already took */
    unsigned char data[];
};

static struct {
    int up, owns_shoal;
    int nodes, me, pid, chains;
    struct gamma_out *out, **out_tail; /* deferred sends, oldest first */
    unsigned char *sending;            /* [node]: a send outside handlers is in pieces to it */
    uint64_t sem[GAMMA_PORTS], err[GAMMA_PORTS];
    struct gamma_port port[GAMMA_PORTS];
} g;

unsigned char gamma_active_port;
unsigned char gamma_errno;
unsigned long gamma_active_len;
int gamma_active_src;

/* ---- receiving ------------------------------------------------------------ */

/* Runs one handler with the context variables it reads; restored after,
 * for a handler it interrupted (one that sent and so polled). */
static void gamma_call(void (*fn)(void), unsigned char port, unsigned char err, unsigned long len, int src)
{
    unsigned char port0 = gamma_active_port, err0 = gamma_errno;
    unsigned long len0 = gamma_active_len;
    int src0 = gamma_active_src;
    gamma_active_port = port;
    gamma_errno = err;
    gamma_active_len = len;
    gamma_active_src = src;
    fn();
    gamma_active_port = port0;
    gamma_errno = err0;
    gamma_active_len = len0;
    gamma_active_src = src0;
}

/* §4.4.3.1: append after the previous message; one that exactly fills the
 * rest of the buffer makes the next start at its beginning again; one
 * longer than the rest is truncated to it (and so fills it), and one with
 * no buffer is dropped, both with MSGTOOLONG to the error handler.  Then
 * the receiver handler, for every message (empty ones too). */
static void gamma_store(struct gamma_port *p, unsigned char port, int src, const unsigned char *data, size_t n)
{
    unsigned long room = p->buf ? p->len - p->off : 0, stored = n <= room ? (unsigned long)n : room;
    if (stored)
        memcpy(p->buf + p->off, data, stored);
    p->off += stored;
    if (p->off == p->len)
        p->off = 0;
    p->busy = 1;
    if (stored < n && p->handler_err)
        gamma_call(p->handler_err, port, GAMMA_ERR_MSGTOOLONG, stored, src);
    if (p->handler_in)
        gamma_call(p->handler_in, port, 0, stored, src);
    p->busy = 0;
}

static void gamma_hold(struct gamma_port *p, int src, const void *data, size_t n)
{
    struct gamma_held *h = malloc(sizeof *h + n);
    if (!h)
        util_fatal("gamma: out of memory for a %zu-byte message from rank %d held at a busy port", n, src);
    h->next = NULL;
    h->src = src;
    h->len = n;
    memcpy(h->data, data, n);
    if (!p->held)
        p->held_tail = &p->held;
    *p->held_tail = h;
    p->held_tail = &h->next;
}

static void gamma_port_msg(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    int src = shoal_token_source(tok);
    if (nargs != 1 || args[0] >= GAMMA_FIRST_RESERVED) {
        LOG(LOG_WARN, "gamma: dropped a malformed message from rank %d", src);
        am_stats()->dropped++;
        return;
    }
    unsigned char port = (unsigned char)args[0];
    struct gamma_port *p = &g.port[port];
    if (!g.up || !p->bound)
        return; /* §4.4.3: a port not bound for input discards */
    if (p->busy) {
        gamma_hold(p, src, buf, n);
        return;
    }
    gamma_store(p, port, src, buf, n);
    while (p->held && !p->busy) {
        struct gamma_held *h = p->held;
        p->held = h->next;
        gamma_store(p, port, h->src, h->data, h->len);
        free(h);
    }
}

/* ---- setting up ------------------------------------------------------------ */

/* After shoal_init: joins the group and ends with the concurrent barrier
 * that closes gamma_init (§5.4). */
static int gamma_join(void)
{
    AM_GUARD();
    if (am_size() > GAMMA_MAX_NODES) {
        LOG(LOG_ERROR, "gamma_init: %d ranks, above GAMMA's %d instances", am_size(), GAMMA_MAX_NODES);
        return SHOAL_EINVAL;
    }
    for (int i = 0; i < GAMMA_PORTS; i++) {
        struct gamma_held *h = g.port[i].held;
        while (h) {
            struct gamma_held *next = h->next;
            free(h);
            h = next;
        }
    }
    memset(g.port, 0, sizeof g.port);
    free(g.sending);
    if (!(g.sending = calloc((size_t)am_size(), 1)))
        return SHOAL_ENOMEM;
    memset(g.sem, 0, sizeof g.sem);
    memset(g.err, 0, sizeof g.err);
    g.nodes = am_size();
    g.me = am_rank();
    g.pid = (int)(boot_job_id() & 0xff);
    g.chains = 2;
    am_register_internal(GAMMA_H_PORT, gamma_port_msg);
    g.up = 1;
    return coll_barrier_chain(g.nodes - 1);
}

int gamma_init(int num_nodes, int argc, char **argv)
{
    (void)num_nodes; /* the group is the job shoalrun started: GAMMA.md */
    if (g.up)
        return SHOAL_EINIT;
    if (shoal_rank() < 0) {
        /* GAMMA's handlers run on arrival: thread progress, unless chosen */
        if (setenv("SHOAL_PROGRESS", "thread", 0))
            return SHOAL_ESYS;
        int rc = shoal_init(&argc, &argv);
        if (rc)
            return rc;
        g.owns_shoal = 1;
    }
    int rc = gamma_join();
    if (rc && g.owns_shoal) {
        g.owns_shoal = 0;
        shoal_finalize();
    }
    return rc;
}

/* Ports and semaphores 247..255 are GAMMA's (§4.7.2, §4.7.6). */
static int gamma_user(unsigned char n)
{
    if (!g.up)
        return SHOAL_ENOTINIT;
    return n >= GAMMA_FIRST_RESERVED ? SHOAL_EINVAL : SHOAL_OK;
}

int gamma_setport(unsigned char activated_port, unsigned char dest_node, unsigned char dest_par_pid,
                  unsigned char dest_port, void (*handler_in)(), void (*handler_err)(), void *buffer_in,
                  unsigned long buffer_len)
{
    AM_GUARD();
    int rc = gamma_user(activated_port);
    if (rc)
        return rc;
    if (dest_port >= GAMMA_FIRST_RESERVED)
        return SHOAL_EINVAL;
    if (dest_node != BROADCAST && dest_node >= g.nodes)
        return SHOAL_ERANK;
    struct gamma_port *p = &g.port[activated_port];
    p->bound = 1;
    p->dest_node = dest_node;
    p->dest_pid = dest_par_pid;
    p->dest_port = dest_port;
    p->handler_in = (void (*)(void))handler_in;
    p->handler_err = (void (*)(void))handler_err;
    p->buf = buffer_in;
    p->len = buffer_in ? buffer_len : 0;
    p->off = 0;
    return SHOAL_OK;
}

int gamma_attach_buffer(unsigned char input_port, void *buffer_in)
{
    AM_GUARD();
    int rc = gamma_user(input_port);
    if (rc)
        return rc;
    struct gamma_port *p = &g.port[input_port];
    if (!p->bound || !p->len || !buffer_in)
        return SHOAL_EINVAL; /* its size comes from a gamma_setport that gave a buffer */
    p->buf = buffer_in;
    p->off = 0;
    return SHOAL_OK;
}

/* ---- sending ------------------------------------------------------------------ */

static int gamma_send_piecewise(int dest, unsigned char port, const void *data, size_t len, unsigned flags,
                                size_t *done)
{
    uint64_t a = port;
    return am_request_large(dest, GAMMA_H_PORT, flags, data, len, 1, &a, done);
}

static int gamma_queued_for(int dest)
{
    for (struct gamma_out *o = g.out; o; o = o->next)
        if (o->dest == dest)
            return 1;
    return 0;
}

static void gamma_failed(unsigned char port, int rc)
{
    struct gamma_port *p = &g.port[port];
    LOG(LOG_DEBUG, "gamma: a send through port %u failed: %s", port, shoal_strerror(rc));
    if (p->handler_err)
        gamma_call(p->handler_err, port, GAMMA_ERR_SENDFAILURE, 0, g.me);
}

/* Outside handlers: sends what handlers left, oldest first (a send's wait
 * may run handlers that add more behind it). */
static void gamma_flush(void)
{
    while (g.out) {
        struct gamma_out *o = g.out;
        g.sending[o->dest] = 1;
        int rc = gamma_send_piecewise(o->dest, o->dest_port, o->data, o->len, 0, &o->done);
        g.sending[o->dest] = 0;
        if (!(g.out = o->next))
            g.out_tail = &g.out;
        if (rc)
            gamma_failed(o->port, rc);
        free(o);
    }
}

/* In a handler a send takes only the room there is; the rest (and any send
 * to a node that has sends waiting) waits in g.out. */
static int gamma_send_deferrable(int dest, unsigned char port, unsigned char dest_port, const void *data,
                                 size_t len)
{
    size_t done = 0;
    if (!g.sending[dest] && !gamma_queued_for(dest)) {
        int rc = gamma_send_piecewise(dest, dest_port, data, len, SHOAL_IMMEDIATE, &done);
        if (rc != SHOAL_EAGAIN)
            return rc;
    }
    struct gamma_out *o = malloc(sizeof *o + len);
    if (!o)
        return SHOAL_ENOMEM;
    *o = (struct gamma_out){.dest = dest, .port = port, .dest_port = dest_port, .len = len, .done = done};
    if (len)
        memcpy(o->data, data, len);
    if (!g.out)
        g.out_tail = &g.out;
    *g.out_tail = o;
    g.out_tail = &o->next;
    return SHOAL_OK;
}

static int gamma_send_one(int dest, unsigned char port, unsigned char dest_port, const void *data, size_t len)
{
    if (am_in_handler())
        return gamma_send_deferrable(dest, port, dest_port, data, len);
    gamma_flush();
    size_t done = 0;
    g.sending[dest] = 1;
    int rc = gamma_send_piecewise(dest, dest_port, data, len, 0, &done);
    g.sending[dest] = 0;
    return rc;
}

/* A BROADCAST port's message as one frame every other instance takes
 * (§4.7: one raw frame on eth; am_net_send_all), outside handlers, where
 * it fits one packet; SHOAL_EINVAL: send it to each instead. */
static int gamma_send_frame(unsigned char dest_port, const void *data, size_t len)
{
    if (am_in_handler() || len > shoal_am_max_medium())
        return SHOAL_EINVAL;
    gamma_flush();
    uint64_t a = dest_port;
    return am_net_send_all(GAMMA_H_PORT, 0, AM_MEDIUM, data, len, 1, &a);
}

/* §4.4.1: returns once the message is handed to the transport, which
 * delivers it reliably; a send the transport refuses runs the port's error
 * handler with SENDFAILURE. */
int gamma_send(unsigned char output_port, void *data, unsigned long len)
{
    AM_GUARD();
    int rc = gamma_user(output_port);
    if (rc)
        return rc;
    struct gamma_port *p = &g.port[output_port];
    if (!p->bound || (len && !data) || p->dest_pid != g.pid)
        return SHOAL_EINVAL;
    if (p->dest_node != BROADCAST)
        rc = gamma_send_one(p->dest_node, output_port, p->dest_port, data, len);
    else if ((rc = gamma_send_frame(p->dest_port, data, len)) == SHOAL_EINVAL) {
        rc = SHOAL_OK;
        for (int r = 0; r < g.nodes && !rc; r++)
            rc = r == g.me ? SHOAL_OK : gamma_send_one(r, output_port, p->dest_port, data, len);
    }
    if (rc)
        gamma_failed(output_port, rc);
    return rc;
}

int gamma_send_fast(unsigned char output_port, void *data, unsigned long len)
{
    return gamma_send(output_port, data, len);
}

int gamma_exit(void)
{
    int rc;
    {
        AM_GUARD();
        if (!g.up)
            return SHOAL_ENOTINIT;
        if (!am_in_handler())
            gamma_flush();
        rc = coll_barrier_chain(g.chains);
        if (rc)
            return rc;
        g.up = 0;
    }
    if (g.owns_shoal) {
        g.owns_shoal = 0;
        rc = shoal_finalize();
    }
    return rc;
}

/* ---- semaphores ------------------------------------------------------------- */

int gamma_signal(unsigned char sem)
{
    AM_GUARD();
    int rc = gamma_user(sem);
    if (!rc)
        g.sem[sem]++;
    return rc;
}

int gamma_sigerr(unsigned char sem)
{
    AM_GUARD();
    int rc = gamma_user(sem);
    if (!rc)
        g.err[sem]++;
    return rc;
}

/* §4.7.8: until the semaphore reaches n, then minus n; the result is minus
 * the errors signalled on the same index since the last wait.  A handler
 * cannot wait (nothing else would run): there only a semaphore that is
 * already high enough is taken. */
int gamma_wait(unsigned char sem, unsigned long n)
{
    AM_GUARD();
    int rc = gamma_user(sem);
    if (rc)
        return rc;
    if (am_in_handler() && g.sem[sem] < n)
        return am_rule_violation("gamma_wait (on a semaphore below its count)");
    struct util_backoff b;
    util_backoff_init(&b);
    while (g.sem[sem] < n) {
        gamma_flush();
        am_progress_wait(&b, 0);
    }
    g.sem[sem] -= n;
    uint64_t errors = g.err[sem];
    g.err[sem] = 0;
    return errors > INT_MAX ? INT_MIN + 1 : -(int)errors;
}

/* §4.7.9, polling once first (outside a handler), so that a loop on it
 * makes progress whatever SHOAL_PROGRESS is. */
int gamma_test(unsigned char sem)
{
    AM_GUARD();
    int rc = gamma_user(sem);
    if (rc)
        return rc;
    if (!am_in_handler()) {
        gamma_flush();
        am_poll(0);
    }
    return g.sem[sem] > INT_MAX ? INT_MAX : (int)g.sem[sem];
}

int gamma_atomic(void (*funct)(void))
{
    if (!g.up)
        return SHOAL_ENOTINIT;
    if (!funct)
        return SHOAL_EINVAL;
    int rc = shoal_handlers_disable();
    if (rc)
        return rc;
    funct();
    return shoal_handlers_enable();
}

/* ---- the group ------------------------------------------------------------------- */

int gamma_sync(void)
{
    AM_GUARD();
    if (!g.up)
        return SHOAL_ENOTINIT;
    if (!am_in_handler())
        gamma_flush();
    return coll_barrier_chain(g.chains);
}

int gamma_sync_chains(int k)
{
    AM_GUARD();
    if (!g.up)
        return SHOAL_ENOTINIT;
    if (k < 1)
        return SHOAL_EINVAL;
    g.chains = k;
    return SHOAL_OK;
}

int gamma_my_par_pid(void)
{
    return g.up ? g.pid : SHOAL_ENOTINIT;
}

int gamma_my_node(void)
{
    return g.up ? g.me : SHOAL_ENOTINIT;
}

int gamma_how_many_nodes(void)
{
    return g.up ? g.nodes : SHOAL_ENOTINIT;
}

/* ---- memory and time ---------------------------------------------------------------- */

/* Nothing here runs at kernel level, so locking is advisory: memory that
 * cannot be locked (RLIMIT_MEMLOCK) is still faulted in, and the call
 * succeeds. */
int gamma_mlock(void *buffer, unsigned long len)
{
    if (len && !buffer)
        return SHOAL_EINVAL;
    if (mlock(buffer, len))
        LOG(LOG_DEBUG, "gamma_mlock: mlock of %lu bytes failed; faulting them in only", len);
    long page = sysconf(_SC_PAGESIZE);
    volatile const unsigned char *b = buffer;
    for (unsigned long i = 0; i < len; i += (unsigned long)page)
        (void)b[i];
    return SHOAL_OK;
}

int gamma_munlock(void *buffer, unsigned long len)
{
    if (len && !buffer)
        return SHOAL_EINVAL;
    return munlock(buffer, len) ? SHOAL_ESYS : SHOAL_OK;
}

int gamma_munlockall(void)
{
    return munlockall() ? SHOAL_ESYS : SHOAL_OK;
}

/* The monotonic clock in nanoseconds, split as the TSC's two words were. */
void gamma_time(time_586 t)
{
    uint64_t ns = util_now_ns();
    t[0].hi = (unsigned long)(ns >> 32);
    t[0].lo = (unsigned long)(ns & 0xffffffffu);
}

double gamma_time_diff(time_586 b, time_586 a)
{
    uint64_t nb = (uint64_t)b[0].hi << 32 | b[0].lo, na = (uint64_t)a[0].hi << 32 | a[0].lo;
    return ((double)nb - (double)na) / 1000.0;
}
