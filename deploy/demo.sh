#!/usr/bin/env bash
# The README's main command: install dependencies, build, run the demo.
#
# The demo starts four `salamander node` processes on this machine (one per
# emulated device, on loopback), trains the CNN on Fashion-MNIST as a 4-stage
# pipeline over them with live progress, then prints throughput and test
# accuracy and checks the saved checkpoint.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" "$root/build"
bin="$root/build/apps/salamander"
out="$root/runs/demo"
mkdir -p "$out"
export SALAMANDER_LOG_DIR="$out/logs"
echo "== pipeline training of the CNN on 4 node processes (loopback)"
"$root/deploy/local-cluster.sh" 4 "$out/cluster.toml" \
  "$bin" supervisor --cluster "$out/cluster.toml" --model cnn --epochs 1 \
  --micro-batches 4 --schedule 1f1b --save "$out/cnn.ckpt"
echo "== evaluating the saved checkpoint on one device"
"$bin" eval --load "$out/cnn.ckpt"
echo "demo: cluster file $out/cluster.toml, node logs in $out/logs, checkpoint $out/cnn.ckpt"
