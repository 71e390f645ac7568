/* CRL latency microbenchmark (thesis §6.1, Tables 6-1, B-6..B-9).
 *
 * Rank 0 is the home of every region; rank 1 measures; ranks 2.. hold the
 * extra shared copies of the "k copies" / "k inv" events.  For each event
 * the situation is built mechanically on 64 regions, then rank 1 times a
 * loop calling the function on the first c of them, for c = 1..64, and the
 * cost per event is the slope of the linear regression of time against c
 * (the median of --reps runs per c).  The raw active-message round trip
 * (a medium request and a reply carrying the region size's payload, the
 * shape of a read miss; the median of batches of 64) is measured in the
 * same run, also with the receiver copying the payload out (as a miss
 * copies it into the region), and misses are printed as ratios to both.  The "k copies" and
 * "k inv" rows need k more ranks, and cores for them to mean anything.
 *
 * Run: shoalrun --bind -n 2 build/bench/crl_bench [--reps N] [--sizes 16,64,256,1024]
 * (more ranks add the events with copies/invalidations up to 6). */
#include "common.h"
#include "shoal/crl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGIONS 64
#define MAX_COPIES 6
#define H_PING 200
#define H_PONG 201

static unsigned me, np;
static unsigned reps = 5;
static unsigned size;
static rid_t op_rids[REGIONS], map_rids[REGIONS];
static void *op_map[REGIONS];     /* the op set, mapped on every rank all run long */
static void *map_map[REGIONS];    /* the map set, on the measurer */
static rid_t *pool;               /* fresh regions for map misses */
static unsigned pool_next;
static unsigned copies;           /* extra sharers of the event being measured */

/* ---- set-up helpers: every rank calls them; they end with a barrier ----- */

static void home_writes_all(void)
{
    if (me == 0)
        for (unsigned i = 0; i < REGIONS; i++) {
            rgn_start_write(op_map[i]);
            rgn_end_write(op_map[i]);
        }
    rgn_barrier();
}

static void read_all_on(unsigned rank)
{
    if (me == rank)
        for (unsigned i = 0; i < REGIONS; i++) {
            rgn_start_read(op_map[i]);
            rgn_end_read(op_map[i]);
        }
    rgn_barrier();
}

/* Home exclusive, then `copies` helper ranks with shared copies. */
static void home_plus_copies(void)
{
    home_writes_all();
    for (unsigned k = 0; k < copies; k++)
        read_all_on(2 + k);
}

static void measurer_writes_all(void)
{
    if (me == 1)
        for (unsigned i = 0; i < REGIONS; i++) {
            rgn_start_write(op_map[i]);
            rgn_end_write(op_map[i]);
        }
    rgn_barrier();
}

/* ---- events: prepare (all ranks), timed and undo (measurer) ------------- */

static void loop_call(void (*fn)(void *), void **maps, unsigned c)
{
    for (unsigned i = 0; i < c; i++)
        fn(maps[i]);
}

static void prep_none(unsigned c) { (void)c; rgn_barrier(); }
static void prep_shared(unsigned c) { (void)c; home_writes_all(); read_all_on(1); }
static void prep_modified(unsigned c) { (void)c; measurer_writes_all(); }
static void prep_copies(unsigned c) { (void)c; home_plus_copies(); }

/* map/unmap events on the map set */
static void map_loop(unsigned c)
{
    for (unsigned i = 0; i < c; i++)
        map_map[i] = rgn_map(map_rids[i]);
}
static void unmap_loop(unsigned c) { loop_call(rgn_unmap, map_map, c); }
static void map_miss_timed(unsigned c)
{
    for (unsigned i = 0; i < c; i++)
        map_map[i] = rgn_map(pool[pool_next + i]);
}
static void map_miss_undo(unsigned c)
{
    unmap_loop(c);
    pool_next += c;
}
static void map_twice(unsigned c) { map_loop(c); map_loop(c); }
static void unmap_twice(unsigned c) { unmap_loop(c); unmap_loop(c); }

/* operation events on the op set */
static void start_read_c(unsigned c) { loop_call(rgn_start_read, op_map, c); }
static void end_read_c(unsigned c) { loop_call(rgn_end_read, op_map, c); }
static void end_read_twice(unsigned c) { end_read_c(c); end_read_c(c); }
static void start_write_c(unsigned c) { loop_call(rgn_start_write, op_map, c); }
static void end_write_c(unsigned c) { loop_call(rgn_end_write, op_map, c); }
static void start_read_twice(unsigned c) { start_read_c(c); start_read_c(c); }
static void nothing(unsigned c) { (void)c; }

struct event {
    const char *name, *cas;
    void (*prepare)(unsigned c); /* all ranks */
    void (*before)(unsigned c);  /* measurer, untimed */
    void (*timed)(unsigned c);   /* measurer */
    void (*after)(unsigned c);   /* measurer, untimed */
    int copies;                  /* -1: no copies variant; else sharers besides home */
    int miss;                    /* print as a ratio to the round trip */
    unsigned measurer;           /* 1, or 0 for the home's own operations */
};

static const struct event events[] = {
    /* the map set lives in the URC; map misses come after its events, as
     * the thousands of fresh regions they unmap evict it */
    {"Map", "hit [a]", prep_none, nothing, map_loop, unmap_loop, -1, 0, 1},
    {"Map", "hit [b]", prep_none, map_loop, map_loop, unmap_twice, -1, 0, 1},
    {"Unmap", "[c]", prep_none, map_twice, unmap_loop, unmap_loop, -1, 0, 1},
    {"Unmap", "[d]", prep_none, map_loop, unmap_loop, nothing, -1, 0, 1},
    {"Map", "miss", prep_none, nothing, map_miss_timed, map_miss_undo, -1, 1, 1},
    {"Start read", "miss, %d copies", prep_copies, nothing, start_read_c, end_read_c, 0, 1, 1},
    {"Start read", "hit [e]", prep_shared, nothing, start_read_c, end_read_c, -1, 0, 1},
    {"Start read", "hit [f]", prep_shared, start_read_c, start_read_c, end_read_twice, -1, 0, 1},
    {"End read", "[g]", prep_shared, start_read_twice, end_read_c, end_read_c, -1, 0, 1},
    {"End read", "[h]", prep_shared, start_read_c, end_read_c, nothing, -1, 0, 1},
    {"Start write", "miss, %d inv", prep_copies, nothing, start_write_c, end_write_c, 0, 1, 1},
    {"Start write", "modify", prep_shared, nothing, start_write_c, end_write_c, -1, 1, 1},
    {"Start write", "hit", prep_modified, nothing, start_write_c, end_write_c, -1, 0, 1},
    {"End write", "", prep_modified, start_write_c, end_write_c, nothing, -1, 0, 1},
    /* the home's own operations against one remote copy (possible on 2 ranks) */
    {"Home write", "1 inv", prep_shared, nothing, start_write_c, end_write_c, -1, 1, 0},
    {"Home read", "remote modified", prep_modified, nothing, start_read_c, end_read_c, -1, 1, 0},
};

/* ---- measurement ---------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Slope of y against x = 1..REGIONS (least squares). */
static double slope(const double *ys)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = REGIONS;
    for (unsigned c = 1; c <= REGIONS; c++) {
        sx += c;
        sy += ys[c - 1];
        sxx += (double)c * c;
        sxy += c * ys[c - 1];
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

/* Slope (ns per event) of the median time against the count, on every
 * rank (the measurer's, spread by a max-reduction). */
static double measure(const struct event *e)
{
    double ys[REGIONS];
    double *runs = malloc(reps * sizeof *runs);
    if (!runs)
        bench_die("out of memory");
    int measuring = me == e->measurer;
    for (unsigned c = 1; c <= REGIONS; c++) {
        for (unsigned r = 0; r < reps; r++) {
            e->prepare(c);
            if (measuring) {
                e->before(c);
                double t0 = bench_now();
                e->timed(c);
                runs[r] = (bench_now() - t0) * 1e9;
                e->after(c);
            }
            rgn_barrier();
        }
        if (measuring) {
            qsort(runs, reps, sizeof *runs, cmp_double);
            ys[c - 1] = runs[reps / 2];
        }
    }
    free(runs);
    return rgn_reduce_dmax(measuring ? slope(ys) : -1e300);
}

/* ---- the raw round trip, in the same run ------------------------------------------ */

static volatile uint64_t pongs;
static unsigned char payload[1 << 16];

static void on_ping(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)buf, (void)n;
    shoal_am_reply_medium(t, H_PONG, 0, payload, (size_t)a[0], na, a);
}

static int copy_out;              /* the round trip's receiver copies the payload out */
static unsigned char sink[1 << 16];

static void on_pong(shoal_token_t t, void *buf, size_t n, const uint64_t *a, unsigned na)
{
    (void)t, (void)a, (void)na;
    if (copy_out && n <= sizeof sink)
        memcpy(sink, buf, n);
    pongs++;
}

/* Round trip (ns): a 4-argument medium request and a reply carrying
 * `size` bytes, rank 1 to rank 0 (which waits in a barrier, as the home
 * does during the events).  Timed in batches of REGIONS round trips, the
 * median batch, so preemption on a busy machine weighs on it no more than
 * on the events' medians. */
static double round_trip(int copy)
{
    copy_out = copy;
    enum { BATCHES = 301 };
    static double batch[BATCHES];
    rgn_barrier();
    if (me == 1) {
        uint64_t args[4] = {size, 2, 3, 4};
        pongs = 0;
        for (unsigned b = 0; b < BATCHES; b++) {
            double t0 = bench_now();
            for (unsigned i = 0; i < REGIONS; i++) {
                uint64_t want = pongs + 1;
                shoal_am_request_medium(0, H_PING, 0, NULL, 0, 4, args);
                while (pongs < want)
                    shoal_poll();
            }
            batch[b] = (bench_now() - t0) * 1e9 / REGIONS;
        }
        qsort(batch, BATCHES, sizeof batch[0], cmp_double);
    }
    rgn_barrier();
    return rgn_reduce_dmax(me == 1 ? batch[BATCHES / 2] : -1e300);
}

/* ---- driver ------------------------------------------------------------------------ */

static void create_sets(void)
{
    unsigned npool = REGIONS * (REGIONS + 1) / 2 * reps;
    rid_t *all = malloc((2 * REGIONS + npool) * sizeof *all);
    if (me == 0)
        for (unsigned i = 0; i < 2 * REGIONS + npool; i++)
            all[i] = rgn_create(size);
    if (me == 0)
        rgn_bcast_send((int)((2 * REGIONS + npool) * sizeof *all), all);
    else
        rgn_bcast_recv((int)((2 * REGIONS + npool) * sizeof *all), all);
    memcpy(op_rids, all, sizeof op_rids);
    memcpy(map_rids, all + REGIONS, sizeof map_rids);
    free(pool);
    pool = malloc(npool * sizeof *pool);
    memcpy(pool, all + 2 * REGIONS, npool * sizeof *pool);
    pool_next = 0;
    free(all);
    for (unsigned i = 0; i < REGIONS; i++)
        op_map[i] = rgn_map(op_rids[i]);
    /* the map set starts in the measurer's URC: mapped and unmapped once */
    if (me == 1) {
        map_loop(REGIONS);
        unmap_loop(REGIONS);
    }
    rgn_barrier();
}

static void release_sets(void)
{
    for (unsigned i = 0; i < REGIONS; i++)
        rgn_unmap(op_map[i]);
    rgn_barrier();
}

static void usage(void)
{
    fprintf(stderr, "usage: shoalrun --bind -n 2 crl_bench [--reps N] [--sizes 16,64,256,1024]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    unsigned sizes[8] = {16, 64, 256, 1024}, nsizes = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *s = strtok(argv[++i], ","); s && nsizes < 8; s = strtok(NULL, ","))
                sizes[nsizes++] = (unsigned)atoi(s);
        } else
            usage();
    }
    if (reps < 1 || nsizes == 0)
        usage();
    shoal_am_register(H_PING, on_ping);
    shoal_am_register(H_PONG, on_pong);
    crl_init();
    me = crl_self_addr();
    np = crl_num_nodes();
    if (np < 2)
        bench_die("crl_bench needs at least 2 ranks (home and measurer)");
    for (unsigned s = 0; s < nsizes; s++) /* the raw round trip's reply carries the region size */
        if (sizes[s] == 0 || sizes[s] > sizeof payload || sizes[s] > shoal_am_max_medium())
            bench_die("--sizes: %u bytes: a size must be 1 to %zu (the raw round trip's reply is one medium message)",
                      sizes[s], sizeof payload < shoal_am_max_medium() ? sizeof payload : shoal_am_max_medium());
    bench_pin_if_unpinned((int)me);
    unsigned max_copies = np - 2 < MAX_COPIES ? np - 2 : MAX_COPIES;
    double table[32][8], rtt[8], rtt_copy[8];
    const char *names[32];
    char cases[32][32];
    int is_miss[32];
    unsigned rows = 0;
    for (unsigned s = 0; s < nsizes; s++) {
        size = sizes[s];
        create_sets();
        rtt[s] = round_trip(0);
        rtt_copy[s] = round_trip(1);
        rows = 0;
        for (size_t e = 0; e < sizeof events / sizeof events[0]; e++) {
            unsigned variants = events[e].copies < 0 ? 1 : max_copies + 1;
            for (unsigned k = 0; k < variants; k++) {
                copies = k;
                double v = measure(&events[e]);
                names[rows] = events[e].name;
                snprintf(cases[rows], sizeof cases[rows], events[e].cas, k);
                is_miss[rows] = events[e].miss;
                table[rows++][s] = v;
            }
        }
        release_sets();
    }
    if (me == 1) {
        printf("CRL latencies (ns per event, slope over 1..%d regions, median of %u runs), %u ranks\n", REGIONS, reps,
               np);
        printf("%-12s %-16s", "Event", "Case");
        for (unsigned s = 0; s < nsizes; s++)
            printf(" %9u B", sizes[s]);
        printf("\n%-29s", "raw AM round trip");
        for (unsigned s = 0; s < nsizes; s++)
            printf(" %11.1f", rtt[s]);
        printf("\n%-29s", "  + receiver copies data out");
        for (unsigned s = 0; s < nsizes; s++)
            printf(" %11.1f", rtt_copy[s]);
        printf("\n");
        for (unsigned r = 0; r < rows; r++) {
            printf("%-12s %-16s", names[r], cases[r]);
            for (unsigned s = 0; s < nsizes; s++)
                printf(" %11.1f", table[r][s]);
            if (is_miss[r]) {
                printf("   (x RTT:");
                for (unsigned s = 0; s < nsizes; s++)
                    printf(" %.2f", table[r][s] / rtt[s]);
                printf("; x RTT+copy:");
                for (unsigned s = 0; s < nsizes; s++)
                    printf(" %.2f", table[r][s] / rtt_copy[s]);
                printf(")");
            }
            printf("\n");
        }
    }
    free(pool);
    crl_exit();
    return 0;
}
