#!/usr/bin/env bash
# fuzz/run.sh [--runs N] [--seconds S] [--quick] [--no-build] [--report-only] [NAME...]:
# what `bench/run.sh fuzz` runs.
#
# Builds the harnesses (fuzz/build.sh), then runs each for N executions
# (default 1,000,000; --quick: 20,000), or until S seconds have passed if
# that comes first, under `nice -n 10`, SALAMANDER_FUZZ_PARALLEL at a time
# (default 2),
# starting from its committed seeds (fuzz/corpus/NAME) and regression inputs
# (fuzz/regressions/NAME); new inputs it finds go to build-fuzz/work/NAME,
# anything it finds to build-fuzz/findings/NAME. Writes
# bench/results/fuzz.json and prints the headline figures last, ending with
# fuzz_execs_min (the fewest executions any harness ran) and fuzz_findings.
# Exits 77 when clang-14 or libFuzzer is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SALAMANDER_FUZZ_BUILD:-$root/build-fuzz}
runs=1000000
seconds=0
report_only=0
build_first=1
parallel=${SALAMANDER_FUZZ_PARALLEL:-2}
names=()
while (($#)); do
  case $1 in
  --runs) runs=$2; shift ;;
  --seconds) seconds=$2; shift ;;
  --report-only) report_only=1 ;; # fuzz.json from the last runs' logs
  --no-build) build_first=0 ;;     # run the harnesses as last built
  --quick) runs=20000 ;;
  -*) echo "usage: fuzz/run.sh [--runs N] [--seconds S] [--quick] [NAME...]" >&2; exit 2 ;;
  *) names+=("$1") ;;
  esac
  shift
done
all=(console cluster_file auth infer_request stream metrics tensor snapshot checkpoint)
((${#names[@]})) || names=("${all[@]}")

mkdir -p "$build"
if ((report_only)); then
  parallel=0
fi
set +e
((report_only || !build_first)) || "$root/fuzz/build.sh" >"$build/build.log" 2>&1
rc=$?
set -e
if ((rc == 77)); then
  tail -1 "$build/build.log" >&2
  exit 77
elif ((rc != 0)); then
  tail -30 "$build/build.log" >&2
  exit "$rc"
fi

# The smallest inputs that still hold every seed; the LibTorch harnesses'
# cost grows with the tensors an input claims, and 4 KiB frames hold enough
# structure (ten layers of named tensors) for the decoder's every branch.
max_len() {
  case $1 in
  infer_request) echo 8192 ;;
  metrics) echo 2048 ;; # several whole events; parsing is most of its cost
  *) echo 4096 ;;
  esac
}

# Quarantine and malloc fill sized for a million short runs: ASan's defaults
# (256 MB of freed memory held back, 4 KiB filled per allocation) made the
# JSON harnesses page-fault most of their time; a use after free within one
# input is still caught.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:max_malloc_fill_size=256:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

one() {
  local name=$1
  local work=$build/work/$name found=$build/findings/$name log=$build/logs/$name.log
  mkdir -p "$work" "$found" "$build/logs"
  rm -f "$found"/*
  local start end status=0 dirs=("$work" "$root/fuzz/corpus/$name")
  [[ -d $root/fuzz/regressions/$name ]] && dirs+=("$root/fuzz/regressions/$name")
  start=$(date +%s.%N)
  /usr/bin/time -f "cpu_s %U %S" -o "$build/logs/$name.time" \
    nice -n 10 "$build/${name}_fuzz" -runs="$runs" -max_total_time="$seconds" \
    -max_len="$(max_len "$name")" \
    -timeout=300 -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$found/" \
    "${dirs[@]}" >"$log" 2>&1 || status=$?
  end=$(date +%s.%N)
  local execs cpu findings
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
  cpu=$(awk '/^cpu_s/ {print $2 + $3}' "$build/logs/$name.time")
  # (slow-unit-* are inputs that took long, not failures: on a loaded host
  # at nice 10 that is the scheduler; a hang shows as timeout-* after 300 s)
  findings=$(find "$found" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' \
    -o -name 'timeout-*' \) | wc -l)
  if ((status != 0 && findings == 0)); then
    findings=1 # died without an artifact (e.g. an error before fuzzing began)
  fi
  printf '{"name": "%s", "execs": %s, "seconds": %.1f, "cpu_s": %.1f, "findings": %s, "exit": %s, "new_units": %s}\n' \
    "$name" "${execs:-0}" "$(echo "$end - $start" | bc)" "${cpu:-0}" "$findings" "$status" \
    "$(find "$work" -type f | wc -l)" >"$build/logs/$name.json"
  echo "fuzz: $name: ${execs:-0} executions, $findings finding(s) ($(basename "$log"))" >&2
}
export -f one max_len
export build root runs seconds

((report_only)) || printf '%s\n' "${names[@]}" | xargs -P "$parallel" -I{} bash -c 'one {}'

mkdir -p "$root/bench/results"
/usr/bin/python3 - "$build/logs" "$runs" "$seconds" "$root/bench/results/fuzz.json" "${names[@]}" <<'PY'
import json, sys
logs, runs, seconds, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names = sys.argv[5:]
rows = [json.load(open(f"{logs}/{n}.json")) for n in names]
result = {
    "benchmark": "fuzz",
    "runs_asked": runs,
    "seconds_allowed": seconds or None,
    "sanitizers": "address,undefined (-fno-sanitize-recover=undefined)",
    "compiler": "clang-14 libFuzzer",
    "harnesses": rows,
    "fuzz_execs_min": min(r["execs"] for r in rows),
    "fuzz_findings": sum(r["findings"] for r in rows),
}
json.dump(result, open(out, "w"), indent=2)
print(f"results: {out}")
for r in rows:
    print(f"{r['name']}: {r['execs']} execs in {r['seconds']:.0f} s "
          f"({r['cpu_s']:.0f} s CPU), {r['findings']} finding(s)")
print(f"fuzz_harnesses: {len(rows)}")
print(f"fuzz_cpu_s_total: {sum(r['cpu_s'] for r in rows):.0f}")
print(f"fuzz_execs_min: {result['fuzz_execs_min']}")
print(f"fuzz_findings: {result['fuzz_findings']}")
PY
