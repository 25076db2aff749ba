#!/usr/bin/env bash
# The README's test command: install dependencies, build, run every test.
# CI (.ci/run) calls exactly this.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" "$root/build"
cd "$root/build"
# One LibTorch thread per test process: results are reproducible and two
# test processes share the two cores without oversubscribing them.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
ctest --output-on-failure -j 2 --timeout 900 "$@"
