/* Water (thesis §6.2.2): the interface between water.c and water_sim.c. */
#ifndef CRL_APPS_WATER_H
#define CRL_APPS_WATER_H

#include "crl_app.h"

enum { WATER_ATOMS = 3 }; /* O, H, H */

struct water_params {
    int molecules;
    int steps;
    int use_reductions; /* global sums by rgn_reduce_dadd instead of the three sum regions */
    int fine;           /* the thesis's granularity: read operations per molecule pair, no hand-made flushes */
    int untuned;        /* the tuned granularity without the hand-made exclusive copies and flushes */
};

/* The global sums of one time step. */
struct water_energy {
    double kinetic;  /* sum over atoms of m v^2 / 2 after the corrector */
    double intra;    /* bond and angle springs */
    double lj;       /* oxygen-oxygen Lennard-Jones */
    double coulomb;  /* site charges */
    double virial;   /* intermolecular sum of r . F */
};

/* What a run leaves on rank 0 (other ranks pass NULL arrays). */
struct water_result {
    struct app_time time;        /* mean of the steps after the first (thesis: of 2 and 3) */
    struct water_energy *energy; /* [steps] */
    double *positions;           /* [molecules][WATER_ATOMS][3] after the last step */
};

/* Collective. */
void water_run_crl(const struct water_params *params, struct water_result *result);
void water_run_seq(const struct water_params *params, struct water_result *result);

#endif
