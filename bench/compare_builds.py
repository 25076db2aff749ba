#!/usr/bin/env python3
"""Runs benchmarks on two builds alternately and writes their headline
figures side by side.

    bench/compare_builds.py OLD_BUILD NEW_BUILD NAME [NAME ...]
        [--rounds 3] [--quick] [--out bench/results/compare_builds.json]

A build is a CMake build directory holding bench/salamander_bench and
apps/salamander (each build's benchmarks start that build's nodes). Round r
runs every NAME on both builds, old first in odd rounds and new first in
even ones, so that a host that drifts (these machines are shared) weighs on
both alike. A figure holds when the medians are within 5% of each other, or
when the new median lies inside the spread of the old runs. Beside it,
Welch's t of the two builds' means, and whether they differ at the 5% level.

Each run's output is kept in OUT-logs/ (NAME-old-round1.log, ...), and the
runs so far in OUT.partial after each run. Prints a Markdown table per
benchmark and, last, one `key: value` per line:
how many figures were compared and how many hold.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bands import t95

HEADLINE = re.compile(r"^([A-Za-z0-9_]+): (-?[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf)$")


def run(build, name, quick, workdir, log):
    out = os.path.join(workdir, f"{name}-{os.path.basename(build.rstrip('/'))}.json")
    cmd = [os.path.join(build, "bench", "salamander_bench"), name, "--out", out]
    if quick:
        cmd.append("--quick")
    env = dict(os.environ, SALAMANDER_BIN=os.path.join(build, "apps", "salamander"),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.monotonic() - start
    # every run's output is kept: a run that fails says which of its parts did
    with open(log, "w") as f:
        f.write(f"$ {' '.join(cmd)}\nexit code {proc.returncode}, {took:.0f} s\n")
        f.write("--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    if proc.returncode != 0:
        # counted, and the comparison goes on: a run that fails on one
        # build only is itself a difference between the builds
        said = [l for l in proc.stderr.splitlines() if "fail" in l.lower()]
        sys.stderr.write("\n".join(said[-20:]) + "\n")
        sys.stderr.write(f"{name} on {build} failed with exit code {proc.returncode} (log: {log})\n")
        return None, took
    figures = {}
    seen_results = False
    for line in proc.stdout.splitlines():
        if line.startswith("results: "):
            seen_results = True
            continue
        m = HEADLINE.match(line.strip())
        if seen_results and m:
            figures[m.group(1)] = float(m.group(2))
    return figures, took


def holds(old, new):
    if not old or not new:
        return False
    mo, mn = statistics.median(old), statistics.median(new)
    if mo == mn:
        return True
    if mo != 0 and abs(mn - mo) / abs(mo) <= 0.05:
        return True
    return min(old) <= mn <= max(old)


def welch(old, new):
    """Welch's t of new against old and its degrees of freedom, and whether
    the two means differ at the 5% level (two-sided); None with fewer than
    two runs a side."""
    if len(old) < 2 or len(new) < 2:
        return None
    mo, mn = statistics.mean(old), statistics.mean(new)
    vo, vn = statistics.variance(old) / len(old), statistics.variance(new) / len(new)
    if vo + vn == 0:
        return {"t": 0.0 if mo == mn else math.inf, "df": len(old) + len(new) - 2,
                "differs": mo != mn}
    t = (mn - mo) / math.sqrt(vo + vn)
    df = (vo + vn) ** 2 / (vo ** 2 / (len(old) - 1) + vn ** 2 / (len(new) - 1))
    return {"t": t, "df": df, "differs": abs(t) > t95(max(1, int(df)))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="bench/results/compare_builds.json")
    ap.add_argument("--tables-from", metavar="PARTIAL",
                    help="run nothing: tabulate the runs an earlier comparison kept "
                         "in OUT.partial (NAMEs pick which of its benchmarks)")
    a = ap.parse_args()
    if a.tables_from:
        with open(a.tables_from) as f:
            kept = json.load(f)
        missing = [n for n in a.names if n not in kept]
        if missing:
            raise SystemExit(f"{a.tables_from} has no runs of {', '.join(missing)}")
        tabulate(a, {n: kept[n] for n in a.names})
        return
    for b in (a.old, a.new):
        if not os.access(os.path.join(b, "bench", "salamander_bench"), os.X_OK):
            raise SystemExit(f"{b}: no bench/salamander_bench (build it first)")
    logs = os.path.splitext(a.out)[0] + "-logs"
    os.makedirs(logs, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for name in a.names:
            runs = {"old": [], "new": [], "failed": {"old": 0, "new": 0}}
            results[name] = runs
            for r in range(a.rounds):
                order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
                for which in order:
                    log = os.path.join(logs, f"{name}-{which}-round{r + 1}.log")
                    figures, took = run(getattr(a, which), name, a.quick, work, log)
                    if figures is None:
                        runs["failed"][which] += 1
                    else:
                        runs[which].append(figures)
                    print(f"{time.strftime('%H:%M:%S')} {name} round {r + 1} {which}: {took:.0f} s"
                          f"{'' if figures is not None else ' (failed)'}", file=sys.stderr,
                          flush=True)
                    # the runs so far, kept at every step: a long comparison
                    # cut short still leaves what it measured
                    with open(a.out + ".partial", "w") as f:
                        json.dump(results, f, indent=2)
    tabulate(a, results)


def tabulate(a, results):
    """The side-by-side tables, the JSON report and the headline counts."""
    compared = held = 0
    report = {"old": a.old, "new": a.new, "rounds": a.rounds, "quick": a.quick,
              "benchmarks": {}}
    for name, runs in results.items():
        keys = sorted(set().union(set(), *(f.keys() for f in runs["old"] + runs["new"])))
        failed = runs["failed"]
        print(f"\n{name}: runs that failed: old {failed['old']}, new {failed['new']}\n")
        print("| figure | old runs | new runs | new / old (medians) | holds | Welch t (df) |")
        print("|---|---|---|---|---|---|")
        rows = {}
        for k in keys:
            old = [f[k] for f in runs["old"] if k in f]
            new = [f[k] for f in runs["new"] if k in f]
            ok = holds(old, new)
            compared += 1
            held += ok
            mo = statistics.median(old) if old else float("nan")
            mn = statistics.median(new) if new else float("nan")
            ratio = mn / mo if mo else float("nan")
            w = welch(old, new)
            rows[k] = {"old": old, "new": new, "ratio": ratio, "holds": ok, "welch": w}
            fmt = lambda xs: ", ".join(f"{x:.4g}" for x in xs)
            wt = "-" if w is None else (f"{w['t']:.2f} ({w['df']:.1f})"
                                        + (", differs at 5%" if w["differs"] else ""))
            print(f"| {k} | {fmt(old)} | {fmt(new)} | {ratio:.3f} | {'yes' if ok else 'NO'} "
                  f"| {wt} |")
        report["benchmarks"][name] = {"figures": rows, "failed_runs": failed}
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"\nresults: {a.out}")
    print(f"figures_compared: {compared}")
    print(f"figures_holding: {held}")


if __name__ == "__main__":
    main()
