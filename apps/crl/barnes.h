/* Barnes-Hut (thesis §6.2.3): the interface between barnes.c and
 * barnes_sim.c. */
#ifndef CRL_APPS_BARNES_H
#define CRL_APPS_BARNES_H

#include "crl_app.h"

struct barnes_params {
    int bodies;
    int steps;
    double theta;   /* opening criterion: a cell of size s at distance d is one body when s < theta d */
    double dt;      /* time step */
    double epsilon; /* softening length */
    int fine;       /* the thesis's granularity: a read operation per visited tree node */
};

/* A body as the run leaves it: acc and phi from a last force computation
 * at the final positions. */
struct barnes_body {
    double mass, pos[3], vel[3], acc[3], phi;
};

/* What a run leaves on rank 0 (other ranks pass NULL arrays). */
struct barnes_result {
    struct app_time time;      /* mean of the steps after the second (thesis: of 3 and 4) */
    double *energy;            /* [steps + 1]: total energy at each force computation */
    double checksum;           /* the sum of every body's final coordinates */
    struct barnes_body *state; /* [bodies], by body index (the same in every run); NULL:
                                  not gathered (only --check needs every body on rank 0) */
};

/* Collective. */
void barnes_run_crl(const struct barnes_params *params, struct barnes_result *result);
void barnes_run_seq(const struct barnes_params *params, struct barnes_result *result);

#endif
