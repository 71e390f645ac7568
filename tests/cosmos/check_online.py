#!/usr/bin/env python3
"""The online predictor (SHOAL_COSMOS=1) sees the stream the trace records:
    check_online.py SHOALRUN SHOAL_COSMOS DIR NRANKS DEPTH FILTER SENDER_INDEX -- PROGRAM ARGS...
runs the program with SHOAL_COSMOS=1, SHOAL_CRL_STATS=1 and
SHOAL_COSMOS_TRACE=DIR, sums the hits and messages every rank's statistics
print for each side, and requires shoal-cosmos replay of the same traces
with the same configuration to count exactly the same."""
import json
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"cosmos \(depth (\d), filter (\d)(, sender index)?\): hits cache (\d+) of (\d+) "
                  r"\([0-9.]+ %\), home (\d+) of (\d+)")
COST = re.compile(r"cosmos: ([0-9.]+) ns per message")


def main():
    if len(sys.argv) < 10 or sys.argv[8] != "--":
        sys.exit(__doc__)
    shoalrun, tool, trace_dir, nranks, depth, filt, sender_index = sys.argv[1:8]
    program = sys.argv[9:]
    shutil.rmtree(trace_dir, ignore_errors=True)
    os.makedirs(trace_dir)
    env = dict(os.environ, SHOAL_COSMOS="1", SHOAL_CRL_STATS="1", SHOAL_COSMOS_TRACE=trace_dir,
               SHOAL_COSMOS_DEPTH=depth, SHOAL_COSMOS_FILTER=filt, SHOAL_COSMOS_SENDER_INDEX=sender_index)
    run = subprocess.run([shoalrun, "--timeout", "60", "-n", nranks, *program], env=env, capture_output=True,
                         text=True, timeout=90)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        sys.exit(f"the program exited {run.returncode}: {run.stderr.strip()}")
    lines = LINE.findall(run.stdout)
    if len(lines) != int(nranks):
        sys.exit(f"{len(lines)} ranks printed the predictor's counts, expected {nranks}")
    hits_c = sum(int(m[3]) for m in lines)
    msgs_c = sum(int(m[4]) for m in lines)
    hits_h = sum(int(m[5]) for m in lines)
    msgs_h = sum(int(m[6]) for m in lines)
    if any((m[0], m[1], bool(m[2])) != (depth, filt, sender_index == "1") for m in lines):
        sys.exit("a rank printed another configuration than the one set")
    costs = [float(c) for c in COST.findall(run.stdout)]
    if len(costs) != int(nranks) or not all(c >= 0 for c in costs):
        sys.exit(f"cost lines: {costs}")
    cmd = [tool, "replay", "--depth", depth, "--filter", filt, "--json", trace_dir]
    if sender_index == "1":
        cmd.insert(-2, "--sender-index")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    row = json.loads(out.stdout)[0]
    print(f"online: cache {hits_c}/{msgs_c}, home {hits_h}/{msgs_h}; replay: cache {row['cache']} of "
          f"{row['cache_messages']}, home {row['home']} of {row['home_messages']}")
    if (row["cache_messages"], row["home_messages"]) != (msgs_c, msgs_h):
        sys.exit("the replay counts other messages than the online predictor")
    for name, hits, msgs in (("cache", hits_c, msgs_c), ("home", hits_h, msgs_h)):
        if msgs and round(row[name] * msgs) != hits:
            sys.exit(f"{name}: the replay's accuracy {row[name]} over {msgs} is not the online {hits} hits")
    if msgs_c + msgs_h == 0:
        sys.exit("no messages: nothing was compared")
    print("ok")


if __name__ == "__main__":
    main()
