#!/usr/bin/env python3
"""Replays a job's traces with shoal-cosmos and checks the overall accuracy:
    check_accuracy.py SHOAL_COSMOS DIR (--min X | --max X) [replay options...]
--min: the accuracy a kernel's signature must reach; --max: a ceiling for
a kernel with no signature (random), so that it stays a floor to compare
with.  Prints the replay's row either way."""
import json
import subprocess
import sys


def main():
    if len(sys.argv) < 5 or sys.argv[3] not in ("--min", "--max"):
        sys.exit(__doc__)
    tool, trace_dir, bound, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    cmd = [tool, "replay", *sys.argv[5:], "--json", trace_dir]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    rows = json.loads(out.stdout)
    if len(rows) != 1:
        sys.exit(f"{' '.join(cmd)}: {len(rows)} rows, expected one configuration")
    row = rows[0]
    print(f"{' '.join(sys.argv[5:])}: cache {row['cache']:.4f} home {row['home']:.4f} "
          f"overall {row['overall']:.4f} over {row['messages']} messages")
    ok = row["overall"] >= limit if bound == "--min" else row["overall"] <= limit
    if not ok:
        sys.exit(f"overall accuracy {row['overall']:.4f}, expected {'>=' if bound == '--min' else '<='} {limit}")
    print("ok")


if __name__ == "__main__":
    main()
