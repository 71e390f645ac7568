/* Blocked LU (thesis §6.2.1): the interface between lu.c and lu_sim.c. */
#ifndef CRL_APPS_LU_H
#define CRL_APPS_LU_H

#include "crl_app.h"

#include <stdint.h>

/* Element (i, j) of the n x n input: uniform in [0, 1) from a hash of the
 * position, plus n on the diagonal.  The matrix is strictly diagonally
 * dominant, so LU without pivoting is stable, and every rank generates its
 * own blocks without communication. */
static inline double lu_input(int n, int i, int j)
{
    uint64_t x = (uint64_t)i << 32 ^ (uint64_t)j;
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-53 + (i == j ? n : 0);
}

/* Factors the n x n input in place in bs x bs blocks, one region per block
 * (collective).  Rank 0 receives the factors in lu (n * n doubles,
 * row-major: L strictly below the diagonal with its unit diagonal implied,
 * U on and above); other ranks pass NULL.  fine: an operation per block
 * update, the thesis's granularity.  Returns the factorization's time
 * (region creation, the input and the gather excluded). */
struct app_time lu_factor_crl(int n, int bs, int fine, double *lu);
struct app_time lu_factor_seq(int n, int bs, int fine, double *lu);

#endif
