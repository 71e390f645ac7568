#!/usr/bin/env python3
"""Two jobs of N ranks each at once on this machine's cores, every rank on
the cluster transport at the default 3 s deadline (issue 17, defect 3):
ranks that wait for the CPU for seconds must still answer the probes that
follow an unanswered keepalive, so neither job may declare a peer dead.

Usage: check_oversubscribed.py SHOALRUN N PROGRAM ARGS..."""
import os
import subprocess
import sys

shoalrun, n, prog = sys.argv[1], sys.argv[2], sys.argv[3:]
env = dict(os.environ, SHOAL_NET_DEAD_MS="3000")
jobs = [subprocess.Popen([shoalrun, "--timeout", "120", "-n", n, *prog], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True) for _ in range(2)]
fail = 0
for i, j in enumerate(jobs):
    out, _ = j.communicate(timeout=150)
    if j.returncode != 0:
        fail = 1
        lines = out.splitlines()
        why = [l for l in lines if "stopped answering" in l or "fatal" in l][:8]  # who was declared dead, and by whom
        print("job %d failed (status %d):\n%s" % (i, j.returncode, "\n".join(why + lines[-8:])))
print("two jobs of %s ranks: %s" % (n, "a job failed" if fail else "both passed"))
sys.exit(fail)
