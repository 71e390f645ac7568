#!/usr/bin/env python3
"""Runs test_kill under shoalrun and checks that a SIGKILLed rank ends the
job within the deadline, with a message naming it, and leaves /dev/shm as
it was.  Usage: check_kill.py SHOALRUN TEST_KILL NRANKS MODE DEADLINE_S"""
import os
import shutil
import subprocess
import sys
import time

# Other programs on the machine (an MPI benchmark, say) may create files in
# /dev/shm while this runs.  As root, rerun inside a private mount namespace
# with its own empty /dev/shm, so whatever appears there is this job's.
if os.geteuid() == 0 and os.environ.get("SHOAL_CHECK_KILL_NS") != "1" and shutil.which("unshare"):
    os.environ["SHOAL_CHECK_KILL_NS"] = "1"
    script = 'mount -t tmpfs shoal-test-shm /dev/shm && exec "$0" "$@"'
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                        sys.executable] + sys.argv)
    sys.exit(r.returncode)

shoalrun, prog, nranks, mode, deadline = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
victim = int(nranks) - 1
before = set(os.listdir("/dev/shm"))
t0 = time.monotonic()
p = subprocess.run([shoalrun, "--timeout", "20", "-n", nranks, prog, mode],
                   capture_output=True, text=True, timeout=30)
elapsed = time.monotonic() - t0
after = set(os.listdir("/dev/shm"))
out = p.stdout + p.stderr
print(out)
print(f"exit {p.returncode} after {elapsed:.3f} s")
fail = []
if p.returncode == 0:
    fail.append("shoalrun exited 0 although a rank was killed")
if elapsed > deadline:
    fail.append(f"job took {elapsed:.3f} s to end, limit {deadline} s")
if f"rank {victim}" not in out:
    fail.append(f"no message names rank {victim}")
if "survived" in out:
    fail.append("a rank carried on as if nothing happened")
if after - before:
    fail.append(f"/dev/shm gained {sorted(after - before)}")
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
