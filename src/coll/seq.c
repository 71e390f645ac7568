/* The identity of every collective: each call a rank makes (shoal_barrier,
 * shoal_broadcast, shoal_reduce; shoal_allreduce is a reduce and a
 * broadcast) takes the next number of one sequence, and the messages and
 * barrier flags of collective #s carry s; their kind is their handler's.
 * Every rank must call the same collectives in the same order, so when a
 * message of a kind other than this rank's #s arrives for #s, or anything
 * arrives for a number past the last one of a rank in shoal_finalize, two
 * ranks called different collectives: the job ends with a message that
 * names both ranks and both calls, where it would otherwise hang. */
#include "am/am.h"
#include "coll/coll.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define SEQ_HISTORY 64u /* the kinds of this many collectives are remembered, past and future */

struct seq_early {
    uint64_t seq; /* 0: none */
    int src;
    uint8_t kind;
};

static struct {
    uint64_t seq;      /* the collective in progress, or the last one */
    int active;        /* inside #seq */
    int finalizing;    /* in shoal_finalize, after #seq */
    uint8_t kind[SEQ_HISTORY];   /* this rank's kind of #s, at s % SEQ_HISTORY, for s <= seq */
    struct seq_early early[SEQ_HISTORY]; /* the first message seen of a collective this rank has not reached */
} cs;

static const char *coll_call_name(enum coll_kind k)
{
    static const char *const names[] = {[COLL_KIND_BARRIER] = "shoal_barrier", [COLL_KIND_BCAST] = "shoal_broadcast",
                                        [COLL_KIND_REDUCE] = "shoal_reduce",
                                        [COLL_KIND_OBARRIER] = "the ordered barrier (rgn_barrier)",
                                        [COLL_KIND_OBCAST] = "the broadcast from any root (rgn_bcast)"};
    return names[k];
}

/* Ends the job: rank src called `theirs` as #seq, which this rank did not. */
static _Noreturn void coll_mismatch_here(int src, uint64_t seq, enum coll_kind theirs)
{
    char mine[96];
    if (cs.finalizing)
        snprintf(mine, sizeof mine, "called shoal_finalize after collective #%llu", (unsigned long long)cs.seq);
    else
        snprintf(mine, sizeof mine, "called %s as #%llu",
                 coll_call_name((enum coll_kind)cs.kind[seq % SEQ_HISTORY]), (unsigned long long)seq);
    util_fatal("collectives called out of step: rank %d called %s as the job's collective #%llu, while this "
               "rank (%d) %s; every rank must call the same collectives in the same order",
               src, coll_call_name(theirs), (unsigned long long)seq, am_rank(), mine);
}

uint64_t coll_begin(enum coll_kind k)
{
    uint64_t s = ++cs.seq;
    cs.kind[s % SEQ_HISTORY] = (uint8_t)k;
    cs.active = 1;
    if (cs.early[s % SEQ_HISTORY].seq == s && cs.early[s % SEQ_HISTORY].kind != k)
        coll_mismatch_here(cs.early[s % SEQ_HISTORY].src, s, (enum coll_kind)cs.early[s % SEQ_HISTORY].kind);
    coll_watch();
    return s;
}

void coll_end(void)
{
    cs.active = 0;
}

void coll_check(int src, uint64_t seq, enum coll_kind k)
{
    if (seq > cs.seq) {
        if (cs.finalizing)
            coll_mismatch_here(src, seq, k);
        if (seq - cs.seq <= SEQ_HISTORY && cs.early[seq % SEQ_HISTORY].seq != seq)
            cs.early[seq % SEQ_HISTORY] = (struct seq_early){seq, src, (uint8_t)k};
        return;
    }
    if (cs.seq - seq < SEQ_HISTORY && cs.kind[seq % SEQ_HISTORY] != k)
        coll_mismatch_here(src, seq, k);
}

/* A barrier flag in this rank's inbox holds the latest barrier its writer
 * entered: exactly #seq while this rank's #seq is something else, or past
 * this rank's last collective once it finalizes, is a mismatch (a later
 * number is not: a rank leaves a broadcast or reduction early and goes
 * on to a later barrier). */
void coll_watch(void)
{
    /* nothing to look for between collectives, or inside a barrier */
    if (!cs.finalizing && (!cs.active || cs.kind[cs.seq % SEQ_HISTORY] == COLL_KIND_BARRIER))
        return;
    for (unsigned round = 0; round < AM_LOCAL_FLAGS; round++) {
        int src = coll_flag_writer(round);
        if (src < 0)
            continue;
        uint64_t s = atomic_load_explicit(am_local_flag(am_rank(), round), memory_order_acquire);
        if (cs.finalizing ? s > cs.seq : cs.active && s == cs.seq)
            coll_mismatch_here(src, s, COLL_KIND_BARRIER);
    }
}

void coll_finalizing(void)
{
    cs.finalizing = 1;
    for (unsigned i = 0; i < SEQ_HISTORY; i++)
        if (cs.early[i].seq > cs.seq)
            coll_mismatch_here(cs.early[i].src, cs.early[i].seq, (enum coll_kind)cs.early[i].kind);
    coll_watch();
}

void coll_seq_fini(void)
{
    memset(&cs, 0, sizeof cs);
}
