#!/usr/bin/env python3
"""Runs test_kill under shoalrun and checks that a SIGKILLed rank ends the
job within the deadline, with a message naming it (in mode busy, from rank
1's failure handler), and leaves /dev/shm as it was.  Usage: check_kill.py SHOALRUN TEST_KILL NRANKS MODE DEADLINE_S [LAUNCH_OPTION...]
(launch options such as --hosts go to shoalrun)."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from jobcheck import run_failing_job  # noqa: E402

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
launch = sys.argv[6:]
victim = int(nranks) - 1
before = set(os.listdir("/dev/shm"))


def shm_unchanged(out):
    gained = set(os.listdir("/dev/shm")) - before
    return f"/dev/shm gained {sorted(gained)}" if gained else None


def busy_handler_ran(out):
    want = f"failure handler of rank 1: rank {victim}:"
    return None if mode != "busy" or want in out else f"no \"{want}\": the busy waiter never noticed"


fail = run_failing_job([shoalrun, "--timeout", "20", *launch, "-n", nranks, prog, mode], deadline, f"rank {victim}",
                       extra_checks=[shm_unchanged, busy_handler_ran])
sys.exit(1 if fail else 0)
