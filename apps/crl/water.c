/* crl_water: Water (thesis §6.2.2) on CRL regions; water_sim.c has the
 * algorithm and the model.
 *
 *   shoalrun -n 2 crl_water [--molecules=512] [--steps=3] [--reduce] [--fine] [--untuned] [--check]
 *   crl_water_null [same options]        (the sequential baseline)
 *
 * --fine: the thesis's granularity (for Cosmos traces): a read operation on
 * both molecules of every pair, and none of the copies and flushes this
 * version adds by hand (water_sim.c).  --untuned: only those copies and
 * flushes go (the baseline for the Cosmos actions, docs/COSMOS.md).
 * Prints the mean time of the steps after the first, the last step's total
 * energy and a checksum of the positions.  --check (rank 0): the total
 * energy must stay within ENERGY_DRIFT of its first value, and in the CRL
 * build a sequential run of the same problem in-process must give the same
 * energies (relative SUM_TOLERANCE: only the order of the floating-point
 * sums differs) and positions (POSITION_TOLERANCE Angstrom). */
#include "crl_app.h"
#include "water.h"

#include <math.h>

/* The Gear integrator at 0.5 fs keeps the total energy within ~2e-4 of the
 * initial kinetic energy (most of it in the first step) for 64 or 512
 * molecules over 3 to 20 steps, while the lattice start melts and the
 * kinetic energy grows fourfold; a wrong force or a lost update moves it by
 * orders of magnitude more.  (Use a cube for the number of molecules: the
 * start is a cubic lattice.) */
#define ENERGY_DRIFT 1e-3
#define SUM_TOLERANCE 1e-9
#define POSITION_TOLERANCE 1e-9

static double total_energy(const struct water_energy *e)
{
    return e->kinetic + e->intra + e->lj + e->coulomb;
}

static int check_drift(const struct water_params *p, const struct water_energy *energy)
{
    double worst = 0;
    for (int s = 1; s < p->steps; s++)
        worst = fmax(worst, fabs(total_energy(&energy[s]) - total_energy(&energy[0])));
    worst /= fabs(energy[0].kinetic);
    int failed = !(worst <= ENERGY_DRIFT);
    printf("check: total energy drift / kinetic energy = %.3e (tolerance %.0e) %s\n", worst, ENERGY_DRIFT,
           failed ? "FAILED" : "ok");
    return failed;
}

#ifndef SHOAL_CRL_NULL
static double relative_difference(double a, double b)
{
    return fabs(a - b) / fmax(fabs(b), 1e-300);
}

static int check_against_sequential(const struct water_params *p, const struct water_result *r)
{
    size_t npos = (size_t)p->molecules * WATER_ATOMS * 3;
    struct water_result seq = {
        .energy = app_alloc((size_t)p->steps * sizeof *seq.energy),
        .positions = app_alloc(npos * sizeof *seq.positions),
    };
    water_run_seq(p, &seq);
    double sums = 0, positions = 0;
    for (int s = 0; s < p->steps; s++) {
        const struct water_energy *a = &r->energy[s], *b = &seq.energy[s];
        sums = fmax(sums, relative_difference(a->kinetic, b->kinetic));
        sums = fmax(sums, relative_difference(a->intra, b->intra));
        sums = fmax(sums, relative_difference(a->lj, b->lj));
        sums = fmax(sums, relative_difference(a->coulomb, b->coulomb));
        sums = fmax(sums, relative_difference(a->virial, b->virial));
    }
    for (size_t i = 0; i < npos; i++)
        positions = fmax(positions, fabs(r->positions[i] - seq.positions[i]));
    int failed = !(sums <= SUM_TOLERANCE) || !(positions <= POSITION_TOLERANCE);
    printf("check: against the sequential run: sums %.3e relative (tolerance %.0e), positions %.3e A "
           "(tolerance %.0e) %s\n",
           sums, SUM_TOLERANCE, positions, POSITION_TOLERANCE, failed ? "FAILED" : "ok");
    free(seq.energy);
    free(seq.positions);
    return failed;
}
#endif

static int check(const struct water_params *p, const struct water_result *r)
{
    int failed = check_drift(p, r->energy);
#ifndef SHOAL_CRL_NULL
    failed |= check_against_sequential(p, r);
#endif
    return failed;
}

static double checksum(const struct water_params *p, const double *positions)
{
    double sum = 0;
    for (size_t i = 0; i < (size_t)p->molecules * WATER_ATOMS * 3; i++)
        sum += positions[i];
    return sum;
}

int main(int argc, char **argv)
{
    struct app_option opts[] = {
        {"molecules", 512, "number of water molecules"},
        {"steps", 3, "time steps"},
        {"reduce", 0, "global sums by rgn_reduce_dadd instead of regions"},
        {"check", 0, "verify the result (rank 0)"},
        {"fine", 0, "operations per molecule pair (the thesis's granularity)"},
        {"untuned", 0, "without the hand-made exclusive copies and flushes (the baseline of the Cosmos actions)"},
    };
    app_parse(argc, argv, opts, 6);
    struct water_params p = {.molecules = (int)opts[0].value, .steps = (int)opts[1].value,
                             .use_reductions = opts[2].value != 0, .fine = opts[4].value != 0,
                             .untuned = opts[5].value != 0};
    if (p.molecules < 2 || p.steps < 1) {
        fprintf(stderr, "%s: needs at least 2 molecules and 1 step\n", argv[0]);
        return 2;
    }
    crl_init();
    int root = crl_self_addr() == 0, failed = 0;
    struct water_result r = {0};
    if (root) {
        r.energy = app_alloc((size_t)p.steps * sizeof *r.energy);
        r.positions = app_alloc((size_t)p.molecules * WATER_ATOMS * 3 * sizeof *r.positions);
    }
    SIM_ENTRY(water_run)(&p, &r);
    if (root) {
        printf("water build=%s procs=%u molecules=%d steps=%d sums=%s%s time=%.6f cpu=%.6f energy=%.10e "
               "checksum=%.12e\n",
               APP_BUILD, crl_num_nodes(), p.molecules, p.steps, p.use_reductions ? "reduce" : "regions",
               p.fine ? " fine" : p.untuned ? " untuned" : "",
               r.time.wall, r.time.cpu, total_energy(&r.energy[p.steps - 1]), checksum(&p, r.positions));
        if (opts[3].value != 0)
            failed = check(&p, &r);
        fflush(stdout);
    }
    free(r.energy);
    free(r.positions);
    crl_exit();
    return failed;
}
