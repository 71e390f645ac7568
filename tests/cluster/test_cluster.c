/* The cluster transport's behaviour as a job sees it (run with
 * SHOAL_TRANSPORT=udp|eth and SHOAL_NET_LOCAL=1 through shoalrun -n 2):
 *   idle    a rank waiting in a barrier while its peer computes uses (almost)
 *           no CPU with SHOAL_NET_WAIT=block;
 *   inject  foreign and malformed packets sent at rank 1 from a separate
 *           socket during AM traffic are dropped and counted, once per
 *           datagram, and the traffic's results are exact;
 *   stall   rank 1 stops (SIGSTOP): rank 0 must end the job naming it
 *           (checked by check_stall.py);
 *   peers   rank 0 talks to every peer and then measures what they cost
 *           it in heap memory once idle (3 ranks or more);
 *   barriers a healthy job of one rank per host (3 or more, with UDP or
 *           raw broadcast) drops no packet as foreign or malformed while
 *           barriers run;
 *   coalesce bursts of equal requests arrive coalesced (udp: UDP_GRO) and
 *           each runs once;
 *   forged  barriers and rank 0's broadcast requests (one MULTI packet
 *           each) for a few seconds while an outsider forges packets
 *           (check_forge.py): each broadcast runs once at every rank, in
 *           order;
 *   compute rank 1 computes for 3 x SHOAL_NET_DEAD_MS without calling shoal:
 *           with the progress thread (SHOAL_NET_THREAD=1) it still answers
 *           keepalives, so it is not declared dead;
 *   quiet   (any number of ranks, meant for heavy SHOAL_FAULTS loss or many
 *           ranks on few cores) rank 0 computes for 4 x SHOAL_NET_DEAD_MS
 *           without calling shoal (its progress thread answers) while the
 *           others wait in a barrier: only keepalives go, and nobody may be
 *           declared dead. */
#include "net/net.h"
#include "net/wire.h"
#include "shoal.h"
#include "../common/check.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { H_ECHO, H_ECHO_REP, H_ENDPOINT, H_PING, H_PONG, H_BURST, H_ROUND };
#define ROUNDS 4000u

static int me;
static volatile uint64_t echoes, sum;
static char peer_endpoint[96];

static void echo(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)na;
    CHECK_RC(shoal_am_reply_medium(t, H_ECHO_REP, 0, buf, n, shoal_args(a[0] * 3)), SHOAL_OK);
}

static void echo_reply(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)na;
    CHECK(n == (size_t)(a[0] / 3 % 1500), "echo of %zu bytes for value %llu", n, (unsigned long long)a[0]);
    sum += a[0];
    echoes++;
}

static void endpoint(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)a, (void)na;
    CHECK(n < sizeof peer_endpoint, "endpoint of %zu bytes", n);
    memcpy(peer_endpoint, buf, n);
}

static volatile uint64_t pongs;

static void ping(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf, (void)na;
    CHECK(n == a[0], "ping of %zu bytes, sent %llu", n, (unsigned long long)a[0]);
    CHECK_RC(shoal_am_reply_short(t, H_PONG, 0, shoal_noargs), SHOAL_OK);
}

static void pong(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n, (void)a, (void)na;
    pongs++;
}

/* The bound: what a peer costs once it has gone quiet. */
#define PEER_BYTES_MAX (64u << 10)

/* Rank 0 and ranks [lo, hi) exchange a short message, a one-packet medium
 * and a many-fragment medium each way, then go quiet: every packet
 * acknowledged and released (the poll outlasts the delayed ACKs). */
static void talk(int lo, int hi, char *buf, size_t big)
{
    size_t sizes[3] = {0, 256, big};
    int sent = 0;
    for (int p = lo; p < hi; p++) {
        if (me != 0 && me != p)
            continue;
        for (int i = 0; i < 3; i++, sent++)
            CHECK_RC(shoal_am_request_medium(me == 0 ? p : 0, H_PING, 0, buf, sizes[i], shoal_args(sizes[i])),
                     SHOAL_OK);
    }
    double t0 = test_now();
    while (pongs < (uint64_t)sent) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, 30, "the pongs");
    }
    pongs = 0;
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    for (t0 = test_now(); test_now() - t0 < 0.2;)
        CHECK_RC(shoal_poll(), SHOAL_OK);
}

/* heap in use, mmapped blocks included */
static double heap_bytes(void)
{
    struct mallinfo2 m = mallinfo2();
    return (double)m.uordblks + (double)m.hblkhd;
}

/* Memory per idle peer: rank 0's heap growth from talking to peers 2..n-1
 * once it has talked to peer 1, divided by those peers.  Talking to peer 1
 * first leaves out what the process keeps once, whoever it talks to (the
 * engines' pools of packet buffers). */
static void test_peers(void)
{
    int n = shoal_size();
    CHECK(n >= 3, "run peers with at least 3 ranks");
    size_t big = shoal_am_max_medium() < (64u << 10) ? shoal_am_max_medium() : (64u << 10);
    char *buf = calloc(big, 1);
    CHECK(buf != NULL, "out of memory");
    if (mallinfo2().uordblks == 0) { /* a sanitizer's allocator: glibc's counters stay 0 */
        printf("peers: the allocator does not report its use; skipped\n");
        CHECK_RC(shoal_finalize(), SHOAL_OK);
        exit(77);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    talk(1, 2, buf, big);
    double before = heap_bytes();
    talk(2, n, buf, big);
    double per = (heap_bytes() - before) / (n - 2);
    free(buf);
    if (me == 0) {
        printf("peers: %d peers cost %.0f bytes of heap each once idle (limit %u)\n", n - 2, per,
               PEER_BYTES_MAX);
        CHECK(per <= PEER_BYTES_MAX, "an idle peer costs %.0f bytes", per);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static void test_idle(void)
{
    if (me == 1) { /* computing: no library call for 1.5 s */
        double t0 = test_now();
        while (test_now() - t0 < 1.5) {
        }
    }
    double wall0 = test_now(), cpu0 = cpu_seconds();
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    double wall = test_now() - wall0, cpu = cpu_seconds() - cpu0;
    if (me == 0) {
        CHECK(wall > 1.0, "the barrier returned after %.3f s, before the peer arrived", wall);
        CHECK(cpu < 0.05 * wall, "waiting %.3f s in a barrier used %.3f s of CPU", wall, cpu);
        printf("idle: %.3f s waiting, %.3f s of CPU\n", wall, cpu);
    }
}

/* ---- inject ---------------------------------------------------------------- */

#define BAD_PIECES 10 /* the most packets one injected datagram holds back to back */
struct bad_packet {
    const char *what;
    int foreign; /* counted as foreign (else malformed) */
    unsigned char bytes[BAD_PIECES * (WIRE_HEADER_BYTES + 16)];
    size_t len;
};

/* A DATA packet for rank 1 of this job, tagged under a secret that is not
 * the job's (an outsider cannot know it), changed by `damage`. */
static size_t make_packet(unsigned char *p, uint64_t job, void (*damage)(struct wire_header *))
{
    struct wire_header h = {.type = WIRE_DATA, .job = job, .src = 0, .dst = 1, .src_inc = 7, .seq = 1, .len = 16};
    if (damage)
        damage(&h);
    unsigned char payload[16] = {0};
    struct wire_key guess;
    CHECK_RC(wire_key_init(&guess, 0x5eed, 0x5eed, 0), SHOAL_OK);
    size_t n = wire_encode(p, WIRE_HEADER_BYTES + 16, &h, payload, &guess, 1);
    wire_key_fini(&guess);
    return n;
}

static void other_job(struct wire_header *h) { h->job ^= 1; }

/* What an outsider can send: each is refused before the tag check or by
 * it; `foreign` says which counter it lands in. */
static size_t build_bad_packets(struct bad_packet *b, uint64_t job)
{
    size_t n = 0;
    b[n] = (struct bad_packet){.what = "not shoal", .foreign = 1, .len = 80};
    memset(b[n++].bytes, 0xab, 80);
    b[n] = (struct bad_packet){.what = "right job, wrong secret", .foreign = 1};
    b[n].len = make_packet(b[n].bytes, job, NULL);
    n++;
    b[n] = (struct bad_packet){.what = "another job", .foreign = 1};
    b[n].len = make_packet(b[n].bytes, job, other_job);
    n++;
    b[n] = (struct bad_packet){.what = "another version", .foreign = 1};
    b[n].len = make_packet(b[n].bytes, job, NULL);
    b[n++].bytes[4] = WIRE_VERSION + 1;
    b[n] = (struct bad_packet){.what = "bad checksum"};
    b[n].len = make_packet(b[n].bytes, job, NULL);
    b[n++].bytes[40] ^= 0x40; /* seq changed after the CRC was computed */
    b[n] = (struct bad_packet){.what = "shorter than a header"};
    b[n].len = make_packet(b[n].bytes, job, NULL) - 40;
    n++;
    /* one datagram is one packet, dropped once, however many headers it
     * holds (the receiver cuts only where the kernel coalesced datagrams) */
    b[n] = (struct bad_packet){.what = "ten packets of another job in one datagram", .foreign = 1};
    for (int i = 0; i < BAD_PIECES; i++)
        b[n].len += make_packet(b[n].bytes + b[n].len, job, other_job);
    n++;
    return n;
}

/* Which of the bad packets the test sends: every 16th round, in turn. */
#define INJECT_EVERY 16u
static const struct bad_packet *injected(const struct bad_packet *bad, size_t nbad, uint64_t round)
{
    return round % INJECT_EVERY ? NULL : &bad[round / INJECT_EVERY % nbad];
}

/* A socket of the same kind as the job's carrier, aimed at rank 1. */
static int injector(const char *ep, struct sockaddr_storage *to, socklen_t *tolen)
{
    char host[64];
    unsigned port;
    if (sscanf(ep, "udp %63[^:]:%u", host, &port) == 2) {
        struct sockaddr_in *in = (struct sockaddr_in *)to;
        memset(to, 0, sizeof *to);
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        CHECK(inet_pton(AF_INET, host, &in->sin_addr) == 1, "endpoint \"%s\"", ep);
        *tolen = sizeof *in;
        return socket(AF_INET, SOCK_DGRAM, 0);
    }
    char ifname[IF_NAMESIZE];
    unsigned mac[6];
    CHECK(sscanf(ep, "eth %15s %x:%x:%x:%x:%x:%x", ifname, &mac[0], &mac[1], &mac[2], &mac[3], &mac[4],
                 &mac[5]) == 7, "endpoint \"%s\"", ep);
    struct sockaddr_ll *ll = (struct sockaddr_ll *)to;
    memset(to, 0, sizeof *to);
    ll->sll_family = AF_PACKET;
    ll->sll_protocol = htons(WIRE_ETHERTYPE);
    ll->sll_ifindex = (int)if_nametoindex(ifname);
    ll->sll_halen = 6;
    for (int i = 0; i < 6; i++)
        ll->sll_addr[i] = (unsigned char)mac[i];
    *tolen = sizeof *ll;
    return socket(AF_PACKET, SOCK_DGRAM, htons(WIRE_ETHERTYPE));
}

static void test_inject(void)
{
    shoal_am_register(H_ENDPOINT, endpoint);
    const char *job_env = getenv("SHOAL_JOB_ID");
    struct bad_packet bad[8];
    size_t nbad = build_bad_packets(bad, job_env ? strtoull(job_env, NULL, 16) : 0);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    struct shoal_stats before, after;
    CHECK_RC(shoal_stats_get(&before), SHOAL_OK);
    if (me == 1) {
        char ep[96];
        net_transport.describe(ep, sizeof ep);
        CHECK_RC(shoal_am_request_medium(0, H_ENDPOINT, 0, ep, strlen(ep) + 1, shoal_noargs), SHOAL_OK);
    }
    if (me == 0) {
        double t0 = test_now();
        while (!peer_endpoint[0]) {
            shoal_poll();
            TEST_DEADLINE(t0, 10, "rank 1's endpoint");
        }
        struct sockaddr_storage to;
        socklen_t tolen;
        int fd = injector(peer_endpoint, &to, &tolen);
        CHECK(fd >= 0, "injector socket for %s", peer_endpoint);
        /* interleaved with real traffic: every echo must come back exact */
        char buf[1500];
        memset(buf, 0x5a, sizeof buf);
        uint64_t want = 0;
        for (uint64_t i = 1; i <= ROUNDS; i++) {
            const struct bad_packet *b = injected(bad, nbad, i);
            if (b)
                CHECK(sendto(fd, b->bytes, b->len, 0, (struct sockaddr *)&to, tolen) == (ssize_t)b->len,
                      "injecting \"%s\"", b->what);
            CHECK_RC(shoal_am_request_medium(1, H_ECHO, 0, buf, i % 1500, shoal_args(i)), SHOAL_OK);
            want += 3 * i;
            while (echoes + 64 < i)
                shoal_poll();
        }
        while (echoes < ROUNDS) {
            shoal_poll();
            TEST_DEADLINE(t0, 60, "the echoes");
        }
        CHECK(sum == want, "echo sum %llu, expected %llu", (unsigned long long)sum, (unsigned long long)want);
        close(fd);
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_stats_get(&after), SHOAL_OK);
    if (me == 1) {
        uint64_t foreign = 0, malformed = 0;
        for (uint64_t i = 1; i <= ROUNDS; i++) {
            const struct bad_packet *b = injected(bad, nbad, i);
            foreign += b && b->foreign;
            malformed += b && !b->foreign;
        }
        uint64_t f = after.net_dropped_foreign - before.net_dropped_foreign;
        uint64_t m = after.net_dropped_malformed - before.net_dropped_malformed;
        printf("inject: %llu foreign and %llu malformed injected; dropped %llu foreign, %llu malformed\n",
               (unsigned long long)foreign, (unsigned long long)malformed, (unsigned long long)f,
               (unsigned long long)m);
        /* On a shared medium (raw frames on lo) a rank also sees, and drops,
         * frames for other ranks (as malformed: not its rank) and other
         * jobs' frames (foreign): there the counts are lower bounds. */
        char ep[96];
        int shared = strncmp(net_transport.describe(ep, sizeof ep), "eth", 3) == 0;
        CHECK(shared ? f >= foreign : f == foreign, "%llu foreign drops for %llu injected", (unsigned long long)f,
              (unsigned long long)foreign);
        CHECK(shared ? m >= malformed : m == malformed, "%llu malformed drops for %llu injected",
              (unsigned long long)m, (unsigned long long)malformed);
    }
}

/* A healthy job drops nothing: barriers released by broadcast (the
 * cluster in a box, one rank per host) count no foreign or malformed
 * packet anywhere, rank 0's own broadcasts, which come back to its host's
 * broadcast receiver, included. */
#define BARRIERS 200
static void test_barriers(void)
{
    CHECK(net_transport.bcast_native(), "the job has no native broadcast (run it on hosts with a broadcast address)");
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    struct shoal_stats before, after;
    CHECK_RC(shoal_stats_get(&before), SHOAL_OK);
    for (int i = 0; i < BARRIERS; i++)
        CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_stats_get(&after), SHOAL_OK);
    uint64_t f = after.net_dropped_foreign - before.net_dropped_foreign;
    uint64_t m = after.net_dropped_malformed - before.net_dropped_malformed;
    printf("barriers: rank %d dropped %llu foreign and %llu malformed packets in %d barriers\n", me,
           (unsigned long long)f, (unsigned long long)m, BARRIERS);
    CHECK(f == 0 && m == 0, "rank %d: %llu foreign and %llu malformed drops in a healthy job", me,
          (unsigned long long)f, (unsigned long long)m);
}

/* Rank 0's broadcast requests: round n carries n, and each runs once, in
 * order (a replayed or forged MULTI must not run one again or early). */
static volatile uint64_t rounds_seen;

static void on_round(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)n;
    CHECK(na == 1 && a[0] == rounds_seen, "rank %d: broadcast round %llu arrived where %llu was due", me,
          (unsigned long long)(na ? a[0] : 0), (unsigned long long)rounds_seen);
    rounds_seen++;
}

/* Barriers and rank 0's one-frame broadcasts for TEST_FORGE_SECONDS
 * (default 4) while check_forge.py's outsider replays and alters what it
 * sniffs; the job must not notice, beyond counting the forged packets as
 * foreign and the replayed ones as duplicates. */
static void test_forged(void)
{
    shoal_am_register(H_ROUND, on_round);
    const char *s = getenv("TEST_FORGE_SECONDS");
    double until = test_now() + (s ? atof(s) : 4.0);
    int go = 1, n = 0;
    while (go) {
        CHECK_RC(shoal_barrier(), SHOAL_OK);
        if (me == 0) {
            uint64_t round = (uint64_t)n;
            CHECK_RC(shoal_am_bcast_short(H_ROUND, 0, 1, &round), SHOAL_OK);
            go = test_now() < until;
        }
        n++;
        CHECK_RC(shoal_broadcast(&go, sizeof go, 0), SHOAL_OK);
    }
    double t0 = test_now();
    while (me != 0 && rounds_seen < (uint64_t)n) {
        CHECK_RC(shoal_poll(), SHOAL_OK);
        TEST_DEADLINE(t0, 30, "rank 0's broadcasts");
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK); /* nothing runs after the count is checked */
    CHECK(me == 0 || rounds_seen == (uint64_t)n, "rank %d: %llu broadcasts ran, rank 0 sent %d", me,
          (unsigned long long)rounds_seen, n);
    struct shoal_stats st;
    CHECK_RC(shoal_stats_get(&st), SHOAL_OK);
    printf("forged: rank %d ran %d barriers, dropped %llu foreign packets, %llu broadcasts in one frame\n", me,
           n, (unsigned long long)st.net_dropped_foreign, (unsigned long long)st.am_bcast_frames);
}

/* Equal requests sent together (SHOAL_MORE) leave as one segmented run
 * (UDP_SEGMENT) and, over loopback, arrive as one coalesced buffer
 * (UDP_GRO): rank 1 must see such buffers, and run every handler once. */
#define BURST 32
#define BURSTS 50
static volatile uint64_t burst_seen;
static void burst(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)buf, (void)a, (void)na;
    CHECK(n == 1000, "a burst request of %zu bytes", n);
    burst_seen++;
}

static void test_coalesce(void)
{
    shoal_am_register(H_BURST, burst);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    struct tp_stats before, after;
    net_transport.stats(&before);
    double t0 = test_now();
    if (me == 0) {
        static char buf[1000];
        for (int b = 0; b < BURSTS; b++)
            for (int i = 0; i < BURST; i++)
                CHECK_RC(shoal_am_request_medium(1, H_BURST, i + 1 < BURST ? SHOAL_MORE : 0, buf, sizeof buf,
                                                 shoal_noargs), SHOAL_OK);
    } else {
        while (burst_seen < BURST * BURSTS) {
            shoal_poll();
            TEST_DEADLINE(t0, 30, "the bursts");
        }
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    net_transport.stats(&after);
    if (me == 1) {
        uint64_t c = after.rx_coalesced - before.rx_coalesced, p = after.packets_received - before.packets_received;
        printf("coalesce: %llu packets received, %llu buffers of several\n", (unsigned long long)p,
               (unsigned long long)c);
        CHECK(burst_seen == BURST * BURSTS, "%llu burst handlers ran for %d", (unsigned long long)burst_seen,
              BURST * BURSTS);
        CHECK(c > 0, "none of %llu packets arrived coalesced", (unsigned long long)p);
    }
}

static void test_compute(void)
{
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    double dead_s = atof(getenv("SHOAL_NET_DEAD_MS") ? getenv("SHOAL_NET_DEAD_MS") : "3000") / 1000;
    if (me == 1) {
        double t0 = test_now();
        while (test_now() - t0 < 3 * dead_s) {
        }
    }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0)
        printf("compute: rank 1 computed %.1f s without a call and stayed alive\n", 3 * dead_s);
}

static void test_quiet(void)
{
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    double dead_s = atof(getenv("SHOAL_NET_DEAD_MS") ? getenv("SHOAL_NET_DEAD_MS") : "3000") / 1000;
    double t0 = test_now();
    if (me == 0)
        while (test_now() - t0 < 4 * dead_s) {
        }
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 0)
        printf("quiet: %d ranks stayed alive through %.1f s of silence\n", shoal_size(), test_now() - t0);
}

static void on_failure(int rank, const char *reason, void *arg)
{
    fprintf(stderr, "failure handler of rank %d (%s): rank %d: %s\n", me, (const char *)arg, rank, reason);
}

static void test_stall(void)
{
    shoal_on_peer_failure(on_failure, "registered");
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (me == 1)
        raise(SIGSTOP); /* alive for the launcher, silent for the network */
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    printf("survived: the barrier passed without rank 1\n");
}

int main(int argc, char **argv)
{
    const char *test = argc > 1 ? argv[1] : "";
    CHECK_RC(shoal_init(&argc, &argv), SHOAL_OK);
    me = shoal_rank();
    shoal_am_register(H_ECHO, echo);
    shoal_am_register(H_ECHO_REP, echo_reply);
    shoal_am_register(H_PING, ping);
    shoal_am_register(H_PONG, pong);
    CHECK(!shoal_rank_local((me + 1) % shoal_size()), "run the ranks on different hosts, or with SHOAL_NET_LOCAL=1");
    static const struct {
        const char *name;
        void (*fn)(void);
        int any_size; /* else run it with -n 2 */
    } tests[] = {{"peers", test_peers, 1},       {"idle", test_idle, 0},         {"inject", test_inject, 0},
                 {"stall", test_stall, 0},       {"compute", test_compute, 0},   {"barriers", test_barriers, 1},
                 {"coalesce", test_coalesce, 0}, {"forged", test_forged, 1},     {"quiet", test_quiet, 1}};
    size_t t = 0, n = sizeof tests / sizeof tests[0];
    while (t < n && strcmp(test, tests[t].name))
        t++;
    CHECK(t < n, "unknown test \"%s\"", test);
    CHECK(shoal_size() == 2 || tests[t].any_size, "run %s with -n 2", test);
    tests[t].fn();
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    if (me == 0)
        printf("test_cluster %s passed\n", test);
    return 0;
}
