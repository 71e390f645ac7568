/* Programs that hang on purpose, for the hang report (check_hang.py runs
 * them under shoalrun and checks what the ranks and the launcher print):
 *   nohandler (2 ranks): rank 0 sends a request to a handler index nobody
 *     registered, ignores the SHOAL_ENOHANDLER, and waits for the reply in
 *     shoal_wait_until; rank 1 waits in shoal_finalize.
 *   barrier (3 ranks): rank 2 skips a barrier and waits for a message the
 *     others would send after it.
 *   crl (3 ranks): rank 1 forgets rgn_end_write on a region homed at rank
 *     0 and waits in shoal_barrier; rank 0 waits in rgn_start_read and
 *     rank 2 in rgn_start_write on that region.
 * Each waits forever: the launcher's --timeout or a signal ends it.
 *   lane (2 ranks, SHOAL_THREAD_MULTIPLE): rank 0's thread "lane-sender"
 *     sends requests to rank 1 until its lane is full and waits for room,
 *     while rank 0's main thread waits in shoal_wait_until; rank 1
 *     computes without calling shoal.  Whichever of rank 0's threads
 *     reports names the other's wait too.
 *   outbox (2 ranks, rings too small for 8 KiB mediums): rank 0 sends
 *     8 KiB mediums to rank 1 until its outbox is full and waits for room;
 *     rank 1 computes without calling shoal.
 *   slow (2 ranks): no hang: rank 1 computes for 3 s while rank 0 waits in
 *     a barrier, then both finalize; a report asked meanwhile must not
 *     change the job. */
#include "../common/check.h"
#include "shoal.h"
#include "shoal/crl.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

enum { H_REQ = 1, H_REP = 2, H_TYPO = 7, H_GO = 3, H_RID = 4 };

static volatile uint64_t replies, go, rid_flag;
static rid_t rid;

static void on_req(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n, (void)args, (void)nargs;
    shoal_am_reply_short(tok, H_REP, 0, 0, NULL);
}

static void on_rep(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)tok, (void)buf, (void)n, (void)args, (void)nargs;
    replies++;
}

static void on_go(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)tok, (void)buf, (void)n, (void)args, (void)nargs;
    go++;
}

static void on_rid(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)tok, (void)buf, (void)n;
    if (nargs == 1)
        rid = (rid_t)args[0];
    rid_flag++;
}

static void nohandler(int me)
{
    if (me == 0) {
        /* the README's example, with H_REQ mistyped as H_TYPO */
        shoal_am_request_short(1, H_TYPO, 0, 0, NULL);
        shoal_wait_until(&replies, 1);
    }
    shoal_finalize();
}

static void skipped_barrier(int me)
{
    if (me != 2) {
        shoal_barrier();
        for (int r = 0; r < shoal_size(); r++)
            CHECK_RC(shoal_am_request_short(r, H_GO, 0, 0, NULL), SHOAL_OK);
    }
    shoal_wait_until(&go, (uint64_t)shoal_size() - 1);
    shoal_finalize();
}

static void forgotten_end_write(int me)
{
    crl_init();
    if (me == 0) {
        rid = rgn_create(64);
        for (int r = 1; r < 3; r++)
            CHECK_RC(shoal_am_request_short(r, H_RID, 0, 1, (uint64_t[]){rid}), SHOAL_OK);
    } else {
        shoal_wait_until(&rid_flag, 1);
    }
    void *p = rgn_map(rid);
    if (me == 1) {
        rgn_start_write(p);
        memset(p, 1, 64);
        /* forgot rgn_end_write(p) */
        for (int r = 0; r < 3; r += 2)
            CHECK_RC(shoal_am_request_short(r, H_GO, 0, 0, NULL), SHOAL_OK);
        shoal_barrier();
    } else {
        shoal_wait_until(&go, 1);
        if (me == 0)
            rgn_start_read(p);
        else
            rgn_start_write(p);
    }
    crl_exit();
}

static void computing(void)
{
    for (;;) { /* a signal cuts a sleep short */
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

static void *lane_sender(void *arg)
{
    (void)arg;
    /* named before its first call: the rank records a thread's name when
     * it first meets it (the creator naming it raced with that, and lost
     * under ASan once) */
    pthread_setname_np(pthread_self(), "lane-sender");
    for (;;) /* until the lane is full: then the send waits for room for ever */
        CHECK_RC(shoal_am_request_short(1, H_GO, 0, 0, NULL), SHOAL_OK);
    return NULL;
}

static void lane_full(int me)
{
    if (me == 1)
        computing();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, lane_sender, NULL) == 0, "pthread_create");
    shoal_wait_until(&go, 1);
}

static void outbox_full(int me)
{
    if (me == 1)
        computing();
    static char payload[8192];
    for (;;) /* until the outbox is full: then the send waits for room for ever */
        CHECK_RC(shoal_am_request_medium(1, H_GO, 0, payload, sizeof payload, 0, NULL), SHOAL_OK);
}

static void slow(int me)
{
    if (me == 1) {
        double t0 = test_now();
        while (test_now() - t0 < 3.0) { /* computing: a signal cuts a sleep short */
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    shoal_barrier();
    CHECK_RC(shoal_finalize(), SHOAL_OK);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: test_hang nohandler|barrier|crl|lane|outbox|slow");
    int level = !strcmp(argv[1], "lane") ? SHOAL_THREAD_MULTIPLE : SHOAL_THREAD_SINGLE, got;
    CHECK_RC(shoal_init_thread(&argc, &argv, level, &got), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_REQ, on_req), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_REP, on_rep), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_GO, on_go), SHOAL_OK);
    CHECK_RC(shoal_am_register(H_RID, on_rid), SHOAL_OK);
    shoal_barrier(); /* every handler registered before anyone sends */
    int me = shoal_rank();
    if (!strcmp(argv[1], "nohandler"))
        nohandler(me);
    else if (!strcmp(argv[1], "barrier"))
        skipped_barrier(me);
    else if (!strcmp(argv[1], "crl"))
        forgotten_end_write(me);
    else if (!strcmp(argv[1], "lane"))
        lane_full(me);
    else if (!strcmp(argv[1], "outbox"))
        outbox_full(me);
    else if (!strcmp(argv[1], "slow"))
        slow(me);
    else
        CHECK(0, "unknown mode %s", argv[1]);
    return 0;
}
