/* transpose_store: matrix transpose with Split-C stores over CMAM (von
 * Eicken's Active Messages thesis, §4.2.6.2 and Table 4-6).
 *
 * A is N x M doubles in blocks of columns: each of the P ranks starts with
 * M/P columns and ends with N/P columns of the transpose T.  A rank walks
 * its part, gathers what each destination needs into messages and stores
 * them there; the receiver counts the bytes that arrived and waits until
 * all have.  Sends are staggered: rank i stores to itself first, then to
 * i+1, and so on.  Barriers bracket the timing.  Three message sizes:
 *
 *   word:  one double per message, a CMAM_4 carrying the destination
 *          address and the value; its handler stores and counts 8 bytes;
 *   row:   one row of a sub-matrix (M/P doubles) per CMAM_xfer;
 *   block: the whole (N/P) x (M/P) sub-matrix for one destination.
 *
 * Row and block messages go into a segment covering the receiver's part of
 * T, whose byte count is everything it expects: the end-of-transfer
 * function signals completion.  T is kept by source block, [source][local
 * column][row within the source's columns], so a row and a block are each
 * contiguous at the destination.  Every rank checks its part of T.
 *
 *   shoalrun -n 4 build/apps/transpose_store [N [M]] [--word|--row|--block] */
#include <shoal/cmam.h>

#include "example.h"

#include <stdio.h>
#include <string.h>

enum variant { WORD, ROW, BLOCK, VARIANTS };
static const char *variant_name[] = {"word", "row", "block"};

static size_t n_rows, m_cols, np_, me_, nl, ml; /* nl = N/P local columns of T, ml = M/P of A */
static double *a_loc;                          /* [ml][N]: my columns of A */
static double *t_loc;                          /* [P][nl][ml]: my columns of T, by source */
static volatile long bytes_in;                 /* word stores that arrived */
static volatile int done;                      /* the segment's end of transfer */
static double **t_base;                        /* every rank's t_loc, at its own address */
static int *seg_ids;                           /* every rank's segment id for its t_loc */
static volatile int told;

static double entry(size_t i, size_t j) /* A[i][j] */
{
    return (double)i * 1000.0 + (double)j;
}

static void store_word_h(double *addr, double value)
{
    *addr = value;
    bytes_in += (long)sizeof(double);
}

static int eot_done(void *base, int info)
{
    (void)base;
    (void)info;
    done = 1;
    return 0;
}

static void tell_h(int src, double *base, int id)
{
    t_base[src] = base;
    seg_ids[src] = id;
    told++;
}

/* Every rank's base address and segment id for this run. */
static void exchange(int id)
{
    for (size_t q = 0; q < np_; q++)
        CMAM_4((int)q, tell_h, (int)me_, t_loc, id);
    CMAM_wait(&told, (int)np_);
}

/* My columns i of A (global ml*me_ + il) hold A[j][i]; T[i][j] = A[j][i]
 * goes to the owner q of T's column j, at [me_][j - q*nl][il]. */
static void send_to(size_t q, enum variant v, double *row)
{
    size_t base_off = (me_ * nl) * ml; /* my source block at q, in doubles */
    for (size_t jl = 0; jl < nl; jl++) {
        size_t j = q * nl + jl;
        for (size_t il = 0; il < ml; il++) {
            double x = a_loc[il * n_rows + j];
            if (v == WORD)
                CMAM_4((int)q, store_word_h, t_base[q] + base_off + jl * ml + il, x);
            else
                row[(v == BLOCK ? jl * ml : 0) + il] = x;
        }
        if (v == ROW)
            CMAM_xfer((int)q, seg_ids[q] + (int)((base_off + jl * ml) * sizeof(double)), row,
                      (int)(ml * sizeof(double)));
    }
    if (v == BLOCK)
        CMAM_xfer((int)q, seg_ids[q] + (int)(base_off * sizeof(double)), row, (int)(nl * ml * sizeof(double)));
}

static double run(enum variant v)
{
    size_t part = np_ * nl * ml;
    memset(t_loc, 0, part * sizeof(double));
    int id = -1;
    if (v != WORD) {
        id = CMAM_open_segment(t_loc, (int)(part * sizeof(double)), eot_done, 0);
        if (id == -1)
            shoal_abort(1, "no segment for %zu bytes", part * sizeof(double));
    }
    exchange(id);
    double *buf = malloc(nl * ml * sizeof(double));
    if (!buf)
        shoal_abort(1, "out of memory");
    check(shoal_barrier(), "barrier");
    double t0 = shoal_wtime();
    for (size_t k = 0; k < np_; k++)
        send_to((me_ + k) % np_, v, buf);
    if (v == WORD) {
        while (bytes_in < (long)(part * sizeof(double)))
            CMAM_poll();
        bytes_in = 0;
    } else {
        while (!done)
            CMAM_poll();
        done = 0;
    }
    check(shoal_barrier(), "barrier");
    double secs = shoal_wtime() - t0;
    free(buf);
    for (size_t p = 0; p < np_; p++) /* T[i][j] for i = p*ml + il, j = me_*nl + jl */
        for (size_t jl = 0; jl < nl; jl++)
            for (size_t il = 0; il < ml; il++) {
                double want = entry(me_ * nl + jl, p * ml + il), got = t_loc[(p * nl + jl) * ml + il];
                if (got != want)
                    shoal_abort(1, "%s transpose wrong at T[%zu][%zu]: %g, expected %g", variant_name[v],
                                p * ml + il, me_ * nl + jl, got, want);
            }
    return secs;
}

int main(int argc, char **argv)
{
    check(shoal_init(&argc, &argv), "shoal_init");
    int only = -1, pos = 0;
    size_t dims[2] = {256, 256};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--word"))
            only = WORD;
        else if (!strcmp(argv[i], "--row"))
            only = ROW;
        else if (!strcmp(argv[i], "--block"))
            only = BLOCK;
        else if (pos < 2) {
            dims[pos] = parse_arg(argc, argv, i, 0, pos ? "M" : "N");
            pos++;
        }
        else
            shoal_abort(2, "usage: transpose_store [N [M]] [--word|--row|--block]");
    }
    n_rows = dims[0];
    m_cols = pos > 1 ? dims[1] : dims[0];
    np_ = (size_t)PROCS;
    me_ = (size_t)MYPROC;
    if (n_rows % np_ || m_cols % np_)
        shoal_abort(2, "N = %zu and M = %zu must be multiples of the %zu ranks", n_rows, m_cols, np_);
    nl = n_rows / np_;
    ml = m_cols / np_;
    if (np_ * nl * ml * sizeof(double) > (1u << 24))
        shoal_abort(2, "a rank's part of T (%zu bytes) must fit a segment (16 MiB)", np_ * nl * ml * sizeof(double));
    a_loc = malloc(ml * n_rows * sizeof(double));
    t_loc = malloc(np_ * nl * ml * sizeof(double));
    t_base = malloc(np_ * sizeof *t_base);
    seg_ids = malloc(np_ * sizeof *seg_ids);
    if (!a_loc || !t_loc || !t_base || !seg_ids)
        shoal_abort(1, "out of memory");
    for (size_t il = 0; il < ml; il++)
        for (size_t j = 0; j < n_rows; j++)
            a_loc[il * n_rows + j] = entry(j, me_ * ml + il);
    check(shoal_barrier(), "barrier"); /* nobody's tell_h comes before t_base exists */
    for (int v = 0; v < VARIANTS; v++) {
        if (only >= 0 && v != only)
            continue;
        double secs = run((enum variant)v);
        size_t payload = v == WORD ? sizeof(double) : v == ROW ? ml * sizeof(double) : nl * ml * sizeof(double);
        size_t msgs = np_ * nl * ml * sizeof(double) / payload; /* per rank */
        if (me_ == 0)
            printf("transpose_store: N=%zu M=%zu ranks=%zu %-5s payload %6zu B  %7zu msgs/rank  %9.3f ms  "
                   "%7.3f us/msg  %8.1f MB/s per rank  checked\n",
                   n_rows, m_cols, np_, variant_name[v], payload, msgs, secs * 1e3, secs * 1e6 / (double)msgs,
                   (double)(msgs * payload) / secs / 1e6);
    }
    fflush(stdout);
    free(a_loc);
    free(t_loc);
    free(t_base);
    free(seg_ids);
    check(shoal_finalize(), "shoal_finalize");
    return 0;
}
