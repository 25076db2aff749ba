#!/usr/bin/env bash
# The README's main command: install dependencies, build, run the demo.
#
# The demo starts four `salamander node` processes on this machine (one per
# device, on loopback; the fourth EMULATES a slower device with a quarter of
# a core), profiles them, trains the CNN on Fashion-MNIST as a pipeline
# planned over them, kills one node with SIGKILL midway and recovers from
# the replicas without a restart, then prints throughput and test accuracy
# and checks the saved checkpoint.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" "$root/build"
bin="$root/build/apps/salamander"
out="$root/runs/demo"
mkdir -p "$out"
export SALAMANDER_LOG_DIR="$out/logs"
echo "== pipeline training of the CNN on 4 node processes (loopback); node2 is killed after 6 s"
SALAMANDER_NODE_ARGS_4="--cpu-share 0.25" SALAMANDER_KILL_AFTER=2:6 \
  "$root/deploy/local-cluster.sh" 4 "$out/cluster.toml" \
  "$bin" supervisor --cluster "$out/cluster.toml" --model cnn --epochs 1 \
  --micro-batches 4 --schedule 1f1b --plan auto --save "$out/cnn.ckpt"
echo "== evaluating the saved checkpoint on one device"
"$bin" eval --load "$out/cnn.ckpt"
echo "demo: cluster file $out/cluster.toml, node logs in $out/logs, checkpoint $out/cnn.ckpt"
