#!/usr/bin/env bash
# bench/run.sh NAME [--quick] [--seeds N]: builds if needed, runs one benchmark, writes
# bench/results/NAME.json and prints the headline figures last.
# Every figure here comes from one host; where devices are emulated the
# benchmark says so in its results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:-}
shift || true
cd "$root"
mkdir -p bench/results
case "$name" in
  build_time)
    # Clean build without ccache in a scratch directory, two jobs.
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    start=$(date +%s.%N)
    CCACHE_DISABLE=1 cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    CCACHE_DISABLE=1 ninja -C "$dir" -j 2 >/dev/null
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    printf '{\n  "benchmark": "build_time",\n  "jobs": 2,\n  "cores": %s,\n  "clean_build_s": %.1f\n}\n' \
      "$(nproc)" "$secs" >bench/results/build_time.json
    echo "results: bench/results/build_time.json"
    printf 'clean_build_s: %.1f\n' "$secs"
    ;;
  fuzz)
    # The libFuzzer harnesses (fuzz/, issue 15 item 4): each decoder 10^6
    # times under ASan + UBSan, `nice -n 10`; exits 77 without clang-14.
    "$root/fuzz/run.sh" "$@"
    ;;
  dashboard)
    # The live page's costs (bench/dashboard.py): /api/state with 32 node
    # processes, the supervisor's CPU with 10 pages, training with it on.
    "$root/deploy/build.sh" "$root/build" >/dev/null
    python3 "$root/bench/dashboard.py" "$root/build/apps/salamander" \
      bench/results/dashboard.json "$@"
    ;;
  "")
    echo "usage: bench/run.sh NAME [--quick] [--seeds N]" >&2
    echo "  NAME: build_time training_overhead codec pipeline_overhead bubble transfer" >&2
    echo "        planner_speed hetero recovery failure_during_recovery replan_stability serve" >&2
    echo "        federated federated_niid split footprint continual train_scaling dashboard fuzz" >&2
    exit 2
    ;;
  *)
    "$root/deploy/build.sh" "$root/build" >/dev/null
    SALAMANDER_BIN="$root/build/apps/salamander" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
      "$root/build/bench/salamander_bench" "$name" --out "bench/results/$name.json" "$@"
    ;;
esac
