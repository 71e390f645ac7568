/* Unit tests of the cluster wire format (src/net/wire.c, docs/WIRE.md):
 * the byte layout, encode/decode round trips, CRC-32C, one malformed packet
 * per drop verdict, single-bit corruption of a checksummed header, and the
 * encoder's capacity check.  Every decode reads from a heap buffer of
 * exactly the received size, so the sanitizer build also proves that
 * wire_decode stays inside [buf, buf + n).
 *
 *   test_wire layout|roundtrip|crc32c|siphash|verdicts|checksum|bitflip|encode_cap|verdict_names */
#include "net/wire.h"
#include "shoal.h"
#include "../common/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define H WIRE_HEADER_BYTES

/* The receiver every test decodes as.  Ranks and ids span several bytes so
 * that a field read with the wrong width or byte order cannot pass. */
#define SELF 0x9f9e9d9cu
static struct wire_expect expect_base = { /* its NH key: main */
    .job = 0x8f8e8d8c8b8a8988ull, .key = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, 0, NULL}, .self = SELF,
    .nranks = 0xfffffff0u};

/* A header whose byte at offset i is 0x80 + i for every byte in 8..59 but
 * the tag's 16..23 (only magic, version, type and flags are fixed by the
 * protocol); len is set by the caller. */
static struct wire_header base_header(uint8_t type, uint16_t len)
{
    return (struct wire_header){.type = type,
                                .flags = WIRE_F_ACK_NOW,
                                .job = expect_base.job,
                                .src = 0x9b9a9998u,
                                .dst = type == WIRE_BCAST ? WIRE_BROADCAST : SELF,
                                .src_inc = 0xa3a2a1a0u,
                                .dst_inc = 0xa7a6a5a4u,
                                .seq = 0xabaaa9a8u,
                                .ack = 0xafaeadacu,
                                .sack = 0xb7b6b5b4b3b2b1b0ull,
                                .credits = 0xb9b8u,
                                .len = len};
}

static unsigned char payload[WIRE_MAX_PAYLOAD];
static unsigned char pkt[H + 65535 + 16];

static void fill_payload(void)
{
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)(i * 7 + 3 + (i >> 8));
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Rewrites the checksum of the header in p: CRC-32C of bytes 0-59, or 0. */
static void set_csum(unsigned char *p, int on)
{
    uint32_t c = on ? wire_crc32c(p, 60) : 0;
    for (int i = 0; i < 4; i++)
        p[60 + i] = (unsigned char)(c >> 8 * i);
}

/* Decodes the first n bytes of p from a heap copy of exactly n bytes. */
static enum wire_verdict decode_n(const unsigned char *p, size_t n, int need_checksum, struct wire_header *out)
{
    unsigned char *copy = malloc(n ? n : 1);
    CHECK(copy, "out of memory");
    memcpy(copy, p, n);
    struct wire_expect e = expect_base;
    e.need_checksum = need_checksum;
    enum wire_verdict v = wire_decode(copy, n, &e, out);
    free(copy);
    return v;
}

static size_t encode_pkt(const struct wire_header *h, int with_checksum)
{
    size_t n = wire_encode(pkt, sizeof pkt, h, payload, &expect_base.key, with_checksum);
    CHECK(n == H + h->len, "wire_encode returned %zu for a %u-byte payload", n, (unsigned)h->len);
    return n;
}

static int same_header(const struct wire_header *a, const struct wire_header *b)
{
    return a->magic == b->magic && a->version == b->version && a->type == b->type && a->flags == b->flags &&
           a->job == b->job && a->mac == b->mac && a->src == b->src && a->dst == b->dst &&
           a->src_inc == b->src_inc && a->dst_inc == b->dst_inc && a->seq == b->seq && a->ack == b->ack &&
           a->sack == b->sack && a->credits == b->credits && a->len == b->len && a->csum == b->csum;
}

/* The packet in pkt (n bytes, header fields as they are) gets `want` under
 * every checksum policy: checksummed and required (raw frames), checksummed
 * and optional, unchecksummed and optional (UDP). */
static void expect_verdict(size_t n, enum wire_verdict want, const char *what)
{
    struct wire_header out;
    static const struct {
        int csum, need;
    } policy[] = {{1, 1}, {1, 0}, {0, 0}};
    for (size_t i = 0; i < sizeof policy / sizeof policy[0]; i++) {
        set_csum(pkt, policy[i].csum);
        enum wire_verdict v = decode_n(pkt, n, policy[i].need, &out);
        CHECK(v == want, "%s (checksum %s, %s): verdict %s, expected %s", what, policy[i].csum ? "set" : "0",
              policy[i].need ? "required" : "optional", wire_verdict_name(v), wire_verdict_name(want));
    }
}

/* Encodes h (no checksum; expect_verdict sets it) and checks its verdict. */
static void expect_header(const struct wire_header *h, enum wire_verdict want, const char *what)
{
    expect_verdict(encode_pkt(h, 0), want, what);
}

/* The documented layout, byte by byte (docs/WIRE.md, "The header"). */
static void test_layout(void)
{
    struct wire_header h = base_header(WIRE_DATA, 0xbbba); /* len bytes 0xba 0xbb: offsets 58, 59 */
    size_t n = encode_pkt(&h, 1);
    CHECK(n == H + 0xbbba, "length %zu", n);
    static const unsigned char head[8] = {'S', 'H', 'O', 'L', WIRE_VERSION, WIRE_DATA, WIRE_F_ACK_NOW, 0};
    for (int i = 0; i < 8; i++)
        CHECK(pkt[i] == head[i], "byte %d is 0x%02x, expected 0x%02x", i, pkt[i], head[i]);
    for (int i = 8; i < 60; i++)
        CHECK((i >= 16 && i < 24) || pkt[i] == 0x80 + i, "byte %d is 0x%02x, expected 0x%02x", i, pkt[i], 0x80 + i);
    uint64_t tag = wire_mac(pkt, h.len, &expect_base.key);
    for (int i = 0; i < 8; i++)
        CHECK(pkt[16 + i] == (unsigned char)(tag >> 8 * i), "tag byte %d is 0x%02x, expected 0x%02x", i,
              pkt[16 + i], (unsigned char)(tag >> 8 * i));
    CHECK(le32(pkt + 60) == wire_crc32c(pkt, 60), "checksum bytes 0x%08x, CRC-32C of bytes 0-59 0x%08x",
          le32(pkt + 60), wire_crc32c(pkt, 60));
    CHECK(memcmp(pkt + H, payload, h.len) == 0, "payload not copied after the header");

    /* The caller's magic, version and csum fields are not what is sent. */
    h.magic = 0x12345678u;
    h.version = 99;
    h.csum = 0xdeadbeefu;
    unsigned char again[H];
    h.len = 0;
    CHECK(wire_encode(again, sizeof again, &h, NULL, &expect_base.key, 0) == H, "encode of a bare header");
    CHECK(memcmp(again, "SHOL", 4) == 0 && again[4] == WIRE_VERSION, "encode sent the caller's magic/version");
    CHECK(le32(again + 60) == 0, "encode without checksum wrote 0x%08x at 60", le32(again + 60));
}

static void roundtrip_one(uint8_t type, uint16_t len, int with_checksum)
{
    struct wire_header h = base_header(type, len), out;
    if (type == WIRE_DATA && len == 1)
        h.flags = 0; /* both values of the one defined flag */
    size_t n = encode_pkt(&h, with_checksum);
    uint32_t crc = wire_crc32c(pkt, 60);
    for (int need = 0; need <= with_checksum; need++) {
        memset(&out, 0x5a, sizeof out);
        enum wire_verdict v = decode_n(pkt, n, need, &out);
        CHECK(v == WIRE_OK, "type %u len %u checksum %d need %d: %s", type, len, with_checksum, need,
              wire_verdict_name(v));
        struct wire_header want = h;
        want.magic = WIRE_MAGIC;
        want.version = WIRE_VERSION;
        want.csum = with_checksum ? crc : 0;
        want.mac = wire_mac(pkt, len, &expect_base.key);
        CHECK(same_header(&out, &want), "type %u len %u checksum %d: decoded header differs from the encoded one",
              type, len, with_checksum);
    }
    CHECK(memcmp(pkt + H, payload, len) == 0, "payload differs");
    if (!with_checksum) {
        CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_CHECKSUM, "unchecksummed packet accepted on a raw frame");
    }
}

static void test_roundtrip(void)
{
    static const uint16_t lens[] = {0, 1, WIRE_MAX_PAYLOAD};
    for (int c = 0; c <= 1; c++) {
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            roundtrip_one(WIRE_DATA, lens[i], c);
            roundtrip_one(WIRE_BCAST, lens[i], c);
        }
        roundtrip_one(WIRE_ACK, 0, c);
        roundtrip_one(WIRE_KEEPALIVE, 0, c);
    }
    /* Extremes of every free field. */
    struct wire_header h = base_header(WIRE_DATA, 0), out;
    h.src = 0;
    h.src_inc = 0xffffffffu;
    h.dst_inc = 0;
    h.seq = 0xffffffffu;
    h.ack = 0;
    h.sack = ~0ull;
    h.credits = 0xffff;
    size_t n = encode_pkt(&h, 1);
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_OK, "extreme values refused");
    CHECK(out.src == 0 && out.src_inc == 0xffffffffu && out.dst_inc == 0 && out.seq == 0xffffffffu && out.ack == 0 &&
              out.sack == ~0ull && out.credits == 0xffff,
          "extreme values changed");
}

static void test_crc32c(void)
{
    CHECK(wire_crc32c("123456789", 9) == 0xe3069283u, "check value 0x%08x", wire_crc32c("123456789", 9));
    CHECK(wire_crc32c("", 0) == 0, "CRC of nothing 0x%08x", wire_crc32c("", 0));
    /* RFC 3720 (iSCSI) B.4 test vectors. */
    unsigned char b[32];
    memset(b, 0, sizeof b);
    CHECK(wire_crc32c(b, 32) == 0x8a9136aau, "32 zero bytes: 0x%08x", wire_crc32c(b, 32));
    memset(b, 0xff, sizeof b);
    CHECK(wire_crc32c(b, 32) == 0x62a8ab43u, "32 0xff bytes: 0x%08x", wire_crc32c(b, 32));
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    CHECK(wire_crc32c(b, 32) == 0x46dd794eu, "bytes 0..31: 0x%08x", wire_crc32c(b, 32));
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)(31 - i);
    CHECK(wire_crc32c(b, 32) == 0x113fdb5cu, "bytes 31..0: 0x%08x", wire_crc32c(b, 32));
}

/* SipHash-2-4 straight from the paper's description, byte by byte, and
 * NH from UMAC's: wire_mac must equal SipHash of (NH sums, length) of the
 * header with tag and checksum zero, then the payload. */
static uint64_t ref_rotl(uint64_t x, int b) { return x << b | x >> (64 - b); }
static void ref_round(uint64_t v[4])
{
    v[0] += v[1]; v[1] = ref_rotl(v[1], 13); v[1] ^= v[0]; v[0] = ref_rotl(v[0], 32);
    v[2] += v[3]; v[3] = ref_rotl(v[3], 16); v[3] ^= v[2];
    v[0] += v[3]; v[3] = ref_rotl(v[3], 21); v[3] ^= v[0];
    v[2] += v[1]; v[1] = ref_rotl(v[1], 17); v[1] ^= v[2]; v[2] = ref_rotl(v[2], 32);
}
static uint64_t ref_siphash(uint64_t k0, uint64_t k1, const unsigned char *m, size_t n)
{
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
                     k1 ^ 0x7465646279746573ull};
    size_t blocks = n / 8 + 1;
    for (size_t b = 0; b < blocks; b++) {
        uint64_t w = 0;
        for (size_t i = 0; i < 8; i++) {
            size_t at = 8 * b + i;
            uint64_t byte = at < n ? m[at] : i == 7 && b == blocks - 1 ? (uint64_t)(n & 0xff) : 0;
            w |= byte << 8 * i;
        }
        v[3] ^= w;
        ref_round(v);
        ref_round(v);
        v[0] ^= w;
    }
    v[2] ^= 0xff;
    for (int i = 0; i < 4; i++)
        ref_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* NH with the Toeplitz-shifted second key, word by word from the UMAC
 * paper's definition. */
static void ref_nh(const unsigned char *m, size_t n, const uint32_t *k, uint64_t out[2])
{
    out[0] = out[1] = 0;
    for (size_t i = 0; i < n; i += 8) {
        uint32_t w[2] = {0, 0};
        for (size_t j = 0; j < 8 && i + j < n; j++)
            w[j / 4] |= (uint32_t)m[i + j] << 8 * (j % 4);
        for (int t = 0; t < 2; t++) {
            const uint32_t *kk = k + i / 4 + 4 * (size_t)t;
            out[t] += (uint64_t)(uint32_t)(w[0] + kk[0]) * (uint64_t)(uint32_t)(w[1] + kk[1]);
        }
    }
}

static void test_siphash(void)
{
    unsigned char m[15];
    for (int i = 0; i < 15; i++)
        m[i] = (unsigned char)i;
    /* the paper's Appendix A example: key 00..0f, message 00..0e */
    CHECK(ref_siphash(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, m, 15) == 0xa129ca6149be45e5ull,
          "reference SipHash-2-4 is wrong");
    /* the NH key: SipHash of (2^63 | i) for word pairs i */
    const struct wire_key *k = &expect_base.key;
    for (uint32_t i = 0; i < WIRE_NH_WORDS; i += 1001) {
        uint32_t even = i & ~1u;
        unsigned char in[8];
        for (int b = 0; b < 8; b++)
            in[b] = (unsigned char)(((uint64_t)1 << 63 | even) >> 8 * b);
        uint64_t w = ref_siphash(k->k0, k->k1, in, 8);
        CHECK(k->nh[i] == (uint32_t)(i & 1 ? w >> 32 : w), "NH key word %u", i);
    }
    static unsigned char buf[H + WIRE_MAX_PAYLOAD], flat[H + WIRE_MAX_PAYLOAD];
    /* around the vector loops' steps (32, 64, 128 bytes) and AVX-512's 2 KiB threshold */
    static const size_t lens[] = {0,    1,    7,    8,    9,    31,   32,   33,   63,   64,   65,   200,  1408,
                                  2047, 2048, 2087, 2111, 8192, 8255, WIRE_MAX_PAYLOAD - 1, WIRE_MAX_PAYLOAD};
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 13 + 1 + (i >> 9));
    memcpy(flat, buf, sizeof buf);
    memset(flat + 16, 0, 8);
    memset(flat + 60, 0, 4);
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        for (int only = 0; only <= 1; only++) {
            size_t n = H + (only ? 0 : lens[l]);
            uint64_t sums[2];
            ref_nh(flat, n, k->nh, sums);
            unsigned char in[24];
            for (int b = 0; b < 8; b++) {
                in[b] = (unsigned char)(sums[0] >> 8 * b);
                in[8 + b] = (unsigned char)(sums[1] >> 8 * b);
                in[16 + b] = (unsigned char)((uint64_t)n >> 8 * b);
            }
            struct wire_key mode = *k;
            mode.header_only = only;
            CHECK(wire_mac(buf, lens[l], &mode) == ref_siphash(k->k0, k->k1, in, 24),
                  "wire_mac over %zu payload bytes, header only %d", lens[l], only);
        }
    }
#if defined(__x86_64__)
    /* a vector header loop that disagreed with the scalar one would have
     * switched itself off, and the tags above would not show it */
    /* AVX-512 only on AMD from family 26 (wire.c says why) */
    unsigned eax = 0, ebx, ecx, edx;
    __get_cpuid(1, &eax, &ebx, &ecx, &edx);
    unsigned family = (eax >> 8) & 0xfu;
    family = family == 0xfu ? family + ((eax >> 20) & 0xffu) : family;
    int wide = __builtin_cpu_supports("avx512f") && __builtin_cpu_is("amd") && family >= 26;
    int widest = !__builtin_cpu_supports("avx2") ? 0 : wide ? 512 : 256;
    CHECK(wire_nh_vector() == widest, "NH on %d-bit vectors where the processor has %d", wire_nh_vector(), widest);
#endif
    /* two payloads of one length that differ in one bit */
    uint64_t a = wire_mac(buf, 1408, k);
    buf[H + 700] ^= 4;
    CHECK(wire_mac(buf, 1408, k) != a, "a one-bit payload change kept the tag");
}

static void test_verdicts(void)
{
    struct wire_header h = base_header(WIRE_DATA, 5);
    size_t n;
    expect_header(&h, WIRE_OK, "a good DATA packet");

    n = encode_pkt(&h, 0);
    expect_verdict(H - 1, WIRE_DROP_SHORT, "63 bytes");
    expect_verdict(0, WIRE_DROP_SHORT, "0 bytes");

    static const unsigned char bad_magic[][4] = {{'S', 'H', 'O', 'M'}, {0, 0, 0, 0}, {'L', 'O', 'H', 'S'}};
    for (size_t i = 0; i < sizeof bad_magic / sizeof bad_magic[0]; i++) {
        encode_pkt(&h, 0);
        memcpy(pkt, bad_magic[i], 4);
        expect_verdict(n, WIRE_DROP_MAGIC, "wrong magic");
    }
    static const unsigned char bad_version[] = {0, WIRE_VERSION + 1, 255};
    for (size_t i = 0; i < sizeof bad_version; i++) {
        encode_pkt(&h, 0);
        pkt[4] = bad_version[i];
        expect_verdict(n, WIRE_DROP_VERSION, "wrong version");
    }

    struct wire_header m = h;
    m.job ^= 1ull << 63;
    expect_header(&m, WIRE_DROP_JOB, "another job");
    m = h;
    m.job = 0;
    expect_header(&m, WIRE_DROP_JOB, "job 0");
    /* the tag: another secret, or any byte it covers changed after tagging */
    static const uint64_t guesses[][3] = {{0x0706050403020100ull, 0x0f0e0d0c0b0a0909ull, 0},
                                          {0x0706050403020101ull, 0x0f0e0d0c0b0a0908ull, 0},
                                          {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull, 1}};
    for (size_t i = 0; i < sizeof guesses / sizeof guesses[0]; i++) {
        struct wire_key guess;
        CHECK_RC(wire_key_init(&guess, guesses[i][0], guesses[i][1], (int)guesses[i][2]), SHOAL_OK);
        CHECK(wire_encode(pkt, sizeof pkt, &h, payload, &guess, 0) == n, "encode");
        wire_key_fini(&guess);
        expect_verdict(n, WIRE_DROP_AUTH, "tagged under another secret, or the header alone");
    }
    static const size_t covered[] = {5, 6, 24, 28, 32, 36, 40, 44, 48, 56, H, H + 4};
    for (size_t i = 0; i < sizeof covered / sizeof covered[0]; i++) {
        encode_pkt(&h, 0);
        pkt[covered[i]] ^= 0x01;
        expect_verdict(n, WIRE_DROP_AUTH, "a covered byte changed after tagging");
    }
    encode_pkt(&h, 0);
    pkt[16] ^= 0x80;
    expect_verdict(n, WIRE_DROP_AUTH, "the tag changed");

    m = h;
    m.src = expect_base.nranks;
    expect_header(&m, WIRE_DROP_RANK, "src == nranks");
    m.src = 0xffffffffu;
    expect_header(&m, WIRE_DROP_RANK, "src 0xffffffff");
    m.src = expect_base.nranks - 1;
    expect_header(&m, WIRE_OK, "src == nranks - 1");
    m.src = SELF;
    expect_header(&m, WIRE_DROP_RANK, "src == self");
    m = h;
    m.dst = SELF + 1;
    expect_header(&m, WIRE_DROP_RANK, "dst another rank");
    m.dst = 0;
    expect_header(&m, WIRE_DROP_RANK, "dst rank 0");
    static const uint8_t unicast[] = {WIRE_DATA, WIRE_ACK, WIRE_KEEPALIVE};
    for (size_t i = 0; i < sizeof unicast; i++) {
        m = base_header(unicast[i], 0);
        m.dst = WIRE_BROADCAST;
        expect_header(&m, WIRE_DROP_RANK, "broadcast dst on a non-BCAST type");
    }
    m = base_header(WIRE_BCAST, 3);
    expect_header(&m, WIRE_OK, "BCAST to the broadcast dst");
    m.dst = SELF;
    expect_header(&m, WIRE_DROP_RANK, "BCAST addressed to one rank");
    m.dst = WIRE_BROADCAST;
    m.src = SELF;
    expect_header(&m, WIRE_DROP_RANK, "own BCAST looped back");

    static const uint8_t bad_type[] = {0, WIRE_TYPES, 0x80, 255};
    for (size_t i = 0; i < sizeof bad_type; i++) {
        m = base_header(bad_type[i], 0);
        expect_header(&m, WIRE_DROP_TYPE, "unknown type");
    }
    for (int bit = 0; bit < 16; bit++) {
        m = h;
        m.flags = (uint16_t)(1u << bit);
        expect_header(&m, (m.flags & ~WIRE_FLAGS) ? WIRE_DROP_TYPE : WIRE_OK, "one flag bit");
        m.flags |= WIRE_F_ACK_NOW;
        expect_header(&m, (m.flags & ~WIRE_FLAGS) ? WIRE_DROP_TYPE : WIRE_OK, "ACK_NOW and one flag bit");
    }
    m = h;
    m.flags = 0;
    expect_header(&m, WIRE_OK, "no flags");
    /* DATA may carry either channel's acks; the other types carry their own */
    static const uint8_t types[] = {WIRE_DATA, WIRE_ACK, WIRE_KEEPALIVE, WIRE_BCAST};
    for (size_t i = 0; i < sizeof types; i++)
        for (unsigned f = 0; f < 4; f++) {
            m = base_header(types[i], 0);
            m.flags = (uint16_t)((f & 1 ? WIRE_F_REPLY : 0) | (f & 2 ? WIRE_F_ACK_REPLY : 0));
            int agree = !(f & 1) == !(f & 2);
            expect_header(&m, types[i] == WIRE_DATA || agree ? WIRE_OK : WIRE_DROP_TYPE, "channel and ack-channel bits");
        }
    m = h;
    m.src_inc = 0;
    expect_header(&m, WIRE_DROP_TYPE, "src_inc 0");
    m = h;
    m.dst_inc = 0;
    expect_header(&m, WIRE_OK, "dst_inc 0 (first contact)");

    n = encode_pkt(&h, 0);
    expect_verdict(n - 1, WIRE_DROP_LENGTH, "len one more than the bytes received");
    expect_verdict(H, WIRE_DROP_LENGTH, "len 5 with no payload received");
    expect_verdict(n + 1, WIRE_DROP_LENGTH, "len one less than the bytes received");
    static const uint16_t too_big[] = {WIRE_MAX_PAYLOAD + 1, 65535};
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
        m = base_header(WIRE_DATA, 0);
        encode_pkt(&m, 0);
        pkt[58] = (unsigned char)too_big[i];
        pkt[59] = (unsigned char)(too_big[i] >> 8);
        memset(pkt + H, 0xab, too_big[i]);
        expect_verdict(H + too_big[i], WIRE_DROP_LENGTH, "len above WIRE_MAX_PAYLOAD, all bytes received");
    }
    static const uint8_t bare[] = {WIRE_ACK, WIRE_KEEPALIVE};
    for (size_t i = 0; i < sizeof bare; i++) {
        m = base_header(bare[i], 0);
        expect_header(&m, WIRE_OK, "bare ACK/KEEPALIVE");
        m.len = 1;
        expect_header(&m, WIRE_DROP_LENGTH, "payload on ACK/KEEPALIVE");
    }
    m = base_header(WIRE_DATA, 0);
    expect_header(&m, WIRE_OK, "DATA with an empty payload");
}

static void test_checksum(void)
{
    struct wire_header h = base_header(WIRE_DATA, 2), out;
    size_t n = encode_pkt(&h, 1);
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_OK && out.csum == wire_crc32c(pkt, 60), "checksummed packet");

    /* Corrupted after the checksum was computed: the checksum verdict, not
     * one from the corrupted field (it cannot be trusted), under both rules. */
    pkt[44] ^= 0x10; /* ack */
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_CHECKSUM, "corrupt ack, checksum required");
    CHECK(decode_n(pkt, n, 0, &out) == WIRE_DROP_CHECKSUM, "corrupt ack, checksum nonzero and optional");
    encode_pkt(&h, 1);
    pkt[8] ^= 1; /* job */
    CHECK(decode_n(pkt, n, 0, &out) == WIRE_DROP_CHECKSUM, "corrupt job reported as %s",
          wire_verdict_name(decode_n(pkt, n, 0, &out)));
    encode_pkt(&h, 1);
    pkt[58] ^= 1; /* len: 3, with 2 payload bytes */
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_CHECKSUM, "corrupt len reported as %s",
          wire_verdict_name(decode_n(pkt, n, 1, &out)));

    /* A wrong checksum value. */
    encode_pkt(&h, 1);
    pkt[63] ^= 0x80;
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_CHECKSUM, "wrong checksum, required");
    CHECK(decode_n(pkt, n, 0, &out) == WIRE_DROP_CHECKSUM, "wrong nonzero checksum, optional");

    /* 0 = not computed: fine on UDP, refused on raw frames. */
    encode_pkt(&h, 0);
    CHECK(le32(pkt + 60) == 0 && wire_crc32c(pkt, 60) != 0, "test header's CRC is 0");
    CHECK(decode_n(pkt, n, 0, &out) == WIRE_OK && out.csum == 0, "checksum 0 refused on UDP");
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_CHECKSUM, "checksum 0 accepted on a raw frame");

    /* Payload bytes are not the checksum's (the carrier's FCS / UDP
     * checksum cover them), but the tag's. */
    encode_pkt(&h, 1);
    pkt[H] ^= 0xff;
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_AUTH, "payload change: %s, expected the tag to refuse it",
          wire_verdict_name(decode_n(pkt, n, 1, &out)));

    /* Magic and version are checked first: another protocol, or another
     * version of this one, need not checksum the way this one does. */
    encode_pkt(&h, 1);
    pkt[0] ^= 1;
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_MAGIC, "magic with a stale checksum");
    encode_pkt(&h, 1);
    pkt[4] = WIRE_VERSION + 1;
    CHECK(decode_n(pkt, n, 1, &out) == WIRE_DROP_VERSION, "version with a stale checksum");
}

/* Every single-bit change of a 64-byte header: always dropped, by the
 * checksum where there is one, else by the first check that reads the
 * byte (magic, version, job, length) or by the tag. */
static void test_bitflip(void)
{
    struct wire_header h = base_header(WIRE_DATA, 0), out;
    unsigned char orig[H], flipped[H];

    CHECK(wire_encode(orig, sizeof orig, &h, NULL, &expect_base.key, 1) == H, "encode");
    uint32_t csum = le32(orig + 60);
    /* With a one-bit checksum, flipping that bit would legally give
     * "checksum not computed"; this header's has more bits. */
    CHECK(__builtin_popcount(csum) > 1, "checksum 0x%08x", csum);
    for (int need = 0; need <= 1; need++) {
        for (int bit = 0; bit < 8 * (int)H; bit++) {
            memcpy(flipped, orig, H);
            flipped[bit / 8] ^= (unsigned char)(1u << bit % 8);
            enum wire_verdict v = decode_n(flipped, H, need, &out);
            int byte = bit / 8;
            enum wire_verdict want = byte < 4 ? WIRE_DROP_MAGIC : byte == 4 ? WIRE_DROP_VERSION : WIRE_DROP_CHECKSUM;
            CHECK(v == want, "checksummed header, bit %d flipped, checksum %s: %s, expected %s", bit,
                  need ? "required" : "optional", wire_verdict_name(v), wire_verdict_name(want));
        }
    }

    CHECK(wire_encode(orig, sizeof orig, &h, NULL, &expect_base.key, 0) == H, "encode");
    for (int bit = 0; bit < 8 * (int)H; bit++) {
        memcpy(flipped, orig, H);
        flipped[bit / 8] ^= (unsigned char)(1u << bit % 8);
        enum wire_verdict v = decode_n(flipped, H, 0, &out);
        int byte = bit / 8;
        enum wire_verdict want;
        if (byte < 4)
            want = WIRE_DROP_MAGIC;
        else if (byte == 4)
            want = WIRE_DROP_VERSION;
        else if (byte >= 8 && byte < 16)
            want = WIRE_DROP_JOB;
        else if (byte == 58 || byte == 59)
            want = WIRE_DROP_LENGTH;
        else if (byte >= 60)
            want = WIRE_DROP_CHECKSUM; /* now nonzero and wrong */
        else
            want = WIRE_DROP_AUTH; /* type, flags, the tag, ranks, incarnations, seq, ack, sack, credits */
        CHECK(v == want, "unchecksummed header, bit %d flipped: %s, expected %s", bit, wire_verdict_name(v),
              wire_verdict_name(want));
    }
}

static void test_encode_cap(void)
{
    static unsigned char buf[H + 300];
    struct wire_header h = base_header(WIRE_DATA, 200);
    memset(buf, 0xee, sizeof buf);
    CHECK(wire_encode(buf, H - 1, &h, payload, &expect_base.key, 1) == 0, "header into 63 bytes");
    CHECK(wire_encode(buf, H + 199, &h, payload, &expect_base.key, 1) == 0, "200-byte payload into 199");
    h.len = 0;
    CHECK(wire_encode(buf, H - 1, &h, NULL, &expect_base.key, 0) == 0, "bare header into 63 bytes");
    CHECK(wire_encode(buf, 0, &h, NULL, &expect_base.key, 0) == 0, "bare header into 0 bytes");
    for (size_t i = 0; i < sizeof buf; i++)
        CHECK(buf[i] == 0xee, "a refused encode wrote byte %zu", i);

    h.len = 200;
    CHECK(wire_encode(buf, H + 200, &h, payload, &expect_base.key, 1) == H + 200, "exact fit");
    for (size_t i = H + 200; i < sizeof buf; i++)
        CHECK(buf[i] == 0xee, "encode wrote byte %zu, beyond the packet", i);

    /* len above WIRE_MAX_PAYLOAD, even with room. */
    static unsigned char big[H + 65535];
    static unsigned char big_payload[65535];
    h.len = WIRE_MAX_PAYLOAD + 1;
    CHECK(wire_encode(big, sizeof big, &h, big_payload, &expect_base.key, 1) == 0, "payload above WIRE_MAX_PAYLOAD");
    h.len = WIRE_MAX_PAYLOAD;
    CHECK(wire_encode(big, sizeof big, &h, big_payload, &expect_base.key, 1) == H + WIRE_MAX_PAYLOAD, "WIRE_MAX_PAYLOAD");
}

static void test_verdict_names(void)
{
    for (int v = 0; v < WIRE_VERDICTS; v++) {
        const char *a = wire_verdict_name((enum wire_verdict)v);
        CHECK(a && *a, "verdict %d has no name", v);
        CHECK(strcmp(a, "unknown") != 0, "verdict %d named \"unknown\"", v);
        for (int w = 0; w < v; w++)
            CHECK(strcmp(a, wire_verdict_name((enum wire_verdict)w)) != 0, "verdicts %d and %d both named \"%s\"",
                  w, v, a);
    }
    CHECK(strcmp(wire_verdict_name(WIRE_VERDICTS), "unknown") == 0, "out-of-range verdict");
    CHECK(strcmp(wire_verdict_name((enum wire_verdict)-1), "unknown") == 0, "negative verdict");
}

int main(int argc, char **argv)
{
    static const struct test_case tests[] = {{"layout", test_layout},         {"roundtrip", test_roundtrip},   {"crc32c", test_crc32c},
                 {"verdicts", test_verdicts},     {"checksum", test_checksum},     {"bitflip", test_bitflip},
                 {"encode_cap", test_encode_cap}, {"siphash", test_siphash}, {"verdict_names", test_verdict_names}};
    CHECK(argc == 2, "usage: %s layout|roundtrip|crc32c|siphash|verdicts|checksum|bitflip|encode_cap|verdict_names",
          argv[0]);
    CHECK_RC(wire_key_init(&expect_base.key, expect_base.key.k0, expect_base.key.k1, 0), SHOAL_OK);
    fill_payload();
    TEST_RUN_CASE(tests, argv[1]);
    printf("wire.%s: ok\n", argv[1]);
    return 0;
}
