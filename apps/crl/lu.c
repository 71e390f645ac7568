/* crl_lu: Blocked LU (thesis §6.2.1) on CRL regions; lu_sim.c has the
 * algorithm.
 *
 *   shoalrun -n 2 crl_lu [--n=500] [--block=10] [--fine] [--check]
 *   crl_lu_null [same options]           (the sequential baseline)
 *
 * --fine: a CRL operation per block update, as the thesis's LU does (its
 * granularity, for Cosmos traces), instead of one write per block.
 * Prints the factorization time and a checksum of the factors.  --check
 * (rank 0) computes the relative residual max|A - LU| / max|A| and, in the
 * CRL build, also factors the matrix again sequentially in-process and
 * compares element by element; either beyond RESIDUAL_TOLERANCE fails. */
#include "crl_app.h"
#include "lu.h"

#include <float.h>
#include <math.h>

/* Backward error of LU without pivoting on a diagonally dominant matrix is a
 * small multiple of n eps; 64 n eps leaves room and still catches any wrong
 * block (which would be off by O(1)). */
#define RESIDUAL_TOLERANCE(n) (64.0 * (n) * DBL_EPSILON)

static double max_abs_input(int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            m = fmax(m, fabs(lu_input(n, i, j)));
    return m;
}

/* max |A - L U| over all elements, relative to max |A|. */
static double relative_residual(int n, const double *lu)
{
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int kmax = i < j ? i : j;
            double sum = i <= j ? lu[(size_t)i * n + j] : lu[(size_t)i * n + j] * lu[(size_t)j * n + j];
            for (int k = 0; k < kmax; k++)
                sum += lu[(size_t)i * n + k] * lu[(size_t)k * n + j];
            worst = fmax(worst, fabs(lu_input(n, i, j) - sum));
        }
    return worst / max_abs_input(n);
}

static double checksum(int n, const double *lu)
{
    double sum = 0;
    for (size_t i = 0; i < (size_t)n * n; i++)
        sum += lu[i];
    return sum;
}

static int check(int n, int bs, const double *lu)
{
    double tolerance = RESIDUAL_TOLERANCE(n);
    double residual = relative_residual(n, lu);
    int failed = !(residual <= tolerance);
    printf("check: residual max|A-LU|/max|A| = %.3e (tolerance %.3e) %s\n", residual, tolerance,
           failed ? "FAILED" : "ok");
#ifndef SHOAL_CRL_NULL
    double *reference = app_alloc((size_t)n * n * sizeof *reference);
    lu_factor_seq(n, bs, 0, reference);
    double diff = 0;
    for (size_t i = 0; i < (size_t)n * n; i++)
        diff = fmax(diff, fabs(lu[i] - reference[i]));
    diff /= max_abs_input(n);
    int differs = !(diff <= tolerance);
    printf("check: max|LU - sequential LU|/max|A| = %.3e (tolerance %.3e) %s\n", diff, tolerance,
           differs ? "FAILED" : "ok");
    free(reference);
    failed |= differs;
#else
    (void)bs;
#endif
    return failed;
}

int main(int argc, char **argv)
{
    struct app_option opts[] = {
        {"n", 500, "matrix order"},
        {"block", 10, "block order (divides n)"},
        {"check", 0, "verify the factors (rank 0)"},
        {"fine", 0, "a CRL operation per block update (the thesis's granularity)"},
    };
    app_parse(argc, argv, opts, 4);
    int n = (int)opts[0].value, bs = (int)opts[1].value, checking = opts[2].value != 0, fine = opts[3].value != 0;
    if (n <= 0 || bs <= 0 || n % bs) {
        fprintf(stderr, "%s: the block order must divide the matrix order (n=%d block=%d)\n", argv[0], n, bs);
        return 2;
    }
    crl_init();
    int root = crl_self_addr() == 0;
    double *lu = root ? app_alloc((size_t)n * n * sizeof *lu) : NULL;
    struct app_time time = SIM_ENTRY(lu_factor)(n, bs, fine, lu);
    int failed = 0;
    if (root) {
        printf("lu build=%s procs=%u n=%d block=%d%s time=%.6f cpu=%.6f checksum=%.12e\n", APP_BUILD,
               crl_num_nodes(), n, bs, fine ? " fine" : "", time.wall, time.cpu, checksum(n, lu));
        if (checking)
            failed = check(n, bs, lu);
        fflush(stdout);
    }
    free(lu);
    crl_exit();
    return failed;
}
