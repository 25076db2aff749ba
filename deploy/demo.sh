#!/usr/bin/env bash
# The README's main command: install dependencies, build, run the demo.
# For now the demo trains the CNN on Fashion-MNIST on one device and checks
# the saved checkpoint; later it grows into a heterogeneous cluster that
# survives a failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" "$root/build"
bin="$root/build/apps/salamander"
out="$root/runs/demo"
mkdir -p "$out"
echo "== training the CNN on Fashion-MNIST (one device, one epoch)"
"$bin" train --model cnn --epochs 1 --save "$out/cnn.ckpt"
echo "== evaluating the saved checkpoint"
"$bin" eval --load "$out/cnn.ckpt"
echo "demo: checkpoint at $out/cnn.ckpt"
