#!/usr/bin/env python3
"""Writes the seed corpus for the wire_decode fuzz target (tests/fuzz/fuzz_wire.c).

    python3 tests/fuzz/make_wire_corpus.py [OUTDIR]    (default: tests/fuzz/corpus/wire)

One small file per case: valid DATA, ACK, KEEPALIVE and BCAST packets with and
without a checksum, and one packet per malformed class (one per drop verdict
wire_decode gives, several for the rank, type and length checks).  Files are
named seed-<case>; the script rewrites those and removes stale seed-* files,
and leaves every other file (inputs the fuzzer found) alone.  The output is
the same on every run.

The layout is docs/WIRE.md's; JOB, KEY, SELF and NRANKS must equal FUZZ_JOB,
FUZZ_KEY0/FUZZ_KEY1, FUZZ_SELF and FUZZ_NRANKS in fuzz_wire.c.  Packets carry the
tag under KEY that the receiver checks (docs/WIRE.md §6.1) (the fuzzer's mutations break
it, so the checks behind the tag are reached through these seeds).  Python 3 standard library
only.
"""
import os
import struct
import sys

JOB = 0x5348424F4A000001
KEY = (0x0123456789ABCDEF, 0xFEDCBA9876543210)
SELF = 1
NRANKS = 4

MAGIC = 0x4C4F4853  # "SHOL"
VERSION = 4
BROADCAST = 0xFFFFFFFF
DATA, ACK, KEEPALIVE, BCAST, MULTI = 1, 2, 3, 4, 5
F_ACK_NOW = 0x1
F_REPLY = 0x2
F_ACK_REPLY = 0x4
HEADER = 64
HEADER_FMT = "<IBBHQQIIIIIIQHH"  # bytes 0-59; the checksum (u32) follows at 60


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283
assert struct.calcsize(HEADER_FMT) == 60

M64 = (1 << 64) - 1


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & M64


def siphash24(key, data):
    k0, k1 = key
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rnd():
        v[0] = (v[0] + v[1]) & M64; v[1] = _rotl(v[1], 13) ^ v[0]; v[0] = _rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M64; v[3] = _rotl(v[3], 16) ^ v[2]
        v[0] = (v[0] + v[3]) & M64; v[3] = _rotl(v[3], 21) ^ v[0]
        v[2] = (v[2] + v[1]) & M64; v[1] = _rotl(v[1], 17) ^ v[2]; v[2] = _rotl(v[2], 32)

    tail = data[len(data) // 8 * 8:] + bytes(7 - len(data) % 8) + bytes([len(data) & 0xFF])
    for w in struct.unpack("<%dQ" % (len(data) // 8), data[:len(data) // 8 * 8]) + struct.unpack("<Q", tail):
        v[3] ^= w
        rnd()
        rnd()
        v[0] ^= w
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


assert siphash24((0x0706050403020100, 0x0F0E0D0C0B0A0908), bytes(range(15))) == 0xA129CA6149BE45E5


def nh_key(key, words):
    """The first `words` 32-bit NH key words: SipHash of 2^63 | i for even i, low half first."""
    out = []
    for i in range(0, words, 2):
        w = siphash24(key, struct.pack("<Q", (1 << 63) | i))
        out += [w & 0xFFFFFFFF, w >> 32]
    return out[:words]


def nh(key, data):
    """NH of data (zero-padded to 8 bytes) under the key and under it shifted by 4 words."""
    padded = data + bytes(-len(data) % 8)
    k = nh_key(key, len(padded) // 4 + 4)
    sums = [0, 0]
    for i in range(0, len(padded), 8):
        m0, m1 = struct.unpack("<II", padded[i:i + 8])
        for t in range(2):
            kk = i // 4 + 4 * t
            sums[t] += ((m0 + k[kk]) & 0xFFFFFFFF) * ((m1 + k[kk + 1]) & 0xFFFFFFFF)
    return struct.pack("<QQ", sums[0] & M64, sums[1] & M64)


def packet(ptype=DATA, payload=b"", csum=True, **f):
    """A packet from SELF's peer 2 (or f["src"]) to SELF; f overrides any header field."""
    h = dict(magic=MAGIC, version=VERSION, type=ptype, flags=0, job=JOB, mac=None, src=2,
             dst=BROADCAST if ptype in (BCAST, MULTI) else SELF, src_inc=0x5EED0002, dst_inc=0x5EED0001,
             seq=1 if ptype == DATA else 0, ack=0, sack=0, credits=64, len=len(payload))
    unknown = set(f) - set(h) - {"csum_value", "tag_key"}
    assert not unknown, unknown
    h.update((k, v) for k, v in f.items() if k not in ("csum_value", "tag_key"))

    def head(mac):
        return struct.pack(HEADER_FMT, h["magic"], h["version"], h["type"], h["flags"], h["job"], mac,
                           h["src"], h["dst"], h["src_inc"], h["dst_inc"], h["seq"], h["ack"], h["sack"],
                           h["credits"], h["len"])
    # the tag: SipHash of the two NH sums of the header (tag and checksum zero) and payload, and their length
    tag_key = f.get("tag_key", KEY)
    hashed = head(0) + bytes(4) + payload
    mac = h["mac"] if h["mac"] is not None else siphash24(tag_key, nh(tag_key, hashed) + struct.pack("<Q", len(hashed)))
    head = head(mac)
    c = f.get("csum_value", crc32c(head) if csum else 0)
    return head + struct.pack("<I", c) + payload


def multi_vector(entries):
    """A MULTI payload's vector: (seq, dst_inc) per rank of NRANKS, padded to 64 bytes."""
    v = b"".join(struct.pack("<II", *entries.get(r, (0, 0))) for r in range(NRANKS))
    return v + bytes(-len(v) % 64)


def corrupt(pkt, offset, mask):
    """pkt with one byte changed after its checksum was computed."""
    b = bytearray(pkt)
    b[offset] ^= mask
    return bytes(b)


def cases():
    body = bytes((i * 7 + 3) & 0xFF for i in range(200))
    good = packet(DATA, body[:16])
    yield "data-len0-csum", packet(DATA)
    yield "data-len1-csum", packet(DATA, body[:1], seq=2, ack=7, credits=32)
    yield "data-len16-nocsum", packet(DATA, body[:16], csum=False, src=0, seq=0x10000)
    yield "data-len200-csum-acknow", packet(DATA, body, flags=F_ACK_NOW, seq=0xFFFFFFFF, ack=0xFFFFFFFE,
                                            sack=0x8000000000000005)
    yield "data-first-contact", packet(DATA, body[:4], src=3, dst_inc=0)
    yield "data-reply-acking-requests", packet(DATA, body[:8], flags=F_REPLY)
    yield "data-request-acking-replies", packet(DATA, body[:8], flags=F_ACK_REPLY)
    yield "ack-csum", packet(ACK, ack=41, sack=0x0000000000000B0D, credits=12)
    yield "ack-nocsum", packet(ACK, csum=False, ack=9, flags=F_ACK_NOW)
    yield "ack-reply-channel", packet(ACK, ack=3, flags=F_REPLY | F_ACK_REPLY)
    yield "keepalive-csum", packet(KEEPALIVE, flags=F_ACK_NOW)
    yield "keepalive-nocsum", packet(KEEPALIVE, csum=False, src=0)
    yield "bcast-len8-csum", packet(BCAST, body[:8], src=3)
    yield "bcast-len0-nocsum", packet(BCAST, csum=False, src=0)
    vec = multi_vector({0: (5, 0x5EED0000), SELF: (9, 0x5EED0001), 3: (2, 0)})
    yield "multi-len16-csum", packet(MULTI, vec + body[:16], src=2)
    yield "multi-vector-only-nocsum", packet(MULTI, vec, csum=False, src=0, flags=F_ACK_NOW)
    yield "multi-reply-channel", packet(MULTI, vec + body[:8], src=3, flags=F_REPLY | F_ACK_REPLY)
    # shorter than a header
    yield "short-empty", b""
    yield "short-1", good[:1]
    yield "short-63", good[:63]
    # not shoal, another version
    yield "magic-bad", packet(DATA, magic=0x4D4F4853)
    yield "magic-big-endian", packet(DATA, magic=0x53484F4C)
    yield "version-0", packet(DATA, version=0)
    yield "version-1", packet(DATA, version=1)
    yield "version-2", packet(DATA, version=2)
    yield "version-3", packet(DATA, version=3)
    yield "version-5", packet(DATA, version=5)
    # another job; a tag the job's secret did not make
    yield "job-other", packet(DATA, job=JOB ^ 1)
    yield "mac-other-secret", packet(DATA, body[:16], tag_key=(KEY[0], KEY[1] ^ 1))
    yield "mac-payload-altered", corrupt(good, HEADER + 3, 0x20)
    yield "mac-seq-altered-nocsum", corrupt(packet(DATA, body[:16], csum=False), 40, 0x04)
    # ranks
    yield "rank-src-nranks", packet(DATA, src=NRANKS)
    yield "rank-src-self", packet(DATA, src=SELF)
    yield "rank-dst-other", packet(DATA, dst=3)
    yield "rank-data-to-broadcast", packet(DATA, dst=BROADCAST)
    yield "rank-bcast-to-one", packet(BCAST, body[:8], dst=SELF)
    yield "rank-multi-to-one", packet(MULTI, vec + body[:8], dst=SELF)
    # types and flags
    yield "type-0", packet(0)
    yield "type-6", packet(6)
    yield "type-255", packet(255)
    yield "flags-unknown", packet(DATA, flags=0x8001)
    yield "flags-ack-other-channel", packet(ACK, flags=F_ACK_REPLY)
    yield "src-inc-0", packet(DATA, src_inc=0)
    # lengths
    yield "len-more-than-received", good[:-1]
    yield "len-less-than-received", good + b"\0"
    yield "len-over-max", packet(DATA, len=65001)  # header only: the limit is checked before the tag
    yield "len-ack-payload", packet(ACK, body[:1])
    yield "len-keepalive-payload", packet(KEEPALIVE, body[:4])
    yield "len-multi-short-vector", packet(MULTI, vec[:24])
    yield "flags-multi-ack-other-channel", packet(MULTI, vec, flags=F_ACK_REPLY)
    # checksums
    yield "csum-wrong", packet(DATA, body[:16], csum_value=crc32c(good[:60]) ^ 0x00010000)
    yield "csum-corrupt-seq", corrupt(good, 40, 0x04)
    yield "csum-corrupt-job", corrupt(good, 8, 0x01)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "corpus", "wire")
    os.makedirs(out, exist_ok=True)
    names = set()
    for name, data in cases():
        name = "seed-" + name
        assert name not in names, name
        names.add(name)
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    for stale in sorted(os.listdir(out)):
        if stale.startswith("seed-") and stale not in names:
            os.remove(os.path.join(out, stale))
    print(f"{len(names)} seeds in {out}")


if __name__ == "__main__":
    main()
