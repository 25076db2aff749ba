#!/usr/bin/env bash
# Configures and builds salamander (Release, Ninja, ccache when present).
# Usage: deploy/build.sh [--sanitize=address|thread] [BUILD_DIR]
#   plain:                 Release, every target        (default dir: build)
#   --sanitize=address:    ASan+UBSan, -O1 -g           (default dir: build-asan)
#   --sanitize=thread:     TSan, -O1 -g                 (default dir: build-tsan)
# A sanitizer build only builds what `ctest -L 'unit|actor'` runs (the unit
# and actor tests and the salamander binary they start); see
# deploy/sanitizers/README.md and deploy/run-sanitized-tests.sh.
# Two compile jobs: a LibTorch translation unit needs 1-2 GB and the machines
# we target have two cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=
case "${1:-}" in
  --sanitize=address | --sanitize=thread) sanitize=${1#--sanitize=}; shift ;;
  --sanitize=*) echo "build.sh: --sanitize wants address or thread, got '${1#--sanitize=}'" >&2; exit 2 ;;
esac
jobs=${SALAMANDER_JOBS:-2}
start=$(date +%s)
if [ -z "$sanitize" ]; then
  build=${1:-$root/build}
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  fi
  ninja -C "$build" -j "$jobs"
else
  case $sanitize in address) build=${1:-$root/build-asan} ;; thread) build=${1:-$root/build-tsan} ;; esac
  if [ ! -f "$build/build.ninja" ]; then
    # -O1 -g without NDEBUG: readable stacks, assertions on, and torch TUs
    # compile faster than at -O3.
    cmake -S "$root" -B "$build" -G Ninja -DSALAMANDER_SANITIZE="$sanitize" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g"
  elif ! grep -qx "SALAMANDER_SANITIZE:STRING=$sanitize" "$build/CMakeCache.txt"; then
    echo "build.sh: $build was configured with another SALAMANDER_SANITIZE; use another directory" >&2
    exit 2
  fi
  # Catch's test discovery runs the test binaries after linking them: they
  # need the same sanitizer options (suppressions) as the test run.
  . "$root/deploy/sanitizers/env.sh" "$sanitize"
  ninja -C "$build" -j "$jobs" unit_pure_tests unit_operate_tests unit_torch_tests actor_tests salamander
fi
echo "build: done in $(( $(date +%s) - start )) s ($build)"
