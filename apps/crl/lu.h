/* Blocked LU (thesis §6.2.1): the interface between lu.c and lu_sim.c. */
#ifndef CRL_APPS_LU_H
#define CRL_APPS_LU_H

#include "crl_app.h"

#include <stdint.h>

/* Element (i, j) of the n x n input number rep: uniform in [0, 1) from a
 * hash of the position and rep, plus n on the diagonal.  The matrix is
 * strictly diagonally dominant, so LU without pivoting is stable, and every
 * rank generates its own blocks without communication. */
static inline double lu_input(int n, int rep, int i, int j)
{
    uint64_t x = (uint64_t)i << 32 ^ (uint64_t)j ^ (uint64_t)rep * 0xd1b54a32d192ed03ull;
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-53 + (i == j ? n : 0);
}

/* A factorization job: inputs first .. first + count - 1, each factored in
 * place in bs x bs blocks into the same regions, one region per block
 * (the time steps or Newton iterations of a user that factors a new matrix
 * of the same shape each time).  On rank 0, after each, out holds the
 * factors (n * n doubles, row-major: L strictly below the diagonal with its
 * unit diagonal implied, U on and above) and each(job, rep) is called (it
 * may be NULL); other ranks pass out NULL.  fine: an operation per block
 * update, the thesis's granularity. */
struct lu_job {
    int n, bs, fine;
    int first, count;
    double *out;
    void (*each)(const struct lu_job *job, int rep);
    void *ctx;
};
/* Collective.  Returns the factorizations' total time (region creation,
 * the inputs and the gathers excluded). */
struct app_time lu_factor_crl(const struct lu_job *job);
struct app_time lu_factor_seq(const struct lu_job *job);

#endif
