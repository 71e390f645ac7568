#!/usr/bin/env python3
"""An outsider tries to end a job: a process in namespace shoal-n3 of the
cluster in a box, which takes no part in the job, sniffs the job's first
broadcast from rank 0 (the barrier's release) on the shared bridge and
sends, again and again, what it can make of it without the job's secret:
the broadcast with a larger incarnation of rank 0 (as if it restarted), and
KEEPALIVEs "from rank 0" with that incarnation to every other rank.  The
job (3 ranks, one per namespace n0-n2, barriers for a few seconds) must
finish normally, say nothing of a restart, and count the forged packets as
foreign.

Usage: check_forge.py SHOALRUN TEST_CLUSTER udp|eth
       check_forge.py --forge udp|eth IFACE NRANKS SECONDS   (the outsider)"""
import os
import socket
import struct
import subprocess
import sys
import time

ETH_P_ALL, ETHERTYPE = 0x0003, 0x88B5
MAGIC, BCAST, KEEPALIVE = b"SHOL", 4, 3


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def shoal_packet(frame):
    """(offset of the shoal header in the frame, udp (ip, port) or None) for a
    shoal BCAST from rank 0, else None."""
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
    if len(p) < 64 or p[:4] != MAGIC or p[5] != BCAST or struct.unpack("<I", p[24:28])[0] != 0:
        return None
    return at, to


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
    while time.time() < end:
        try:
            frame = raw.recv(70000)
        except socket.timeout:
            continue
        found = shoal_packet(frame)
        if found:
            break
    else:
        print("forger: sniffed no broadcast from rank 0 in %d s" % seconds)
        return 1
    at, to = found
    pkt = frame[at:]
    fakes = [forged(pkt, BCAST, 0xFFFFFFFF)] + [forged(pkt, KEEPALIVE, r) for r in range(1, nranks)]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sent = 0
    for _ in range(20):
        for f in fakes:
            if carrier == "eth":
                raw.send(frame[:at] + f)
            else:
                udp.sendto(f, to)
            sent += 1
        time.sleep(0.05)
    print("forger: sniffed rank 0's broadcast (incarnation %d), sent %d forged packets"
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
    for f in fail:
        print("check_forge: " + f)
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
