/* The fault injector: spec parsing and its errors, determinism (same seed
 * and stream, same decisions; another stream, others), rates within
 * statistical bounds, and what each fault does to the packets. */
#include "../common/check.h"
#include "net/faults.h"

#include <math.h>
#include <shoal.h>
#include <stdint.h>
#include <string.h>

static void check_parse(void)
{
    struct util_fault_spec c;
    char err[200];
    CHECK_RC(util_fault_parse("", &c, err, sizeof err), SHOAL_OK);
    CHECK(!fault_active(&c) && c.seed == 1, "empty spec is not neutral");
    CHECK_RC(util_fault_parse("loss=0.01,dup=0.001,reorder=0.01,delay=200us,corrupt=0.0001,seed=42", &c, err, sizeof err),
             SHOAL_OK);
    CHECK(c.loss == 0.01 && c.dup == 0.001 && c.reorder == 0.01 && c.corrupt == 0.0001 && c.delay_ns == 200000 &&
              c.seed == 42 && fault_active(&c), "full spec misparsed");
    CHECK_RC(util_fault_parse("delay=1.5ms", &c, err, sizeof err), SHOAL_OK);
    CHECK(c.delay_ns == 1500000 && fault_active(&c), "delay=1.5ms gave %llu ns", (unsigned long long)c.delay_ns);
    CHECK_RC(util_fault_parse("delay=7ns,loss=1,seed=0x10", &c, err, sizeof err), SHOAL_OK);
    CHECK(c.delay_ns == 7 && c.loss == 1.0 && c.seed == 16, "delay=7ns,loss=1,seed=0x10 misparsed");
    CHECK_RC(util_fault_parse("seed=5", &c, NULL, 0), SHOAL_OK);
    CHECK(!fault_active(&c), "a seed alone injects nothing");

    static const struct { const char *spec, *needle; } bad[] = {
        {"loss=1.5", "bad value \"1.5\" for loss"},
        {"loss=-0.1", "for loss"},
        {"loss=nan", "for loss"},
        {"loss=0.1x", "for loss"},
        {"loss=", "for loss"},
        {"dup=2", "for dup"},
        {"reorder=abc", "for reorder"},
        {"corrupt=1e3", "for corrupt"},
        {"delay=200", "a time with a unit ns, us or ms"},
        {"delay=5s", "for delay"},
        {"delay=-1us", "for delay"},
        {"seed=-3", "for seed"},
        {"seed=12abc", "for seed"},
        {"seed=99999999999999999999999", "for seed"},
        {"jitter=5us", "unknown item \"jitter\""},
        {"loss", "\"loss\" needs a value"},
        {"loss=0.1,,dup=0.1", "empty item"},
        {"loss=0.1,", "empty item"},
        {",loss=0.1", "empty item"},
        {"loss=0.1,loss=0.2", "loss given twice"},
        {"loss=0.1 ", "for loss"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK(util_fault_parse(bad[i].spec, &c, err, sizeof err) == SHOAL_EINVAL, "\"%s\" accepted", bad[i].spec);
        CHECK(strstr(err, bad[i].needle), "\"%s\": message \"%s\" lacks \"%s\"", bad[i].spec, err, bad[i].needle);
        CHECK(util_fault_parse(bad[i].spec, &c, NULL, 0) == SHOAL_EINVAL, "\"%s\" accepted without err", bad[i].spec);
    }
}

/* ---- a recorder of what comes out --------------------------------------- */

struct out {
    uint64_t now;        /* the time emit was called at (set by the driver) */
    uint64_t hash;       /* of every (time, addr, bytes) emitted, in order */
    uint64_t count, corrupted, late;
    uint32_t last_id[4]; /* per address: the id of the packet emitted last */
    uint64_t swaps;      /* ids that went out below an earlier one, per address */
    uint64_t delay;      /* expected delay of every packet */
    uint64_t sent_at[1u << 17];
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

#define PKT 32

/* A test packet: its id twice (one copy survives a corrupted byte), then
 * a pattern from it. */
static void make_pkt(unsigned char *p, uint32_t id)
{
    memcpy(p, &id, 4);
    memcpy(p + 4, &id, 4);
    for (int i = 8; i < PKT; i++)
        p[i] = (unsigned char)(id * 31 + (uint32_t)i);
}

/* Bytes of pkt that differ from packet id. */
static int changed(const unsigned char *pkt, uint32_t id)
{
    unsigned char want[PKT];
    make_pkt(want, id);
    int diff = 0;
    for (int i = 0; i < PKT; i++)
        diff += pkt[i] != want[i];
    return diff;
}

static void record(void *ctx, uint32_t addr, const void *pkt, size_t len)
{
    struct out *o = ctx;
    const unsigned char *b = pkt;
    CHECK(len == PKT && addr < 4, "emitted len %zu addr %u", len, addr);
    for (size_t i = 0; i < len; i++)
        o->hash = mix(o->hash, b[i]);
    o->hash = mix(mix(o->hash, o->now), addr);
    uint32_t id0, id1;
    memcpy(&id0, b, 4);
    memcpy(&id1, b + 4, 4);
    int d0 = changed(b, id0), d1 = changed(b, id1);
    uint32_t id = d0 <= d1 ? id0 : id1;
    int diff = d0 <= d1 ? d0 : d1;
    CHECK(diff <= 1, "packet %u has %d bytes changed", id, diff);
    if (diff) {
        o->corrupted++;
        return;
    }
    o->late += o->now != o->sent_at[id] + o->delay;
    o->swaps += id < o->last_id[addr];
    o->last_id[addr] = id;
    o->count++;
}

/* Passes n packets, one per microsecond, to addresses 0..3 in turn, then
 * flushes everything; returns the injector's counters. */
static struct fault_stats run(const char *spec, uint64_t stream, uint32_t n, struct out *o)
{
    struct util_fault_spec c;
    CHECK_RC(util_fault_parse(spec, &c, NULL, 0), SHOAL_OK);
    struct faults f;
    fault_init(&f, &c, stream);
    memset(o, 0, sizeof *o);
    o->delay = c.delay_ns;
    unsigned char pkt[PKT];
    for (uint32_t id = 0; id < n; id++) {
        uint64_t t = 1000 * (uint64_t)(id + 1);
        o->now = t;
        fault_flush(&f, t, record, o);
        make_pkt(pkt, id);
        o->sent_at[id] = t;
        fault_pass(&f, t, id % 4, pkt, PKT, record, o);
        CHECK(fault_next_deadline(&f) >= t, "a deadline in the past");
    }
    for (uint64_t t; (t = fault_next_deadline(&f)) != UINT64_MAX;) {
        o->now = t;
        fault_flush(&f, t, record, o);
    }
    struct fault_stats s = f.stats;
    fault_fini(&f);
    return s;
}

static void check_determinism(void)
{
    static struct out a, b, c;
    const char *spec = "loss=0.05,dup=0.02,reorder=0.05,corrupt=0.01,delay=3us,seed=7";
    run(spec, 4, 20000, &a);
    run(spec, 4, 20000, &b);
    CHECK(a.hash == b.hash && a.count == b.count, "same seed and stream, different output");
    run(spec, 5, 20000, &c);
    CHECK(a.hash != c.hash, "another stream gave the same output");
    run("loss=0.05,dup=0.02,reorder=0.05,corrupt=0.01,delay=3us,seed=8", 4, 20000, &c);
    CHECK(a.hash != c.hash, "another seed gave the same output");
}

/* |observed - expected| within 5 standard deviations of a binomial. */
static void check_rate(const char *what, uint64_t observed, uint64_t trials, double p)
{
    double mean = p * (double)trials, sd = sqrt((double)trials * p * (1 - p));
    CHECK(fabs((double)observed - mean) <= 5 * sd + 1, "%s: %llu of %llu, expected %.0f +- %.0f", what,
          (unsigned long long)observed, (unsigned long long)trials, mean, 5 * sd);
    printf("  %-10s %6llu of %llu (expected %.0f)\n", what, (unsigned long long)observed,
           (unsigned long long)trials, mean);
}

static void check_rates(void)
{
    static struct out o;
    const uint32_t n = 100000;
    struct fault_stats s = run("loss=0.1,dup=0.05,reorder=0.03,corrupt=0.02,seed=3", 1, n, &o);
    CHECK(s.packets == n && s.nomem == 0, "%llu packets", (unsigned long long)s.packets);
    check_rate("loss", s.dropped, n, 0.1);
    check_rate("corrupt", s.corrupted, n - s.dropped, 0.02);
    check_rate("dup", s.duplicated, n - s.dropped, 0.05);
    /* a hold needs no packet already held for the address: slightly below p */
    check_rate("reorder", s.reordered, n - s.dropped, 0.03 * (1 - 0.03));
    CHECK(o.count + o.corrupted == n - s.dropped + s.duplicated, "emitted %llu + %llu corrupted, expected %llu",
          (unsigned long long)o.count, (unsigned long long)o.corrupted,
          (unsigned long long)(n - s.dropped + s.duplicated));
    /* a corrupted packet may also be duplicated */
    CHECK(o.corrupted >= s.corrupted && o.corrupted <= 2 * s.corrupted, "%llu corrupted packets out for %llu",
          (unsigned long long)o.corrupted, (unsigned long long)s.corrupted);
    CHECK(o.swaps > 0 && o.swaps <= s.reordered + s.duplicated, "%llu swaps for %llu holds",
          (unsigned long long)o.swaps, (unsigned long long)s.reordered);
}

/* The byte a corrupt fault changed is in the 64-byte header. */
static void check_header_hit(void *ctx, uint32_t addr, const void *pkt, size_t len)
{
    const unsigned char *orig = ctx, *b = pkt;
    int changed = 0;
    (void)addr;
    for (size_t i = 0; i < len; i++)
        if (b[i] != orig[i]) {
            CHECK(i < 64, "byte %zu of a %zu-byte packet corrupted", i, len);
            changed++;
        }
    CHECK(changed == 1, "%d bytes changed", changed);
}

/* A fixed delay delays every packet by exactly that and keeps the order;
 * a held packet follows the next packet for its address, or goes out
 * FAULT_HOLD_NS later. */
static void check_shapes(void)
{
    static struct out o;
    struct fault_stats s = run("delay=250us", 9, 5000, &o);
    CHECK(o.count == 5000 && o.late == 0 && o.swaps == 0 && s.delayed == 5000, "delay: %llu late, %llu swaps",
          (unsigned long long)o.late, (unsigned long long)o.swaps);
    s = run("", 9, 5000, &o);
    CHECK(o.count == 5000 && o.late == 0 && o.swaps == 0 && s.delayed == 0, "no faults changed something");

    struct util_fault_spec c;
    CHECK_RC(util_fault_parse("reorder=1", &c, NULL, 0), SHOAL_OK);
    struct faults f;
    fault_init(&f, &c, 0);
    memset(&o, 0, sizeof o);
    unsigned char pkt[PKT];
    make_pkt(pkt, 1);
    o.sent_at[1] = 10 + FAULT_HOLD_NS; /* expected release time of a lone held packet */
    fault_pass(&f, 10, 2, pkt, PKT, record, &o);
    CHECK(o.count == 0 && fault_next_deadline(&f) == 10 + FAULT_HOLD_NS, "held packet not scheduled");
    o.now = 10 + FAULT_HOLD_NS;
    fault_flush(&f, o.now - 1, record, &o);
    CHECK(o.count == 0, "released early");
    fault_flush(&f, o.now, record, &o);
    CHECK(o.count == 1 && o.late == 0, "lone held packet not released at its deadline");
    /* with reorder=1 every packet is held unless its address has one held:
     * 5, 6 to address 3 go out as 6, 5 */
    make_pkt(pkt, 5);
    fault_pass(&f, 20 + FAULT_HOLD_NS, 3, pkt, PKT, record, &o);
    make_pkt(pkt, 6);
    o.sent_at[6] = o.sent_at[5] = o.now = 30 + FAULT_HOLD_NS;
    fault_pass(&f, o.now, 3, pkt, PKT, record, &o);
    CHECK(o.count == 3 && o.swaps == 1 && o.last_id[3] == 5, "5,6 did not swap");
    fault_fini(&f);

    /* corrupt=1 changes exactly one byte of every packet, in its header */
    CHECK_RC(util_fault_parse("corrupt=1", &c, NULL, 0), SHOAL_OK);
    fault_init(&f, &c, 0);
    memset(&o, 0, sizeof o);
    for (uint32_t id = 0; id < 1000; id++) {
        make_pkt(pkt, id);
        fault_pass(&f, 0, 0, pkt, PKT, record, &o);
    }
    CHECK(o.corrupted == 1000 && f.stats.corrupted == 1000, "corrupt=1: %llu changed",
          (unsigned long long)o.corrupted);
    static unsigned char big[200];
    for (uint32_t id = 0; id < 1000; id++) {
        memset(big, (int)id, sizeof big);
        fault_pass(&f, 0, 0, big, sizeof big, check_header_hit, big);
    }
    fault_fini(&f);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "parse"))
        check_parse();
    else if (!strcmp(what, "determinism"))
        check_determinism();
    else if (!strcmp(what, "rates"))
        check_rates();
    else if (!strcmp(what, "shapes"))
        check_shapes();
    else
        CHECK(0, "usage: test_faults parse|determinism|rates|shapes (got \"%s\")", what);
    printf("net faults %s: ok\n", what);
    return 0;
}
