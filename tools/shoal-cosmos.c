/* shoal-cosmos: replays Cosmos traces (SHOAL_COSMOS_TRACE=DIR, docs/COSMOS_TRACE.md)
 * through the predictor offline and prints the thesis's tables in their
 * shapes (docs/COSMOS.md).
 *
 *   shoal-cosmos replay [--depth D] [--filter F] [--sender-index] [--window N] [--warmup N]
 *                       [--until N] [--pool N] [--json] DIR...
 *
 * Every rank's trace feeds two predictors of that rank, its home side and
 * its remote side; markers are not predicted, and a barrier marker advances
 * the rank's iteration count.  Exit 0, 1 on bad traces, 2 on bad usage. */
#include "cosmos/cosmos.h"
#include "cosmos/trace.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIDES 2        /* COSMOS_ROLE_REMOTE (cache, C), COSMOS_ROLE_HOME (directory, D) */
#define TOP_TRANSITIONS 10
#define ADAPT_POINTS 5.0 /* time to adapt: within this many points of the steady state */

static const char *const side_name[SIDES] = {"cache", "home"};

struct rank_trace {
    char *path;
    struct cosmos_rec *recs;
    size_t n;
};

struct job {
    const char *dir;
    uint64_t id;
    uint32_t nranks;
    struct rank_trace *ranks; /* indexed by rank */
    uint64_t messages;        /* records that are not markers */
    uint64_t iterations;      /* barrier markers of the rank with the most */
    uint64_t blocks;          /* <rank, side, block> referenced up to --until */
};

/* One configuration's results over a whole job. */
struct row {
    struct cosmos_cfg cfg;
    uint64_t warmup, until;
    uint64_t hits[SIDES], msgs[SIDES];
    uint64_t blocks, mhr, pht, pool_failed; /* blocks: <rank, side, block> referenced */
    size_t bytes;
};

/* Per-transition and per-window counts (Table 6.6, Fig. 6-8). */
struct detail {
    uint64_t trans_refs[SIDES][16][16], trans_hits[SIDES][16][16];
    uint64_t *win_hits, *win_msgs;
    size_t nwin, window;
    uint64_t last; /* the last iteration (messages after the last barrier) */
    /* messages after the last barrier (the applications' final gather):
     * shown in the last window, left out of the steady state and the time
     * to adapt */
    uint64_t tail_hits, tail_msgs;
};

struct opts {
    int depth, filter, sender_index, json;
    size_t window;   /* Fig. 6-8's window in barriers; 0: chosen from the job */
    uint64_t warmup; /* barriers before which messages train but are not counted */
    uint64_t until;  /* barrier at which each rank's replay stops; 0: none */
    size_t pool;     /* each predictor's shared PHT pool (cosmos_cfg.pool_entries); 0: unbounded */
};

static void die_usage(const char *why)
{
    fprintf(stderr,
            "shoal-cosmos: %s\n"
            "usage: shoal-cosmos replay [--depth 1-4] [--filter 0-2] [--sender-index] [--window N] [--warmup N]\n"
            "                           [--until N] [--pool N] [--json] DIR...\n"
            "  without --depth/--filter/--sender-index: Tables 6.4-6.8 and Fig. 6-8 of the thesis;\n"
            "  with any of them: that one configuration (default depth 1, filter 0).\n",
            why);
    exit(2);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fprintf(stderr, "shoal-cosmos: out of memory\n");
        exit(1);
    }
    return p;
}

static double pct(uint64_t hits, uint64_t msgs)
{
    return msgs ? 100.0 * (double)hits / (double)msgs : 0.0;
}

/* ---- loading -------------------------------------------------------------- */

/* Reads one trace whole into t; 0, or -1 after a message naming the file. */
static int load_file(const char *path, struct rank_trace *t, struct cosmos_trace_hdr *h)
{
    struct cosmos_trace_r *r;
    if (cosmos_trace_open_read(path, &r, h) != 0) {
        fprintf(stderr, "shoal-cosmos: %s: not a readable trace (see above)\n", path);
        return -1;
    }
    size_t cap = 0;
    struct cosmos_rec rec;
    int rc;
    while ((rc = cosmos_trace_next(r, &rec)) == 1) {
        if (rec.role != COSMOS_ROLE_MARKER && rec.sender >= h->nranks) {
            fprintf(stderr, "shoal-cosmos: %s: record %zu has sender %" PRIu32 ", not a rank of the job's %" PRIu32 "\n",
                    path, t->n, rec.sender, h->nranks);
            rc = -1;
            break;
        }
        if (rec.role != COSMOS_ROLE_MARKER && rec.sender > COSMOS_SENDER_MAX) {
            fprintf(stderr, "shoal-cosmos: %s: record %zu has sender %" PRIu32 ", above the %u a tuple's 12 bits "
                    "hold (docs/COSMOS.md)\n", path, t->n, rec.sender, COSMOS_SENDER_MAX);
            rc = -1;
            break;
        }
        if (t->n == cap) {
            cap = cap ? 2 * cap : 4096;
            t->recs = xrealloc(t->recs, cap * sizeof(*t->recs));
        }
        t->recs[t->n++] = rec;
    }
    cosmos_trace_close_read(r);
    if (rc < 0) {
        fprintf(stderr, "shoal-cosmos: %s: corrupt trace (see above)\n", path);
        return -1;
    }
    t->path = strdup(path);
    return 0;
}

static int is_trace_name(const char *name)
{
    size_t n = strlen(name);
    return strncmp(name, "cosmos-", 7) == 0 && n > 13 && strcmp(name + n - 6, ".trace") == 0;
}

/* One job's traces from dir, every rank exactly once; 0 or -1 with a message. */
static int load_job(const char *dir, struct job *j)
{
    memset(j, 0, sizeof(*j));
    j->dir = dir;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "shoal-cosmos: %s: cannot open the directory\n", dir);
        return -1;
    }
    int err = 0, files = 0;
    struct dirent *e;
    while (!err && (e = readdir(d))) {
        if (!is_trace_name(e->d_name))
            continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *path = xrealloc(NULL, len);
        snprintf(path, len, "%s/%s", dir, e->d_name);
        struct rank_trace t = {0};
        struct cosmos_trace_hdr h;
        err = load_file(path, &t, &h);
        if (!err && files && (h.job_id != j->id || h.nranks != j->nranks)) {
            fprintf(stderr, "shoal-cosmos: %s: mixed jobs: %s is job %" PRIx64 " of %" PRIu32
                    " ranks, another is job %" PRIx64 " of %" PRIu32 "\n",
                    dir, e->d_name, h.job_id, h.nranks, j->id, j->nranks);
            err = -1;
        }
        if (!err && !files) {
            j->id = h.job_id;
            j->nranks = h.nranks;
            j->ranks = xrealloc(NULL, h.nranks * sizeof(*j->ranks));
            memset(j->ranks, 0, h.nranks * sizeof(*j->ranks));
        }
        if (!err && j->ranks[h.rank].path) {
            fprintf(stderr, "shoal-cosmos: %s and %s are both rank %" PRIu32 "\n", j->ranks[h.rank].path, path,
                    h.rank);
            err = -1;
        }
        if (!err) {
            j->ranks[h.rank] = t;
            files++;
        } else {
            free(t.recs);
            free(t.path);
        }
        free(path);
    }
    closedir(d);
    if (!err && !files) {
        fprintf(stderr, "shoal-cosmos: %s: no traces (cosmos-<job>-r<rank>.trace)\n", dir);
        err = -1;
    }
    for (uint32_t r = 0; !err && r < j->nranks; r++) {
        if (!j->ranks[r].path) {
            fprintf(stderr, "shoal-cosmos: %s: job %" PRIx64 " has %" PRIu32 " ranks but no trace of rank %" PRIu32
                    "\n", dir, j->id, j->nranks, r);
            err = -1;
        }
    }
    for (uint32_t r = 0; !err && r < j->nranks; r++) {
        uint64_t barriers = 0;
        for (size_t i = 0; i < j->ranks[r].n; i++) {
            const struct cosmos_rec *c = &j->ranks[r].recs[i];
            j->messages += c->role != COSMOS_ROLE_MARKER;
            barriers += c->role == COSMOS_ROLE_MARKER && c->type == COSMOS_MARK_BARRIER;
        }
        if (barriers > j->iterations)
            j->iterations = barriers;
    }
    return err;
}

static void free_job(struct job *j)
{
    for (uint32_t r = 0; j->ranks && r < j->nranks; r++) {
        free(j->ranks[r].recs);
        free(j->ranks[r].path);
    }
    free(j->ranks);
}

/* ---- replay --------------------------------------------------------------- */

/* Counts one message into Table 6.6 (prev: the type before it at this block
 * and side, 0 if none) and into its iteration's window of Fig. 6-8. */
static void detail_count(struct detail *det, const struct cosmos_rec *c, unsigned prev, uint64_t iteration,
                         int hit)
{
    if (prev) {
        det->trans_refs[c->role][prev][c->type]++;
        det->trans_hits[c->role][prev][c->type] += hit;
    }
    size_t w = (size_t)(iteration / det->window);
    if (w < det->nwin) {
        det->win_msgs[w]++;
        det->win_hits[w] += hit;
    }
    if (iteration >= det->last) {
        det->tail_msgs++;
        det->tail_hits += (uint64_t)hit;
    }
}

/* One rank through its two predictors. */
/* The records of t a replay up to barrier `until` (0: all) takes: those
 * before the marker of that barrier. */
static size_t replay_end(const struct rank_trace *t, uint64_t until)
{
    uint64_t iteration = 0;
    for (size_t i = 0; until && i < t->n; i++) {
        const struct cosmos_rec *c = &t->recs[i];
        if (c->role == COSMOS_ROLE_MARKER && c->type == COSMOS_MARK_BARRIER && ++iteration >= until)
            return i;
    }
    return t->n;
}

static void replay_rank(const struct rank_trace *t, struct cosmos_pred *p[SIDES], struct row *row,
                        struct detail *det)
{
    uint64_t iteration = 0;
    for (size_t i = 0, end = replay_end(t, row->until); i < end; i++) {
        const struct cosmos_rec *c = &t->recs[i];
        if (c->role == COSMOS_ROLE_MARKER) {
            iteration += c->type == COSMOS_MARK_BARRIER;
            continue;
        }
        /* The type before this message: asked before cosmos_observe adds it. */
        uint32_t ls;
        unsigned prev = 0;
        if (det && !cosmos_last(p[c->role], c->block, c->sender, &ls, &prev))
            prev = 0;
        int rc = cosmos_observe(p[c->role], c->block, c->sender, c->type);
        if (rc < 0) {
            fprintf(stderr, "shoal-cosmos: %s: the predictor refused record %zu (error %d)\n", t->path, i, rc);
            exit(1);
        }
        if (det)
            detail_count(det, c, iteration < row->warmup ? 0 : prev, iteration, rc == COSMOS_HIT);
        if (iteration < row->warmup)
            continue;
        row->msgs[c->role]++;
        row->hits[c->role] += rc == COSMOS_HIT;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The <rank, side, block> triples a replay up to `until` references,
 * whatever the key: with the sender in the index a block has several MHRs,
 * and the memory per block counts them all.  A rank's blocks go into one
 * array, the remote side's from the front and the home's from the back. */
static uint64_t distinct_blocks(const struct job *j, uint64_t until)
{
    uint64_t distinct = 0;
    for (uint32_t r = 0; r < j->nranks; r++) {
        const struct rank_trace *t = &j->ranks[r];
        uint64_t *ids = xrealloc(NULL, (t->n ? t->n : 1) * sizeof(uint64_t));
        size_t front = 0, back = t->n;
        for (size_t i = 0, end = replay_end(t, until); i < end; i++) {
            const struct cosmos_rec *c = &t->recs[i];
            if (c->role == COSMOS_ROLE_MARKER)
                continue;
            if (c->role == COSMOS_ROLE_REMOTE)
                ids[front++] = c->block;
            else
                ids[--back] = c->block;
        }
        uint64_t *side[SIDES] = {ids, ids + back};
        size_t n[SIDES] = {front, t->n - back};
        for (int s = 0; s < SIDES; s++) {
            qsort(side[s], n[s], sizeof(uint64_t), cmp_u64);
            for (size_t i = 0; i < n[s]; i++)
                distinct += !i || side[s][i] != side[s][i - 1];
        }
        free(ids);
    }
    return distinct;
}

static void replay(const struct job *j, const struct opts *o, const struct cosmos_cfg *cfg, struct row *row,
                   struct detail *det)
{
    memset(row, 0, sizeof(*row));
    row->cfg = *cfg;
    row->cfg.pool_entries = o->pool;
    row->warmup = o->warmup;
    row->until = o->until;
    row->blocks = j->blocks;
    for (uint32_t r = 0; r < j->nranks; r++) {
        struct cosmos_pred *p[SIDES];
        for (int s = 0; s < SIDES; s++) {
            if (cosmos_create(&row->cfg, &p[s]) != 0) {
                fprintf(stderr, "shoal-cosmos: cannot create a predictor\n");
                exit(1);
            }
        }
        replay_rank(&j->ranks[r], p, row, det);
        for (int s = 0; s < SIDES; s++) {
            struct cosmos_counts c;
            cosmos_counts(p[s], &c);
            row->mhr += c.blocks;
            row->pht += c.pht_entries;
            row->pool_failed += c.pool_failed;
            row->bytes += cosmos_mem_bytes(p[s]);
            cosmos_destroy(p[s]);
        }
    }
}

/* ---- output --------------------------------------------------------------- */

static double frac(uint64_t hits, uint64_t msgs)
{
    return msgs ? (double)hits / (double)msgs : 0.0;
}

static double row_ratio(const struct row *r)
{
    return r->mhr ? (double)r->pht / (double)r->mhr : 0.0;
}

static double row_overhead(const struct row *r)
{
    return cosmos_overhead_pct(r->cfg.depth, r->blocks, r->mhr, r->pht);
}

static void json_side(const char *key, uint64_t hits, uint64_t msgs)
{
    if (msgs)
        printf(", \"%s\": %.6f", key, frac(hits, msgs));
    else
        printf(", \"%s\": null", key);
}

static void json_row(const struct job *j, const struct row *r, int *first)
{
    uint64_t msgs = r->msgs[0] + r->msgs[1];
    printf("%s\n  {\"dir\": \"%s\", \"job\": \"%" PRIx64 "\", \"ranks\": %" PRIu32
           ", \"depth\": %u, \"filter\": %u, \"sender_index\": %s",
           *first ? "" : ",", j->dir, j->id, j->nranks, r->cfg.depth, r->cfg.filter,
           r->cfg.sender_index ? "true" : "false");
    json_side("cache", r->hits[0], r->msgs[0]);
    json_side("home", r->hits[1], r->msgs[1]);
    json_side("overall", r->hits[0] + r->hits[1], msgs);
    printf(", \"messages\": %" PRIu64 ", \"cache_messages\": %" PRIu64 ", \"home_messages\": %" PRIu64
           ", \"blocks\": %" PRIu64 ", \"mhr_entries\": %" PRIu64 ", \"pht_entries\": %" PRIu64 ", \"ratio\": %.4f"
           ", \"overhead_pct\": %.4f, \"bytes\": %zu, \"warmup\": %" PRIu64 ", \"until\": %" PRIu64
           ", \"pool\": %zu, \"pool_failed\": %" PRIu64 "}",
           msgs, r->msgs[0], r->msgs[1], r->blocks, r->mhr, r->pht, row_ratio(r), row_overhead(r), r->bytes, r->warmup, r->until,
           r->cfg.pool_entries, r->pool_failed);
    *first = 0;
}

static void print_rates_header(void)
{
    printf("%5s %3s %3s %7s %7s %7s %10s\n", "depth", "F", "+P", "C %", "D %", "O %", "messages");
}

static void print_rates(const struct row *r)
{
    printf("%5u %3u %3s %7.1f %7.1f %7.1f %10" PRIu64 "\n", r->cfg.depth, r->cfg.filter,
           r->cfg.sender_index ? "yes" : "no", pct(r->hits[0], r->msgs[0]), pct(r->hits[1], r->msgs[1]),
           pct(r->hits[0] + r->hits[1], r->msgs[0] + r->msgs[1]), r->msgs[0] + r->msgs[1]);
}

static void print_memory_header(void)
{
    printf("%5s %10s %10s %10s %7s %8s %12s %10s\n", "depth", "blocks", "MHR", "PHT", "Ratio", "Ovhd %", "bytes",
           "bytes/MHR");
}

static void print_memory(const struct row *r)
{
    printf("%5u %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %7.2f %8.1f %12zu %10.0f\n", r->cfg.depth, r->blocks, r->mhr,
           r->pht, row_ratio(r), row_overhead(r), r->bytes, r->mhr ? (double)r->bytes / (double)r->mhr : 0.0);
}

/* Table 6.6: the most referenced <previous type, type> transitions. */
static void print_transitions(const struct detail *det)
{
    uint64_t total = 0;
    for (int s = 0; s < SIDES; s++)
        for (int a = 0; a < 16; a++)
            for (int b = 0; b < 16; b++)
                total += det->trans_refs[s][a][b];
    printf("%-6s %-44s %7s %7s\n", "side", "transition", "refs %", "hits %");
    uint8_t shown[SIDES][16][16] = {{{0}}};
    for (int k = 0; k < TOP_TRANSITIONS; k++) {
        int bs = -1, ba = 0, bb = 0;
        for (int s = 0; s < SIDES; s++)
            for (int a = 0; a < 16; a++)
                for (int b = 0; b < 16; b++)
                    if (!shown[s][a][b] && det->trans_refs[s][a][b] &&
                        (bs < 0 || det->trans_refs[s][a][b] > det->trans_refs[bs][ba][bb])) {
                        bs = s;
                        ba = a;
                        bb = b;
                    }
        if (bs < 0)
            break;
        shown[bs][ba][bb] = 1;
        char name[64];
        snprintf(name, sizeof name, "<%s, %s>", cosmos_type_name((unsigned)ba), cosmos_type_name((unsigned)bb));
        printf("%-6s %-44s %7.1f %7.1f\n", side_name[bs], name, pct(det->trans_refs[bs][ba][bb], total),
               pct(det->trans_hits[bs][ba][bb], det->trans_refs[bs][ba][bb]));
    }
}

/* Window w's messages and hits without those after the last barrier. */
static uint64_t win_msgs_in(const struct detail *det, size_t w)
{
    return det->win_msgs[w] - (w == det->nwin - 1 ? det->tail_msgs : 0);
}

static double win_pct_in(const struct detail *det, size_t w)
{
    return pct(det->win_hits[w] - (w == det->nwin - 1 ? det->tail_hits : 0), win_msgs_in(det, w));
}

/* Fig. 6-8: accuracy per window; the time to adapt is the first window from
 * which every window is within ADAPT_POINTS of the steady state, the
 * accuracy over the last half of the windows.  Both leave out the messages
 * after the last barrier, which are no iteration (the applications gather
 * their results there, once). */
static void print_windows(const struct detail *det)
{
    printf("%-16s %10s %7s\n", "iterations", "messages", "hits %");
    uint64_t sh = 0, sm = 0;
    for (size_t w = 0; w < det->nwin; w++) {
        char span[32];
        uint64_t end = (w + 1) * det->window - 1;
        snprintf(span, sizeof span, "%zu-%" PRIu64, w * det->window, end < det->last ? end : det->last);
        printf("%-16s %10" PRIu64 " %7.1f\n", span, det->win_msgs[w], pct(det->win_hits[w], det->win_msgs[w]));
        if (w >= det->nwin / 2) {
            sh += det->win_hits[w];
            sm += det->win_msgs[w];
        }
    }
    double steady = pct(sh - det->tail_hits, sm - det->tail_msgs);
    size_t adapt = det->nwin;
    while (adapt > 0 && (!win_msgs_in(det, adapt - 1) || win_pct_in(det, adapt - 1) >= steady - ADAPT_POINTS))
        adapt--;
    if (det->tail_msgs)
        printf("after the last barrier: %" PRIu64 " messages, %.1f %% hits (left out below)\n", det->tail_msgs,
               pct(det->tail_hits, det->tail_msgs));
    printf("steady state %.1f %% (last half of the windows); time to adapt: %zu iterations "
           "(first window from which all are within %.0f points of it)\n",
           steady, adapt * det->window, ADAPT_POINTS);
}

static void detail_init(struct detail *det, const struct job *j, const struct opts *o)
{
    memset(det, 0, sizeof(*det));
    /* with --until the replay ends at that barrier: no messages after it */
    uint64_t iterations = o->until && o->until < j->iterations ? o->until - 1 : j->iterations;
    det->window = o->window ? o->window : (size_t)(iterations / 20 + 1);
    det->nwin = (size_t)(iterations / det->window + 1);
    det->last = o->until && o->until <= j->iterations ? o->until : j->iterations;
    det->win_hits = xrealloc(NULL, det->nwin * sizeof(uint64_t));
    det->win_msgs = xrealloc(NULL, det->nwin * sizeof(uint64_t));
    memset(det->win_hits, 0, det->nwin * sizeof(uint64_t));
    memset(det->win_msgs, 0, det->nwin * sizeof(uint64_t));
}

static void detail_free(struct detail *det)
{
    free(det->win_hits);
    free(det->win_msgs);
}

static struct cosmos_cfg cfg_of(unsigned depth, unsigned filter, int sender_index)
{
    return (struct cosmos_cfg){.depth = depth, .filter = filter, .sender_index = sender_index};
}

static void print_details(const struct job *j, const struct opts *o, const struct cosmos_cfg *cfg,
                          const char *what)
{
    struct detail det;
    struct row r;
    detail_init(&det, j, o);
    replay(j, o, cfg, &r, &det);
    printf("\nTable 6.6: transitions <previous type, type> at one side (%s; top %d by references)\n", what,
           TOP_TRANSITIONS);
    print_transitions(&det);
    printf("\nFig. 6-8: accuracy per window of %zu barriers (%s)\n", det.window, what);
    print_windows(&det);
    detail_free(&det);
}

static void header(const struct job *j, const struct opts *o)
{
    printf("== %s: job %" PRIx64 ", %" PRIu32 " ranks, %" PRIu64 " messages, %" PRIu64 " barriers ==\n", j->dir,
           j->id, j->nranks, j->messages, j->iterations);
    if (o->warmup)
        printf("warm-up: messages before each rank's barrier %" PRIu64 " train the predictors but are not "
               "counted (Fig. 6-8 counts them)\n", o->warmup);
    if (o->until)
        printf("until: each rank's replay stops at its barrier %" PRIu64 ", as if the run had ended there\n",
               o->until);
    if (o->pool)
        printf("pool: each predictor (a rank's side) has %zu shared PHT entries beyond each key's %d; a history "
               "met when they are all taken is not learnt\n", o->pool, COSMOS_PHT_STATIC);
}

/* Every table of the thesis for one job. */
static void report_all(const struct job *j, const struct opts *o, int *first)
{
    struct row base[COSMOS_DEPTH_MAX], filt[2][COSMOS_FILTER_MAX], pi[COSMOS_DEPTH_MAX];
    for (unsigned d = 1; d <= COSMOS_DEPTH_MAX; d++) {
        struct cosmos_cfg c = cfg_of(d, 0, 0), cp = cfg_of(d, 0, 1);
        replay(j, o, &c, &base[d - 1], NULL);
        replay(j, o, &cp, &pi[d - 1], NULL);
    }
    for (unsigned d = 1; d <= 2; d++)
        for (unsigned f = 1; f <= COSMOS_FILTER_MAX; f++) {
            struct cosmos_cfg c = cfg_of(d, f, 0);
            replay(j, o, &c, &filt[d - 1][f - 1], NULL);
        }
    if (o->json) {
        for (int d = 0; d < COSMOS_DEPTH_MAX; d++)
            json_row(j, &base[d], first);
        for (int d = 0; d < 2; d++)
            for (int f = 0; f < COSMOS_FILTER_MAX; f++)
                json_row(j, &filt[d][f], first);
        for (int d = 0; d < COSMOS_DEPTH_MAX; d++)
            json_row(j, &pi[d], first);
        return;
    }
    header(j, o);
    printf("\nTable 6.4: prediction rates (%% hits; C = remote/cache side, D = home/directory side, "
           "O = overall, message-weighted; no filter)\n");
    print_rates_header();
    for (int d = 0; d < COSMOS_DEPTH_MAX; d++)
        print_rates(&base[d]);
    printf("\nTable 6.5: overall rate (%%) with filters of max count 0 (none), 1, 2\n%5s %7s %7s %7s\n", "depth",
           "0", "1", "2");
    for (int d = 0; d < 2; d++) {
        printf("%5d %7.1f", d + 1, pct(base[d].hits[0] + base[d].hits[1], base[d].msgs[0] + base[d].msgs[1]));
        for (int f = 0; f < COSMOS_FILTER_MAX; f++)
            printf(" %7.1f", pct(filt[d][f].hits[0] + filt[d][f].hits[1], filt[d][f].msgs[0] + filt[d][f].msgs[1]));
        printf("\n");
    }
    printf("\nTable 6.7: memory (no filter; MHR = keys referenced, Ratio = PHT/MHR entries, Ovhd = per "
           "128-byte block with 2-byte tuples, bytes = this implementation's tables)\n");
    print_memory_header();
    for (int d = 0; d < COSMOS_DEPTH_MAX; d++)
        print_memory(&base[d]);
    printf("\nTable 6.8: the sender in the index (Base = O of Table 6.4, +P = change in points; "
           "C and D with the sender; Ovhd per block, every sender's MHR counted)\n%5s %7s %7s %7s %7s %8s\n", "depth",
           "Base", "+P", "C %", "D %", "Ovhd %");
    for (int d = 0; d < COSMOS_DEPTH_MAX; d++) {
        double b = pct(base[d].hits[0] + base[d].hits[1], base[d].msgs[0] + base[d].msgs[1]);
        double p = pct(pi[d].hits[0] + pi[d].hits[1], pi[d].msgs[0] + pi[d].msgs[1]);
        printf("%5d %7.1f %+7.1f %7.1f %7.1f %8.1f\n", d + 1, b, p - b, pct(pi[d].hits[0], pi[d].msgs[0]),
               pct(pi[d].hits[1], pi[d].msgs[1]), row_overhead(&pi[d]));
    }
    struct cosmos_cfg d1 = cfg_of(1, 0, 0);
    print_details(j, o, &d1, "depth 1, no filter");
    printf("\n");
}

/* The one configuration the options name. */
static void report_one(const struct job *j, const struct opts *o, int *first)
{
    struct cosmos_cfg c = cfg_of((unsigned)o->depth, (unsigned)o->filter, o->sender_index);
    struct row r;
    replay(j, o, &c, &r, NULL);
    if (o->json) {
        json_row(j, &r, first);
        return;
    }
    header(j, o);
    print_rates_header();
    print_rates(&r);
    printf("\n");
    print_memory_header();
    print_memory(&r);
    char what[64];
    snprintf(what, sizeof what, "depth %u, filter %u%s", c.depth, c.filter, c.sender_index ? ", sender index" : "");
    print_details(j, o, &c, what);
    printf("\n");
}

static long parse_num(const char *opt, const char *v, long lo, long hi)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || end == v || n < lo || n > hi) {
        char why[96];
        snprintf(why, sizeof why, "%s needs a number in %ld-%ld", opt, lo, hi);
        die_usage(why);
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "replay") != 0)
        die_usage(argc < 2 ? "no command" : "unknown command (only replay)");
    struct opts o = {.depth = 1};
    int single = 0, ndirs = 0;
    const char **dirs = xrealloc(NULL, (size_t)argc * sizeof(*dirs));
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--depth") == 0) {
            o.depth = (int)parse_num(a, i + 1 < argc ? argv[++i] : NULL, 1, COSMOS_DEPTH_MAX);
            single = 1;
        } else if (strcmp(a, "--filter") == 0) {
            o.filter = (int)parse_num(a, i + 1 < argc ? argv[++i] : NULL, 0, COSMOS_FILTER_MAX);
            single = 1;
        } else if (strcmp(a, "--window") == 0) {
            o.window = (size_t)parse_num(a, i + 1 < argc ? argv[++i] : NULL, 1, 1000000000L);
        } else if (strcmp(a, "--warmup") == 0) {
            o.warmup = (uint64_t)parse_num(a, i + 1 < argc ? argv[++i] : NULL, 0, 1000000000L);
        } else if (strcmp(a, "--until") == 0) {
            o.until = (uint64_t)parse_num(a, i + 1 < argc ? argv[++i] : NULL, 1, 1000000000L);
        } else if (strcmp(a, "--pool") == 0) {
            o.pool = (size_t)parse_num(a, i + 1 < argc ? argv[++i] : NULL, 1, 1000000000L);
        } else if (strcmp(a, "--sender-index") == 0) {
            o.sender_index = 1;
            single = 1;
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (a[0] == '-') {
            die_usage("unknown option");
        } else {
            dirs[ndirs++] = a;
        }
    }
    if (!ndirs)
        die_usage("no trace directory");
    int first = 1, rc = 0;
    if (o.json)
        printf("[");
    for (int d = 0; d < ndirs; d++) {
        struct job j;
        if (load_job(dirs[d], &j) != 0) {
            rc = 1;
        } else {
            j.blocks = distinct_blocks(&j, o.until);
            if (single)
                report_one(&j, &o, &first);
            else
                report_all(&j, &o, &first);
        }
        free_job(&j);
    }
    if (o.json)
        printf("\n]\n");
    free(dirs);
    return rc;
}
