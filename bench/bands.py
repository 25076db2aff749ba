#!/usr/bin/env python3
"""Accuracy against training time over several seeds: the mean of the seeds
with its 95% band (Student t), drawn by gnuplot.

    bench/bands.py bench/results/federated.json bench/results/federated.png

Reads the per-seed results that `bench/run.sh NAME --seeds N` lists in
`seed_results` (or the one run itself), takes every `KEY_curve` detail
("t:acc t:acc ..." in training seconds, or "acc acc ..." one per round) and,
for each curve named on the command line (default: every curve that all
seeds have), steps it on a common grid: the accuracy at time t is the last
evaluation at or before t. A time before every seed has an evaluation is
left out, so each point of a curve is the mean of all its seeds.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

# t(0.975, df), df = 1..30 (as algorithms/stats.cpp)
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(df):
    """t(0.975, df), stepped past 30 as algorithms/stats.cpp does (the two
    must give the same intervals)."""
    if df <= len(T95):
        return T95[df - 1]
    if df <= 40:
        return 2.021
    if df <= 60:
        return 2.000
    if df <= 120:
        return 1.980
    return 1.96


def band(values):
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def parse_curve(text):
    """[(x, acc)]: x is training seconds ("t:acc") or the round (from 1)."""
    points = []
    for i, item in enumerate(text.split()):
        if ":" in item:
            t, a = item.split(":")
            points.append((float(t), float(a)))
        else:
            points.append((float(i + 1), float(item)))
    return points


def at(points, x):
    last = None
    for t, a in points:
        if t <= x + 1e-9:
            last = a
    return last


def seed_runs(top, results_dir):
    """The per-seed results a --seeds run lists in `seed_results` (as written,
    or by name in `results_dir`), or the one run `top` itself."""
    runs = []
    for path in top.get("seed_results") or []:
        for candidate in (path, os.path.join(results_dir, os.path.basename(path))):
            if os.path.exists(candidate):
                with open(candidate) as f:
                    runs.append(json.load(f))
                break
    return runs or [top]


def runs_of(results_path):
    with open(results_path) as f:
        top = json.load(f)
    return seed_runs(top, os.path.dirname(os.path.abspath(results_path)))


def series(runs, names, grid_points=200):
    """{name: [(x, mean, low, high, n)]} over the seeds that have the curve."""
    out = {}
    for name in names:
        curves = [parse_curve(r[name + "_curve"]) for r in runs if r.get(name + "_curve")]
        curves = [c for c in curves if c]
        if not curves:
            continue
        end = max(c[-1][0] for c in curves)
        rows = []
        for i in range(grid_points + 1):
            x = end * i / grid_points
            values = [v for v in (at(c, x) for c in curves) if v is not None]
            # a band over fewer seeds than the rest would be another figure
            if len(values) == len(curves):
                rows.append((x, *band(values), len(values)))
        out[name] = rows
    return out


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        print("usage: bench/bands.py RESULTS.json OUT.png [CURVE ...] [--xlabel TEXT]")
        return 2
    results, png = argv[1], argv[2]
    rest = argv[3:]
    xlabel = "training time (s)"
    if "--xlabel" in rest:
        i = rest.index("--xlabel")
        xlabel = rest[i + 1]
        rest = rest[:i] + rest[i + 2:]
    runs = runs_of(results)
    names = rest or sorted({k[:-len("_curve")] for k in runs[0] if k.endswith("_curve")})
    data = series(runs, names)
    if not data:
        print(f"bands: no curves named {names} in {results}", file=sys.stderr)
        return 1
    seeds = len(runs)
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for k, (name, rows) in enumerate(data.items()):
            path = os.path.join(tmp, f"{k}.dat")
            with open(path, "w") as f:
                for x, mean, low, high, n in rows:
                    f.write(f"{x} {100 * mean} {100 * low} {100 * high} {n}\n")
            colour = k + 1
            plots.append(f"'{path}' using 1:3:4 with filledcurves lc {colour} "
                         f"fs transparent solid 0.2 notitle")
            plots.append(f"'{path}' using 1:2 with lines lc {colour} lw 2 "
                         f"title '{name.replace('_', ' ')}'")
        script = "\n".join([
            "set terminal pngcairo size 1000,600",
            f"set output '{png}'",
            f"set xlabel '{xlabel}'",
            "set ylabel 'test accuracy (%)'",
            "set yrange [*:100]",
            f"set title 'mean of {seeds} seed(s) with its 95% band (Student t)'",
            "set key bottom right",
            "set grid",
            "plot " + ", \\\n  ".join(plots),
        ])
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"bands: wrote {png} ({len(data)} curves, {seeds} seed(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
