#!/usr/bin/env python3
"""The Cosmos actions measured (docs/COSMOS.md, Actions): each workload with
no action, with each of SHOAL_COSMOS_ACT=rmw, dsi, migratory, push, xpush, upgrade and with all six, on shm and
on udp (SHOAL_NET_LOCAL=1) at 2 and 4 ranks, interleaved (every action of a
workload back to back, the whole matrix once per round), SHOAL_CRL_STATS=1
on every run (its clock reads are in every time alike).  One JSON line per
run: protocol messages sent (all ranks), operation misses (all ranks), time
(the application's mean step, or the kernels' slowest rank's total), the
actions' counters and the load average before the run.

  bench/cosmos_actions.py BUILD_DIR OUT.jsonl [--rounds 5] [--only SUBSTRING] [--steps N] [--on TR/N]
                          [--acts A:B:...]
      (--steps: the applications' time steps, default 3; --on: one transport and rank count, e.g. udp/2;
       --acts: these actions only besides none, each a name or "all", e.g. push:all)
  BUILD_DIR may be NAME=DIR,NAME=DIR,...: several builds A/B, each run of the
  matrix back to back in every build; the readers then report each build apart
  (a row's workload is prefixed "NAME: ").
  bench/cosmos_actions.py --table OUT.jsonl       (a row per workload: medians against none)
  bench/cosmos_actions.py --summary OUT.jsonl     (medians, spreads, ratios; Water's hand
                                                   tuning against the actions)
"""
import json, os, re, statistics, subprocess, sys, time

NAMES = ["rmw", "dsi", "migratory", "push", "xpush", "upgrade"]
ALL = ",".join(NAMES)
ACTIONS = [""] + NAMES + [ALL]
KERNELS = ["pc1", "pcn", "migratory", "counter"]
APPS = {
    "lu": ["--n=200", "--block=10"],
    "water": ["--molecules=128", "--steps=3"],
    "barnes": ["--bodies=1024", "--steps=3"],
}


def workloads(build, steps):
    k = os.path.join(build, "tests/cosmos/cosmos_kernels")
    for name in KERNELS:
        yield "kernel " + name, [k, name, "50"]
    for app, args in APPS.items():
        exe = os.path.join(build, "apps/crl/crl_" + app)
        args = [x if not x.startswith("--steps=") else "--steps=%d" % steps for x in args]
        yield app, [exe] + args
        yield app + " --fine", [exe] + args + ["--fine"]
        if app == "water":
            yield app + " --untuned", [exe] + args + ["--untuned"]


def run(build, cmd, n, transport, act):
    env = dict(os.environ, SHOAL_CRL_STATS="1", SHOAL_COSMOS_ACT=act)
    if transport == "udp":
        env.update(SHOAL_TRANSPORT="udp", SHOAL_NET_LOCAL="1", SHOAL_IFACE="lo", SHOAL_NET_DEAD_MS="15000")
    load = os.getloadavg()[0]
    t0 = time.time()
    p = subprocess.run([os.path.join(build, "tools/shoalrun"), "-n", str(n)] + cmd, env=env,
                       capture_output=True, text=True, timeout=600)
    out = p.stdout
    if p.returncode:
        raise SystemExit("failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), out[-2000:], p.stderr[-2000:]))
    msgs = sum(int(m) for m in re.findall(r"total protocol msgs\s+(\d+)", out))
    misses = sum(int(m) for m in re.findall(r"rgn_start_(?:read|write)\s+\d+\s+\d+\s+(\d+)", out))
    t = re.search(r" time=([0-9.]+)", out)
    secs = float(t.group(1)) if t else max(float(x) for x in re.findall(r"total ([0-9.]+)\n", out)) / 1e3
    acts = {}
    for name, *v in re.findall(r"cosmos action (\w+): taken (\d+), confirmed (\d+), wasted (\d+), throttled (\d+)", out):
        s = acts.setdefault(name, [0, 0, 0, 0])
        for i, x in enumerate(v):
            s[i] += int(x)
    return {"msgs": msgs, "misses": misses, "time": secs, "acts": acts, "load": load, "wall": time.time() - t0}


def builds_of(arg):
    """[(name, dir)]: one unnamed build, or NAME=DIR,... to compare."""
    if "=" not in arg:
        return [(None, arg)]
    return [tuple(x.split("=", 1)) for x in arg.split(",")]


def measure(builds, out, rounds, only, steps, on, actions):
    with open(out, "a") as f:
        for rnd in range(rounds):
            for transport in ["shm", "udp"]:
                for n in [2, 4]:
                    if on and on != "%s/%d" % (transport, n):
                        continue
                    for name, _ in workloads("", steps):
                        if only and only not in name:
                            continue
                        for act in actions:
                            for label, build in builds:
                                cmd = dict(workloads(build, steps))[name]
                                r = run(build, cmd, n, transport, act)
                                r.update(round=rnd, transport=transport, n=n, workload=name, act=act or "none")
                                if label:
                                    r["build"] = label
                                f.write(json.dumps(r) + "\n")
                                f.flush()


def records(path):
    """The runs of OUT.jsonl, a build's name (A/B runs) prefixed to the workload."""
    for line in open(path):
        r = json.loads(line)
        if "build" in r:
            r["workload"] = r["build"] + ": " + r["workload"]
        yield r


def summary(path):
    rows = {}
    loads = []
    for r in records(path):
        rows.setdefault((r["workload"], r["transport"], r["n"]), {}).setdefault(r["act"], []).append(r)
        loads.append(r["load"])
    print("load average before the runs: median %.1f, min %.1f, max %.1f" %
          (statistics.median(loads), min(loads), max(loads)))
    print("| workload | tr | n | action | msgs | misses | time | msgs vs none | time vs none | spread | taken/confirmed/wasted/throttled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (w, tr, n), by in rows.items():
        base = by.get("none")
        bm = statistics.median(x["msgs"] for x in base)
        bt = statistics.median(x["time"] for x in base)
        for act in ["none"] + [a for a in by if a != "none"]:  # in the order they ran
            xs = by.get(act)
            if not xs:
                continue
            m = statistics.median(x["msgs"] for x in xs)
            mi = statistics.median(x["misses"] for x in xs)
            ts = sorted(x["time"] for x in xs)
            t = statistics.median(ts)
            spread = "%.0f-%.0f %%" % (100 * (ts[0] / t - 1), 100 * (ts[-1] / t - 1))
            acts = " ".join("%s %d/%d/%d/%d" % ((k,) + tuple(statistics.median(x["acts"][k][i] for x in xs)
                                                             for i in range(4)))
                            for k in act.split(",") if k in xs[0]["acts"])
            print("| %s | %s | %d | %s | %d | %d | %.2f ms | %+.1f %% | %+.1f %% | %s | %s |" %
                  (w, tr, n, act, m, mi, t * 1e3, 100 * (m / bm - 1) if bm else 0, 100 * (t / bt - 1), spread, acts))


def hand(path):
    """Water's hand tuning against the actions: the gain of each over --untuned."""
    med = {}
    labels = set()
    for r in records(path):
        labels.add(r.get("build", ""))
        med.setdefault((r["workload"], r["transport"], r["n"], r["act"]), []).append(r)
    print("| tr | n | what | msgs | time | msgs saved | time saved | of the hand tuning's (msgs, time) |")
    print("|---|---|---|---|---|---|---|---|")
    for label, tr, n in ((b, t, k) for b in sorted(labels) for t in ["shm", "udp"] for k in [2, 4]):
        pre = label + ": " if label else ""

        def m(w, a, k):
            xs = med.get((pre + w, tr, n, a))
            return statistics.median(x[k] for x in xs) if xs else None
        bm, bt = m("water --untuned", "none", "msgs"), m("water --untuned", "none", "time")
        if bm is None:
            continue
        hm, ht = m("water", "none", "msgs"), m("water", "none", "time")
        if hm is None:
            continue
        rows = [("untuned", bm, bt), ("hand-tuned", hm, ht)]
        ran = dict.fromkeys(k[3] for k in med if k[:3] == (pre + "water --untuned", tr, n) and k[3] != "none")
        rows += [("untuned + " + a, m("water --untuned", a, "msgs"), m("water --untuned", a, "time")) for a in ran]
        for what, xm, xt in rows:
            if xm is None:
                continue
            sm, st = bm - xm, bt - xt
            rec = "" if what in ("untuned", "hand-tuned") else "%.0f %%, %.0f %%" % (
                100 * sm / (bm - hm) if bm != hm else 0, 100 * st / (bt - ht) if bt != ht else 0)
            print("| %s | %d | %s | %d | %.2f ms | %+.1f %% | %+.1f %% | %s |" %
                  (tr, n, pre + what, xm, xt * 1e3, 100 * sm / bm, 100 * st / bt, rec))


def condensed(path):
    """One row per workload, transport and ranks: messages and time against no action."""
    med = {}
    for r in records(path):
        med.setdefault((r["workload"], r["transport"], r["n"]), {}).setdefault(r["act"], []).append(r)
    acts = NAMES + [ALL]
    print("| workload | tr | n | msgs | misses | " + " | ".join("msgs " + a.replace(ALL, "all") for a in acts) +
          " | time | " + " | ".join("time " + a.replace(ALL, "all") for a in acts) + " |")
    print("|---" * (6 + 2 * len(acts)) + "|")
    for (w, tr, n), by in med.items():
        def md(a, k):
            return statistics.median(x[k] for x in by[a]) if a in by else None
        bm, bt = md("none", "msgs"), md("none", "time")
        cells = ["%+.1f %%" % (100 * (md(a, "msgs") / bm - 1)) if md(a, "msgs") is not None else "" for a in acts]
        tcells = ["%+.0f %%" % (100 * (md(a, "time") / bt - 1)) if md(a, "time") is not None else "" for a in acts]
        print("| %s | %s | %d | %d | %d | %s | %.2f ms | %s |" % (w, tr, n, bm, md("none", "misses"), " | ".join(cells),
                                                               bt * 1e3, " | ".join(tcells)))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "--table":
        condensed(a[1])
    elif a and a[0] == "--summary":
        summary(a[1])
        print()
        hand(a[1])
    else:
        rounds = int(a[a.index("--rounds") + 1]) if "--rounds" in a else 5
        only = a[a.index("--only") + 1] if "--only" in a else None
        steps = int(a[a.index("--steps") + 1]) if "--steps" in a else 3
        on = a[a.index("--on") + 1] if "--on" in a else None
        actions = ACTIONS
        if "--acts" in a:
            actions = [""] + [ALL if x == "all" else x for x in a[a.index("--acts") + 1].split(":")]
        measure(builds_of(a[0]), a[1], rounds, only, steps, on, actions)
