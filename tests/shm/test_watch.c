/* Watched senders, the summary and first contact (docs/SHM_QUEUE.md),
 * through shoalrun with more ranks than SHOAL_SHM_WATCHED:
 *   many   rank 0 receives; in round k the senders s with (s + k) % 3 != 0
 *          are told to go and send it B requests (numbered per sender,
 *          checked in order by its handler, each answered by a reply the
 *          sender checks in order), the others stay idle; between rounds
 *          rank 0 polls until every sender is demoted (bounded), so the
 *          next round's senders reach it through the summary again.
 *          Counts per sender exact; promotions and demotions counted and
 *          asserted (at least one of each per sender and round it took
 *          part in).  With SHOAL_PROGRESS=thread rank 0's main thread
 *          waits for the round without polling (its progress thread
 *          sleeps and is woken through the doorbell); at MULTIPLE the
 *          requests go through lanes (asserted).
 *   first  ranks 2j and 2j+1 talk (requests and replies), nobody else:
 *          every rank's inbox holds pages only in its partner's request
 *          and reply rings (mincore on the mapping: a memfd's pages in
 *          the page cache are its allocated tmpfs pages), and those whole. */
#include "am/state.h"
#include "shm/shm.h"
#include "shoal.h"
#include "../common/check.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { H_GO, H_MSG, H_REPLY, H_DONE, H_STOP };
#define ROUNDS 12
#define BURST 200
#define DEADLINE_S 50

static int me, n, threaded, multiple;
/* written by handlers, which run on the progress thread in thread mode */
static _Atomic uint64_t go_rounds, stop, replies, dones;
static uint64_t *next_seq; /* rank 0: [sender] next request number */
static uint64_t sent_seq;

static int active(int s, int k)
{
    return s != 0 && (s + k) % 3 != 0;
}

static void on_go(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)a, (void)na;
    atomic_fetch_add(&go_rounds, 1);
}

static void on_msg(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)b, (void)nb;
    int s = shoal_token_source(t);
    CHECK(na == 2 && a[0] == (uint64_t)s, "request from rank %d names sender %llu", s, (unsigned long long)a[0]);
    CHECK(a[1] == next_seq[s], "request %llu from rank %d, expected %llu: lost or out of order",
          (unsigned long long)a[1], s, (unsigned long long)next_seq[s]);
    next_seq[s]++;
    CHECK_RC(shoal_am_reply_short(t, H_REPLY, 0, shoal_args(a[1])), SHOAL_OK);
}

static void on_reply(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb;
    uint64_t want = atomic_load(&replies);
    CHECK(na == 1 && a[0] == want, "reply %llu, expected %llu", (unsigned long long)a[0], (unsigned long long)want);
    atomic_store(&replies, want + 1);
}

static void on_done(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)a, (void)na;
    atomic_fetch_add(&dones, 1);
}

static void on_stop(shoal_token_t t, void *b, size_t nb, const uint64_t *a, unsigned na)
{
    (void)t, (void)b, (void)nb, (void)a, (void)na;
    atomic_store(&stop, 1);
}

/* Until *v >= want: polling, or (thread mode, `sleep`) napping while the
 * progress thread runs the handlers. */
static void wait_for(_Atomic uint64_t *v, uint64_t want, int sleep, const char *what)
{
    double end = test_now() + DEADLINE_S;
    while (atomic_load(v) < want) {
        if (sleep)
            test_nap(0.0002);
        else
            CHECK_RC(shoal_poll(), SHOAL_OK);
        CHECK(test_now() < end, "rank %d: %s: %llu of %llu after %d s", me, what, (unsigned long long)atomic_load(v),
              (unsigned long long)want, DEADLINE_S);
    }
}

/* Rank 0's watch state, read under the owner lock (the progress thread
 * changes it). */
static struct shm_watch watch_now(void)
{
    shoal_handlers_disable();
    struct shm_watch w = am.shm->watch;
    shoal_handlers_enable();
    return w;
}

static void receiver(void)
{
    uint64_t expect_dones = 0, rounds_in = 0;
    for (int k = 0; k < ROUNDS; k++) {
        int nact = 0;
        for (int s = 1; s < n; s++)
            if (active(s, k)) {
                CHECK_RC(shoal_am_request_short(s, H_GO, 0, 0, NULL), SHOAL_OK);
                nact++;
            }
        rounds_in += (uint64_t)nact;
        expect_dones += (uint64_t)nact;
        wait_for(&dones, expect_dones, threaded, "the round's senders done");
        for (int s = 1; s < n; s++) {
            uint64_t want = 0;
            for (int j = 0; j <= k; j++)
                want += active(s, j) ? BURST : 0;
            CHECK(next_seq[s] == want, "round %d: %llu requests from rank %d, expected %llu", k,
                  (unsigned long long)next_seq[s], s, (unsigned long long)want);
        }
        /* every sender idle now: polls demote them all (self included) */
        double end = test_now() + DEADLINE_S;
        while (watch_now().n > 0) {
            CHECK_RC(shoal_poll(), SHOAL_OK);
            CHECK(test_now() < end, "round %d: %d senders still watched after %d s of idle polls", k,
                  watch_now().n, DEADLINE_S);
        }
    }
    struct shm_watch w = watch_now();
    printf("rank 0: %llu promotions, %llu demotions in %llu passes, %llu sender-rounds\n",
           (unsigned long long)w.promotions, (unsigned long long)w.demotions, (unsigned long long)w.passes,
           (unsigned long long)rounds_in);
    CHECK(w.on, "the summary is off with %d ranks: SHOAL_SHM_WATCHED must be below the rank count", n);
    CHECK(w.promotions >= rounds_in && w.demotions >= rounds_in,
          "%llu promotions and %llu demotions for %llu sender-rounds: the summary was not exercised",
          (unsigned long long)w.promotions, (unsigned long long)w.demotions, (unsigned long long)rounds_in);
    if (multiple)
        CHECK(atomic_load(&shm_lanes(am.shm, 0)->used), "no sender used a lane at MULTIPLE");
    for (int s = 1; s < n; s++)
        CHECK_RC(shoal_am_request_short(s, H_STOP, 0, 0, NULL), SHOAL_OK);
}

static void sender(void)
{
    uint64_t rounds = 0;
    double end = test_now() + 4 * DEADLINE_S;
    while (!atomic_load(&stop)) {
        if (atomic_load(&go_rounds) > rounds) {
            rounds++;
            for (int i = 0; i < BURST; i++)
                CHECK_RC(shoal_am_request_short(0, H_MSG, 0, shoal_args((uint64_t)me, sent_seq++)), SHOAL_OK);
            wait_for(&replies, sent_seq, threaded, "replies");
            CHECK_RC(shoal_am_request_short(0, H_DONE, 0, 0, NULL), SHOAL_OK);
        }
        if (threaded)
            test_nap(0.0002);
        else
            CHECK_RC(shoal_poll(), SHOAL_OK);
        CHECK(test_now() < end, "rank %d: no stop from rank 0", me);
    }
}

/* Pages of [p, p + len) in the page cache. */
static size_t resident(const char *p, size_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = len / (size_t)page, in = 0;
    unsigned char *vec = malloc(pages);
    CHECK(vec && mincore((void *)p, len, vec) == 0, "mincore");
    for (size_t i = 0; i < pages; i++)
        in += vec[i] & 1;
    free(vec);
    return in * (size_t)page;
}

static void first_contact(void)
{
    int partner = me ^ 1;
    CHECK(n % 2 == 0, "first needs an even rank count");
    for (int i = 0; i < 50; i++)
        CHECK_RC(shoal_am_request_short(partner, H_MSG, 0, shoal_args((uint64_t)me, sent_seq++)), SHOAL_OK);
    wait_for(&replies, sent_seq, 0, "replies");
    CHECK_RC(shoal_barrier(), SHOAL_OK); /* the partner's replies to us are sent too */
    const struct shm_region_header *h = am.shm->regions[me];
    const char *rings = (const char *)h + h->rings_offset;
    size_t ring = (size_t)h->ring_slots * RING_SLOT_BYTES, k = SHM_CLASSES + h->lanes;
    CHECK(h->ring_slots * RING_SLOT_BYTES % 4096 == 0, "rings of %u slots are not whole pages", h->ring_slots);
    for (int s = 0; s < n; s++)
        for (size_t c = 0; c < k; c++) {
            size_t got = resident(rings + ((size_t)s * k + c) * ring, ring);
            size_t want = s == partner && c < SHM_CLASSES ? ring : 0;
            CHECK(got == want, "rank %d's inbox: ring %zu of sender %d holds %zu bytes, expected %zu", me, c, s, got,
                  want);
        }
    CHECK(resident((const char *)h, h->rings_offset) == h->rings_offset, "the inbox's head part is not all backed");
}

int main(int argc, char **argv)
{
    int provided;
    multiple = argc > 2 && !strcmp(argv[2], "multiple");
    CHECK_RC(shoal_init_thread(&argc, &argv, multiple ? SHOAL_THREAD_MULTIPLE : SHOAL_THREAD_SINGLE, &provided),
             SHOAL_OK);
    CHECK(argc >= 2, "usage: test_watch many|first [multiple]");
    me = shoal_rank();
    n = shoal_size();
    threaded = shoal_progress_threaded();
    next_seq = calloc((size_t)n, sizeof *next_seq);
    CHECK(next_seq, "out of memory");
    shoal_handler_t hs[] = {on_go, on_msg, on_reply, on_done, on_stop};
    for (unsigned h = 0; h < sizeof hs / sizeof hs[0]; h++)
        CHECK_RC(shoal_am_register(h, hs[h]), SHOAL_OK);
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    if (!strcmp(argv[1], "first"))
        first_contact();
    else if (me == 0)
        receiver();
    else
        sender();
    CHECK_RC(shoal_barrier(), SHOAL_OK);
    free(next_seq);
    CHECK_RC(shoal_finalize(), SHOAL_OK);
    return 0;
}
