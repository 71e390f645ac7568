/* net layer: the cluster wire format, shared by both carriers (UDP
 * datagrams and raw Ethernet frames with shoal's EtherType).  Every packet
 * is one 64-byte header, little-endian, then `len` payload bytes.  The
 * layout is documented byte by byte in docs/WIRE.md; WIRE_VERSION changes
 * with any change to it. */
#ifndef SHOAL_NET_WIRE_H
#define SHOAL_NET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x4c4f4853u   /* "SHOL" read little-endian */
#define WIRE_VERSION 4u
#define WIRE_ETHERTYPE 0x88b5u   /* IEEE 802 local experimental EtherType 1 */
#define WIRE_HEADER_BYTES 64u
/* where the fields that tell a packet's job and sender lie (little-endian,
 * as every field): the codec and readers that look before decoding share them */
#define WIRE_OFF_JOB 8u
#define WIRE_OFF_MAC 16u
#define WIRE_OFF_SRC 24u
#define WIRE_BROADCAST 0xffffffffu /* dst of a packet for every rank of the job */
#define WIRE_MAX_PAYLOAD 65000u  /* fits one UDP datagram; carriers lower it to their MTU */
/* A MULTI packet's payload starts with a vector of one 8-byte entry per
 * rank of the job (seq, dst_inc; little-endian), padded to 64 bytes so the
 * message after it keeps the payload's alignment; jobs of more ranks
 * broadcast one DATA packet per rank instead. */
#define WIRE_MULTI_MAX_RANKS 64u
#define WIRE_MULTI_ENTRY 8u

enum wire_type {
    WIRE_DATA = 1,      /* reliable, sequenced: carries AM-layer bytes */
    WIRE_ACK = 2,       /* acknowledgement only (seq unused) */
    WIRE_KEEPALIVE = 3, /* liveness probe during silence; answered by an ACK */
    WIRE_BCAST = 4,     /* unsequenced one-to-all datagram (barrier release, broadcast) */
    WIRE_MULTI = 5,     /* one DATA packet for every other rank: each finds its seq in the payload's vector */
    WIRE_TYPES
};

/* flags */
#define WIRE_F_ACK_NOW 0x1u /* the sender wants an ACK at once (MBCF/Ether's TH1 ack request) */
#define WIRE_F_REPLY 0x2u   /* the reply channel: its own sequence numbers, acks and credits */
#define WIRE_F_ACK_REPLY 0x4u /* ack, sack and credits are the reply channel's (else the request channel's);
                                 equal to WIRE_F_REPLY except on DATA */
#define WIRE_FLAGS (WIRE_F_ACK_NOW | WIRE_F_REPLY | WIRE_F_ACK_REPLY)

/* The header as the code sees it (host order); wire_encode/wire_decode
 * convert.  Offsets are the bytes on the wire. */
struct wire_header {
    uint32_t magic;    /*  0 WIRE_MAGIC */
    uint8_t version;   /*  4 WIRE_VERSION */
    uint8_t type;      /*  5 enum wire_type */
    uint16_t flags;    /*  6 WIRE_F_* */
    uint64_t job;      /*  8 job id */
    uint64_t mac;      /* 16 SipHash-2-4 tag under the job's secret (wire_encode_header fills it) */
    uint32_t src;      /* 24 sender's rank */
    uint32_t dst;      /* 28 receiver's rank, or WIRE_BROADCAST */
    uint32_t src_inc;  /* 32 sender's incarnation (nonzero, new at every start) */
    uint32_t dst_inc;  /* 36 receiver's incarnation as the sender knows it; 0 before first contact */
    uint32_t seq;      /* 40 DATA: this packet's sequence number for (src, dst); from 1 */
    uint32_t ack;      /* 44 cumulative: every DATA seq <= ack from dst to src has arrived */
    uint64_t sack;     /* 48 bit i: DATA seq ack + 2 + i from dst to src has arrived */
    uint16_t credits;  /* 56 DATA packets beyond ack the sender of this header can still accept */
    uint16_t len;      /* 58 payload bytes after the header */
    uint32_t csum;     /* 60 CRC-32C of bytes 0-59 (raw frames; 0 = not computed on UDP) */
};

/* Why a packet was dropped; counted per reason. */
enum wire_verdict {
    WIRE_OK = 0,
    WIRE_DROP_SHORT,       /* shorter than a header */
    WIRE_DROP_MAGIC,       /* not a shoal packet */
    WIRE_DROP_VERSION,     /* another protocol version */
    WIRE_DROP_JOB,         /* another job */
    WIRE_DROP_AUTH,        /* this job's id, and a MAC tag the job's secret did not make */
    WIRE_DROP_RANK,        /* unknown source rank, or not addressed to this rank */
    WIRE_DROP_TYPE,        /* unknown type or flags */
    WIRE_DROP_LENGTH,      /* len disagrees with the bytes received, or too large */
    WIRE_DROP_CHECKSUM,    /* header checksum wrong */
    WIRE_DROP_INCARNATION, /* from an old incarnation of the peer, or to an old one of this rank */
    WIRE_DROP_DUPLICATE,   /* DATA already delivered (counted, and acknowledged again) */
    WIRE_DROP_WINDOW,      /* DATA beyond the receive window */
    WIRE_DROP_FAULT,       /* dropped by SHOAL_FAULTS injection */
    WIRE_VERDICTS
};

/* The job's secret: a 128-bit SipHash key, and the NH key derived from it
 * (wire_key_init).  It never travels in a packet.  header_only: the tag
 * covers the 64 header bytes only (SHOAL_NET_AUTH=header), else header and
 * payload. */
/* 32-bit NH key words: two per 8-byte piece, the shift (4), and 12 that
 * the AVX-512 loop loads past the last it uses */
#define WIRE_NH_WORDS (2u * ((WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD + 7u) / 8u) + 16u)
struct wire_key {
    uint64_t k0, k1;
    int header_only;
    uint32_t *nh; /* WIRE_NH_WORDS, from wire_key_init */
};

/* Derives the NH key from (k0, k1); SHOAL_OK or SHOAL_ENOMEM. */
int wire_key_init(struct wire_key *k, uint64_t k0, uint64_t k1, int header_only);
void wire_key_fini(struct wire_key *k);

/* What a receiver accepts: its job, secret and rank, the job size, and
 * whether checksums are required (raw frames) or checked when nonzero. */
struct wire_expect {
    uint64_t job;
    struct wire_key key;
    uint32_t self, nranks;
    int need_checksum;
};

uint32_t wire_crc32c(const void *buf, size_t n);
/* The widest vector the tag's NH runs on, in bits: 512 (AVX-512 for
 * payloads, AVX2 for headers and tails), 256 (AVX2) or 0 (scalar); a
 * vector loop is used when the processor has it and its sums agreed with
 * the scalar loop's when the library loaded.  For the tests. */
int wire_nh_vector(void);

/* The tag of the packet at buf: SipHash-2-4 of the two 64-bit NH sums
 * (Toeplitz-shifted keys) of the header, with its mac and csum fields taken
 * as zero, followed by (unless key->header_only) the len payload bytes, and
 * of the bytes hashed (docs/WIRE.md §6.1). */
uint64_t wire_mac(const void *buf, size_t len, const struct wire_key *key);

/* Writes the 64 header bytes (h->len says the payload's length) into buf,
 * with the tag over the header and the payload already at buf +
 * WIRE_HEADER_BYTES (h->mac is ignored). */
void wire_encode_header(void *buf, const struct wire_header *h, const struct wire_key *key, int with_checksum);

/* Writes header + payload into buf (cap bytes); with_checksum fills csum.
 * Returns the packet's length, or 0 if it does not fit. */
size_t wire_encode(void *buf, size_t cap, const struct wire_header *h, const void *payload,
                   const struct wire_key *key, int with_checksum);

/* Where the packet at p (n bytes there) ends by its own length field: its
 * bytes, or n when n is too short for a header or for that length (the
 * decoder then drops it).  The length is covered by the header checksum on
 * raw frames and by the UDP checksum of the datagram it came in. */
size_t wire_packet_bytes(const void *p, size_t n);
/* Checks a received packet of n bytes against *e and decodes its header;
 * the payload is at buf + WIRE_HEADER_BYTES.  Never reads outside [buf,
 * buf + n).  Checks everything a packet says about itself (magic, version,
 * job, length, tag, ranks, type, flags, checksum); incarnations, sequence
 * numbers and windows are the reliability layer's. */
enum wire_verdict wire_decode(const void *buf, size_t n, const struct wire_expect *e, struct wire_header *out);

const char *wire_verdict_name(enum wire_verdict v);

/* The bytes of a MULTI packet's vector in a job of nranks (<=
 * WIRE_MULTI_MAX_RANKS), and where rank's entry says its sequence number
 * and incarnation are (the vector at v, little-endian). */
size_t wire_multi_vector_bytes(uint32_t nranks);
void wire_multi_put(unsigned char *v, uint32_t rank, uint32_t seq, uint32_t dst_inc);
void wire_multi_get(const unsigned char *v, uint32_t rank, uint32_t *seq, uint32_t *dst_inc);

#endif
