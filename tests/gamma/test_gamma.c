/* gamma.h: every call and every buffering and error rule of the thesis
 * (Ciaccio §4.4.3 and §4.7; docs/GAMMA.md), on whatever
 * transport the environment picks.  Subtests:
 *   api       naming, semaphores, atomic, time, mlock, a ring of messages, gamma_sync at K = 1, 2, N-1
 *   buffer    gather by append, wrap on exact fit, truncation, missing buffer, empty messages,
 *             attach_buffer from a handler, handlers that send and never nest on their port
 *   large     4 MiB messages echoed from a handler (sends that do not fit wait outside handlers)
 *   broadcast BROADCAST ports: every other instance receives each message on its own port
 *   misuse    reserved and bad ports and semaphores, unbound ports, refused sends
 *             (run with SHOAL_STRICT=0 and SHOAL_AM_LARGE_MAX=4096) */
#include <shoal/gamma.h>

#include "../common/check.h"

#include <stdint.h>
#include <string.h>

static int me, n;

#define WAIT_S 30

/* gamma_wait, bounded: the semaphore must reach k within WAIT_S. */
static int wait_sem(unsigned char sem, unsigned long k)
{
    double t0 = test_now();
    while ((unsigned long)gamma_test(sem) < k)
        TEST_DEADLINE(t0, WAIT_S, "a semaphore");
    return gamma_wait(sem, k);
}

/* ---- api -------------------------------------------------------------------- */
enum { P_RING = 1 };
static uint64_t ring_in[4];
static volatile int ring_src = -1;
static volatile unsigned long ring_len;
static int shared_counter;

static void ring_handler(void)
{
    CHECK(gamma_active_port == P_RING, "active port %d", gamma_active_port);
    ring_src = gamma_active_src;
    ring_len = gamma_active_len;
    gamma_signal(P_RING);
}

static void bump(void)
{
    shared_counter++;
}

static void test_api(void)
{
    time_586 a, b;
    gamma_time(a);
    CHECK(gamma_how_many_nodes() == n && gamma_my_node() == me, "naming");
    CHECK(gamma_my_par_pid() >= 0 && gamma_my_par_pid() <= 255, "par pid %d", gamma_my_par_pid());
    /* semaphores start at 0, count, and gamma_wait takes n and reports errors */
    CHECK(gamma_test(5) == 0, "semaphore 5 starts at %d", gamma_test(5));
    CHECK_RC(gamma_signal(5), 0);
    CHECK_RC(gamma_signal(5), 0);
    CHECK(gamma_test(5) == 2, "after two signals %d", gamma_test(5));
    CHECK_RC(gamma_wait(5, 2), 0);
    CHECK(gamma_test(5) == 0, "after wait %d", gamma_test(5));
    CHECK_RC(gamma_sigerr(5), 0);
    CHECK_RC(gamma_sigerr(5), 0);
    CHECK_RC(gamma_signal(5), 0);
    CHECK_RC(gamma_wait(5, 1), -2);
    CHECK_RC(gamma_wait(5, 0), 0); /* the errors were counted once */
    CHECK_RC(gamma_atomic(bump), 0);
    CHECK(shared_counter == 1, "gamma_atomic ran its function %d times", shared_counter);
    static char locked[3 * 4096];
    CHECK_RC(gamma_mlock(locked, sizeof locked), 0);
    CHECK_RC(gamma_munlock(locked, sizeof locked), 0);
    CHECK_RC(gamma_munlockall(), 0);
    /* a ring: each instance sends its node number to the next */
    unsigned char next = (unsigned char)((me + 1) % n);
    CHECK_RC(gamma_setport(P_RING, next, (unsigned char)gamma_my_par_pid(), P_RING, ring_handler, NULL, ring_in,
                           sizeof ring_in),
             0);
    CHECK_RC(gamma_sync(), 0);
    for (int round = 0; round < 50; round++) {
        uint64_t v[2] = {(uint64_t)me, (uint64_t)round};
        CHECK_RC(gamma_send(P_RING, v, sizeof v), 0);
        CHECK_RC(wait_sem(P_RING, 1), 0);
        int prev = (me + n - 1) % n;
        CHECK(ring_src == prev && ring_len == 16, "round %d: from %d, %lu bytes", round, ring_src, ring_len);
        /* 16 bytes each into 32: the first of a pair at 0, the second after it */
        uint64_t *at = ring_in + 2 * (round & 1);
        CHECK(at[0] == (uint64_t)prev && at[1] == (uint64_t)round, "round %d: buffer holds %llu %llu", round,
              (unsigned long long)at[0], (unsigned long long)at[1]);
        CHECK_RC(gamma_sync(), 0);
    }
    for (int k = 1; k <= n; k++) {
        CHECK_RC(gamma_sync_chains(k), 0);
        for (int i = 0; i < 20; i++)
            CHECK_RC(gamma_sync(), 0);
    }
    CHECK_RC(gamma_sync_chains(2), 0);
    gamma_time(b);
    CHECK(gamma_time_diff(b, a) > 0 && gamma_time_diff(b, a) < 1e9, "time difference %f us", gamma_time_diff(b, a));
}

/* ---- buffer ------------------------------------------------------------------- */
enum { P_GATHER = 2, P_TRUNC, P_NOBUF, P_EMPTY, P_ATTACH, P_ECHO, S_ERR = 20 };
static uint64_t gather[64];
static char trunc_buf[8];
static uint64_t attach_a[2], attach_b[2];
static volatile unsigned long last_len[GAMMA_FIRST_RESERVED];
static volatile int errs[GAMMA_FIRST_RESERVED], last_errno;
static volatile int depth[GAMMA_FIRST_RESERVED];

static void note(void)
{
    last_len[gamma_active_port] = gamma_active_len;
    gamma_signal(gamma_active_port);
}

static void on_error(void)
{
    errs[gamma_active_port]++;
    last_errno = gamma_errno;
    gamma_sigerr(gamma_active_port);
}

/* Swaps the two buffers after each message: the next goes to the start of
 * the other one. */
static void swap_buffer(void)
{
    uint64_t *now = gamma_active_len && attach_a[0] ? attach_b : attach_a;
    CHECK_RC(gamma_attach_buffer(gamma_active_port, now), 0);
    gamma_signal(gamma_active_port);
}

/* Sends the message straight back from the handler; no message of the same
 * port may start before this handler returns. */
static char echo_buf[32];
static void echo(void)
{
    CHECK(++depth[P_ECHO] == 1, "a second message entered port %d inside its handler", P_ECHO);
    char copy[32];
    memcpy(copy, echo_buf, gamma_active_len);
    if (me == 1)
        CHECK_RC(gamma_send(P_ECHO, copy, gamma_active_len), 0);
    CHECK(memcmp(copy, echo_buf, gamma_active_len) == 0, "the port's buffer changed inside its handler");
    depth[P_ECHO]--;
    gamma_signal(P_ECHO);
}

static void test_buffer(void)
{
    unsigned char pid = (unsigned char)gamma_my_par_pid();
    int senders = n - 1;
    CHECK_RC(gamma_setport(P_GATHER, 0, pid, P_GATHER, note, on_error, gather, (unsigned long)senders * 8), 0);
    CHECK_RC(gamma_setport(P_TRUNC, 0, pid, P_TRUNC, note, on_error, trunc_buf, sizeof trunc_buf), 0);
    CHECK_RC(gamma_setport(P_NOBUF, 0, pid, P_NOBUF, note, on_error, NULL, 0), 0);
    CHECK_RC(gamma_setport(P_EMPTY, 0, pid, P_EMPTY, note, on_error, NULL, 0), 0);
    CHECK_RC(gamma_setport(P_ATTACH, 0, pid, P_ATTACH, swap_buffer, on_error, attach_a, sizeof attach_a), 0);
    CHECK_RC(gamma_setport(P_ECHO, (unsigned char)(1 - (me & 1)), pid, P_ECHO, echo, on_error, echo_buf,
                           sizeof echo_buf),
             0);
    CHECK_RC(gamma_sync(), 0);
    /* gather: every other instance's 8 bytes land one after the other; a
     * full buffer starts again at its beginning */
    for (int round = 1; round <= 3; round++) {
        if (me > 0) {
            uint64_t v = (uint64_t)(me * 100 + round);
            CHECK_RC(gamma_send(P_GATHER, &v, 8), 0);
        } else {
            CHECK_RC(wait_sem(P_GATHER, (unsigned long)senders), 0);
            uint64_t seen = 0;
            for (int i = 0; i < senders; i++) {
                uint64_t v = gather[i];
                CHECK(v % 100 == (uint64_t)round && v / 100 >= 1 && v / 100 < (uint64_t)n, "slot %d holds %llu", i,
                      (unsigned long long)v);
                seen |= 1ull << (v / 100);
            }
            CHECK(seen == ((1ull << n) - 2), "round %d: senders seen %llx", round, (unsigned long long)seen);
        }
        CHECK_RC(gamma_sync(), 0);
    }
    char big[16] = "0123456789abcdef";
    if (me == 1)
        CHECK_RC(gamma_send(P_TRUNC, big, sizeof big), 0); /* 16 bytes into 8: truncated */
    if (me == 0) {
        CHECK_RC(wait_sem(P_TRUNC, 1), -1);
        CHECK(last_len[P_TRUNC] == 8 && last_errno == GAMMA_ERR_MSGTOOLONG && !memcmp(trunc_buf, "01234567", 8),
              "truncation: %lu bytes, errno %d", last_len[P_TRUNC], last_errno);
    }
    CHECK_RC(gamma_sync(), 0);
    if (me == 1) {
        CHECK_RC(gamma_send(P_TRUNC, big + 12, 4), 0);      /* after a truncation the buffer is full: at 0 */
        CHECK_RC(gamma_send(P_NOBUF, big, 5), 0);           /* no buffer */
        CHECK_RC(gamma_send(P_EMPTY, NULL, 0), 0);          /* an empty message runs the handler */
        uint64_t v = 7;
        CHECK_RC(gamma_send(P_ATTACH, &v, 8), 0);
        v = 8;
        CHECK_RC(gamma_send(P_ATTACH, &v, 8), 0);
    }
    if (me == 0) {
        CHECK_RC(wait_sem(P_TRUNC, 1), 0);
        CHECK(last_len[P_TRUNC] == 4 && !memcmp(trunc_buf, "cdef4567", 8), "after truncation %lu bytes: %.8s",
              last_len[P_TRUNC], trunc_buf);
        CHECK_RC(wait_sem(P_NOBUF, 1), -1);
        CHECK(last_len[P_NOBUF] == 0 && errs[P_NOBUF] == 1, "no buffer: %lu bytes, %d errors", last_len[P_NOBUF],
              errs[P_NOBUF]);
        CHECK_RC(wait_sem(P_EMPTY, 1), 0);
        CHECK(last_len[P_EMPTY] == 0 && errs[P_EMPTY] == 0, "empty message");
        CHECK_RC(wait_sem(P_ATTACH, 2), 0);
        CHECK(attach_a[0] == 7 && attach_b[0] == 8 && attach_a[1] == 0 && attach_b[1] == 0,
              "attach_buffer: a = %llu %llu, b = %llu %llu", (unsigned long long)attach_a[0],
              (unsigned long long)attach_a[1], (unsigned long long)attach_b[0], (unsigned long long)attach_b[1]);
    }
    CHECK_RC(gamma_sync(), 0);
    /* ping-pong between pairs (0,1), (2,3)...: instance 1's handler answers */
    if (me < 2 && n >= 2) {
        for (int i = 0; i < 500; i++) {
            if (me == 0) {
                char m[32];
                memset(m, i & 0x7f, sizeof m);
                CHECK_RC(gamma_send(P_ECHO, m, sizeof m), 0);
            }
            CHECK_RC(wait_sem(P_ECHO, 1), 0);
            CHECK(me == 1 || echo_buf[0] == (char)(i & 0x7f), "echo %d holds %d", i, echo_buf[0]);
        }
    }
    CHECK_RC(gamma_sync(), 0);
}

/* ---- broadcast ------------------------------------------------------------------ */
enum { P_BCAST = 9 };
static uint64_t bcast_in[2 * 64];
static volatile int bcast_from[64];

static void bcast_handler(void)
{
    CHECK(gamma_active_len == 16, "broadcast of %lu bytes", gamma_active_len);
    bcast_from[gamma_active_src]++;
    gamma_signal(P_BCAST);
}

static void test_broadcast(void)
{
    unsigned char pid = (unsigned char)gamma_my_par_pid();
    CHECK_RC(gamma_setport(P_BCAST, BROADCAST, pid, P_BCAST, bcast_handler, NULL, bcast_in, sizeof bcast_in), 0);
    CHECK_RC(gamma_sync(), 0);
    for (int round = 0; round < 5; round++) {
        uint64_t v[2] = {(uint64_t)me, (uint64_t)round};
        CHECK_RC(gamma_send(P_BCAST, v, sizeof v), 0);
        CHECK_RC(wait_sem(P_BCAST, (unsigned long)(n - 1)), 0);
        CHECK_RC(gamma_sync(), 0);
        CHECK_RC(gamma_attach_buffer(P_BCAST, bcast_in), 0);
    }
    for (int r = 0; r < n; r++)
        CHECK(bcast_from[r] == (r == me ? 0 : 5), "%d broadcasts from instance %d", bcast_from[r], r);
    const char *frames = getenv("TEST_BCAST_FRAMES"); /* expected: each send one frame (1) or none (0) */
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    if (frames)
        CHECK(st.am_bcast_frames == (atoi(frames) ? 5u : 0u), "%llu broadcasts left as one frame",
              (unsigned long long)st.am_bcast_frames);
}

/* ---- large --------------------------------------------------------------------- */
/* Messages of many pieces sent back from a handler (which must not wait
 * for room: what does not fit leaves from the next call outside handlers). */
enum { P_LARGE = 10 };
#define LARGE (4 * 1024 * 1024)
static unsigned char *large_in, *large_out;

static void large_echo(void)
{
    CHECK(gamma_active_len == LARGE, "large message of %lu bytes", gamma_active_len);
    if (me == 1) {
        memcpy(large_out, large_in, LARGE);
        CHECK_RC(gamma_send(P_LARGE, large_out, LARGE), 0);
    }
    gamma_signal(P_LARGE);
}

static void test_large(void)
{
    large_in = calloc(1, LARGE);
    large_out = calloc(1, LARGE);
    CHECK(large_in && large_out, "memory");
    if (me < 2)
        CHECK_RC(gamma_setport(P_LARGE, (unsigned char)(1 - me), (unsigned char)gamma_my_par_pid(), P_LARGE,
                               large_echo, NULL, large_in, LARGE),
                 0);
    CHECK_RC(gamma_sync(), 0);
    for (int i = 0; i < 10 && me < 2; i++) {
        if (me == 0) {
            for (size_t j = 0; j < LARGE; j++)
                large_out[j] = (unsigned char)(i + j * 7);
            CHECK_RC(gamma_send(P_LARGE, large_out, LARGE), 0);
        }
        CHECK_RC(wait_sem(P_LARGE, 1), 0);
        for (size_t j = 0; me == 0 && j < LARGE; j++)
            CHECK(large_in[j] == (unsigned char)(i + j * 7), "round %d byte %zu", i, j);
    }
    CHECK_RC(gamma_sync(), 0);
    free(large_in);
    free(large_out);
}

/* ---- misuse ------------------------------------------------------------------------ */
enum { P_UNBOUND = 11, P_OUT, P_SYNC_IN_HANDLER, P_UNBOUND_OUT, P_AFTER };
static volatile int unbound_got, send_failures, handler_rc[2];

static void count_unbound(void)
{
    unbound_got++;
    gamma_signal(P_UNBOUND);
}

static void send_failed(void)
{
    CHECK(gamma_errno == GAMMA_ERR_SENDFAILURE && gamma_active_port == P_OUT, "errno %d port %d", gamma_errno,
          gamma_active_port);
    send_failures++;
    gamma_sigerr(P_OUT);
}

static void blocking_in_handler(void)
{
    handler_rc[0] = gamma_wait(P_SYNC_IN_HANDLER, 1000);
    handler_rc[1] = gamma_sync();
    gamma_signal(P_SYNC_IN_HANDLER);
}

static void test_misuse(void)
{
    unsigned char pid = (unsigned char)gamma_my_par_pid();
    for (int p = GAMMA_FIRST_RESERVED; p <= 255; p++) {
        CHECK_RC(gamma_setport((unsigned char)p, 0, pid, 1, NULL, NULL, NULL, 0), SHOAL_EINVAL);
        CHECK_RC(gamma_send((unsigned char)p, NULL, 0), SHOAL_EINVAL);
        CHECK_RC(gamma_attach_buffer((unsigned char)p, gather), SHOAL_EINVAL);
        CHECK_RC(gamma_signal((unsigned char)p), SHOAL_EINVAL);
        CHECK_RC(gamma_sigerr((unsigned char)p), SHOAL_EINVAL);
        CHECK_RC(gamma_wait((unsigned char)p, 0), SHOAL_EINVAL);
        CHECK_RC(gamma_test((unsigned char)p), SHOAL_EINVAL);
    }
    CHECK_RC(gamma_setport(1, 0, pid, (unsigned char)GAMMA_FIRST_RESERVED, NULL, NULL, NULL, 0), SHOAL_EINVAL);
    CHECK_RC(gamma_setport(1, (unsigned char)n, pid, 1, NULL, NULL, NULL, 0), SHOAL_ERANK);
    CHECK_RC(gamma_send(30, "x", 1), SHOAL_EINVAL);      /* never bound */
    CHECK_RC(gamma_attach_buffer(31, gather), SHOAL_EINVAL); /* never bound */
    CHECK_RC(gamma_setport(31, 0, pid, 1, NULL, NULL, NULL, 0), 0);
    CHECK_RC(gamma_attach_buffer(31, gather), SHOAL_EINVAL); /* bound without a buffer: no size */
    CHECK_RC(gamma_setport(32, 0, (unsigned char)(pid + 1), 1, NULL, NULL, NULL, 0), 0);
    CHECK_RC(gamma_send(32, "x", 1), SHOAL_EINVAL); /* another group */
    CHECK_RC(gamma_send(31, NULL, 4), SHOAL_EINVAL);
    CHECK_RC(gamma_atomic(NULL), SHOAL_EINVAL);
    CHECK_RC(gamma_sync_chains(0), SHOAL_EINVAL);
    CHECK_RC(gamma_init(n, 0, NULL), SHOAL_EINIT);
    /* a message to a port not bound at its destination is discarded; the
     * one sent after it on another port tells that it has been handled */
    int to = (me + 1) % n;
    CHECK_RC(gamma_setport(P_UNBOUND_OUT, (unsigned char)to, pid, P_UNBOUND, NULL, NULL, NULL, 0), 0);
    CHECK_RC(gamma_setport(P_AFTER, (unsigned char)to, pid, P_AFTER, note, NULL, NULL, 0), 0);
    CHECK_RC(gamma_sync(), 0);
    CHECK_RC(gamma_send(P_UNBOUND_OUT, NULL, 0), 0);
    CHECK_RC(gamma_send(P_AFTER, NULL, 0), 0);
    CHECK_RC(wait_sem(P_AFTER, 1), 0);
    CHECK_RC(gamma_setport(P_UNBOUND, (unsigned char)to, pid, P_UNBOUND, count_unbound, NULL, NULL, 0), 0);
    CHECK_RC(gamma_sync(), 0);
    CHECK_RC(gamma_send(P_UNBOUND, NULL, 0), 0);
    CHECK_RC(wait_sem(P_UNBOUND, 1), 0);
    CHECK_RC(gamma_sync(), 0);
    CHECK(unbound_got == 1, "port %d ran its handler %d times", P_UNBOUND, unbound_got);
    /* a send the transport refuses (above SHOAL_AM_LARGE_MAX): SENDFAILURE */
    static char huge[8192];
    CHECK_RC(gamma_setport(P_OUT, (unsigned char)to, pid, P_OUT, NULL, send_failed, NULL, 0), 0);
    CHECK_RC(gamma_send(P_OUT, huge, sizeof huge), SHOAL_ETOOBIG);
    CHECK(send_failures == 1, "the error handler ran %d times", send_failures);
    CHECK_RC(gamma_wait(P_OUT, 0), -1);
    /* calls that would block a handler are refused there */
    CHECK_RC(gamma_setport(P_SYNC_IN_HANDLER, (unsigned char)to, pid, P_SYNC_IN_HANDLER, blocking_in_handler, NULL,
                           NULL, 0),
             0);
    CHECK_RC(gamma_sync(), 0);
    CHECK_RC(gamma_send(P_SYNC_IN_HANDLER, NULL, 0), 0);
    CHECK_RC(wait_sem(P_SYNC_IN_HANDLER, 1), 0);
    CHECK(handler_rc[0] == SHOAL_EHANDLER && handler_rc[1] == SHOAL_EHANDLER, "in a handler: wait %d, sync %d",
          handler_rc[0], handler_rc[1]);
    CHECK_RC(gamma_sync(), 0);
}

int main(int argc, char **argv)
{
    const char *test = argc > 1 ? argv[1] : "api";
    CHECK_RC(gamma_my_node(), SHOAL_ENOTINIT);
    CHECK_RC(gamma_send(1, NULL, 0), SHOAL_ENOTINIT);
    CHECK_RC(gamma_sync(), SHOAL_ENOTINIT);
    CHECK_RC(gamma_exit(), SHOAL_ENOTINIT);
    CHECK_RC(gamma_init(0, argc, argv), 0);
    me = gamma_my_node();
    n = gamma_how_many_nodes();
    CHECK(n <= 64, "at most 64 instances here");
    if (!strcmp(test, "api"))
        test_api();
    else if (!strcmp(test, "buffer"))
        test_buffer();
    else if (!strcmp(test, "large"))
        test_large();
    else if (!strcmp(test, "broadcast"))
        test_broadcast();
    else if (!strcmp(test, "misuse"))
        test_misuse();
    else
        CHECK(0, "unknown subtest %s", test);
    CHECK_RC(gamma_exit(), 0);
    CHECK_RC(gamma_my_node(), SHOAL_ENOTINIT);
    if (me == 0)
        printf("test_gamma %s passed on %d instances\n", test, n);
    return 0;
}
