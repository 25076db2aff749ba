#!/usr/bin/env bash
# Builds the libFuzzer harnesses into build-fuzz/ with clang-14 (ASan, UBSan).
#
#   fuzz/build.sh            all nine harnesses
#   fuzz/build.sh --no-torch the six that need no LibTorch (seconds)
#   fuzz/build.sh seeds      rebuilds, then rewrites the seed files made with
#                            the project's encoders (stream logs, tensor and
#                            snapshot frames, checkpoints) in fuzz/corpus/;
#                            the hand-written seeds are kept
#
# Exits 77 when clang-14 or libFuzzer is missing (deploy/install-deps.sh
# installs clang-14 libfuzzer-14-dev libclang-rt-14-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SALAMANDER_FUZZ_BUILD:-$root/build-fuzz}
jobs=${SALAMANDER_FUZZ_JOBS:-2}

missing() {
  echo "fuzz: $1; install clang-14 libfuzzer-14-dev libclang-rt-14-dev (deploy/install-deps.sh)" >&2
  exit 77
}
command -v clang-14 >/dev/null || missing "clang-14 is not installed"
command -v clang++-14 >/dev/null || missing "clang++-14 is not installed"
rt=$(clang++-14 -print-resource-dir)/lib/linux
[[ -f $rt/libclang_rt.fuzzer-x86_64.a || -f $rt/libclang_rt.fuzzer-aarch64.a ]] ||
  missing "libFuzzer (libclang_rt.fuzzer) is not in $rt"
[[ -f $rt/libclang_rt.asan-x86_64.a || -f $rt/libclang_rt.asan-aarch64.a ]] ||
  missing "AddressSanitizer's runtime is not in $rt"

torch=ON
seeds=0
for arg in "$@"; do
  case $arg in
  --no-torch) torch=OFF ;;
  seeds) seeds=1 ;;
  *) echo "usage: fuzz/build.sh [--no-torch] [seeds]" >&2; exit 2 ;;
  esac
done

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root/fuzz" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DSALAMANDER_FUZZ_TORCH=$torch >/dev/null
else
  cmake "$build" -DSALAMANDER_FUZZ_TORCH=$torch >/dev/null
fi
cmake --build "$build" -j "$jobs"

if ((seeds)); then
  # the harnesses whose seeds come from the project's encoders
  for name in stream tensor snapshot checkpoint; do
    [[ -x $build/${name}_fuzz ]] || continue
    mkdir -p "$root/fuzz/corpus/$name"
    SALAMANDER_FUZZ_WRITE_SEEDS="$root/fuzz/corpus/$name" "$build/${name}_fuzz" >/dev/null 2>&1
  done
fi
