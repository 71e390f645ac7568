#!/usr/bin/env python3
"""Runs test_cluster stall: rank 1 stops itself (SIGSTOP), which the
launcher does not see; rank 0 must find it silent over the network and end
the job naming it within SHOAL_NET_DEAD_MS plus a second.
Usage: check_stall.py SHOALRUN TEST_CLUSTER DEAD_MS"""
import os
import subprocess
import sys
import time

shoalrun, prog, dead_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ, SHOAL_NET_DEAD_MS=str(dead_ms))
t0 = time.monotonic()
p = subprocess.run([shoalrun, "--timeout", "30", "-n", "2", prog, "stall"],
                   capture_output=True, text=True, timeout=45, env=env)
elapsed = time.monotonic() - t0
out = p.stdout + p.stderr
print(out)
print(f"exit {p.returncode} after {elapsed:.3f} s")
fail = []
if p.returncode == 0:
    fail.append("shoalrun exited 0 although rank 1 stopped answering")
if elapsed > dead_ms / 1000 + 1.5:
    fail.append(f"job took {elapsed:.3f} s to end, limit {dead_ms / 1000 + 1.5} s")
if "peer rank 1 stopped answering" not in out:
    fail.append("no message says rank 1 stopped answering")
if "survived" in out:
    fail.append("a rank carried on as if nothing happened")
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
