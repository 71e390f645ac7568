/* shm transport: the inbox regions that hold the rings. */
#include "shm/shm.h"
#include "boot/boot.h"
#include "shoal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

uint32_t shm_default_ring_slots(int nranks)
{
    long long cfg = util_config_int(CFG_SHM_RING_SLOTS);
    if (cfg > 0)
        return (uint32_t)cfg;
    /* Large rings make large messages cheap: a line the sender rewrites a
     * ring later has aged out of the receiver's caches, and writing it costs
     * no cross-core invalidation (measured: a 64 KiB medium ping-pong 2.6x
     * faster with 1 MiB rings than with 256 KiB ones; docs/SHM_QUEUE.md).
     * But a medium no longer has to fit its ring (the outbox takes the rest),
     * so rings are held to a budget per rank: the largest ring up to 16384
     * slots that keeps this rank's rings within 128 MiB / nranks (the whole
     * host's within 128 MiB, as before), or within 4 MiB where that is more,
     * so 256 ranks keep 128-slot rings and an inbox of about 6 MiB. */
    size_t budget = (128u << 20) / (size_t)(nranks > 0 ? nranks : 1);
    if (budget < SHM_RING_BUDGET_MIN)
        budget = SHM_RING_BUDGET_MIN;
    uint32_t slots = 16384;
    while (slots > 64 && (size_t)nranks * SHM_CLASSES * slots * RING_SLOT_BYTES > budget)
        slots /= 2;
    return slots;
}

size_t shm_outbox_bytes(int nranks)
{
    /* None where a ring holds every medium up to SHOAL_SHM_MEDIUM_MAX (8
     * ranks or fewer by default): those inboxes stay as they were. */
    size_t ring_max = (size_t)ring_max_msg_slots(shm_default_ring_slots(nranks)) * RING_SLOT_BYTES;
    if (ring_max >= SHM_MEDIUM_HEAD_MAX + (size_t)util_config_int(CFG_SHM_MEDIUM_MAX))
        return 0;
    return util_round_up((size_t)util_config_int(CFG_SHM_OUTBOX_BYTES), OUTBOX_ALIGN);
}

/* An inbox with `lanes` lanes per sender holds this many rings per sender. */
static size_t rings_per_sender(uint32_t lanes)
{
    return SHM_CLASSES + lanes;
}

/* After the heads: the summary (a byte per sender), then the watched
 * flags (a byte per sender), each in lines of its own. */
static size_t summary_offset(int nranks, uint32_t lanes)
{
    return SHM_HEADS_OFFSET + (size_t)nranks * rings_per_sender(lanes) * sizeof(struct ring_head);
}

static size_t flags_bytes(int nranks)
{
    return util_round_up((size_t)nranks, RING_HEAD_BLOCK);
}

static size_t watched_offset(int nranks, uint32_t lanes)
{
    return summary_offset(nranks, lanes) + flags_bytes(nranks);
}

static size_t rings_offset(int nranks, uint32_t lanes)
{
    return util_round_up(watched_offset(nranks, lanes) + flags_bytes(nranks), 4096);
}

size_t shm_region_eager_bytes(int nranks, uint32_t lanes)
{
    return rings_offset(nranks, lanes);
}

/* The outbox follows the rings, page-aligned. */
static size_t outbox_offset(int nranks, uint32_t ring_slots, uint32_t lanes)
{
    return util_round_up(rings_offset(nranks, lanes) +
                             (size_t)nranks * rings_per_sender(lanes) * ring_slots * RING_SLOT_BYTES,
                         4096);
}

size_t shm_region_bytes(int nranks, uint32_t ring_slots, uint32_t lanes)
{
    return outbox_offset(nranks, ring_slots, lanes) + SHM_CLASSES * shm_outbox_bytes(nranks);
}

/* Rank r's inbox (of nranks on this host, each with rings in every inbox)
 * as this rank's layout expects it. */
static int check_region(const struct shm_state *st, const struct shm_region_header *h, int r, int nranks,
                        uint32_t slots, size_t bytes)
{
    if (h->magic != SHM_MAGIC || h->version != SHM_LAYOUT_VERSION || h->owner_rank != (uint32_t)r ||
        h->nranks != (uint32_t)nranks || h->ring_slots != slots || h->lanes > UTIL_SHM_LANES_MAX ||
        h->watch_max != st->watch_max ||
        h->rings_offset != rings_offset(nranks, h->lanes) || h->total_bytes != bytes ||
        h->outbox_bytes != st->outbox_bytes || h->outbox_offset != outbox_offset(nranks, slots, h->lanes) ||
        bytes != shm_region_bytes(nranks, slots, h->lanes)) {
        LOG(LOG_ERROR, "inbox of rank %d has a foreign layout (version %u, %u ranks, %u slots, %llu-byte outbox "
            "pools, %u watched); all ranks must run the same shoal build, SHOAL_SHM_RING_SLOTS, "
            "SHOAL_SHM_OUTBOX_BYTES and SHOAL_SHM_WATCHED",
            r, h->version, h->nranks, h->ring_slots, (unsigned long long)h->outbox_bytes, h->watch_max);
        return SHOAL_EBOOT;
    }
    if (h->lanes && st->lanes && h->lanes != st->lanes) { /* this rank's threads would write past its lanes */
        LOG(LOG_ERROR, "inbox of rank %d has %u lanes per sender, rank %d's %u: every rank at "
            "SHOAL_THREAD_MULTIPLE on a host must have the same SHOAL_SHM_LANES", r, h->lanes, st->rank, st->lanes);
        return SHOAL_EBOOT;
    }
    return SHOAL_OK;
}

/* Ring k of sender's in an inbox (0 requests, 1 replies, SHM_CLASSES + l
 * lane l), as its header lays it out. */
static void *ring_base(void *region, int sender, unsigned k)
{
    const struct shm_region_header *h = region;
    size_t idx = (size_t)sender * rings_per_sender(h->lanes) + k;
    return (char *)region + h->rings_offset + idx * h->ring_slots * RING_SLOT_BYTES;
}

static struct ring_head *ring_head_of(void *region, int sender, unsigned k)
{
    const struct shm_region_header *h = region;
    return (struct ring_head *)((char *)region + SHM_HEADS_OFFSET) + (size_t)sender * rings_per_sender(h->lanes) + k;
}

static int ring_tx_of(struct shm_state *st, struct ring_tx *tx, int i, unsigned k)
{
    void *theirs = st->regions[st->local[i]];
    int me = st->local_index[st->rank];
    return ring_tx_init(tx, ring_base(theirs, me, k), ring_head_of(theirs, me, k), st->ring_slots);
}

static void ring_rx_of(struct shm_state *st, struct ring_rx *rx, int i, unsigned k)
{
    void *mine = st->regions[st->rank];
    ring_rx_init(rx, ring_base(mine, i, k), ring_head_of(mine, i, k), st->ring_slots);
}

/* This rank's ends of the rings it shares with local peer i. */
static int ring_pairs_init(struct shm_state *st, int i)
{
    size_t peer = (size_t)st->local[i];
    int rc = SHOAL_OK;
    for (unsigned c = 0; c < SHM_CLASSES && rc == SHOAL_OK; c++) {
        ring_rx_of(st, &st->rx[(size_t)i * SHM_CLASSES + c], i, c);
        rc = ring_tx_of(st, &st->tx[peer * SHM_CLASSES + c], i, c);
    }
    for (unsigned l = 0; l < st->lanes; l++)
        ring_rx_of(st, &st->lane_rx[(size_t)i * st->lanes + l], i, SHM_CLASSES + l);
    const struct shm_region_header *theirs = st->regions[peer];
    for (unsigned l = 0; theirs->lanes && l < st->lanes && rc == SHOAL_OK; l++) /* the same count (check_region) */
        rc = ring_tx_of(st, &st->lane_tx[l * (size_t)st->nranks + peer], i, SHM_CLASSES + l);
    size_t me = (size_t)st->local_index[st->rank];
    st->peer[peer].summary = (uint8_t *)theirs + summary_offset(st->nlocal, theirs->lanes) + me;
    st->peer[peer].top = (uint8_t *)theirs + SHM_SUMMARY_TOP_OFFSET + me / 64;
    st->peer[peer].watched = (uint8_t *)theirs + watched_offset(st->nlocal, theirs->lanes) + me;
    return rc;
}

/* Every local peer's pools as its (checked) header places them, and this
 * rank's allocators over its own. */
static int outbox_pools_init(struct shm_state *st)
{
    for (int i = 0; i < st->nlocal; i++) {
        char *region = st->regions[st->local[i]];
        st->outbox[st->local[i]] = region + ((const struct shm_region_header *)region)->outbox_offset;
    }
    /* backed now, by its owner, like the inbox's first part: the rings are
     * backed at first contact, but these are the owner's own to write */
    int rc = st->outbox_bytes ? mem_populate("this rank's outbox", st->outbox[st->rank], SHM_CLASSES * st->outbox_bytes)
                              : SHOAL_OK;
    for (unsigned c = 0; c < SHM_CLASSES && rc == SHOAL_OK; c++)
        rc = outbox_init(&st->out[c], st->outbox[st->rank] + c * st->outbox_bytes, st->outbox_bytes);
    return rc;
}

/* The ranks this one reaches over shared memory, in rank order. */
static int find_local(struct shm_state *st)
{
    st->local = malloc((size_t)st->nranks * sizeof *st->local);
    st->local_index = malloc((size_t)st->nranks * sizeof *st->local_index);
    if (!st->local || !st->local_index)
        return SHOAL_ENOMEM;
    for (int r = 0; r < st->nranks; r++) {
        st->local_index[r] = boot_rank_local(r) ? st->nlocal : -1;
        if (st->local_index[r] >= 0)
            st->local[st->nlocal++] = r;
    }
    return SHOAL_OK;
}

/* membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) reaches the processes that
 * registered for it: every rank registers before the inboxes' exchange,
 * so all its peers have before any of them can send. */
static int watch_membarrier_register(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) != 0) {
        LOG(LOG_INFO, "membarrier(GLOBAL_EXPEDITED) unavailable: a send to an unwatched peer fences instead");
        return 0;
    }
    return 1;
}

/* Up to W local senders every one is watched for ever and no summary is
 * read or written; above, none is until its first message. */
static int watch_init(struct shm_state *st)
{
    struct shm_watch *w = &st->watch;
    int n = st->nlocal;
    void *mine = st->regions[st->rank];
    w->list = calloc((size_t)n, sizeof *w->list);
    w->seen = calloc((size_t)n, sizeof *w->seen);
    w->member = calloc((size_t)n, 1);
    if (!w->list || !w->seen || !w->member)
        return SHOAL_ENOMEM;
    w->flag = (uint8_t *)mine + watched_offset(n, st->lanes);
    w->summary = (uint64_t *)((char *)mine + summary_offset(n, st->lanes));
    w->top = (uint64_t *)((char *)mine + SHM_SUMMARY_TOP_OFFSET);
    w->words = (n + 7) / 8;
    w->top_words = (n + 511) / 512;
    if (!w->on)
        for (int i = 0; i < n; i++)
            shm_watch_add(st, i);
    w->promotions = 0; /* the initial list is no promotion */
    return SHOAL_OK;
}

void shm_watch_add(struct shm_state *st, int i)
{
    struct shm_watch *w = &st->watch;
    __atomic_store_n(&w->flag[i], 1, __ATOMIC_RELAXED);
    w->seen[i] = UINT64_MAX; /* not idle before a whole pass has gone by */
    if (!w->member[i]) {
        w->member[i] = 1;
        w->list[w->n++] = i;
    }
    w->promotions++;
}

void shm_watch_fence(const struct shm_state *st)
{
    if (st->watch.sender_fence) {
        atomic_thread_fence(memory_order_seq_cst); /* the senders fence: Dekker's order from both sides */
        return;
    }
    /* registered at init, so it cannot fail; if it did, a demotion could lose a message */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0)
        util_fatal("membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) failed after registering: %s", strerror(errno));
}

int shm_tx_first_contact(struct ring_tx *tx, int dest)
{
    char what[64];
    snprintf(what, sizeof what, "the first message to rank %d (its ring)", dest);
    int rc = mem_populate(what, tx->slots, (size_t)tx->nslots * RING_SLOT_BYTES);
    if (rc == SHOAL_OK)
        ring_tx_warm(tx);
    return rc;
}

int shm_init(struct shm_state *st, int rank, int nranks, unsigned lanes)
{
    memset(st, 0, sizeof *st);
    st->rank = rank;
    st->nranks = nranks;
    st->lanes = lanes;
    int rc = find_local(st);
    if (rc)
        return rc;
    int n = st->nlocal;
    st->ring_slots = shm_default_ring_slots(n);
    st->outbox_bytes = shm_outbox_bytes(n);
    st->region_bytes = shm_region_bytes(n, st->ring_slots, st->lanes);
    st->watch_max = (uint32_t)util_config_int(CFG_SHM_WATCHED);
    st->watch.on = (uint32_t)n > st->watch_max;
    st->watch.sender_fence = st->watch.on && !watch_membarrier_register();
    st->peer = calloc((size_t)nranks, sizeof *st->peer);
    st->regions = calloc((size_t)nranks, sizeof *st->regions);
    size_t *sizes = st->region_sizes = calloc((size_t)nranks, sizeof *sizes);
    st->tx = calloc((size_t)nranks * SHM_CLASSES, sizeof *st->tx);
    st->rx = calloc((size_t)n * SHM_CLASSES, sizeof *st->rx);
    st->lane_tx = calloc((size_t)nranks * lanes + 1, sizeof *st->lane_tx); /* + 1: never a NULL for 0 */
    st->lane_rx = calloc((size_t)n * lanes + 1, sizeof *st->lane_rx);
    st->outbox = calloc((size_t)nranks, sizeof *st->outbox);
    if (!st->peer || !st->regions || !sizes || !st->tx || !st->rx || !st->lane_tx || !st->lane_rx || !st->outbox)
        return SHOAL_ENOMEM;
    struct shm_region_header h = {.magic = SHM_MAGIC, .version = SHM_LAYOUT_VERSION,
                                  .owner_rank = (uint32_t)rank, .nranks = (uint32_t)n,
                                  .ring_slots = st->ring_slots, .rings_offset = rings_offset(n, st->lanes),
                                  .total_bytes = st->region_bytes, .owner_pid = getpid(), .lanes = st->lanes,
                                  .outbox_offset = outbox_offset(n, st->ring_slots, st->lanes),
                                  .outbox_bytes = st->outbox_bytes, .watch_max = st->watch_max};
    /* the rings are backed by their senders at first contact */
    rc = mem_exchange_alloc("shoal-inbox", st->region_bytes, shm_region_eager_bytes(n, st->lanes), &h, sizeof h,
                            nranks, st->regions, sizes);
    for (int i = 0; i < n && rc == SHOAL_OK; i++)
        rc = check_region(st, st->regions[st->local[i]], st->local[i], n, st->ring_slots, sizes[st->local[i]]);
    if (rc)
        return rc;
    for (int i = 0; i < n && rc == SHOAL_OK; i++)
        rc = ring_pairs_init(st, i);
    if (rc == SHOAL_OK)
        rc = outbox_pools_init(st);
    return rc ? rc : watch_init(st);
}

void shm_fini(struct shm_state *st)
{
    for (int r = 0; st->regions && r < st->nranks; r++)
        if (st->regions[r])
            munmap(st->regions[r], st->region_sizes[r]);
    free(st->regions);
    free(st->region_sizes);
    for (int i = 0; st->tx && i < st->nlocal; i++)
        for (unsigned c = 0; c < SHM_CLASSES; c++)
            ring_tx_fini(&st->tx[(size_t)st->local[i] * SHM_CLASSES + c]);
    for (int i = 0; st->lane_tx && i < st->nlocal; i++)
        for (unsigned l = 0; l < st->lanes; l++)
            ring_tx_fini(&st->lane_tx[l * (size_t)st->nranks + (size_t)st->local[i]]);
    free(st->tx);
    free(st->rx);
    free(st->lane_tx);
    free(st->lane_rx);
    free(st->outbox);
    for (unsigned c = 0; c < SHM_CLASSES; c++)
        outbox_fini(&st->out[c]);
    free(st->local);
    free(st->local_index);
    free(st->peer);
    free(st->watch.list);
    free(st->watch.seen);
    free(st->watch.member);
    memset(st, 0, sizeof *st);
}

_Static_assert(SHM_BARRIER_OFFSET + SHM_BARRIER_ROUNDS * RING_HEAD_BLOCK <= SHM_DOORBELL_OFFSET &&
                   SHM_DOORBELL_OFFSET + sizeof(struct shm_doorbell) <= SHM_HEADS_OFFSET,
               "the doorbell sits between the barrier flags and the heads");
_Static_assert(SHM_DOORBELL_OFFSET + sizeof(struct shm_doorbell) <= SHM_LANES_OFFSET &&
                   SHM_LANES_OFFSET + sizeof(struct shm_lanes) <= SHM_SUMMARY_TOP_OFFSET &&
                   SHM_SUMMARY_TOP_OFFSET + 4096 / 64 <= SHM_HEADS_OFFSET,
               "the lanes' word sits between the doorbell and the heads");

struct shm_barrier_flag *shm_barrier_flag(struct shm_state *st, int r, unsigned round)
{
    return (struct shm_barrier_flag *)((char *)st->regions[r] + SHM_BARRIER_OFFSET) + round;
}
