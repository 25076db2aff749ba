#!/usr/bin/env bash
# Configures and builds salamander (Release, Ninja, ccache when present).
# Usage: deploy/build.sh [BUILD_DIR]   (default: build)
# Two compile jobs: a LibTorch translation unit needs 1-2 GB and the machines
# we target have two cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
jobs=${SALAMANDER_JOBS:-2}
start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$build" -j "$jobs"
echo "build: done in $(( $(date +%s) - start )) s ($build)"
