/* The cluster wire format: encoding, and the checks every received packet
 * passes before anything else looks at it (docs/WIRE.md). */
#include "net/wire.h"
#include "shoal.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#include <cpuid.h>
#endif

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78).  A byte-wise
 * table took 107 ns per 60-byte header here, and every raw frame is
 * checksummed when sent and when received: about a tenth of a loopback
 * half round trip.  SSE4.2's crc32 instruction computes the same CRC 8
 * bytes at a time (12 ns), so it is used where the processor has it; the
 * table (built when the library loads) elsewhere. */
static uint32_t crc_table[256];

static uint32_t crc32c_table(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint32_t c = 0xffffffffu;
    while (n--)
        c = crc_table[(c ^ *p++) & 0xff] ^ c >> 8;
    return c ^ 0xffffffffu;
}

#if defined(__x86_64__)
static int crc_sse42;   /* the processor has SSE4.2 */
static int nh_use_avx2;   /* and AVX2 */
static int nh_use_avx512; /* and AVX-512 (payloads of NH_AVX512_FROM bytes and more) */

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint64_t c = 0xffffffffu;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xffffffffu;
}
#endif

static void nh_check_vector(void);

#if defined(__x86_64__)
/* Where 512-bit multiplies run at full width without lowering the clock:
 * AMD from Zen 5 (family 26), where NH on AVX-512 was measured.  Zen 4
 * splits them in two, and Intel's Skylake to Cascade Lake lower the core's
 * clock for them, which would slow the application around the library. */
static int nh_avx512_full_width(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    unsigned family = (eax >> 8) & 0xfu;
    return (family == 0xfu ? family + ((eax >> 20) & 0xffu) : family) >= 26u;
}
#endif

__attribute__((constructor)) static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? c >> 1 ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    /* the two must agree; checking it here runs the table in every test */
    crc_sse42 = __builtin_cpu_supports("sse4.2") && crc32c_sse42("123456789", 9) == crc32c_table("123456789", 9);
    nh_use_avx2 = __builtin_cpu_supports("avx2");
    nh_use_avx512 = nh_use_avx2 && __builtin_cpu_supports("avx512f") && nh_avx512_full_width();
#endif
    nh_check_vector();
}

uint32_t wire_crc32c(const void *buf, size_t n)
{
#if defined(__x86_64__)
    if (crc_sse42)
        return crc32c_sse42(buf, n);
#endif
    return crc32c_table(buf, n);
}

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const unsigned char *p)
{
    return get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const unsigned char *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* ---- SipHash-2-4 (Aumasson & Bernstein): a keyed PRF, the tag ---------- */

static inline uint64_t rotl(uint64_t x, unsigned b)
{
    return x << b | x >> (64 - b);
}

#define SIP_ROUND(v0, v1, v2, v3)                                                                  \
    do {                                                                                           \
        v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);                                  \
        v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;                                                     \
        v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;                                                     \
        v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);                                  \
    } while (0)

struct sip {
    uint64_t v0, v1, v2, v3;
};

static inline void sip_init(struct sip *s, const struct wire_key *k)
{
    *s = (struct sip){k->k0 ^ 0x736f6d6570736575ull, k->k1 ^ 0x646f72616e646f6dull,
                      k->k0 ^ 0x6c7967656e657261ull, k->k1 ^ 0x7465646279746573ull};
}

static inline void sip_word(struct sip *s, uint64_t m)
{
    s->v3 ^= m;
    SIP_ROUND(s->v0, s->v1, s->v2, s->v3);
    SIP_ROUND(s->v0, s->v1, s->v2, s->v3);
    s->v0 ^= m;
}

static uint64_t sip_final(struct sip *s)
{
    s->v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIP_ROUND(s->v0, s->v1, s->v2, s->v3);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

/* SipHash-2-4 of one 64-bit word: the NH key's generator (counter mode). */
static uint64_t sip_one(const struct wire_key *k, uint64_t w)
{
    struct sip s;
    sip_init(&s, k);
    sip_word(&s, w);
    sip_word(&s, (uint64_t)8 << 56);
    return sip_final(&s);
}

int wire_key_init(struct wire_key *k, uint64_t k0, uint64_t k1, int header_only)
{
    *k = (struct wire_key){k0, k1, header_only, malloc(WIRE_NH_WORDS * sizeof *k->nh)};
    if (!k->nh)
        return SHOAL_ENOMEM;
    for (uint32_t i = 0; i < WIRE_NH_WORDS; i += 2) {
        uint64_t w = sip_one(k, (uint64_t)1 << 63 | i); /* never a packet's input: those are longer */
        k->nh[i] = (uint32_t)w;
        k->nh[i + 1] = (uint32_t)(w >> 32);
    }
    return SHOAL_OK;
}

void wire_key_fini(struct wire_key *k)
{
    free(k->nh);
    k->nh = NULL;
}

/* NH (Black et al., UMAC): the sum over the message's 8-byte pieces, the
 * last zero-padded, of (m0 + k[2i]) * (m1 + k[2i+1]) mod 2^64, with 32-bit
 * additions; for two different messages of one length the sums agree with
 * probability 2^-32 over the key, and the second sum, over the key shifted
 * by four words (Toeplitz), makes it 2^-64.  The tag hides both sums. */
static inline void nh_piece(const unsigned char *m, const uint32_t *kk, uint64_t *a, uint64_t *b)
{
    uint32_t m0 = get32(m), m1 = get32(m + 4);
    *a += (uint64_t)(uint32_t)(m0 + kk[0]) * (uint32_t)(m1 + kk[1]);
    *b += (uint64_t)(uint32_t)(m0 + kk[4]) * (uint32_t)(m1 + kk[5]);
}

static void nh_plain(const unsigned char *p, size_t n, const uint32_t *k, uint64_t out[2])
{
    uint64_t a = 0, b = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        nh_piece(p + i, k + i / 4, &a, &b);
    if (i < n) { /* the last piece, zero-padded */
        unsigned char last[8] = {0};
        memcpy(last, p + i, n - i);
        nh_piece(last, k + i / 4, &a, &b);
    }
    out[0] = a;
    out[1] = b;
}

#if defined(__x86_64__)
/* 32 bytes a step: m + k in eight 32-bit lanes, then each even lane times
 * the odd one above it (vpmuludq takes the low half of each 64-bit lane)
 * into four 64-bit sums per key. */
__attribute__((target("avx2"))) static inline void nh_step_avx2(__m256i m, const uint32_t *kk, __m256i *a,
                                                                 __m256i *b)
{
    __m256i t = _mm256_add_epi32(m, _mm256_loadu_si256((const __m256i *)(const void *)kk));
    __m256i u = _mm256_add_epi32(m, _mm256_loadu_si256((const __m256i *)(const void *)(kk + 4)));
    *a = _mm256_add_epi64(*a, _mm256_mul_epu32(t, _mm256_srli_epi64(t, 32)));
    *b = _mm256_add_epi64(*b, _mm256_mul_epu32(u, _mm256_srli_epi64(u, 32)));
}

__attribute__((target("avx2"))) static inline uint64_t nh_lanes_avx2(__m256i v)
{
    uint64_t l[4];
    _mm256_storeu_si256((__m256i *)(void *)l, v);
    return l[0] + l[1] + l[2] + l[3];
}

/* The tail as nh_plain does. */
__attribute__((target("avx2"))) static void nh_avx2(const unsigned char *p, size_t n, const uint32_t *k,
                                                     uint64_t out[2])
{
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        nh_step_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(p + i)), k + i / 4, &a, &b);
    uint64_t rest[2];
    nh_plain(p + i, n - i, k + i / 4, rest);
    out[0] = nh_lanes_avx2(a) + rest[0];
    out[1] = nh_lanes_avx2(b) + rest[1];
}

/* 64 bytes a step, as nh_step_avx2 in sixteen lanes; the key shifted by
 * four words is cut from two loads (valignd) rather than loaded across a
 * cache line every step, and two steps run at once.  Measured on Zen 5
 * (wire_mac in a loop, in cache, two runs): 1.25-1.48 x AVX2's rate at
 * 65,000 bytes, 1.33-1.43 x at 8 KiB, equal at 2 KiB and slower below it
 * (1400 bytes: 52 against 47 ns; the reduction), hence NH_AVX512_FROM.  A
 * 1 MiB stream's sender spent an eighth of its time in NH on AVX2. */
#define NH_AVX512_FROM 2048u
__attribute__((target("avx512f"))) static inline void nh_step_avx512(__m512i m, __m512i kt, __m512i ku, __m512i *a,
                                                                     __m512i *b)
{
    __m512i t = _mm512_add_epi32(m, kt);
    __m512i u = _mm512_add_epi32(m, ku);
    *a = _mm512_add_epi64(*a, _mm512_mul_epu32(t, _mm512_srli_epi64(t, 32)));
    *b = _mm512_add_epi64(*b, _mm512_mul_epu32(u, _mm512_srli_epi64(u, 32)));
}

/* Unsigned (gcc's _mm512_reduce_add_epi64 adds as signed: overflow). */
__attribute__((target("avx512f"))) static inline uint64_t nh_lanes_avx512(__m512i v)
{
    uint64_t l[8];
    _mm512_storeu_si512((void *)l, v);
    return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}

/* n >= 64; the last 0-63 bytes as nh_avx2 does. */
__attribute__((target("avx512f"))) static void nh_avx512(const unsigned char *p, size_t n, const uint32_t *k,
                                                         uint64_t out[2])
{
    __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512(), a2 = a, b2 = b;
    __m512i cur = _mm512_loadu_si512((const void *)k);
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m512i nxt = _mm512_loadu_si512((const void *)(k + i / 4 + 16));
        __m512i nn = _mm512_loadu_si512((const void *)(k + i / 4 + 32));
        nh_step_avx512(_mm512_loadu_si512((const void *)(p + i)), cur, _mm512_alignr_epi32(nxt, cur, 4), &a, &b);
        nh_step_avx512(_mm512_loadu_si512((const void *)(p + i + 64)), nxt, _mm512_alignr_epi32(nn, nxt, 4), &a2, &b2);
        cur = nn;
    }
    if (i + 64 <= n) { /* one step left */
        __m512i nxt = _mm512_loadu_si512((const void *)(k + i / 4 + 16));
        nh_step_avx512(_mm512_loadu_si512((const void *)(p + i)), cur, _mm512_alignr_epi32(nxt, cur, 4), &a, &b);
        i += 64;
    }
    uint64_t rest[2];
    nh_avx2(p + i, n - i, k + i / 4, rest);
    a = _mm512_add_epi64(a, a2);
    b = _mm512_add_epi64(b, b2);
    out[0] = nh_lanes_avx512(a) + rest[0];
    out[1] = nh_lanes_avx512(b) + rest[1];
}

/* nh_header's sums in two steps, the tag's and the checksum's words masked
 * to zero (every packet is hashed twice on its way: a tenth of its user-space
 * cost on a udp ping-pong was the scalar header loop). */
__attribute__((target("avx2"))) static void nh_header_avx2(const unsigned char *p, const uint32_t *k,
                                                            uint64_t out[2])
{
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
    __m256i lo = _mm256_setr_epi32(-1, -1, -1, -1, 0, 0, -1, -1), hi = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0);
    nh_step_avx2(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)p), lo), k, &a, &b);
    nh_step_avx2(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)), hi), k + 8, &a, &b);
    out[0] = nh_lanes_avx2(a);
    out[1] = nh_lanes_avx2(b);
}
#endif

int wire_nh_vector(void)
{
#if defined(__x86_64__)
    return nh_use_avx512 ? 512 : nh_use_avx2 ? 256 : 0;
#else
    return 0;
#endif
}

static void nh(const unsigned char *p, size_t n, const uint32_t *k, uint64_t out[2])
{
#if defined(__x86_64__)
    if (nh_use_avx512 && n >= NH_AVX512_FROM) {
        nh_avx512(p, n, k, out);
        return;
    }
    if (nh_use_avx2 && n >= 32) {
        nh_avx2(p, n, k, out);
        return;
    }
#endif
    nh_plain(p, n, k, out);
}

/* NH of the header's 16 words, with the tag (words 4-5) and the checksum
 * (word 15) as zero: the checksum is computed after the tag. */
static void nh_header_plain(const unsigned char *p, const uint32_t *k, uint64_t out[2])
{
    uint64_t a = 0, b = 0;
    for (unsigned w = 0; w < 16; w += 2) {
        uint32_t m0 = w == 4 ? 0 : get32(p + 4 * w), m1 = w == 4 || w == 14 ? 0 : get32(p + 4 * w + 4);
        a += (uint64_t)(uint32_t)(m0 + k[w]) * (uint32_t)(m1 + k[w + 1]);
        b += (uint64_t)(uint32_t)(m0 + k[w + 4]) * (uint32_t)(m1 + k[w + 5]);
    }
    out[0] = a;
    out[1] = b;
}

static void nh_header(const unsigned char *p, const uint32_t *k, uint64_t out[2])
{
#if defined(__x86_64__)
    if (nh_use_avx2) {
        nh_header_avx2(p, k, out);
        return;
    }
#endif
    nh_header_plain(p, k, out);
}

/* As for the CRC: the vector loops must agree with the scalar ones,
 * checked once when the library loads (on words of a fixed generator, as
 * key, header and a payload with a ragged end), which runs the scalar
 * loops in every process; a vector loop that disagrees is not used. */
static void nh_check_vector(void)
{
#if defined(__x86_64__)
    if (!nh_use_avx2)
        return;
    /* the key: two words per 8-byte piece and WIRE_NH_WORDS's 16 more;
     * then the message, header or payload */
    enum { PAYLOAD = 203, KEY = 2 * ((PAYLOAD + 7) / 8) + 16 };
    uint32_t w[KEY + (PAYLOAD + 3) / 4];
    uint64_t x = 0x9e3779b97f4a7c15ull, v[2], s[2];
    for (unsigned i = 0; i < sizeof w / sizeof w[0]; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        w[i] = (uint32_t)(x >> 16);
    }
    const unsigned char *msg = (const unsigned char *)(w + KEY);
    nh_header_avx2(msg, w, v);
    nh_header_plain(msg, w, s);
    nh_use_avx2 = v[0] == s[0] && v[1] == s[1];
    nh_plain(msg, PAYLOAD, w, s);
    if (nh_use_avx2) {
        nh_avx2(msg, PAYLOAD, w, v);
        nh_use_avx2 = v[0] == s[0] && v[1] == s[1];
    }
    if (nh_use_avx2 && nh_use_avx512)
        nh_avx512(msg, PAYLOAD, w, v);
    nh_use_avx512 = nh_use_avx2 && nh_use_avx512 && v[0] == s[0] && v[1] == s[1];
#endif
}

uint64_t wire_mac(const void *buf, size_t len, const struct wire_key *key)
{
    const unsigned char *p = buf;
    size_t n = key->header_only ? 0 : len;
    uint64_t h[2], b[2] = {0, 0};
    nh_header(p, key->nh, h);
    if (n)
        nh(p + WIRE_HEADER_BYTES, n, key->nh + WIRE_HEADER_BYTES / 4, b);
    struct sip s;
    sip_init(&s, key);
    sip_word(&s, h[0] + b[0]);
    sip_word(&s, h[1] + b[1]);
    sip_word(&s, WIRE_HEADER_BYTES + n); /* NH's sums agree by chance only for equal lengths */
    sip_word(&s, (uint64_t)24 << 56);
    return sip_final(&s);
}

void wire_encode_header(void *buf, const struct wire_header *h, const struct wire_key *key, int with_checksum)
{
    unsigned char *p = buf;
    put32(p + 0, WIRE_MAGIC);
    p[4] = WIRE_VERSION;
    p[5] = h->type;
    put16(p + 6, h->flags);
    put64(p + WIRE_OFF_JOB, h->job);
    put32(p + WIRE_OFF_SRC, h->src);
    put32(p + 28, h->dst);
    put32(p + 32, h->src_inc);
    put32(p + 36, h->dst_inc);
    put32(p + 40, h->seq);
    put32(p + 44, h->ack);
    put64(p + 48, h->sack);
    put16(p + 56, h->credits);
    put16(p + 58, h->len);
    put64(p + WIRE_OFF_MAC, wire_mac(p, h->len, key));
    put32(p + 60, with_checksum ? wire_crc32c(p, 60) : 0);
}

size_t wire_encode(void *buf, size_t cap, const struct wire_header *h, const void *payload,
                   const struct wire_key *key, int with_checksum)
{
    size_t total = WIRE_HEADER_BYTES + h->len;
    if (total > cap || h->len > WIRE_MAX_PAYLOAD)
        return 0;
    if (h->len)
        memcpy((unsigned char *)buf + WIRE_HEADER_BYTES, payload, h->len);
    wire_encode_header(buf, h, key, with_checksum);
    return total;
}

static void decode_fields(const unsigned char *p, struct wire_header *h)
{
    *h = (struct wire_header){
        .magic = get32(p), .version = p[4], .type = p[5], .flags = get16(p + 6), .job = get64(p + WIRE_OFF_JOB),
        .mac = get64(p + WIRE_OFF_MAC), .src = get32(p + WIRE_OFF_SRC), .dst = get32(p + 28), .src_inc = get32(p + 32),
        .dst_inc = get32(p + 36), .seq = get32(p + 40), .ack = get32(p + 44), .sack = get64(p + 48),
        .credits = get16(p + 56), .len = get16(p + 58), .csum = get32(p + 60)};
}

size_t wire_packet_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    if (n < WIRE_HEADER_BYTES)
        return n;
    size_t len = WIRE_HEADER_BYTES + (size_t)get16(b + 58); /* the header's len */
    return len <= n ? len : n;
}

enum wire_verdict wire_decode(const void *buf, size_t n, const struct wire_expect *e, struct wire_header *h)
{
    const unsigned char *p = buf;
    if (n < WIRE_HEADER_BYTES)
        return WIRE_DROP_SHORT;
    decode_fields(p, h);
    if (h->magic != WIRE_MAGIC)
        return WIRE_DROP_MAGIC;
    if (h->version != WIRE_VERSION)
        return WIRE_DROP_VERSION;
    if ((e->need_checksum || h->csum) && h->csum != wire_crc32c(p, 60))
        return WIRE_DROP_CHECKSUM; /* before the fields below: they may be the corrupted ones */
    if (h->job != e->job)
        return WIRE_DROP_JOB;
    /* the length first: the tag covers the payload it says */
    if (h->len > WIRE_MAX_PAYLOAD || (size_t)h->len != n - WIRE_HEADER_BYTES)
        return WIRE_DROP_LENGTH;
    if (h->mac != wire_mac(p, h->len, &e->key))
        return WIRE_DROP_AUTH;
    if (h->src >= e->nranks || h->src == e->self || (h->dst != e->self && h->dst != WIRE_BROADCAST) ||
        (h->dst == WIRE_BROADCAST) != (h->type == WIRE_BCAST || h->type == WIRE_MULTI))
        return WIRE_DROP_RANK;
    if (h->type == 0 || h->type >= WIRE_TYPES || (h->flags & ~WIRE_FLAGS) || h->src_inc == 0 ||
        (h->type != WIRE_DATA && !(h->flags & WIRE_F_REPLY) != !(h->flags & WIRE_F_ACK_REPLY)))
        return WIRE_DROP_TYPE;
    if (h->len && h->type != WIRE_DATA && h->type != WIRE_BCAST && h->type != WIRE_MULTI)
        return WIRE_DROP_LENGTH;
    if (h->type == WIRE_MULTI && (e->nranks > WIRE_MULTI_MAX_RANKS || h->len < wire_multi_vector_bytes(e->nranks)))
        return WIRE_DROP_LENGTH; /* no vector, or a job too large to have one */
    return WIRE_OK;
}

size_t wire_multi_vector_bytes(uint32_t nranks)
{
    return ((size_t)nranks * WIRE_MULTI_ENTRY + 63u) & ~(size_t)63u;
}

void wire_multi_put(unsigned char *v, uint32_t rank, uint32_t seq, uint32_t dst_inc)
{
    put32(v + (size_t)rank * WIRE_MULTI_ENTRY, seq);
    put32(v + (size_t)rank * WIRE_MULTI_ENTRY + 4, dst_inc);
}

void wire_multi_get(const unsigned char *v, uint32_t rank, uint32_t *seq, uint32_t *dst_inc)
{
    *seq = get32(v + (size_t)rank * WIRE_MULTI_ENTRY);
    *dst_inc = get32(v + (size_t)rank * WIRE_MULTI_ENTRY + 4);
}

const char *wire_verdict_name(enum wire_verdict v)
{
    static const char *const names[WIRE_VERDICTS] = {
        [WIRE_OK] = "accepted", [WIRE_DROP_SHORT] = "short", [WIRE_DROP_MAGIC] = "not shoal",
        [WIRE_DROP_VERSION] = "other version", [WIRE_DROP_JOB] = "other job", [WIRE_DROP_AUTH] = "bad MAC",
        [WIRE_DROP_RANK] = "bad rank", [WIRE_DROP_TYPE] = "bad type", [WIRE_DROP_LENGTH] = "bad length",
        [WIRE_DROP_CHECKSUM] = "bad checksum", [WIRE_DROP_INCARNATION] = "old incarnation",
        [WIRE_DROP_DUPLICATE] = "duplicate", [WIRE_DROP_WINDOW] = "beyond window",
        [WIRE_DROP_FAULT] = "injected fault"};
    return (unsigned)v < WIRE_VERDICTS ? names[v] : "unknown";
}
