#!/usr/bin/env python3
"""An outsider tries to end or corrupt a job: a process in namespace
shoal-n3 of the cluster in a box, which takes no part in the job, sniffs
rank 0's first BCAST (the barrier's release) and first MULTI (a one-frame
broadcast request, WIRE.md 3.1) on the shared bridge and sends, again and
again, what it can make of them without the job's secret: the BCAST with a
larger incarnation of rank 0 (as if it restarted), KEEPALIVEs "from rank 0"
with that incarnation to every other rank, the MULTI with every receiver's
sequence number moved ahead (to take the place of rank 0's next message),
and the MULTI replayed as it was.  The job (3 ranks, one per namespace
n0-n2, barriers and broadcast requests for a few seconds) must finish
normally, say nothing of a restart, run each broadcast request once and in
order, and count the forged packets as foreign.

Usage: check_forge.py SHOALRUN TEST_CLUSTER udp|eth
       check_forge.py --forge udp|eth IFACE NRANKS SECONDS   (the outsider)"""
import os
import socket
import struct
import subprocess
import sys
import time

ETH_P_ALL, ETHERTYPE = 0x0003, 0x88B5
MAGIC, BCAST, KEEPALIVE, MULTI = b"SHOL", 4, 3, 5


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def shoal_packet(frame):
    """(type, offset of the shoal header in the frame, udp (ip, port) or None)
    for a shoal BCAST or MULTI from rank 0, else None."""
    etype = struct.unpack("!H", frame[12:14])[0]
    if etype == ETHERTYPE:
        at, to = 14, None
    elif etype == 0x0800 and frame[23] == 17:  # IPv4, UDP
        ihl = (frame[14] & 15) * 4
        udp = 14 + ihl
        to = (socket.inet_ntoa(frame[30:34]), struct.unpack("!H", frame[udp + 2:udp + 4])[0])
        at = udp + 8
    else:
        return None
    p = frame[at:]
    if len(p) < 64 or p[:4] != MAGIC or p[5] not in (BCAST, MULTI) or struct.unpack("<I", p[24:28])[0] != 0:
        return None
    return p[5], at, to


def moved_ahead(pkt, nranks):
    """The MULTI with each receiver's sequence number + 1 (the next message's
    place in its stream) and the header checksum recomputed; the tag, which
    covers the vector, cannot be."""
    b = bytearray(pkt)
    for r in range(1, nranks):
        seq = struct.unpack_from("<I", b, 64 + 8 * r)[0]
        struct.pack_into("<I", b, 64 + 8 * r, (seq + 1) & 0xFFFFFFFF)
    if struct.unpack("<I", b[60:64])[0]:
        struct.pack_into("<I", b, 60, crc32c(bytes(b[:60])))
    return bytes(b)


def forged(pkt, ptype, dst):
    """pkt as rank 0 restarted: incarnation + 1000, then type/dst/len, and
    the checksum recomputed (it is public: anyone can)."""
    b = bytearray(pkt[:64] if ptype == KEEPALIVE else pkt)
    inc = struct.unpack("<I", b[32:36])[0]
    struct.pack_into("<I", b, 32, (inc + 1000) & 0xFFFFFFFF)
    b[5] = ptype
    struct.pack_into("<I", b, 28, dst)
    if ptype == KEEPALIVE:
        struct.pack_into("<H", b, 58, 0)
    if struct.unpack("<I", b[60:64])[0]:
        struct.pack_into("<I", b, 60, crc32c(bytes(b[:60])))
    return bytes(b)


def forge(carrier, iface, nranks, seconds):
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    raw.bind((iface, 0))
    raw.settimeout(0.5)
    end = time.time() + seconds
    seen = {}  # type -> (frame, offset, udp destination)
    while time.time() < end and len(seen) < 2:
        try:
            frame = raw.recv(70000)
        except socket.timeout:
            continue
        found = shoal_packet(frame)
        if found and found[0] not in seen:
            seen[found[0]] = (frame,) + found[1:]
    for t, name in ((BCAST, "BCAST"), (MULTI, "MULTI")):
        if t not in seen:
            print("forger: sniffed no %s from rank 0 in %d s" % (name, seconds))
            return 1
    frame, at, to = seen[BCAST]
    pkt = frame[at:]
    fakes = [(frame, at, to, forged(pkt, BCAST, 0xFFFFFFFF))]
    fakes += [(frame, at, to, forged(pkt, KEEPALIVE, r)) for r in range(1, nranks)]
    mframe, mat, mto = seen[MULTI]
    fakes += [(mframe, mat, mto, moved_ahead(mframe[mat:], nranks)), (mframe, mat, mto, mframe[mat:])]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sent = 0
    for _ in range(20):
        for fr, off, dest, f in fakes:
            if carrier == "eth":
                raw.send(fr[:off] + f)
            else:
                udp.sendto(f, dest)
            sent += 1
        time.sleep(0.05)
    print("forger: sniffed rank 0's BCAST (incarnation %d) and MULTI, sent %d forged or replayed packets"
          % (struct.unpack("<I", pkt[32:36])[0], sent))
    return 0


def main():
    if sys.argv[1] == "--forge":
        return forge(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    shoalrun, prog, carrier = sys.argv[1:4]
    env = dict(os.environ, TEST_FORGE_SECONDS="4", SHOAL_NET_DEAD_MS="15000")
    job = subprocess.Popen([shoalrun, "--timeout", "60", "--hosts", "shoal-n0,shoal-n1,shoal-n2", "--rsh",
                            "ip netns exec {host}", "--transport", carrier, "-x", "SHOAL_IFACE=shoal0",
                            "-n", "3", prog, "forged"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    forger = subprocess.run(["ip", "netns", "exec", "shoal-n3", sys.executable, os.path.abspath(__file__),
                             "--forge", carrier, "shoal0", "3", "10"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=60)
    out, _ = job.communicate(timeout=90)
    print(forger.stdout + out)
    fail = []
    if forger.returncode != 0:
        fail.append("the outsider could not forge anything (status %d)" % forger.returncode)
    if job.returncode != 0:
        fail.append("the job failed (status %d)" % job.returncode)
    if "restarted" in out or "stopped answering" in out:
        fail.append("the job took a forged packet for rank 0")
    foreign = [int(line.split("dropped ")[1].split()[0]) for line in out.splitlines() if line.startswith("forged:")]
    if len(foreign) != 3 or sum(foreign) == 0:
        fail.append("the forged packets were not counted as foreign (%s)" % foreign)
    frames = [int(line.split("foreign packets, ")[1].split()[0]) for line in out.splitlines()
              if line.startswith("forged: rank 0 ")]
    if not frames or frames[0] == 0:
        fail.append("rank 0 sent no broadcast as one frame (%s): nothing to forge a MULTI from" % frames)
    for f in fail:
        print("check_forge: " + f)
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
