#!/usr/bin/env bash
# The benchmark runner as bench/run.sh calls it: an unknown option or a bad
# --seeds is an error (exit 2, saying which), and --seeds N runs N seeds and
# prints each headline figure's mean, n and 95% interval last (the codec
# benchmark, --quick: about a second a run).
# Usage: bench_cli_test.sh PATH/TO/salamander_bench
set -euo pipefail
bench="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
refused() {
  local pattern="$1"
  shift
  local out rc=0
  out=$("$bench" "$@" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "salamander_bench $* exited $rc, not 2: $out"
  grep -qF -- "$pattern" <<<"$out" || fail "salamander_bench $*: no '$pattern' in: $out"
}
refused "unknown option '--quik'" codec --quik
refused "--seeds takes a whole number from 2 to 999, got '1'" codec --seeds 1
refused "--seeds takes a whole number from 2 to 999, got 'x'" codec --seeds x
refused "--seeds needs a value" codec --seeds
refused "no benchmark named 'nosuch'" nosuch

out=$(OMP_NUM_THREADS=1 "$bench" codec --quick --seeds 3 --out "$work/codec.json" 2>"$work/err") ||
  fail "codec --seeds 3: $(tail -5 "$work/err")"
for k in 1 2 3; do
  [ -s "$work/codec.seed$k.json" ] || fail "no results of seed $k"
done
tail -4 <<<"$out" | head -1 | grep -q "^codec_over_memcpy_64mb: " || fail "the mean is not printed last: $out"
tail -3 <<<"$out" | head -1 | grep -q "^codec_over_memcpy_64mb_n: 3$" || fail "n is not 3: $out"
python3 - "$work" <<'PY' || fail "the aggregate does not hold up"
import json, statistics, sys
d = sys.argv[1]
runs = [json.load(open(f"{d}/codec.seed{k}.json"))["codec_over_memcpy_64mb"] for k in (1, 2, 3)]
agg = json.load(open(f"{d}/codec.json"))
assert agg["seeds"] == 3 and agg["codec_over_memcpy_64mb_values"] == runs, agg
mean = statistics.mean(runs)
half = 4.303 * statistics.stdev(runs) / 3 ** 0.5  # t(0.975, 2)
assert abs(agg["codec_over_memcpy_64mb"] - mean) < 1e-9, (agg, mean)
assert abs(agg["codec_over_memcpy_64mb_ci_low"] - (mean - half)) < 1e-9
assert abs(agg["codec_over_memcpy_64mb_ci_high"] - (mean + half)) < 1e-9
PY
echo "bench_cli_test: all checks passed"
