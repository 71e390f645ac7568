/* Blocked LU without pivoting (thesis §6.2.1, after Rothberg, Singh and
 * Gupta): the matrix is cut into bs x bs blocks, one region per block, and
 * blocks are dealt to ranks in a 2-D scatter over a prow x pcol grid.  The
 * owner of a block creates its region (so it is the block's home) and does
 * every write to it; other ranks only read it.  Step k of nb:
 *
 *   1. the owner of diagonal block (k,k) factors it;         barrier
 *   2. owners of perimeter blocks (k,j) and (i,k), i,j > k,
 *      solve them against the diagonal block;                barrier
 *   3. owners of interior blocks (i,j), i,j > k, subtract
 *      A(i,k) x A(k,j).
 *
 * Step 3 needs no barrier behind it: step k+1 writes only blocks that step
 * k's interior phase neither reads (it reads row and column k) nor writes
 * on another rank (every block has one writer).  Blocks are mapped around
 * each use, as in the thesis; a finished block is never written again, so
 * each remote block is fetched once and then hits. */
#include "crl_app.h"
#include "lu.h"

struct lu {
    int n, bs, nb;     /* matrix size, block size, blocks per row */
    unsigned me;       /* my rank */
    unsigned prow, pcol; /* the process grid */
    rid_t *rids;       /* one per block, row-major by block */
};

static unsigned block_owner(const struct lu *lu, int bi, int bj)
{
    return (unsigned)bi % lu->prow * lu->pcol + (unsigned)bj % lu->pcol;
}

static int mine(const struct lu *lu, int bi, int bj)
{
    return block_owner(lu, bi, bj) == lu->me;
}

static const double *read_block(const struct lu *lu, int bi, int bj)
{
    double *b = rgn_map(lu->rids[(size_t)bi * lu->nb + bj]);
    rgn_start_read(b);
    return b;
}

static void release_read(const double *b)
{
    rgn_end_read((void *)b);
    rgn_unmap((void *)b);
}

static double *write_block(const struct lu *lu, int bi, int bj)
{
    double *b = rgn_map(lu->rids[(size_t)bi * lu->nb + bj]);
    rgn_start_write(b);
    return b;
}

static void release_write(double *b)
{
    rgn_end_write(b);
    rgn_unmap(b);
}

/* In place: a = L U, L unit lower triangular, U upper. */
static void factor_diagonal(double *a, int bs)
{
    for (int k = 0; k < bs; k++)
        for (int i = k + 1; i < bs; i++) {
            double l = a[i * bs + k] /= a[k * bs + k];
            for (int j = k + 1; j < bs; j++)
                a[i * bs + j] -= l * a[k * bs + j];
        }
}

/* b = L^-1 b, L the unit lower triangle of the factored diagonal block. */
static void solve_row_block(const double *diag, double *b, int bs)
{
    for (int k = 0; k < bs; k++)
        for (int i = k + 1; i < bs; i++) {
            double l = diag[i * bs + k];
            for (int j = 0; j < bs; j++)
                b[i * bs + j] -= l * b[k * bs + j];
        }
}

/* b = b U^-1, U the upper triangle of the factored diagonal block. */
static void solve_column_block(const double *diag, double *b, int bs)
{
    for (int i = 0; i < bs; i++)
        for (int k = 0; k < bs; k++) {
            double x = b[i * bs + k] /= diag[k * bs + k];
            for (int j = k + 1; j < bs; j++)
                b[i * bs + j] -= x * diag[k * bs + j];
        }
}

/* c -= a b */
static void multiply_subtract(double *c, const double *a, const double *b, int bs)
{
    for (int i = 0; i < bs; i++)
        for (int k = 0; k < bs; k++) {
            double x = a[i * bs + k];
            for (int j = 0; j < bs; j++)
                c[i * bs + j] -= x * b[k * bs + j];
        }
}

static void factor_diagonal_step(const struct lu *lu, int k)
{
    if (!mine(lu, k, k))
        return;
    double *d = write_block(lu, k, k);
    factor_diagonal(d, lu->bs);
    release_write(d);
}

static void update_perimeter(const struct lu *lu, int k)
{
    const double *diag = NULL;
    for (int j = k + 1; j < lu->nb; j++) {
        if (!mine(lu, k, j))
            continue;
        if (!diag)
            diag = read_block(lu, k, k);
        double *b = write_block(lu, k, j);
        solve_row_block(diag, b, lu->bs);
        release_write(b);
    }
    for (int i = k + 1; i < lu->nb; i++) {
        if (!mine(lu, i, k))
            continue;
        if (!diag)
            diag = read_block(lu, k, k);
        double *b = write_block(lu, i, k);
        solve_column_block(diag, b, lu->bs);
        release_write(b);
    }
    if (diag)
        release_read(diag);
}

static void update_interior(const struct lu *lu, int k)
{
    for (int i = k + 1; i < lu->nb; i++) {
        const double *left = NULL;
        for (int j = k + 1; j < lu->nb; j++) {
            if (!mine(lu, i, j))
                continue;
            if (!left)
                left = read_block(lu, i, k);
            const double *above = read_block(lu, k, j);
            double *b = write_block(lu, i, j);
            multiply_subtract(b, left, above, lu->bs);
            release_write(b);
            release_read(above);
        }
        if (left)
            release_read(left);
    }
}

/* The grid prow x pcol = nranks with prow the largest divisor <= sqrt. */
static void choose_grid(struct lu *lu, unsigned nranks)
{
    lu->prow = 1;
    for (unsigned p = 1; p * p <= nranks; p++)
        if (nranks % p == 0)
            lu->prow = p;
    lu->pcol = nranks / lu->prow;
}

/* Creates and fills my blocks, then shares every block's rid. */
static void create_blocks(struct lu *lu)
{
    size_t nblocks = (size_t)lu->nb * lu->nb;
    unsigned *owner = app_alloc(nblocks * sizeof *owner);
    lu->rids = app_alloc(nblocks * sizeof *lu->rids);
    for (int bi = 0; bi < lu->nb; bi++)
        for (int bj = 0; bj < lu->nb; bj++) {
            size_t b = (size_t)bi * lu->nb + bj;
            owner[b] = block_owner(lu, bi, bj);
            if (owner[b] != lu->me)
                continue;
            lu->rids[b] = rgn_create((unsigned)(lu->bs * lu->bs * sizeof(double)));
            double *a = write_block(lu, bi, bj);
            for (int i = 0; i < lu->bs; i++)
                for (int j = 0; j < lu->bs; j++)
                    a[i * lu->bs + j] = lu_input(lu->n, bi * lu->bs + i, bj * lu->bs + j);
            release_write(a);
        }
    app_share_rids(lu->rids, owner, nblocks);
    free(owner);
}

static void gather(const struct lu *lu, double *out)
{
    for (int bi = 0; bi < lu->nb; bi++)
        for (int bj = 0; bj < lu->nb; bj++) {
            const double *a = read_block(lu, bi, bj);
            for (int i = 0; i < lu->bs; i++)
                memcpy(out + (size_t)(bi * lu->bs + i) * lu->n + bj * lu->bs, a + i * lu->bs,
                       lu->bs * sizeof *a);
            release_read(a);
        }
}

double SIM_ENTRY(lu_factor)(int n, int bs, double *out)
{
    struct lu lu = {.n = n, .bs = bs, .nb = n / bs, .me = crl_self_addr()};
    choose_grid(&lu, crl_num_nodes());
    create_blocks(&lu);
    rgn_barrier();
    double start = app_now();
    for (int k = 0; k < lu.nb; k++) {
        factor_diagonal_step(&lu, k);
        rgn_barrier();
        update_perimeter(&lu, k);
        rgn_barrier();
        update_interior(&lu, k);
    }
    rgn_barrier();
    double seconds = app_now() - start;
    if (out)
        gather(&lu, out);
    rgn_barrier();
    free(lu.rids);
    return seconds;
}
