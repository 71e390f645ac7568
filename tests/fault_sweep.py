#!/usr/bin/env python3
"""The fault sweep: every multi-process test program that runs over the
cluster transport, on udp and eth, under the project's fault spec
(SHOAL_FAULTS=loss=0.01,reorder=0.01,dup=0.001) with seeds 1..S.  Each job
checks its own results exactly (every handler once, every byte, every
reply before finalize returns); the sweep reports each failure with its
command and the last lines it printed, and exits 1 if any failed.  Too long
for CI (about 15 minutes at 25 seeds on two cores): run it by hand.

Usage: tests/fault_sweep.py BUILD_DIR [--seeds S] [--carriers udp,eth] [--jobs J]"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import time

# (program, mode, ranks): the modes the CTest suite runs under faults, and
# shoal_finalize right after a burst of messages
JOBS = [("am/test_am", "all", 4), ("am/test_am", "storm", 4), ("am/test_am", "long", 3),
        ("am/test_finalize", "replies", 4), ("am/test_finalize", "oneway", 4), ("am/test_finalize", "medium", 4),
        ("coll/test_coll", "bcast", 4), ("coll/test_coll", "reduce", 4), ("rma/test_rma", "all", 3),
        ("dsm/test_crl", "stress", 4), ("dsm/test_crl", "delete_cycles", 4), ("dsm/test_crl", "delete_cached", 4)]
SPEC = "loss=0.01,reorder=0.01,dup=0.001"


def run(build, carrier, seed, prog, mode, n):
    env = dict(os.environ, SHOAL_TRANSPORT=carrier, SHOAL_NET_LOCAL="1", SHOAL_IFACE="lo",
               SHOAL_NET_DEAD_MS="15000", SHOAL_STRICT="0", SHOAL_FAULTS="%s,seed=%d" % (SPEC, seed))
    cmd = [os.path.join(build, "tools", "shoalrun"), "--timeout", "120", "-n", str(n),
           os.path.join(build, "tests", prog), mode]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return (carrier, seed, prog, mode, n, p.returncode, time.time() - t0, p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seeds", type=int, default=25)
    ap.add_argument("--carriers", default="udp,eth")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    work = [(c, s, p, m, n) for s in range(1, a.seeds + 1) for c in a.carriers.split(",") for p, m, n in JOBS]
    failed = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for c, s, p, m, n, rc, secs, out in pool.map(lambda w: run(a.build, *w), work):
            if rc != 0:
                failed.append((c, s, p, m, n, rc, out))
                print("FAIL %s seed %d %s %s -n %d: status %d after %.1f s\n%s" %
                      (c, s, p, m, n, rc, secs, "\n".join(out.splitlines()[-6:])), flush=True)
    print("fault sweep: %d of %d jobs passed (%s, seeds 1-%d, %s)" %
          (len(work) - len(failed), len(work), a.carriers, a.seeds, SPEC))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
