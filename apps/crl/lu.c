/* crl_lu: Blocked LU (thesis §6.2.1) on CRL regions; lu_sim.c has the
 * algorithm.
 *
 *   shoalrun -n 2 crl_lu [--n=500] [--block=10] [--fine] [--repeat=1] [--check]
 *   crl_lu_null [same options]           (the sequential baseline)
 *
 * --fine: a CRL operation per block update, as the thesis's LU does (its
 * granularity, for Cosmos traces), instead of one write per block.
 * --repeat=R: R factorizations of R different matrices into the same
 * regions, one after another, as a user factoring a new matrix every time
 * step or Newton iteration does (the thesis's applications iterate; one
 * factorization sends each remote copy one message per block, so nothing
 * repeats for a predictor to learn: docs/COSMOS.md).
 * Prints the factorization time (the mean over the R) and a checksum of the
 * last factors.  --check (rank 0) checks every factorization: the relative
 * residual max|A - LU| / max|A| and, in the CRL build, the element-by-element
 * difference from the same matrix factored again sequentially in-process;
 * either beyond RESIDUAL_TOLERANCE fails. */
#include "crl_app.h"
#include "lu.h"

#include <float.h>
#include <math.h>

/* Backward error of LU without pivoting on a diagonally dominant matrix is a
 * small multiple of n eps; 64 n eps leaves room and still catches any wrong
 * block (which would be off by O(1)). */
#define RESIDUAL_TOLERANCE(n) (64.0 * (n) * DBL_EPSILON)

static double max_abs_input(int n, int rep)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            m = fmax(m, fabs(lu_input(n, rep, i, j)));
    return m;
}

/* max |A - L U| over all elements of input rep, relative to max |A|. */
static double relative_residual(int n, int rep, const double *lu)
{
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int kmax = i < j ? i : j;
            double sum = i <= j ? lu[(size_t)i * n + j] : lu[(size_t)i * n + j] * lu[(size_t)j * n + j];
            for (int k = 0; k < kmax; k++)
                sum += lu[(size_t)i * n + k] * lu[(size_t)k * n + j];
            worst = fmax(worst, fabs(lu_input(n, rep, i, j) - sum));
        }
    return worst / max_abs_input(n, rep);
}

static double checksum(int n, const double *lu)
{
    double sum = 0;
    for (size_t i = 0; i < (size_t)n * n; i++)
        sum += lu[i];
    return sum;
}

/* The job's `each` with --check: factorization rep's factors, checked;
 * a failure is added to *(int *)job->ctx. */
static void check(const struct lu_job *job, int rep)
{
    int n = job->n;
    const double *lu = job->out;
    double tolerance = RESIDUAL_TOLERANCE(n);
    double residual = relative_residual(n, rep, lu);
    int failed = !(residual <= tolerance);
    printf("check: input %d: residual max|A-LU|/max|A| = %.3e (tolerance %.3e) %s\n", rep, residual, tolerance,
           failed ? "FAILED" : "ok");
#ifndef SHOAL_CRL_NULL
    double *reference = app_alloc((size_t)n * n * sizeof *reference);
    lu_factor_seq(&(struct lu_job){.n = n, .bs = job->bs, .first = rep, .count = 1, .out = reference});
    double diff = 0;
    for (size_t i = 0; i < (size_t)n * n; i++)
        diff = fmax(diff, fabs(lu[i] - reference[i]));
    diff /= max_abs_input(n, rep);
    int differs = !(diff <= tolerance);
    printf("check: input %d: max|LU - sequential LU|/max|A| = %.3e (tolerance %.3e) %s\n", rep, diff, tolerance,
           differs ? "FAILED" : "ok");
    free(reference);
    failed |= differs;
#endif
    *(int *)job->ctx |= failed;
}

int main(int argc, char **argv)
{
    struct app_option opts[] = {
        {"n", 500, "matrix order"},
        {"block", 10, "block order (divides n)"},
        {"check", 0, "verify the factors (rank 0)"},
        {"fine", 0, "a CRL operation per block update (the thesis's granularity)"},
        {"repeat", 1, "factorizations of different matrices into the same regions"},
    };
    app_parse(argc, argv, opts, 5);
    int n = (int)opts[0].value, bs = (int)opts[1].value, checking = opts[2].value != 0, fine = opts[3].value != 0;
    int repeat = (int)opts[4].value;
    if (n <= 0 || bs <= 0 || n % bs) {
        fprintf(stderr, "%s: the block order must divide the matrix order (n=%d block=%d)\n", argv[0], n, bs);
        return 2;
    }
    if (repeat < 1) {
        fprintf(stderr, "%s: --repeat must be at least 1 (it is %d)\n", argv[0], repeat);
        return 2;
    }
    crl_init();
    int root = crl_self_addr() == 0, failed = 0;
    double *lu = root ? app_alloc((size_t)n * n * sizeof *lu) : NULL;
    struct lu_job job = {.n = n, .bs = bs, .fine = fine, .first = 0, .count = repeat, .out = lu,
                         .each = checking ? check : NULL, .ctx = &failed};
    struct app_time time = SIM_ENTRY(lu_factor)(&job);
    if (root) {
        printf("lu build=%s procs=%u n=%d block=%d%s repeat=%d time=%.6f cpu=%.6f checksum=%.12e\n", APP_BUILD,
               crl_num_nodes(), n, bs, fine ? " fine" : "", repeat, time.wall / repeat, time.cpu / repeat,
               checksum(n, lu));
        fflush(stdout);
    }
    free(lu);
    crl_exit();
    return failed;
}
