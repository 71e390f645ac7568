/* cosmos layer: the Cosmos coherence-message predictor (Mukherjee's thesis,
 * chapter 6; docs/COSMOS.md).  It knows nothing of CRL: a predictor is
 * offered <block, sender, type> messages and predicts the next one per
 * block.  Internal to libshoal.
 *
 * Structure (§6.2.2): per key a Message History Register (MHR) of the last
 * `depth` <sender, type> tuples; per key a Pattern History Table (PHT)
 * indexed by that history whose entries hold a predicted tuple and a
 * saturating filter counter.  The key is the block, or <block, sender> with
 * sender_index (§6.6).
 *
 * Prediction and update (§6.2.3-6.2.4): cosmos_observe looks the MHR's
 * history up in the PHT; the entry there, if any, is the prediction (HIT if
 * it equals the arrived tuple, else MISS; no entry: NONE).  Then the entry
 * learns the arrived tuple and the tuple is shifted into the MHR.  A key's
 * history is full, and its PHT gets its first entry, at its depth+1-th
 * reference; until then every message is NONE.
 *
 * Filter (§6.2.6, §6.5.2), max count F in 0-2, per PHT entry, starting at
 * 0 when the entry is written:
 *   hit:  ctr = min(ctr + 1, F)
 *   miss: ctr == 0 ? prediction = arrived tuple : ctr -= 1
 * F = 0 is no filter (always replace); with F = 1 a confirmed prediction is
 * replaced only after two consecutive misses at that history (the thesis's
 * single-bit counter).
 *
 * Sender index (§6.6): the MHR and PHT are per <block, sender> and the
 * history holds only that sender's messages, so the PHT in effect predicts
 * the sender's next type.  An arriving message is a hit when the prediction
 * of ITS sender's history equals its type, which makes the rate comparable
 * with the base variant's (every arrived message is predicted over once).
 * cosmos_predict for an unknown sender (COSMOS_ANY_SENDER) makes no
 * prediction in this variant: the caller must name the sender it expects
 * (the protocol knows it: a cache hears only from the home, a directory
 * awaiting an acknowledgement knows from whom).
 *
 * Tuples are the thesis's 2 bytes: 12 bits of sender (ranks 0-4095) and 4
 * bits of type (1-15).  Bounded tables (§6.2.7, LimitLESS-style): each key
 * has COSMOS_PHT_STATIC entries of its own; more come from a pool shared by
 * the predictor's keys, of cfg.pool_entries entries (0: unbounded).  When
 * the pool is exhausted a new history learns nothing (no entry is made, the
 * message counts NONE and pool_failed counts it); existing entries still
 * predict and update.
 *
 * Cost: open-addressing hash tables that grow by doubling, so the steady
 * state allocates nothing per message.  In-line, what a message costs is
 * the cache lines it misses, so a caller with a structure per block of its
 * own (dsm's regions) may embed the key's state there (struct cosmos_blk,
 * the _blk calls): the update then touches the caller's line and no table
 * line unless the key has more than COSMOS_PHT_STATIC histories.  Not
 * thread-safe: one predictor per side per rank, used by one thread. */
#ifndef SHOAL_COSMOS_H
#define SHOAL_COSMOS_H

#include <stddef.h>
#include <stdint.h>

#define COSMOS_DEPTH_MAX 4
#define COSMOS_FILTER_MAX 2
#define COSMOS_SENDER_MAX 4095u /* 12 bits of sender in a tuple */
#define COSMOS_TYPE_MAX 15u     /* 4 bits of type; 0 is not a type */
#define COSMOS_PHT_STATIC 4     /* PHT entries each key owns (§6.2.7: about 4) */
#define COSMOS_ANY_SENDER UINT32_MAX
#define COSMOS_TUPLE_BYTES 2    /* for the thesis's memory formula */
#define COSMOS_BLOCK_BYTES 128  /* the thesis's block, for the same formula */

/* cosmos_observe's outcomes (errors are negative SHOAL_E codes). */
enum cosmos_outcome { COSMOS_NONE = 0, COSMOS_HIT = 1, COSMOS_MISS = 2 };

struct cosmos_cfg {
    unsigned depth;      /* MHR depth, 1-4 */
    unsigned filter;     /* filter's max count, 0-2 */
    int sender_index;    /* key by <block, sender> and predict the type (§6.6) */
    size_t pool_entries; /* shared overflow PHT entries; 0: unbounded */
};

struct cosmos_pred; /* one predictor: one side (home or remote) of one rank */

/* One key's state: its MHR and its COSMOS_PHT_STATIC inline PHT entries
 * (more are in the shared pool, found by id).  The predictor's table holds
 * one per key; a caller may embed one per block and pass it to the _blk
 * calls.  An embedded state starts zeroed, "not loaded": its first use
 * loads the block's state from the table, where cosmos_blk_park left it
 * when the caller's structure went away, or starts the block.  While a
 * block's state is embedded the caller must not offer that block to the
 * table calls (cosmos_observe, cosmos_predict, cosmos_last).  The fields
 * are the predictor's. */
struct cosmos_blk {
    uint64_t hist;                        /* last `depth` tuples, newest in the low 16 bits */
    uint64_t st_hist[COSMOS_PHT_STATIC];  /* inline PHT entries: their histories */
    uint16_t st_pred[COSMOS_PHT_STATIC];  /* and predicted tuples */
    uint32_t id;                          /* stable, names the pool's entries; 0: not loaded */
    uint8_t meta;                         /* references (saturating at depth), entries in use, pool */
    uint8_t ctrs;                         /* the inline entries' filter counters, 2 bits each */
    uint16_t sender;                      /* in the table: the key's sender (sender_index), else any */
};

/* SHOAL_EINVAL for a depth or filter out of range, SHOAL_ENOMEM. */
int cosmos_create(const struct cosmos_cfg *cfg, struct cosmos_pred **p);
void cosmos_destroy(struct cosmos_pred *p);

/* Offers one arrived message: predicts first (from the history before it),
 * then updates.  Returns COSMOS_HIT, COSMOS_MISS or COSMOS_NONE (no
 * prediction made); SHOAL_EINVAL for a sender above COSMOS_SENDER_MAX or a
 * type outside 1-15 (nothing is counted); SHOAL_ENOMEM if a table could not
 * grow (the message is counted NONE and not learnt). */
int cosmos_observe(struct cosmos_pred *p, uint64_t block, uint32_t sender, unsigned type);

/* The prediction for the next message of block: 1 with *sender and *type
 * set, 0 if there is none.  With sender_index, *sender names the sender to
 * predict for (COSMOS_ANY_SENDER: no prediction); otherwise it is output
 * only. */
int cosmos_predict(struct cosmos_pred *p, uint64_t block, uint32_t *sender, unsigned *type);

/* The prediction for the message after <after_sender, after_type>, as if
 * that one had come (nothing is learnt or counted): a caller deciding how
 * to answer a message it predicts but has not received.  b is the block's
 * embedded state or NULL (the table's); with sender_index, *sender names
 * the sender to predict for, as in cosmos_predict. */
int cosmos_predict_after(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block, uint32_t after_sender,
                         unsigned after_type, uint32_t *sender, unsigned *type);

/* The newest tuple in the key's history: 1 with *sender and *type set, 0 if
 * the key has none.  sender is the key's sender with sender_index, ignored
 * otherwise. */
int cosmos_last(const struct cosmos_pred *p, uint64_t block, uint32_t sender,
                uint32_t *last_sender, unsigned *last_type);

/* cosmos_observe and cosmos_predict on a block whose state b the caller
 * embeds.  With sender_index the key is per sender and b is not used: these
 * are cosmos_observe and cosmos_predict. */
int cosmos_observe_blk(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block, uint32_t sender,
                       unsigned type);
int cosmos_predict_blk(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block, uint32_t *sender,
                       unsigned *type);
/* The caller's structure holding block's state b goes away: the state moves
 * into the table (b is zeroed), where the table calls and a later embedded
 * state's first use find it.  SHOAL_ENOMEM if the table could not grow:
 * the block's history is lost and starts again. */
int cosmos_blk_park(struct cosmos_pred *p, struct cosmos_blk *b, uint64_t block);

struct cosmos_counts {
    uint64_t hits, misses, none; /* outcomes of cosmos_observe */
    uint64_t blocks;             /* MHR entries: keys referenced at least once */
    uint64_t pht_entries;        /* PHT entries, static and pool */
    uint64_t pool_used;          /* of those, from the shared pool */
    uint64_t pool_failed;        /* histories not learnt: the pool was full */
    uint64_t grows;              /* times a table doubled (the call that does takes microseconds) */
};
void cosmos_counts(const struct cosmos_pred *p, struct cosmos_counts *c);

/* Bytes the predictor's tables occupy now (allocated, not just used), and
 * the loaded embedded states. */
size_t cosmos_mem_bytes(const struct cosmos_pred *p);

/* The thesis's Table 6.7 overhead per 128-byte block, in percent, with
 * 2-byte tuples: `mhr` histories of depth tuples and `pht` PHT entries of
 * depth + 1 (its index and prediction) over `blocks` blocks.  Without the
 * sender in the index a block has one history (mhr == blocks) and this is
 * the thesis's 2 (depth + Ratio (depth + 1)) / 128 with Ratio = pht / mhr;
 * with it a block has a history per sender, all of which count. */
static inline double cosmos_overhead_pct(unsigned depth, uint64_t blocks, uint64_t mhr, uint64_t pht)
{
    if (!blocks)
        return 0.0;
    return COSMOS_TUPLE_BYTES * ((double)depth * (double)mhr + (double)(depth + 1) * (double)pht) * 100.0 /
           (COSMOS_BLOCK_BYTES * (double)blocks);
}

#endif
