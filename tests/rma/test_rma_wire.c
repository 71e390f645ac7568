/* Malformed served-path messages (docs/RMA.md §2.3), built by hand from the
 * documented wire layout and sent through the internal AM handlers: each
 * is dropped and counted (stats.dropped), the target's memory is
 * untouched, a malformed request that names a command gets SHOAL_EINVAL
 * back (which the initiator drops, as it names nothing in flight), and the
 * job carries on.  Two ranks, SHOAL_RMA_DIRECT=0. */
#include "../common/check.h"
#include "am/am.h"

#include <shoal.h>
#include <string.h>

enum { REQ = AM_INTERNAL_BASE, REP };
enum { KIND, ID, KEY, OFF, N, COOKIE, A, B, C, OUT, REQ_ARGS };
enum { PUT, PUT_FLAG, GET, FETCH_OP, CAS };
#define REP_ARGS 6
#define SEG 4096
#define MALFORMED 11 /* messages send_malformed sends */

static void send_raw(int to, unsigned handler, const void *data, size_t n, unsigned nargs, const uint64_t *a)
{
    CHECK_RC(am_request_internal(to, handler, 0, data, n, nargs, a), SHOAL_OK);
}

/* Sends every malformed message to `to`; returns how many it sent. */
static int send_malformed(shoal_rmem_t t)
{
    char ff[64];
    memset(ff, 0xff, sizeof ff);
    uint64_t base[REQ_ARGS] = {[KIND] = PUT, [ID] = t.id, [KEY] = t.key, [N] = 16, [C] = 16};
    uint64_t a[REQ_ARGS];
    int sent = 0;
#define SEND(data, n, nargs, h) (send_raw(t.rank, (h), (data), (n), (nargs), a), sent++)
    memcpy(a, base, sizeof a);
    SEND(ff, 16, 3, REQ); /* too few arguments */
    memcpy(a, base, sizeof a), a[KIND] = 200;
    SEND(ff, 16, REQ_ARGS, REQ); /* unknown kind */
    memcpy(a, base, sizeof a);
    SEND(ff, 8, REQ_ARGS, REQ); /* 16 bytes announced, 8 carried */
    memcpy(a, base, sizeof a), a[C] = 8;
    SEND(ff, 16, REQ_ARGS, REQ); /* a part longer than its whole command */
    memcpy(a, base, sizeof a), a[OFF] = 8, a[OUT] = 16, a[C] = 64;
    SEND(ff, 16, REQ_ARGS, REQ); /* a part placed before the segment's start */
    memcpy(a, base, sizeof a), a[KIND] = FETCH_OP, a[N] = 2, a[C] = 1ull << 62;
    SEND(ff, 16, REQ_ARGS, REQ); /* a whole extent that overflows */
    memcpy(a, base, sizeof a), a[KIND] = CAS, a[N] = 0, a[OUT] = 8;
    SEND(NULL, 0, REQ_ARGS, REQ); /* an unsplit command placed inside another */
    memcpy(a, base, sizeof a), a[KIND] = GET, a[N] = 1u << 30, a[C] = 1u << 30;
    SEND(NULL, 0, REQ_ARGS, REQ); /* a get larger than one reply */
    memcpy(a, base, sizeof a), a[COOKIE] = 5 | 999u << 10, a[C] = 8;
    SEND(ff, 16, REQ_ARGS, REQ); /* malformed and waited for: the owner answers SHOAL_EINVAL */
    memcpy(a, base, sizeof a);
    SEND(NULL, 0, 2, REP); /* a reply with too few arguments */
    uint64_t r[REP_ARGS] = {0, 7 | 12345u << 10, 0, 0, 0, 0};
    send_raw(t.rank, REP, NULL, 0, REP_ARGS, r), sent++; /* a reply that names no command */
#undef SEND
    return sent;
}

int main(void)
{
    CHECK_RC(shoal_init(NULL, NULL), SHOAL_OK);
    int me = shoal_rank();
    CHECK(shoal_size() == 2, "run with 2 ranks");
    shoal_mem_t m;
    CHECK_RC(shoal_mem_create(SEG, SHOAL_MEM_ALL, &m), SHOAL_OK);
    shoal_rmem_t all[2];
    CHECK_RC(shoal_mem_exchange(m, all), SHOAL_OK);
    struct shoal_stats before, after;
    CHECK_RC(shoal_stats_get(&before), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK); /* nothing is sent before every rank has its baseline */
    int sent = 0;
    uint64_t v = 42;
    if (me == 0) {
        sent = send_malformed(all[1]);
        /* Served and ordered behind them: when it returns, rank 1 has seen all
         * of them and its answer to the waited-for one is in. */
        CHECK_RC(shoal_put(all[1], 64, &v, 8, 0, NULL), SHOAL_OK);
    }
    CHECK(me == 1 || sent == MALFORMED, "sent %d malformed messages, expected %d", sent, MALFORMED);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_stats_get(&after), SHOAL_OK);
    uint64_t dropped = after.dropped - before.dropped;
    if (me == 1) {
        CHECK(dropped == MALFORMED, "rank 1 dropped %llu malformed messages, %d were sent",
              (unsigned long long)dropped, MALFORMED);
        const unsigned char *seg;
        CHECK_RC(shoal_mem_local(m, (void **)&seg, NULL), SHOAL_OK);
        for (int i = 0; i < SEG; i++)
            CHECK(i / 8 == 8 || seg[i] == 0, "byte %d of the target changed by a malformed message", i);
        CHECK(memcmp(seg + 64, &v, 8) == 0, "the valid put after them is missing");
    } else
        CHECK(dropped == 1, "rank 0 dropped %llu replies, expected the one SHOAL_EINVAL answer",
              (unsigned long long)dropped);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    CHECK_RC(shoal_mem_destroy(m), SHOAL_OK);
    return shoal_finalize() == SHOAL_OK ? 0 : 1;
}
