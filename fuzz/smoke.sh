#!/usr/bin/env bash
# The fuzzers' CI smoke test (ctest -L fuzz): builds the harnesses, replays
# every regression input (fuzz/regressions/NAME: each once, all must pass),
# then fuzzes each harness for a few seconds from its seeds. Exits 77 (a
# skip) when clang-14 or libFuzzer is missing.
#
#   SALAMANDER_FUZZ_SMOKE_S   seconds per harness (default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SALAMANDER_FUZZ_BUILD:-$root/build-fuzz}
seconds=${SALAMANDER_FUZZ_SMOKE_S:-3}
names=(console cluster_file auth infer_request stream metrics tensor snapshot checkpoint)

mkdir -p "$build"
start=$(date +%s)
set +e
"$root/fuzz/build.sh" >"$build/build.log" 2>&1
rc=$?
set -e
if ((rc == 77)); then
  echo "SKIP: $(tail -1 "$build/build.log")"
  exit 77
elif ((rc != 0)); then
  tail -40 "$build/build.log"
  echo "FAIL: the harnesses do not build"
  exit 1
fi
echo "built in $(($(date +%s) - start)) s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:max_malloc_fill_size=256:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()
for name in "${names[@]}"; do
  bin=$build/${name}_fuzz
  mkdir -p "$scratch/$name/work" "$scratch/$name/found"
  regressions=("$root/fuzz/regressions/$name"/*)
  if [[ -e ${regressions[0]} ]]; then
    if ! "$bin" "${regressions[@]}" >"$scratch/$name/replay.log" 2>&1; then
      tail -30 "$scratch/$name/replay.log"
      failed+=("$name: a regression input fails again")
      continue
    fi
  else
    regressions=()
  fi
  if ! "$bin" -max_total_time="$seconds" -max_len=4096 -timeout=120 -print_final_stats=1 \
    -artifact_prefix="$scratch/$name/found/" "$scratch/$name/work" \
    "$root/fuzz/corpus/$name" >"$scratch/$name/fuzz.log" 2>&1; then
    tail -30 "$scratch/$name/fuzz.log"
    for f in "$scratch/$name/found"/*; do
      [[ -e $f ]] && echo "input (base64): $(base64 -w0 "$f" | head -c 2000)"
    done
    failed+=("$name: the fuzzer found an input that fails")
    continue
  fi
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$scratch/$name/fuzz.log" | tail -1)
  echo "$name: ${#regressions[@]} regression input(s) pass; ${execs:-0} executions in ${seconds} s, no finding"
done
echo "smoke: $(($(date +%s) - start)) s in all"
if ((${#failed[@]})); then
  printf 'FAIL: %s\n' "${failed[@]}"
  exit 1
fi
