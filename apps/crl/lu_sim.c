/* Blocked LU without pivoting (thesis §6.2.1, after Rothberg, Singh and
 * Gupta): the matrix is cut into bs x bs blocks, one region per block, and
 * blocks are dealt to ranks in a 2-D scatter over a prow x pcol grid.  The
 * owner of a block creates its region (so it is the block's home) and does
 * every write to it; other ranks only read it.  Block (i,j) gets the
 * updates A(i,j) -= A(i,k) A(k,j) for k < min(i,j), then is finished:
 * factored if diagonal, else solved against diagonal block min(i,j).  That
 * is the thesis's step k (factor the diagonal block, solve the perimeter,
 * update the interior) reordered per rank: in its step k a rank first
 * updates and finishes its blocks of row and column k+1, diagonal first,
 * which every rank's next step waits for, then updates the rest.  The order
 * of the operations on each block is unchanged, so the factors equal the
 * sequential ones bit for bit.
 *
 * Each block's owner holds one write operation on it from its creation
 * until the block is finished.  That write is also the synchronization: a
 * read of a block waits, as CRL operations do, until the owner ends the
 * write, so the ranks need no barrier (the thesis's version has two per
 * step) and the steps pipeline.  A rank's step k waits only for blocks
 * finished in the first part of step k-1 or, for the diagonal block k+1,
 * of step k, which their owners reach without waiting on anything later:
 * nothing deadlocks.
 *
 * Operations are coarser than the thesis's one per block update: a 10x10
 * update is ~270 ns on a current core (the thesis had ~11,000 cycles of
 * work per operation), so an operation or a map per update would cost as
 * much as the work.  Besides the one write per block, each rank reads row
 * and column k and the diagonal block k+1 once per step, and every block is
 * mapped at start and stays mapped.
 *
 * With `fine` (--fine, the thesis's granularity, for Cosmos traces that
 * resemble its own, docs/CRL_APPS.md) every block update and every finish
 * is its own operations: a write on the block and reads of the blocks it
 * uses, ended at once.  Writes no longer hold blocks between updates, so
 * the steps synchronize as the thesis's do, with two barriers each:
 * factor the diagonal block k, barrier, solve row and column k against
 * it, barrier, update the trailing blocks.  Each block sees the same
 * operations in the same order, so the factors are the same. */
#include "crl_app.h"
#include "lu.h"

struct lu {
    int n, bs, nb;       /* matrix size, block size, blocks per row */
    unsigned me;         /* my rank */
    unsigned prow, pcol; /* the process grid */
    unsigned my_row, my_col; /* my place in it */
    rid_t *rids;         /* one per block, row-major by block */
    double **blocks;     /* mapped blocks (NULL: not yet) */
    const double **row, **column; /* read operations in progress: A(k,j), A(i,k) */
    const double *diag;  /* and on the diagonal block A(k+1,k+1), or NULL */
    int fine;            /* an operation per block update (the thesis's granularity) */
    struct app_poll poll;
};

/* A poll every ~0.5 us of work: every step, the ranks that do not own
 * column k miss on each of its blocks, so the misses are on the critical
 * path.  At 2 processes polling every 2 updates gave speedups of
 * 1.66-1.74, every 4 1.23-1.74 (medians 1.72, 1.63); a poll is ~8 ns. */
enum { POLL_EVERY_BLOCKS = 2 };

/* The block kernels are out of line and start on a 64-byte boundary, so
 * the CRL and the null build run the same machine code at the same
 * alignment.  Inlined, the same scalar loop landed at different offsets in
 * the two binaries and ran at different speeds on this machine (AMD EPYC):
 * the null build's factorization took 23.7 ms against the CRL build's 17.6
 * ms, and the null object's copy linked into crl_lu 23.7 ms against 13.8 ms
 * in crl_lu_null after a change of loop order; aligned, both take 17.4 ms.
 * The call per block (~270 ns of work) costs nothing measurable. */
#define KERNEL __attribute__((noinline, aligned(64))) static

static unsigned block_owner(const struct lu *lu, int bi, int bj)
{
    return (unsigned)bi % lu->prow * lu->pcol + (unsigned)bj % lu->pcol;
}

static int mine(const struct lu *lu, int bi, int bj)
{
    return block_owner(lu, bi, bj) == lu->me;
}

static double *block(struct lu *lu, int bi, int bj)
{
    size_t b = (size_t)bi * lu->nb + bj;
    if (!lu->blocks[b])
        lu->blocks[b] = rgn_map(lu->rids[b]);
    return lu->blocks[b];
}

static const double *start_read(struct lu *lu, int bi, int bj)
{
    double *b = block(lu, bi, bj);
    rgn_start_read(b);
    return b;
}

/* In place: a = L U, L unit lower triangular, U upper. */
KERNEL void factor_diagonal(double *a, int bs)
{
    for (int k = 0; k < bs; k++)
        for (int i = k + 1; i < bs; i++) {
            double l = a[i * bs + k] /= a[k * bs + k];
            for (int j = k + 1; j < bs; j++)
                a[i * bs + j] -= l * a[k * bs + j];
        }
}

/* b = L^-1 b, L the unit lower triangle of the factored diagonal block. */
KERNEL void solve_row_block(const double *diag, double *b, int bs)
{
    for (int k = 0; k < bs; k++)
        for (int i = k + 1; i < bs; i++) {
            double l = diag[i * bs + k];
            for (int j = 0; j < bs; j++)
                b[i * bs + j] -= l * b[k * bs + j];
        }
}

/* b = b U^-1, U the upper triangle of the factored diagonal block. */
KERNEL void solve_column_block(const double *diag, double *b, int bs)
{
    for (int i = 0; i < bs; i++)
        for (int k = 0; k < bs; k++) {
            double x = b[i * bs + k] /= diag[k * bs + k];
            for (int j = k + 1; j < bs; j++)
                b[i * bs + j] -= x * diag[k * bs + j];
        }
}

/* c -= a b.  The blocks are distinct regions; restrict says so, and lets
 * the compiler vectorize without a run-time overlap test whose register
 * use made the CRL build's loop two instructions per row longer than the
 * null build's (cachegrind: 4 % more instructions; perf: 10 % more samples
 * in update).  It also made both builds 5 % faster. */
KERNEL void multiply_subtract(double *restrict c, const double *restrict a, const double *restrict b, int bs)
{
    for (int i = 0; i < bs; i++)
        for (int k = 0; k < bs; k++) {
            double x = a[i * bs + k];
            for (int j = 0; j < bs; j++)
                c[i * bs + j] -= x * b[k * bs + j];
        }
}

/* My block (i,j) has had its updates with every k < min(i,j): factor it
 * (diagonal) or solve it against the diagonal block (read once per step),
 * and end the write operation held on it since its creation. */
static void finish(struct lu *lu, int i, int j)
{
    double *b = block(lu, i, j);
    if (i == j) {
        factor_diagonal(b, lu->bs);
    } else {
        int k = i < j ? i : j;
        if (!lu->diag)
            lu->diag = start_read(lu, k, k);
        if (i < j)
            solve_row_block(lu->diag, b, lu->bs);
        else
            solve_column_block(lu->diag, b, lu->bs);
    }
    rgn_end_write(b);
    app_poll(&lu->poll);
}

/* My block (i,j) -= A(i,k) A(k,j); reads A(i,k) and A(k,j) once per step. */
static void update(struct lu *lu, int i, int j, int k)
{
    if (!lu->column[i])
        lu->column[i] = start_read(lu, i, k);
    if (!lu->row[j])
        lu->row[j] = start_read(lu, k, j);
    multiply_subtract(block(lu, i, j), lu->column[i], lu->row[j], lu->bs);
    app_poll(&lu->poll);
}

static void end_reads(struct lu *lu)
{
    for (int b = 0; b < lu->nb; b++) {
        if (lu->column[b])
            rgn_end_read((void *)lu->column[b]);
        if (lu->row[b])
            rgn_end_read((void *)lu->row[b]);
        lu->column[b] = lu->row[b] = NULL;
    }
    if (lu->diag)
        rgn_end_read((void *)lu->diag);
    lu->diag = NULL;
}

/* The first block index >= from in grid row or column `coord` of a grid
 * dimension of `p`: a rank's blocks are every p-th from there, so the steps
 * walk them directly instead of testing the owner of every block (two
 * divisions each, ~nb^2 per step on every rank). */
static int first_mine(int from, unsigned coord, unsigned p)
{
    return from + (int)((coord + p - (unsigned)from % p) % p);
}

/* My blocks of row and column k+1 but the diagonal block: with
 * `finishing`, finish them, else update them with row and column k. */
static void perimeter(struct lu *lu, int k, int finishing)
{
    int next = k + 1;
    if ((unsigned)next % lu->prow == lu->my_row)
        for (int j = first_mine(next + 1, lu->my_col, lu->pcol); j < lu->nb; j += (int)lu->pcol)
            finishing ? finish(lu, next, j) : update(lu, next, j, k);
    if ((unsigned)next % lu->pcol == lu->my_col)
        for (int i = first_mine(next + 1, lu->my_row, lu->prow); i < lu->nb; i += (int)lu->prow)
            finishing ? finish(lu, i, next) : update(lu, i, next, k);
}

/* Step k (from -1: no update) updates my blocks of the trailing matrix
 * with row and column k, and finishes those that become final: row and
 * column k+1.  These go first, as the next step of every rank waits for
 * them: the diagonal block first, which every other block of row and
 * column k+1 waits for; then the updates of the others, which wait for
 * nothing of this step, so that the diagonal block's owner has factored it
 * before they are finished against it. */
static void step(struct lu *lu, int k)
{
    int next = k + 1;
    if (mine(lu, next, next)) {
        if (k >= 0)
            update(lu, next, next, k);
        finish(lu, next, next);
    }
    if (k >= 0)
        perimeter(lu, k, 0);
    perimeter(lu, k, 1);
    if (k >= 0) {
        int col0 = first_mine(next + 1, lu->my_col, lu->pcol);
        for (int i = first_mine(next + 1, lu->my_row, lu->prow); i < lu->nb; i += (int)lu->prow)
            for (int j = col0; j < lu->nb; j += (int)lu->pcol)
                update(lu, i, j, k);
    }
    end_reads(lu);
}

/* --fine: block (i,j) of mine, a write operation around `kernel` reading
 * blocks `a` and, if not NULL, `b` (each under a read operation). */
static void fine_op(struct lu *lu, int i, int j, int ai, int aj, int bi, int bj,
                    void (*kernel)(struct lu *lu, double *c, const double *a, const double *b))
{
    double *c = block(lu, i, j);
    rgn_start_write(c);
    const double *a = ai >= 0 ? start_read(lu, ai, aj) : NULL;
    const double *b = bi >= 0 ? start_read(lu, bi, bj) : NULL;
    kernel(lu, c, a, b);
    if (b)
        rgn_end_read((void *)b);
    if (a)
        rgn_end_read((void *)a);
    rgn_end_write(c);
    app_poll(&lu->poll);
}

static void fine_factor(struct lu *lu, double *c, const double *a, const double *b)
{
    (void)a, (void)b;
    factor_diagonal(c, lu->bs);
}

static void fine_solve_row(struct lu *lu, double *c, const double *diag, const double *b)
{
    (void)b;
    solve_row_block(diag, c, lu->bs);
}

static void fine_solve_column(struct lu *lu, double *c, const double *diag, const double *b)
{
    (void)b;
    solve_column_block(diag, c, lu->bs);
}

static void fine_update(struct lu *lu, double *c, const double *a, const double *b)
{
    multiply_subtract(c, a, b, lu->bs);
}

/* The thesis's step k at its granularity (see the top of the file). */
static void fine_step(struct lu *lu, int k)
{
    if (mine(lu, k, k))
        fine_op(lu, k, k, -1, -1, -1, -1, fine_factor);
    rgn_barrier();
    if ((unsigned)k % lu->prow == lu->my_row)
        for (int j = first_mine(k + 1, lu->my_col, lu->pcol); j < lu->nb; j += (int)lu->pcol)
            fine_op(lu, k, j, k, k, -1, -1, fine_solve_row);
    if ((unsigned)k % lu->pcol == lu->my_col)
        for (int i = first_mine(k + 1, lu->my_row, lu->prow); i < lu->nb; i += (int)lu->prow)
            fine_op(lu, i, k, k, k, -1, -1, fine_solve_column);
    rgn_barrier();
    int col0 = first_mine(k + 1, lu->my_col, lu->pcol);
    for (int i = first_mine(k + 1, lu->my_row, lu->prow); i < lu->nb; i += (int)lu->prow)
        for (int j = col0; j < lu->nb; j += (int)lu->pcol)
            fine_op(lu, i, j, i, k, k, j, fine_update);
}

/* The grid prow x pcol = nranks with prow the largest divisor <= sqrt,
 * and my place in it. */
static void choose_grid(struct lu *lu, unsigned nranks)
{
    lu->prow = 1;
    for (unsigned p = 1; p * p <= nranks; p++)
        if (nranks % p == 0)
            lu->prow = p;
    lu->pcol = nranks / lu->prow;
    lu->my_row = lu->me / lu->pcol;
    lu->my_col = lu->me % lu->pcol;
}

/* Fills my blocks with input rep, starting the write operation each keeps
 * until it is final (as tuned; --fine ends it at once). */
static void fill_blocks(struct lu *lu, int rep)
{
    for (int bi = 0; bi < lu->nb; bi++)
        for (int bj = 0; bj < lu->nb; bj++) {
            if (!mine(lu, bi, bj))
                continue;
            double *a = block(lu, bi, bj);
            rgn_start_write(a);
            for (int i = 0; i < lu->bs; i++)
                for (int j = 0; j < lu->bs; j++)
                    a[i * lu->bs + j] = lu_input(lu->n, rep, bi * lu->bs + i, bj * lu->bs + j);
            if (lu->fine)
                rgn_end_write(a);
        }
}

/* Creates my blocks, then shares every block's rid. */
static void create_blocks(struct lu *lu)
{
    size_t nblocks = (size_t)lu->nb * lu->nb;
    unsigned *owner = app_alloc(nblocks * sizeof *owner);
    for (int bi = 0; bi < lu->nb; bi++)
        for (int bj = 0; bj < lu->nb; bj++) {
            size_t b = (size_t)bi * lu->nb + bj;
            owner[b] = block_owner(lu, bi, bj);
            if (owner[b] == lu->me)
                lu->rids[b] = rgn_create((unsigned)(lu->bs * lu->bs * sizeof(double)));
        }
    app_share_rids(lu->rids, owner, nblocks);
    for (int bi = 0; bi < lu->nb; bi++) /* map misses stay out of the timed part */
        for (int bj = 0; bj < lu->nb; bj++)
            block(lu, bi, bj);
    free(owner);
}

static void gather(struct lu *lu, double *out)
{
    for (int bi = 0; bi < lu->nb; bi++)
        for (int bj = 0; bj < lu->nb; bj++) {
            const double *a = start_read(lu, bi, bj);
            for (int i = 0; i < lu->bs; i++)
                memcpy(out + (size_t)(bi * lu->bs + i) * lu->n + bj * lu->bs, a + i * lu->bs,
                       lu->bs * sizeof *a);
            rgn_end_read((void *)a);
        }
}

struct app_time SIM_ENTRY(lu_factor)(const struct lu_job *job)
{
    struct lu lu = {.n = job->n, .bs = job->bs, .nb = job->n / job->bs, .me = crl_self_addr(),
                    .fine = job->fine, .poll = app_poll_init(POLL_EVERY_BLOCKS)};
    size_t nblocks = (size_t)lu.nb * lu.nb;
    lu.rids = app_alloc(nblocks * sizeof *lu.rids);
    lu.blocks = app_alloc(nblocks * sizeof *lu.blocks);
    lu.row = app_alloc((size_t)lu.nb * sizeof *lu.row);
    lu.column = app_alloc((size_t)lu.nb * sizeof *lu.column);
    choose_grid(&lu, crl_num_nodes());
    create_blocks(&lu);
    struct app_time elapsed = {0, 0};
    for (int rep = job->first; rep < job->first + job->count; rep++) {
        fill_blocks(&lu, rep);
        rgn_barrier();
        struct app_time start = app_clock();
        for (int k = lu.fine ? 0 : -1; k < lu.nb - (lu.fine ? 0 : 1); k++)
            lu.fine ? fine_step(&lu, k) : step(&lu, k);
        rgn_barrier();
        app_add_since(&elapsed, start);
        if (job->out) {
            gather(&lu, job->out);
            if (job->each)
                job->each(job, rep);
        }
        rgn_barrier(); /* the gather's reads are over before the next input is written */
    }
    for (size_t b = 0; b < nblocks; b++) { /* nobody uses a block any more: unmap, and delete mine */
        rgn_unmap(lu.blocks[b]);
        if (mine(&lu, (int)(b / (size_t)lu.nb), (int)(b % (size_t)lu.nb)))
            rgn_delete(lu.rids[b]);
    }
    free(lu.rids);
    free(lu.blocks);
    free(lu.row);
    free(lu.column);
    return elapsed;
}
