"""Shared by the scripts that check how a job ends: runs a command, prints
its output, and judges that it failed, within a deadline, with a message
naming what went wrong, and that no rank carried on ("survived")."""
import subprocess
import time


def run_failing_job(cmd, deadline_s, must_say, env=None, extra_checks=()):
    """Runs cmd; returns the list of failures (empty: as expected).
    extra_checks are callables taking the output and returning a failure
    message or None."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline_s + 30, env=env)
    elapsed = time.monotonic() - t0
    out = p.stdout + p.stderr
    print(out)
    print(f"exit {p.returncode} after {elapsed:.3f} s")
    fail = []
    if p.returncode == 0:
        fail.append("the job exited 0")
    if elapsed > deadline_s:
        fail.append(f"job took {elapsed:.3f} s to end, limit {deadline_s} s")
    if must_say not in out:
        fail.append(f"no message says \"{must_say}\"")
    if "survived" in out:
        fail.append("a rank carried on as if nothing happened")
    fail += [m for m in (check(out) for check in extra_checks) if m]
    for f in fail:
        print("FAIL:", f)
    return fail
