#!/usr/bin/env python3
"""Shared memory under a memory cgroup limit is SHOAL_ENOMEM, not the OOM killer.

Creates a memory cgroup limited to 256 MiB as a child of this process's
own (v1, or v2 where that one may have children with the memory
controller), runs jobs inside it, and removes it.  In it:
  - shoal_seg_create and shoal_mem_create of 512 MiB return SHOAL_ENOMEM
    on every rank, and 1 MiB still works (test_seg cgroup);
  - shoal_init with rings of 256 MiB per rank returns SHOAL_ENOMEM;
each with the log line naming the cgroup, and no rank killed.
Exit 77 (skip) when no memory cgroup can be created here.

usage: check_cgroup.py SHOALRUN TEST_SEG
"""
import os
import subprocess
import sys
import time

LIMIT = 256 << 20
SKIP = 77


def memory_cgroup_dir():
    """The directory of this process's memory cgroup and its version."""
    v1 = v2 = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, (fstype, _src, opts) = left.split(), right.split()[:3]
            if fstype == "cgroup" and "memory" in opts.split(","):
                v1 = (fields[4], fields[3])
            elif fstype == "cgroup2":
                v2 = (fields[4], fields[3])
    with open("/proc/self/cgroup") as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    if v1:
        path = next((p for _, c, p in lines if "memory" in c.split(",")), None)
        mount, version, files = v1, 1, ("memory.limit_in_bytes", "tasks")
    elif v2:
        path = next((p for h, c, p in lines if h == "0" and c == ""), None)
        mount, version, files = v2, 2, ("memory.max", "cgroup.procs")
    else:
        return None
    if path is None:
        return None
    point, root = mount
    if root != "/" and path.startswith(root):
        path = path[len(root):]
    return os.path.join(point, path.lstrip("/")), version, files


def make_cgroup():
    found = memory_cgroup_dir()
    if not found:
        return None, "no memory cgroup hierarchy is mounted"
    parent, version, (limit_file, _) = found
    cg = os.path.join(parent, "shoal-test-%d" % os.getpid())
    try:
        os.mkdir(cg)
    except OSError as e:
        return None, "cannot create a cgroup under %s: %s" % (parent, e)
    try:
        with open(os.path.join(cg, limit_file), "w") as f:
            f.write(str(LIMIT))
    except OSError as e:
        os.rmdir(cg)
        return None, "cannot limit cgroup %s (v%d): %s" % (cg, version, e)
    return cg, None


def remove_cgroup(cg):
    # The memory of the jobs' memfds is uncharged shortly after they exit.
    deadline = time.monotonic() + 10
    while True:
        try:
            os.rmdir(cg)
            return
        except OSError as e:
            if time.monotonic() > deadline:
                print("check_cgroup: cannot remove %s: %s" % (cg, e), file=sys.stderr)
                return
            time.sleep(0.1)


def run_inside(cg, cmd, env=None):
    procs = os.path.join(cg, "cgroup.procs")
    wrapped = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs] + cmd
    p = subprocess.run(wrapped, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stderr


def expect(name, status, err, cg):
    ok = True
    if status != 0:
        print("FAIL %s: exit status %d (137: a rank was killed by signal 9)" % (name, status))
        ok = False
    if "memory cgroup %s (limit %d bytes)" % (cg, LIMIT) not in err:
        print("FAIL %s: no log line naming the cgroup %s" % (name, cg))
        ok = False
    if not ok:
        print("--- stderr of %s:\n%s" % (name, err))
    else:
        print("ok %s" % name)
    return ok


def main():
    shoalrun, test_seg = sys.argv[1], sys.argv[2]
    cg, why = make_cgroup()
    if not cg:
        print("check_cgroup: skipped: %s" % why)
        return SKIP
    try:
        status, err = run_inside(cg, [shoalrun, "-n", "2", test_seg, "cgroup"])
        ok = expect("seg_create/mem_create of 512 MiB", status, err, cg)
        # 2 ranks x 2 classes x 2^20 slots x 64 bytes = 256 MiB of rings per rank
        status, err = run_inside(cg, [shoalrun, "-n", "2", test_seg, "init-fails", "-9"],
                                 {"SHOAL_SHM_RING_SLOTS": str(1 << 20)})
        ok = expect("shoal_init with 256 MiB of rings", status, err, cg) and ok
    finally:
        remove_cgroup(cg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
