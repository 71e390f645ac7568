/* Barrier, hierarchical: the ranks of a host first, then one leader per
 * host (its lowest rank) across hosts, then each leader releases its host.
 * On one host that is a single dissemination barrier; with every rank on
 * its own host (SHOAL_NET_LOCAL=1), the leaders' step is the whole barrier.
 *
 * Dissemination (Hensgen, Finkel & Manber): ceil(log2 N) rounds; in round
 * k member i raises a flag at member i+2^k and waits for its own, raised
 * by i-2^k.  Flags hold the barrier's epoch, so they never need resetting
 * and a fast rank's next barrier cannot be confused with this one.
 * Handlers run while waiting.  A flag for a peer on this host is a store
 * into its inbox; for a peer elsewhere, a message whose handler raises the
 * same flag in a local table.  Rounds are numbered across the phases (the
 * host's first, the leaders' after the fullest host's, so that leaders of
 * hosts of different sizes agree) so each has its own flags, and the
 * leader's release is the last flag.
 *
 * The leaders may instead meet as in Ciaccio's GAMMA thesis, Chapter 5
 * (SHOAL_BARRIER): every protocol there sends N - 1 empty "enter" messages
 * and ONE broadcast "exit".  The K-chain (§5.3) splits the N - 1 slaves into
 * K chains that pass a token down to rank 0 (the master), which waits for K
 * tokens and releases everyone: K = 1 is the serialized barrier (§5.2.2),
 * K = 2 GAMMA's two-token gamma_sync, K = N - 1 the concurrent barrier
 * (§5.2.1), where every slave tells the master directly.  Where the network
 * broadcasts natively (eth's frame to ff:ff:ff:ff:ff:ff) the release is one
 * broadcast, which every rank on every host receives.  Broadcasts may be
 * lost: a leader not released within COLL_QUERY_NS asks rank 0 once
 * (reliable), and rank 0 answers with a reliable release as soon as the
 * barrier is complete; a rank that is not a leader takes whichever comes
 * first, the frame or its leader's flag.  Elsewhere the master releases
 * each member with a reliable message. */
#include "am/am.h"
#include "am/hang.h"
#include "boot/boot.h"
#include "coll/coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    COLL_H_BARRIER = AM_LAYER_BASE(AM_BLOCK_COLL), /* dissemination flag (epoch, round) */
    COLL_H_ARRIVE,                         /* to rank 0: arrived at (epoch) */
    COLL_H_RELEASE,                        /* from rank 0: (epoch) is complete; broadcast or not */
    COLL_H_QUERY,                          /* to rank 0: not released from (epoch) yet */
    COLL_H_CHAIN = AM_LAYER_BASE(AM_BLOCK_COLL) + 9, /* to the next member down a chain: (epoch) reached */
};
#define COLL_QUERY_NS 2000000ull
#define COLL_RELEASE_ROUND (AM_LOCAL_FLAGS - 1)

static struct {
    uint32_t arrived[2];    /* rank 0: arrivals per epoch parity (epochs never overlap further) */
    uint64_t done;          /* rank 0: last complete epoch */
    uint64_t *asked;        /* rank 0: [rank] epoch it asked about, 0 if none */
    uint64_t released;      /* others: last epoch released */
    uint64_t chained;       /* last epoch the member after this one in its chain passed on */
    uint32_t expect;        /* rank 0: chain tokens the barrier in progress waits for */
    int *leaders;           /* the lowest rank of every host, in rank order */
    uint32_t chains;        /* the leaders' algorithm: 0 dissemination, else the K-chain's K */
    int *all;               /* 0 .. size - 1: coll_barrier_chain's members */
    int nleaders;
    int leader_index;       /* this rank's in leaders[]; -1 if it is not one */
    unsigned host_rounds;   /* dissemination rounds among this host's ranks */
    unsigned leader_round0; /* the leaders' first flag round: the most any host's ranks use */
    uint64_t net_flag[AM_LOCAL_FLAGS]; /* latest epoch announced per round over the network */
} bb;

static void coll_barrier_flag(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    if (nargs == 2)
        coll_check(shoal_token_source(tok), args[0], COLL_KIND_BARRIER);
    if (nargs == 2 && args[1] < AM_LOCAL_FLAGS && bb.net_flag[args[1]] < args[0])
        bb.net_flag[args[1]] = args[0];
}

static void coll_arrive(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    if (nargs != 1)
        return;
    coll_check(shoal_token_source(tok), args[0], COLL_KIND_BARRIER);
    bb.arrived[args[0] & 1]++;
}

static void coll_release(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    if (nargs == 1)
        coll_check(shoal_token_source(tok), args[0], COLL_KIND_BARRIER);
    if (nargs == 1 && args[0] > bb.released)
        bb.released = args[0];
}

static void coll_chain_token(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    if (nargs == 1)
        coll_check(shoal_token_source(tok), args[0], COLL_KIND_BARRIER);
    if (nargs == 1 && args[0] > bb.chained)
        bb.chained = args[0];
}

/* Answered at once if the epoch is complete, else when it completes. */
static void coll_query(shoal_token_t tok, void *buf, size_t n, const uint64_t *args, unsigned nargs)
{
    (void)buf, (void)n;
    int src = shoal_token_source(tok);
    if (nargs != 1 || src <= 0 || src >= am_size() || !bb.asked)
        return;
    coll_check(src, args[0], COLL_KIND_BARRIER);
    if (args[0] <= bb.done)
        am_reply_internal(tok, COLL_H_RELEASE, NULL, 0, 1, &bb.done);
    else
        bb.asked[src] = args[0];
}

void coll_init(void)
{
    am_register_internal(COLL_H_BARRIER, coll_barrier_flag);
    am_register_internal(COLL_H_ARRIVE, coll_arrive);
    am_register_internal(COLL_H_RELEASE, coll_release);
    am_register_internal(COLL_H_QUERY, coll_query);
    am_register_internal(COLL_H_CHAIN, coll_chain_token);
    coll_bcast_init();
    coll_reduce_init();
    coll_ordered_init();
}

void coll_fini(void)
{
    free(bb.leaders);
    free(bb.all);
    free(bb.asked);
    memset(&bb, 0, sizeof bb);
    coll_bcast_fini();
    coll_reduce_fini();
    coll_ordered_fini();
    coll_tree_fini();
    coll_seq_fini();
}

static void coll_send(int peer, unsigned handler, uint64_t epoch)
{
    int rc = am_request_internal(peer, handler, 0, NULL, 0, 1, &epoch);
    if (rc)
        util_fatal("barrier: cannot reach rank %d: %s", peer, shoal_strerror(rc));
}

static unsigned rounds_for(int n)
{
    unsigned k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

static uint32_t coll_chains(void);

/* Who leads which host; computed at the first barrier, when every layer
 * below knows its peers. */
static void coll_layout(void)
{
    if (bb.leaders)
        return;
    bb.leaders = malloc((size_t)am_size() * sizeof *bb.leaders);
    int *on = calloc((size_t)am_size(), sizeof *on); /* ranks per host, by leader index */
    if (!bb.leaders || !on)
        util_fatal("out of memory for the barrier's table of %d ranks", am_size());
    bb.leader_index = -1;
    int most = 0; /* ranks on the fullest host */
    for (int r = 0; r < am_size(); r++) {
        int i = 0;
        while (i < bb.nleaders && !boot_shm_peers(bb.leaders[i], r))
            i++;
        if (i == bb.nleaders && r == am_rank())
            bb.leader_index = i;
        if (i == bb.nleaders)
            bb.leaders[bb.nleaders++] = r;
        most = ++on[i] > most ? on[i] : most;
    }
    free(on);
    int nlocal;
    am_local_ranks(&nlocal);
    bb.host_rounds = rounds_for(nlocal);
    /* Hosts may hold different numbers of ranks, and every leader must
     * number the leaders' rounds alike: they start after the fullest
     * host's, not this host's (a:2,b:1 raised round 1 at b, which waited
     * on round 0). */
    bb.leader_round0 = rounds_for(most);
    if (bb.leader_round0 + rounds_for(bb.nleaders) > COLL_RELEASE_ROUND)
        util_fatal("barrier: %d hosts of up to %d ranks need more than %u flag rounds", bb.nleaders,
                   most, COLL_RELEASE_ROUND);
    bb.chains = coll_chains();
}

const int *coll_leaders(int *n)
{
    coll_layout();
    *n = bb.nleaders;
    return bb.leaders;
}

int coll_use_broadcast(void)
{
    coll_layout();
    return am_bcast_native() && bb.nleaders > 1;
}

void coll_listen(int on)
{
    if (coll_use_broadcast())
        am_bcast_listen(on);
}

/* ---- what a waiting barrier knows (the hang report) -------------------- */

/* A dissemination round: members[me] waits for members[me - dist]'s flag. */
struct coll_round {
    const int *members;
    int n, me, dist;
    unsigned round;
};

/* Appends " r" for each of members[me - i], i in [from, to). */
static size_t coll_list(char *buf, size_t n, size_t k, const struct coll_round *c, int from, int to)
{
    for (int i = from; i < to && k < n; i++) {
        int m = snprintf(buf + k, n - k, " %d", c->members[((c->me - i) % c->n + c->n) % c->n]);
        k += m > 0 ? (size_t)m : 0;
    }
    return k;
}

/* In round k of a dissemination barrier a rank has heard, directly or
 * through others, from the dist - 1 members before it; dist = 2^k. */
static int coll_describe_round(const struct hang_wait *w, char *buf, size_t n)
{
    const struct coll_round *c = w->obj;
    int from = c->members[((c->me - c->dist) % c->n + c->n) % c->n];
    int m = snprintf(buf, n, "barrier epoch %llu, round %u: waits for rank %d; arrived as far as this rank knows:",
                     (unsigned long long)w->value, c->round, from);
    size_t k = m > 0 ? (size_t)m : 0;
    k = coll_list(buf, n, k, c, 0, c->dist);
    if (k < n) {
        m = snprintf(buf + k, n - k, "; not known:");
        k += m > 0 ? (size_t)m : 0;
    }
    coll_list(buf, n, k, c, c->dist, c->n);
    return from;
}

static int coll_describe_release(const struct hang_wait *w, char *buf, size_t n)
{
    snprintf(buf, n, "barrier epoch %llu: waits for rank %d to release it", (unsigned long long)w->value,
             w->peer);
    return w->peer;
}

static int coll_describe_root(const struct hang_wait *w, char *buf, size_t n)
{
    snprintf(buf, n, "barrier epoch %llu: rank 0 waits for its chains' tokens (%u of %u arrived)",
             (unsigned long long)w->value, bb.arrived[w->value & 1], bb.expect);
    return -1;
}

static int coll_describe_chain(const struct hang_wait *w, char *buf, size_t n)
{
    snprintf(buf, n, "barrier epoch %llu: waits for the token of rank %d, the next in its chain",
             (unsigned long long)w->value, w->peer);
    return w->peer;
}

/* The master releases the chain barrier's members with one broadcast when
 * it reaches them all (the members are the hosts' leaders, or every rank
 * is alone on its host), else with a reliable message to each. */
static int coll_release_by_broadcast(int n)
{
    return coll_use_broadcast() && n == bb.nleaders;
}

/* Rank 0, members[0]: waits for k tokens, then releases members[1..n). */
static void coll_root(const int *members, int n, uint32_t k, uint64_t epoch)
{
    if (!bb.asked && !(bb.asked = calloc((size_t)am_size(), sizeof *bb.asked)))
        util_fatal("out of memory for the barrier's table of %d ranks", am_size());
    struct util_backoff b;
    util_backoff_init(&b);
    bb.expect = k;
    hang_push("barrier", -1, epoch, NULL, coll_describe_root);
    while (bb.arrived[epoch & 1] < k)
        am_progress_wait(&b, 0);
    hang_pop();
    bb.arrived[epoch & 1] = 0;
    bb.done = epoch;
    if (coll_release_by_broadcast(n)) {
        int rc = am_bcast_internal(COLL_H_RELEASE, 1, &epoch, NULL, 0);
        if (rc)
            util_fatal("barrier: broadcast failed: %s", shoal_strerror(rc));
    } else {
        for (int i = 1; i < n; i++)
            coll_send(members[i], COLL_H_RELEASE, epoch);
    }
    for (int r = 1; r < am_size(); r++)
        if (bb.asked[r] && bb.asked[r] <= epoch) {
            bb.asked[r] = 0;
            coll_send(r, COLL_H_RELEASE, epoch);
        }
}

/* A member waits for rank 0's release; one it may miss (a broadcast) it
 * asks for once. */
static void coll_await_release(uint64_t epoch, int may_miss)
{
    struct util_backoff b;
    util_backoff_init(&b);
    uint64_t ask_at = may_miss ? util_now_ns() + COLL_QUERY_NS : 0;
    hang_push("barrier", 0, epoch, NULL, coll_describe_release);
    while (bb.released < epoch) {
        am_progress_wait(&b, 0);
        if (ask_at && util_now_ns() >= ask_at) {
            coll_send(0, COLL_H_QUERY, epoch);
            ask_at = 0;
        }
    }
    hang_pop();
}

/* The K-chain barrier among members (members[0] is rank 0, this rank is at
 * index me).  The slaves, members[1..n), form k chains of consecutive
 * members, the first (n - 1) % k chains one longer; in each the highest
 * starts and the token goes down to the chain's lowest, its leader, which
 * hands it to rank 0 (the thesis leaves the assignment open: GAMMA.md). */
static void coll_chain(const int *members, int n, int me, uint32_t k, uint64_t epoch)
{
    uint32_t m = (uint32_t)n - 1;
    k = k < 1 ? 1 : k > m ? m : k;
    if (me == 0) {
        coll_root(members, n, k, epoch);
        return;
    }
    uint32_t i = (uint32_t)me - 1, q = m / k, r = m % k;
    uint32_t c = i < r * (q + 1) ? i / (q + 1) : r + (i - r * (q + 1)) / q;
    uint32_t lo = c * q + (c < r ? c : r), hi = lo + q + (c < r) - 1;
    if (i < hi) {
        struct util_backoff b;
        util_backoff_init(&b);
        hang_push("barrier", members[me + 1], epoch, NULL, coll_describe_chain);
        while (bb.chained < epoch)
            am_progress_wait(&b, 0);
        hang_pop();
    }
    if (i > lo)
        coll_send(members[me - 1], COLL_H_CHAIN, epoch);
    else
        coll_send(0, COLL_H_ARRIVE, epoch);
    coll_await_release(epoch, coll_release_by_broadcast(n));
}

static void coll_raise(int peer, unsigned round, uint64_t epoch)
{
    if (!am_is_remote(peer)) {
        atomic_store_explicit(am_local_flag(peer, round), epoch, memory_order_release);
        return;
    }
    uint64_t args[2] = {epoch, round};
    int rc = am_request_internal(peer, COLL_H_BARRIER, 0, NULL, 0, 2, args);
    if (rc)
        util_fatal("barrier: cannot reach rank %d: %s", peer, shoal_strerror(rc));
}

static int coll_raised(unsigned round, uint64_t epoch)
{
    return atomic_load_explicit(am_local_flag(am_rank(), round), memory_order_acquire) >= epoch ||
           bb.net_flag[round] >= epoch;
}

/* A dissemination barrier among the n ranks of members (this one is at
 * index me), on flag rounds from round0 on. */
static void coll_disseminate(const int *members, int n, int me, unsigned round0, uint64_t epoch)
{
    unsigned round = round0;
    struct coll_round what = {members, n, me, 1, 0};
    hang_push("barrier", -1, epoch, &what, coll_describe_round);
    for (int dist = 1; dist < n; dist <<= 1, round++) {
        coll_raise(members[(me + dist) % n], round, epoch);
        struct util_backoff b;
        util_backoff_init(&b);
        what.dist = dist;
        what.round = round;
        hang_refine(-1, epoch);
        while (!coll_raised(round, epoch))
            am_progress_wait(&b, 0);
    }
    hang_pop();
}

/* The leaders' algorithm (SHOAL_BARRIER), chosen once with the layout: 0
 * for dissemination, else the K of the K-chain. */
static uint32_t coll_chains(void)
{
    const char *alg = util_config_str(CFG_BARRIER);
    uint32_t all = (uint32_t)bb.nleaders - 1;
    if (!strcmp(alg, "dissemination") || (!strcmp(alg, "auto") && !coll_use_broadcast()))
        return 0;
    if (!strcmp(alg, "chain"))
        return (uint32_t)util_config_int(CFG_BARRIER_CHAINS);
    return all; /* concurrent */
}

/* Across hosts, among the leaders; then each leader releases its host. */
static void coll_cross_hosts(uint64_t epoch)
{
    if (bb.chains)
        coll_chain(bb.leaders, bb.nleaders, bb.leader_index, bb.chains, epoch);
    else
        coll_disseminate(bb.leaders, bb.nleaders, bb.leader_index, bb.leader_round0, epoch);
    int n;
    const int *local = am_local_ranks(&n);
    for (int i = 1; i < n; i++)
        coll_raise(local[i], COLL_RELEASE_ROUND, epoch);
}

int coll_flag_writer(unsigned round)
{
    if (!bb.leaders)
        return -1;
    int n, me = am_local_index(am_rank());
    const int *local = am_local_ranks(&n);
    if (round < bb.host_rounds)
        return local[((me - (1 << round)) % n + n) % n];
    return round == COLL_RELEASE_ROUND && bb.nleaders > 1 && me > 0 ? local[0] : -1;
}

static void coll_wait_release(uint64_t epoch)
{
    struct util_backoff b;
    util_backoff_init(&b);
    int n;
    hang_push("barrier", am_local_ranks(&n)[0], epoch, NULL, coll_describe_release);
    while (!coll_raised(COLL_RELEASE_ROUND, epoch) && bb.released < epoch)
        am_progress_wait(&b, 0);
    hang_pop();
}

static int coll_barrier(void);

int shoal_barrier(void)
{
    AM_GUARD();
    hang_push("shoal_barrier", -1, 0, NULL, NULL);
    int rc = coll_barrier();
    hang_pop();
    return rc;
}

static int coll_barrier(void)
{
    if (am_rank() < 0)
        return SHOAL_ENOTINIT;
    int rc = am_blocking_allowed("shoal_barrier");
    if (rc)
        return rc;
    coll_layout();
    uint64_t epoch = coll_begin(COLL_KIND_BARRIER);
    int nlocal;
    const int *local = am_local_ranks(&nlocal);
    coll_disseminate(local, nlocal, am_local_index(am_rank()), 0, epoch);
    if (bb.nleaders > 1) {
        coll_listen(1);
        if (bb.leader_index >= 0)
            coll_cross_hosts(epoch);
        else
            coll_wait_release(epoch);
        coll_listen(0);
    }
    coll_end();
    am_stats()->barriers++;
    return SHOAL_OK;
}

int coll_barrier_chain(int k)
{
    if (am_rank() < 0)
        return SHOAL_ENOTINIT;
    if (k < 1)
        return SHOAL_EINVAL;
    int rc = am_blocking_allowed("gamma_sync");
    if (rc)
        return rc;
    coll_layout();
    if (!bb.all) {
        if (!(bb.all = malloc((size_t)am_size() * sizeof *bb.all)))
            util_fatal("out of memory for the barrier's table of %d ranks", am_size());
        for (int r = 0; r < am_size(); r++)
            bb.all[r] = r;
    }
    uint64_t epoch = coll_begin(COLL_KIND_BARRIER);
    if (am_size() > 1) {
        coll_listen(1);
        coll_chain(bb.all, am_size(), am_rank(), (uint32_t)k, epoch);
        coll_listen(0);
    }
    coll_end();
    am_stats()->barriers++;
    return SHOAL_OK;
}
