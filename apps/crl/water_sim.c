/* Water (thesis §6.2.2): molecular dynamics of liquid water after SPLASH-2
 * water-nsquared with the M-Water change of Cox et al. (forces gathered in
 * a private array, each molecule's total added once per step).
 *
 * Regions: one per molecule (created by its owner: molecules are cut into
 * contiguous ranges by rank) and three small ones for the global sums
 * (potential energies 24 B, kinetic energy by direction 24 B, virial 8 B)
 * that every rank adds to once per step with a write operation.  With
 * use_reductions the sums go through rgn_reduce_dadd instead (§6.3).  As in
 * the thesis every region is mapped once at start and stays mapped.
 *
 * A time step (Gear 6-value predictor-corrector, positions and scaled
 * derivatives per atom):
 *   predict my molecules, intramolecular forces          barrier
 *   copy the positions of the molecules I meet (one read
 *   each, or a write where I alone will add forces to it);
 *   pair forces: molecule i against the next n/2
 *   (each pair once), into the private array;
 *   add them into the others' molecules (one write each) barrier
 *   add mine into my molecules, correct them, periodic
 *   boundary, kinetic energy; publish the sums.
 * No barrier separates the copies from the force writes: positions do not
 * change in between, and a rank writes only after its whole pair
 * computation, long after every rank copied at the start of the phase.
 *
 * Before the first step one force computation gives the initial
 * accelerations (untimed, like the set-up).
 *
 * With `fine` (--fine, the thesis's granularity, for Cosmos traces) the
 * pair phase takes a read operation on both molecules of every pair, as
 * the thesis's Water does, instead of copying the positions once; and the
 * hand-made tuning goes (the exclusive copies where a rank alone adds
 * forces, the flushes after the force and sum additions), leaving to the
 * protocol what the thesis left to it.  `untuned` (--untuned) drops only
 * that tuning, at the tuned granularity: the baseline against which the
 * hand tuning and the Cosmos actions (docs/COSMOS.md, Actions) compare.
 *
 * The model: three sites, flexible (harmonic O-H bonds and H-H spring),
 * SPC-like charges, oxygen-oxygen Lennard-Jones, pairs switched off
 * smoothly towards half the box on the oxygen distance (minimum image).
 * Units: Angstrom, amu, kcal/mol; the time unit is 48.89 fs. */
#include "crl_app.h"
#include "water.h"

#include <math.h>
#include <stdint.h>

enum { O, H1, H2, ATOMS = WATER_ATOMS };
enum { ORDERS = 6, FORCES = ORDERS }; /* f[0..5]: x, dt x', dt^2 x''/2, ...; f[6]: force */

struct molecule {
    double f[ORDERS + 1][ATOMS][3];
};

typedef double sites_t[ATOMS][3]; /* one molecule's atom positions */

#define DT 0.01             /* 0.49 fs */
#define DENSITY 0.0334      /* molecules per cubic Angstrom: 1 g/cm^3 */
#define COULOMB 332.0637    /* kcal Angstrom / (mol e^2) */
#define LJ_SIGMA 3.166
#define LJ_EPSILON 0.1554
#define BOND_K 1059.162     /* V = K/2 (r - R0)^2 */
#define BOND_R0 1.012
#define HH_K 150.0
#define HH_R0 1.652         /* H-O-H angle 109.5 degrees */
#define SWITCH_START 0.8    /* of the cutoff (half the box) */
#define INITIAL_SPEED 0.3   /* Angstrom per time unit, each component */

static const double mass[ATOMS] = {15.9994, 1.008, 1.008};
static const double charge[ATOMS] = {-0.82, 0.41, 0.41};
/* Gear's corrector for second-order equations, 6 values. */
static const double gear[ORDERS] = {3.0 / 16, 251.0 / 360, 1, 11.0 / 18, 1.0 / 6, 1.0 / 60};

struct water {
    int n;
    int use_reductions;
    double box, cutoff2, switch2; /* squares of the cutoff and of where the switch starts */
    unsigned me;
    size_t first, count;              /* my molecules */
    struct molecule **mol;            /* every molecule, mapped for the whole run */
    sites_t *sites;                   /* positions of the molecules I meet, this step */
    double (*force)[ATOMS][3];        /* my pair-force contributions this step */
    double *potential_sum;            /* intra, lj, coulomb */
    double *kinetic_sum;              /* x, y, z */
    double *virial_sum;
    struct water_energy local;        /* my part of this step's sums */
    int fine;                         /* the thesis's granularity */
    int hand;                         /* the hand-made tuning: exclusive copies, flushes (not fine, untuned) */
    unsigned char *sole_adder;        /* [n]: I am the only rank but its owner to add forces to it */
    struct app_poll poll;
};

enum { POLL_EVERY_PAIRS = 32 }; /* a pair is ~45 ns */

static double uniform(uint64_t *state) /* splitmix64, in [-1, 1) */
{
    uint64_t x = *state += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-52 - 1;
}

static void normalize(double v[3])
{
    double len = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (int d = 0; d < 3; d++)
        v[d] /= len;
}

/* Molecule k of n: oxygen on a cubic lattice, random orientation, every
 * atom moving with the same random velocity (so the bonds start relaxed). */
static void initial_state(struct molecule *m, int k, int n, double box)
{
    int side = (int)ceil(cbrt((double)n));
    double spacing = box / side;
    int cell[3] = {k % side, k / side % side, k / (side * side)};
    uint64_t rng = (uint64_t)k * 0x632be59bd9b4e019ull;
    double axis[3], across[3], velocity[3];
    for (int d = 0; d < 3; d++) {
        axis[d] = uniform(&rng);
        across[d] = uniform(&rng);
        velocity[d] = INITIAL_SPEED * uniform(&rng);
    }
    normalize(axis);
    double dot = axis[0] * across[0] + axis[1] * across[1] + axis[2] * across[2];
    for (int d = 0; d < 3; d++)
        across[d] -= dot * axis[d];
    normalize(across);
    double half_hh = HH_R0 / 2, along = sqrt(BOND_R0 * BOND_R0 - half_hh * half_hh);
    memset(m, 0, sizeof *m);
    for (int d = 0; d < 3; d++) {
        double o = (cell[d] + 0.5) * spacing;
        m->f[0][O][d] = o;
        m->f[0][H1][d] = o + along * axis[d] + half_hh * across[d];
        m->f[0][H2][d] = o + along * axis[d] - half_hh * across[d];
        for (int a = 0; a < ATOMS; a++)
            m->f[1][a][d] = DT * velocity[d];
    }
}

/* Taylor series forward one step: f[i] += sum over j > i of C(j, i) f[j]. */
static void predict(struct molecule *m)
{
    static const double binomial[ORDERS][ORDERS] = {
        {1, 1, 1, 1, 1, 1}, {0, 1, 2, 3, 4, 5}, {0, 0, 1, 3, 6, 10},
        {0, 0, 0, 1, 4, 10}, {0, 0, 0, 0, 1, 5}, {0, 0, 0, 0, 0, 1},
    };
    for (int i = 0; i < ORDERS - 1; i++)
        for (int j = i + 1; j < ORDERS; j++)
            for (int a = 0; a < ATOMS; a++)
                for (int d = 0; d < 3; d++)
                    m->f[i][a][d] += binomial[i][j] * m->f[j][a][d];
}

/* Harmonic spring between atoms x and y of m; returns its energy. */
static double spring(struct molecule *m, int x, int y, double k, double rest)
{
    double r[3], len2 = 0;
    for (int d = 0; d < 3; d++) {
        r[d] = m->f[0][y][d] - m->f[0][x][d];
        len2 += r[d] * r[d];
    }
    double len = sqrt(len2), stretch = len - rest;
    double pull = -k * stretch / len; /* force on y per unit of r */
    for (int d = 0; d < 3; d++) {
        m->f[FORCES][y][d] += pull * r[d];
        m->f[FORCES][x][d] -= pull * r[d];
    }
    return 0.5 * k * stretch * stretch;
}

/* Sets the molecule's force to its intramolecular part. */
static double intramolecular_forces(struct molecule *m)
{
    memset(m->f[FORCES], 0, sizeof m->f[FORCES]);
    return spring(m, O, H1, BOND_K, BOND_R0) + spring(m, O, H2, BOND_K, BOND_R0) + spring(m, H1, H2, HH_K, HH_R0);
}

/* Site-site forces between a and b (b shifted to a's nearest image),
 * added to fa and fb, and the pair's energies, added to e. */
static void site_forces(const sites_t a, const sites_t b, const double shift[3],
                        double fa[ATOMS][3], double fb[ATOMS][3], struct water_energy *e)
{
    for (int i = 0; i < ATOMS; i++)
        for (int j = 0; j < ATOMS; j++) {
            double r[3], r2 = 0;
            for (int d = 0; d < 3; d++) {
                r[d] = b[j][d] + shift[d] - a[i][d];
                r2 += r[d] * r[d];
            }
            double inv2 = 1 / r2, inv = sqrt(inv2);
            double energy = COULOMB * charge[i] * charge[j] * inv;
            double push = energy * inv2; /* force on b per unit of r */
            e->coulomb += energy;
            if (i == O && j == O) {
                double s6 = LJ_SIGMA * LJ_SIGMA * inv2;
                s6 = s6 * s6 * s6;
                e->lj += 4 * LJ_EPSILON * (s6 * s6 - s6);
                push += 24 * LJ_EPSILON * (2 * s6 * s6 - s6) * inv2;
            }
            e->virial += push * r2;
            for (int d = 0; d < 3; d++) {
                fb[j][d] += push * r[d];
                fa[i][d] -= push * r[d];
            }
        }
}

/* The forces between molecules a and b, added to fa and fb.  The pair's
 * energy U is scaled by a switch S of the oxygen distance, 1 below
 * SWITCH_START of the cutoff and falling smoothly to 0 at it, so molecules
 * crossing the cutoff do not make the energy jump; -U dS/dr acts on the
 * oxygens. */
static void interact(const struct water *w, const sites_t a, const sites_t b,
                     double fa[ATOMS][3], double fb[ATOMS][3], struct water_energy *e)
{
    double shift[3], oo[3], oo2 = 0;
    for (int d = 0; d < 3; d++) {
        double r = b[O][d] - a[O][d];
        shift[d] = -w->box * rint(r / w->box);
        oo[d] = r + shift[d];
        oo2 += oo[d] * oo[d];
    }
    if (oo2 >= w->cutoff2)
        return;
    double pa[ATOMS][3] = {{0}}, pb[ATOMS][3] = {{0}};
    struct water_energy pair = {0};
    site_forces(a, b, shift, pa, pb, &pair);
    double width = w->cutoff2 - w->switch2, x = (oo2 - w->switch2) / width;
    double s = 1, ds = 0; /* S and dS/d(oo2) */
    if (x > 0) {
        s = 1 - x * x * (3 - 2 * x);
        ds = -6 * x * (1 - x) / width;
    }
    double push = -2 * (pair.coulomb + pair.lj) * ds; /* on b's oxygen per unit of oo */
    for (int i = 0; i < ATOMS; i++)
        for (int d = 0; d < 3; d++) {
            fa[i][d] += s * pa[i][d];
            fb[i][d] += s * pb[i][d];
        }
    for (int d = 0; d < 3; d++) {
        fb[O][d] += push * oo[d];
        fa[O][d] -= push * oo[d];
    }
    e->coulomb += s * pair.coulomb;
    e->lj += s * pair.lj;
    e->virial += s * pair.virial + push * oo2;
}

static void correct(struct molecule *m)
{
    for (int a = 0; a < ATOMS; a++)
        for (int d = 0; d < 3; d++) {
            double error = DT * DT / 2 * m->f[FORCES][a][d] / mass[a] - m->f[2][a][d];
            for (int i = 0; i < ORDERS; i++)
                m->f[i][a][d] += gear[i] * error;
        }
}

/* Keeps the oxygen inside the box, moving the whole molecule. */
static void wrap(struct molecule *m, double box)
{
    for (int d = 0; d < 3; d++) {
        double shift = -box * floor(m->f[0][O][d] / box);
        if (shift != 0)
            for (int a = 0; a < ATOMS; a++)
                m->f[0][a][d] += shift;
    }
}

static void add_kinetic(const struct molecule *m, double kinetic[3])
{
    for (int a = 0; a < ATOMS; a++)
        for (int d = 0; d < 3; d++) {
            double v = m->f[1][a][d] / DT;
            kinetic[d] += 0.5 * mass[a] * v * v;
        }
}

static void predict_mine(struct water *w)
{
    for (size_t k = w->first; k < w->first + w->count; k++) {
        struct molecule *m = w->mol[k];
        rgn_start_write(m);
        predict(m);
        w->local.intra += intramolecular_forces(m);
        rgn_end_write(m);
    }
}

/* How many molecules a rank with `count` of them meets: its own and the
 * n/2 after them (mod n). */
static size_t span_of(size_t n, size_t count)
{
    return count + n / 2 < n ? count + n / 2 : n;
}

static size_t met_span(const struct water *w)
{
    return span_of((size_t)w->n, w->count);
}

/* Marks the molecules of other ranks that I meet and no third rank meets:
 * I am the only one to add forces to them (at 2 processes, every molecule
 * of the other rank). */
static void find_sole_adds(struct water *w)
{
    size_t n = (size_t)w->n;
    unsigned nranks = crl_num_nodes();
    w->sole_adder = app_alloc(n); /* zeroed */
    for (size_t k = w->count; k < met_span(w); k++) {
        size_t j = (w->first + k) % n, first, count;
        unsigned owner = app_owner(j, n, nranks), r = 0;
        for (; r < nranks; r++) {
            app_partition(n, r, nranks, &first, &count);
            if (r != w->me && r != owner && (j + n - first) % n < span_of(n, count))
                break;
        }
        w->sole_adder[j] = r == nranks;
    }
}

/* One operation per molecule I meet copies its positions for the whole
 * pair phase: an operation per pair would cost more than the pair.  It is
 * a write where I alone will add forces to the molecule: the owner does
 * not touch it before then, so the exclusive copy taken now is still here
 * for the addition, which then needs no upgrade round trip.  At 2
 * processes that removed 256 misses per rank and step, taken while the
 * other rank computes (~300 us of a 5 ms step, against ~50); where
 * several ranks add to a molecule, their writes here would take its copy
 * from each other and the additions would miss again. */
static void copy_sites(struct water *w)
{
    for (size_t k = 0; k < met_span(w); k++) {
        size_t j = (w->first + k) % (size_t)w->n;
        struct molecule *m = w->mol[j];
        if (w->hand && w->sole_adder[j])
            rgn_start_write(m);
        else
            rgn_start_read(m);
        memcpy(w->sites[j], m->f[0], sizeof(sites_t));
        if (w->hand && w->sole_adder[j])
            rgn_end_write(m);
        else
            rgn_end_read(m);
    }
}

/* --fine: one pair under read operations on both molecules. */
static void interact_pair(struct water *w, size_t i, size_t j)
{
    const struct molecule *a = w->mol[i], *b = w->mol[j];
    rgn_start_read((void *)a);
    rgn_start_read((void *)b);
    interact(w, a->f[0], b->f[0], w->force[i], w->force[j], &w->local);
    rgn_end_read((void *)b);
    rgn_end_read((void *)a);
}

/* Molecule i meets i+1 .. i+n/2 (mod n); for even n the pair at distance
 * n/2 is met from its lower end only. */
static void interact_mine(struct water *w)
{
    int n = w->n;
    if (!w->fine)
        copy_sites(w);
    for (size_t i = w->first; i < w->first + w->count; i++) {
        int last = n % 2 == 0 && (int)i >= n / 2 ? n / 2 - 1 : n / 2;
        for (int d = 1; d <= last; d++) {
            size_t j = (i + (size_t)d) % (size_t)n;
            if (w->fine)
                interact_pair(w, i, j);
            else
                interact(w, w->sites[i], w->sites[j], w->force[i], w->force[j], &w->local);
            app_poll(&w->poll);
        }
    }
}

/* Adds my contributions in w->force[j] to molecule j (write held). */
static void add_force(struct water *w, size_t j)
{
    struct molecule *m = w->mol[j];
    for (int a = 0; a < ATOMS; a++)
        for (int d = 0; d < 3; d++)
            m->f[FORCES][a][d] += w->force[j][a][d];
    memset(w->force[j], 0, sizeof w->force[j]);
}

/* Adds my contributions to the molecules I met that are not mine; mine get
 * theirs in the write that corrects them, which saves one miss each.  Each
 * copy goes straight back to its home (a flush is one message, sent without
 * waiting): the next write to the molecule, its owner's correction or
 * another rank's contribution, then finds it at home instead of waiting
 * for this rank to poll and answer an invalidation.  At 2 processes that
 * took the corrections 150-500 us per step, against ~30 with the flush. */
static void add_forces_to_others(struct water *w)
{
    for (size_t k = w->count; k < met_span(w); k++) {
        size_t j = (w->first + k) % (size_t)w->n;
        rgn_start_write(w->mol[j]);
        add_force(w, j);
        rgn_end_write(w->mol[j]);
        if (w->hand)
            rgn_flush(w->mol[j]);
    }
}

static void correct_mine(struct water *w, double kinetic[3])
{
    for (size_t k = w->first; k < w->first + w->count; k++) {
        struct molecule *m = w->mol[k];
        rgn_start_write(m);
        add_force(w, k);
        correct(m);
        wrap(m, w->box);
        add_kinetic(m, kinetic);
        rgn_end_write(m);
    }
}

/* Flushed at once, so that rank 0 (their home) takes the sums without an
 * invalidation each that would wait for this rank to poll: it computes the
 * next step's predictions meanwhile (~50 us per region at 2 processes). */
static void add_to_region(const struct water *w, double *region, const double *values, int count)
{
    rgn_start_write(region);
    for (int i = 0; i < count; i++)
        region[i] += values[i];
    rgn_end_write(region);
    if (w->hand)
        rgn_flush(region);
}

/* Rank 0: reads this step's totals out of the sum regions and zeroes them
 * for the next step (nobody adds to them before two more barriers). */
static void take_region_sums(struct water *w, struct water_energy *out)
{
    double *regions[3] = {w->potential_sum, w->kinetic_sum, w->virial_sum};
    for (int r = 0; r < 3; r++)
        rgn_start_write(regions[r]);
    *out = (struct water_energy){
        .kinetic = w->kinetic_sum[0] + w->kinetic_sum[1] + w->kinetic_sum[2],
        .intra = w->potential_sum[0],
        .lj = w->potential_sum[1],
        .coulomb = w->potential_sum[2],
        .virial = w->virial_sum[0],
    };
    memset(w->potential_sum, 0, 3 * sizeof(double));
    memset(w->kinetic_sum, 0, 3 * sizeof(double));
    w->virial_sum[0] = 0;
    for (int r = 0; r < 3; r++)
        rgn_end_write(regions[r]);
}

/* Combines every rank's part of this step's sums; rank 0 gets them in out. */
static void publish_sums(struct water *w, const double kinetic[3], struct water_energy *out)
{
    struct water_energy *e = &w->local;
    if (w->use_reductions) {
        struct water_energy total = {
            .kinetic = rgn_reduce_dadd(kinetic[0] + kinetic[1] + kinetic[2]),
            .intra = rgn_reduce_dadd(e->intra),
            .lj = rgn_reduce_dadd(e->lj),
            .coulomb = rgn_reduce_dadd(e->coulomb),
            .virial = rgn_reduce_dadd(e->virial),
        };
        if (out)
            *out = total;
    } else {
        double potential[3] = {e->intra, e->lj, e->coulomb};
        add_to_region(w, w->potential_sum, potential, 3);
        add_to_region(w, w->kinetic_sum, kinetic, 3);
        add_to_region(w, w->virial_sum, &e->virial, 1);
        rgn_barrier();
        if (out)
            take_region_sums(w, out);
    }
    *e = (struct water_energy){0};
}

/* The forces at the initial positions give the initial accelerations (the
 * predictor's other derivatives start at zero). */
static void initial_accelerations(struct water *w)
{
    for (size_t k = w->first; k < w->first + w->count; k++) {
        rgn_start_write(w->mol[k]);
        intramolecular_forces(w->mol[k]);
        rgn_end_write(w->mol[k]);
    }
    rgn_barrier();
    interact_mine(w);
    rgn_barrier();
    add_forces_to_others(w);
    rgn_barrier();
    for (size_t k = w->first; k < w->first + w->count; k++) {
        struct molecule *m = w->mol[k];
        rgn_start_write(m);
        add_force(w, k);
        for (int a = 0; a < ATOMS; a++)
            for (int d = 0; d < 3; d++)
                m->f[2][a][d] = DT * DT / 2 * m->f[FORCES][a][d] / mass[a];
        rgn_end_write(m);
    }
    w->local = (struct water_energy){0};
}

static void time_step(struct water *w, struct water_energy *out)
{
    double kinetic[3] = {0, 0, 0};
    predict_mine(w);
    rgn_barrier();
    interact_mine(w);
    add_forces_to_others(w);
    rgn_barrier();
    correct_mine(w, kinetic);
    publish_sums(w, kinetic, out);
}

/* Creates my molecules' regions (rank 0 also the sums') and maps them all. */
static void create_regions(struct water *w)
{
    size_t n = (size_t)w->n, count = n + 3;
    rid_t *rids = app_alloc(count * sizeof *rids);
    unsigned *owner = app_alloc(count * sizeof *owner);
    static const unsigned sum_bytes[3] = {3 * sizeof(double), 3 * sizeof(double), sizeof(double)};
    for (size_t k = 0; k < count; k++) {
        owner[k] = k < n ? app_owner(k, n, crl_num_nodes()) : 0;
        if (owner[k] == w->me)
            rids[k] = rgn_create(k < n ? (unsigned)sizeof(struct molecule) : sum_bytes[k - n]);
    }
    app_share_rids(rids, owner, count);
    w->mol = app_alloc(n * sizeof *w->mol);
    for (size_t k = 0; k < n; k++)
        w->mol[k] = rgn_map(rids[k]);
    w->potential_sum = rgn_map(rids[n]);
    w->kinetic_sum = rgn_map(rids[n + 1]);
    w->virial_sum = rgn_map(rids[n + 2]);
    free(owner);
    free(rids);
}

static void release(void *region, int created_here)
{
    rid_t rid = rgn_rid(region);
    rgn_unmap(region);
    if (created_here)
        rgn_delete(rid);
}

static void gather_positions(const struct water *w, double *out)
{
    for (int k = 0; k < w->n; k++) {
        rgn_start_read(w->mol[k]);
        memcpy(out + (size_t)k * ATOMS * 3, w->mol[k]->f[0], sizeof w->mol[k]->f[0]);
        rgn_end_read(w->mol[k]);
    }
}

void SIM_ENTRY(water_run)(const struct water_params *params, struct water_result *result)
{
    struct water w = {.n = params->molecules, .use_reductions = params->use_reductions, .me = crl_self_addr(),
                      .fine = params->fine, .hand = !params->fine && !params->untuned,
                      .poll = app_poll_init(POLL_EVERY_PAIRS)};
    w.box = cbrt(w.n / DENSITY);
    w.cutoff2 = w.box * w.box / 4;
    w.switch2 = SWITCH_START * SWITCH_START * w.cutoff2;
    app_partition((size_t)w.n, w.me, crl_num_nodes(), &w.first, &w.count);
    w.force = app_alloc((size_t)w.n * sizeof *w.force);
    w.sites = app_alloc((size_t)w.n * sizeof *w.sites);
    create_regions(&w);
    find_sole_adds(&w);
    for (size_t k = w.first; k < w.first + w.count; k++) {
        rgn_start_write(w.mol[k]);
        initial_state(w.mol[k], (int)k, w.n, w.box);
        rgn_end_write(w.mol[k]);
    }
    rgn_barrier();
    initial_accelerations(&w);
    rgn_barrier();
    struct app_time timed = {0, 0};
    for (int s = 0; s < params->steps; s++) {
        struct app_time start = app_clock();
        time_step(&w, result->energy ? &result->energy[s] : NULL);
        if (s > 0 || params->steps == 1)
            app_add_since(&timed, start);
    }
    int counted = params->steps > 1 ? params->steps - 1 : 1;
    result->time = (struct app_time){timed.wall / counted, timed.cpu / counted};
    if (result->positions)
        gather_positions(&w, result->positions);
    rgn_barrier(); /* nobody uses a region any more: unmap, and delete mine */
    for (size_t k = 0; k < (size_t)w.n; k++)
        release(w.mol[k], k - w.first < w.count);
    release(w.potential_sum, w.me == 0);
    release(w.kinetic_sum, w.me == 0);
    release(w.virial_sum, w.me == 0);
    free(w.mol);
    free(w.force);
    free(w.sites);
    free(w.sole_adder);
}
