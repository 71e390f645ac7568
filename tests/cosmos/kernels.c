/* Synthetic CRL kernels with known coherence signatures (issue 19 item 5a),
 * for the Cosmos traces and predictor:
 *   kernels KERNEL [iterations]
 * KERNEL: pc1 (producer-consumer, one consumer), pcn (one producer, every
 * other rank a consumer), counter (the thesis's Fig. 6-2 shared counter:
 * home, producer and consumer three ranks where there are three), migratory
 * (read-modify-write passed from rank to rank), phases (migratory phases
 * alternating with producer-consumer ones, like unstructured's), random
 * (reads and writes of random regions).  Region k is homed at rank k mod n;
 * every phase ends with rgn_barrier, so the traces hold a marker after it;
 * every kernel checks the values it reads and the final contents.  Run with
 * SHOAL_COSMOS_TRACE=DIR to record. */
#include <shoal/crl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 8 /* a 64-byte region */

struct kernel_state {
    unsigned me, n, nreg;
    rid_t *rid;
    uint64_t **p; /* mapped for the whole run */
};

static void fail(const struct kernel_state *k, const char *what, unsigned reg, uint64_t got, uint64_t want)
{
    fprintf(stderr, "kernels: rank %u: %s: region %u holds %llu, expected %llu\n", k->me, what, reg,
            (unsigned long long)got, (unsigned long long)want);
    exit(1);
}

/* nreg regions, region r created by (homed at) rank r % n, mapped everywhere. */
static void regions_setup(struct kernel_state *k, unsigned nreg)
{
    k->nreg = nreg;
    k->rid = calloc(nreg, sizeof *k->rid);
    k->p = calloc(nreg, sizeof *k->p);
    if (!k->rid || !k->p) {
        fprintf(stderr, "kernels: out of memory\n");
        exit(1);
    }
    for (unsigned r = 0; r < nreg; r++) {
        if (r % k->n == k->me) {
            k->rid[r] = rgn_create(WORDS * sizeof(uint64_t));
            rgn_bcast_send(sizeof k->rid[r], &k->rid[r]);
        } else
            rgn_bcast_recv(sizeof k->rid[r], &k->rid[r]);
    }
    for (unsigned r = 0; r < nreg; r++)
        k->p[r] = rgn_map(k->rid[r]);
    rgn_barrier();
}

static void put(uint64_t *p, uint64_t v)
{
    rgn_start_write(p);
    for (int w = 0; w < WORDS; w++)
        p[w] = v;
    rgn_end_write(p);
}

/* Reads region r and checks every word holds want. */
static void expect(const struct kernel_state *k, unsigned r, uint64_t want, const char *what)
{
    uint64_t *p = k->p[r];
    rgn_start_read(p);
    for (int w = 0; w < WORDS; w++)
        if (p[w] != want) {
            uint64_t got = p[w];
            rgn_end_read(p);
            fail(k, what, r, got, want);
        }
    rgn_end_read(p);
}

/* The read-then-write of a migratory datum: a read copy, then an upgrade. */
static void read_modify_write(const struct kernel_state *k, unsigned r, uint64_t want)
{
    uint64_t *p = k->p[r];
    rgn_start_read(p);
    uint64_t v = p[0];
    rgn_end_read(p);
    if (v != want)
        fail(k, "migratory read", r, v, want);
    put(p, v + 1);
}

/* One producer-consumer round on every region: the producer of region r
 * writes, then each consumer reads.  consumer(r, c) says whether rank c
 * consumes r. */
static void produce_consume(struct kernel_state *k, unsigned producer_shift, int all_consume, uint64_t value)
{
    for (unsigned r = 0; r < k->nreg; r++)
        if ((r + producer_shift) % k->n == k->me)
            put(k->p[r], value + r);
    rgn_barrier();
    for (unsigned r = 0; r < k->nreg; r++) {
        unsigned producer = (r + producer_shift) % k->n;
        int consumer = all_consume ? k->me != producer : k->me == (producer + 1) % k->n;
        if (consumer)
            expect(k, r, value + r, "consumer read");
    }
    rgn_barrier();
}

/* n turns: at turn t, rank (r + 1 + t) % n read-modify-writes region r, so
 * each region visits every rank once per round. */
static void migrate(struct kernel_state *k, uint64_t *count)
{
    for (unsigned t = 0; t < k->n; t++) {
        for (unsigned r = 0; r < k->nreg; r++)
            if ((r + 1 + t) % k->n == k->me)
                read_modify_write(k, r, count[r]);
        for (unsigned r = 0; r < k->nreg; r++)
            count[r]++;
        rgn_barrier();
    }
}

static void kernel_pc(struct kernel_state *k, unsigned iters, int all_consume)
{
    regions_setup(k, k->n);
    for (unsigned i = 0; i < iters; i++)
        produce_consume(k, 0, all_consume, 1000u * (i + 1));
}

/* Fig. 6-2: region r's counter, homed at r, is incremented by rank r+1 and
 * read by rank r+2 (the home itself with two ranks). */
static void kernel_counter(struct kernel_state *k, unsigned iters)
{
    regions_setup(k, k->n);
    for (unsigned i = 0; i < iters; i++) {
        for (unsigned r = 0; r < k->nreg; r++)
            if ((r + 1) % k->n == k->me) {
                uint64_t *p = k->p[r];
                rgn_start_write(p);
                if (p[0] != i)
                    fail(k, "counter before increment", r, p[0], i);
                p[0]++;
                rgn_end_write(p);
            }
        rgn_barrier();
        for (unsigned r = 0; r < k->nreg; r++)
            if ((r + 2) % k->n == k->me) {
                uint64_t *p = k->p[r];
                rgn_start_read(p);
                uint64_t v = p[0];
                rgn_end_read(p);
                if (v != i + 1)
                    fail(k, "counter read", r, v, i + 1);
            }
        rgn_barrier();
    }
}

static void kernel_migratory(struct kernel_state *k, unsigned iters)
{
    regions_setup(k, k->n);
    uint64_t *count = calloc(k->nreg, sizeof *count);
    for (unsigned i = 0; i < iters; i++)
        migrate(k, count);
    for (unsigned r = 0; r < k->nreg; r++)
        expect(k, r, (uint64_t)iters * k->n, "final migratory count");
    free(count);
}

/* Phases of 5 iterations: migratory, then producer-consumer with every
 * other rank consuming, and again. */
static void kernel_phases(struct kernel_state *k, unsigned iters)
{
    regions_setup(k, k->n);
    uint64_t *count = calloc(k->nreg, sizeof *count);
    for (unsigned i = 0; i < iters; i++) {
        if ((i / 5) % 2 == 0) {
            migrate(k, count);
            continue;
        }
        produce_consume(k, 0, 1, 1000u * (i + 1));
        for (unsigned r = 0; r < k->nreg; r++) /* the migratory phase counts on from here */
            count[r] = 1000u * (i + 1) + r;
    }
    free(count);
}

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Each rank, each iteration: 4 operations on random regions of 2n, a write
 * (one in three) adding 1.  Every rank replays every rank's generator, so
 * each knows the final counts; within an iteration a read sees a count
 * between the one before it and the one after it. */
static void kernel_random(struct kernel_state *k, unsigned iters)
{
    regions_setup(k, 2 * k->n);
    uint64_t *before = calloc(k->nreg, sizeof *before), *after = calloc(k->nreg, sizeof *after);
    uint64_t *seed = calloc(k->n, sizeof *seed);
    for (unsigned c = 0; c < k->n; c++)
        seed[c] = 0x9e3779b97f4a7c15ull * (c + 1);
    for (unsigned i = 0; i < iters; i++) {
        memcpy(before, after, k->nreg * sizeof *before);
        for (unsigned c = 0; c < k->n; c++)
            for (int op = 0; op < 4; op++) {
                uint64_t x = rng(&seed[c]);
                unsigned r = (unsigned)(x % k->nreg);
                int write = (x >> 32) % 3 == 0;
                after[r] += write;
                if (c != k->me)
                    continue;
                uint64_t *p = k->p[r];
                if (write) {
                    rgn_start_write(p);
                    p[0]++;
                    rgn_end_write(p);
                    continue;
                }
                rgn_start_read(p);
                uint64_t v = p[0];
                rgn_end_read(p);
                if (v < before[r])
                    fail(k, "random read below the iteration's start", r, v, before[r]);
            }
        rgn_barrier();
    }
    for (unsigned r = 0; r < k->nreg; r++) {
        uint64_t *p = k->p[r];
        rgn_start_read(p);
        uint64_t v = p[0];
        rgn_end_read(p);
        if (v != after[r])
            fail(k, "random final count", r, v, after[r]);
    }
    free(before);
    free(after);
    free(seed);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s pc1|pcn|counter|migratory|phases|random [iterations]\n", argv[0]);
        return 2;
    }
    unsigned iters = argc == 3 ? (unsigned)strtoul(argv[2], NULL, 10) : 50;
    crl_init();
    struct kernel_state k = {.me = crl_self_addr(), .n = crl_num_nodes()};
    const char *name = argv[1];
    if (!strcmp(name, "pc1"))
        kernel_pc(&k, iters, 0);
    else if (!strcmp(name, "pcn"))
        kernel_pc(&k, iters, 1);
    else if (!strcmp(name, "counter"))
        kernel_counter(&k, iters);
    else if (!strcmp(name, "migratory"))
        kernel_migratory(&k, iters);
    else if (!strcmp(name, "phases"))
        kernel_phases(&k, iters);
    else if (!strcmp(name, "random"))
        kernel_random(&k, iters);
    else {
        fprintf(stderr, "kernels: unknown kernel %s\n", name);
        return 2;
    }
    rgn_barrier(); /* every read of the last round is done before the regions go */
    for (unsigned r = 0; r < k.nreg; r++)
        rgn_unmap(k.p[r]);
    free(k.p);
    free(k.rid);
    if (k.me == 0)
        printf("kernel %s: %u iterations on %u ranks ok\n", name, iters, k.n);
    crl_exit();
    return 0;
}
