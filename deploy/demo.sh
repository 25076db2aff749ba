#!/usr/bin/env bash
# The README's main command: install dependencies, build, run the demo.
#
# The demo starts four `salamander node` processes on this machine (one per
# device, on loopback; the fourth EMULATES a slower device with a quarter of
# a core), profiles them, trains a small ViT on Fashion-MNIST for an epoch
# as the planner and schedule auto choose (FTPipeHD's asynchronous pipeline,
# which they predict faster than a flushed pipeline or data parallelism
# here; the plan line names each stage's node and layer range), kills one
# node with SIGKILL midway and recovers from the replicas without a restart
# (the progress line shows it), then prints throughput and test accuracy,
# checks the saved checkpoint and draws the run's metrics (throughput and
# loss over time, the failure marked) to a PNG.
# Then it serves that checkpoint over HTTP as a pipeline on three node
# processes, under load, through another SIGKILL (deploy/serve-demo.sh).
# Nodes and supervisor share a fresh cluster secret; a node without it would
# be refused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/deploy/install-deps.sh"
"$root/deploy/build.sh" "$root/build"
bin="$root/build/apps/salamander"
out="$root/runs/demo"
mkdir -p "$out"
export SALAMANDER_LOG_DIR="$out/logs"
SALAMANDER_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export SALAMANDER_SECRET
. "$root/deploy/free_port.sh"
port=$(free_port)
echo "== training a ViT (4 blocks) on 4 node processes (loopback), planned and scheduled"
echo "   by --plan auto --schedule auto; node4 EMULATES a device with a quarter of a core;"
echo "   node2 is killed (SIGKILL) after 30 s. 'plan vN: nodeK[a,b) ...' gives each"
echo "   stage's node and its layers a to b-1"
echo "   (attach with: $bin console 127.0.0.1:$port; watch it in a browser at the"
echo "   'dashboard:' address printed below, actions with the secret in $out/secret)"
(umask 077 && printf '%s' "$SALAMANDER_SECRET" >"$out/secret")
SALAMANDER_NODE_ARGS_4="--cpu-share 0.25" SALAMANDER_KILL_AFTER=2:30 \
  "$root/deploy/local-cluster.sh" 4 "$out/cluster.toml" \
  "$bin" supervisor --cluster "$out/cluster.toml" --model vit:size=tiny,depth=4,mlp=384 \
  --lr 1e-3 --epochs 1 --plan auto --schedule auto --save "$out/vit.ckpt" \
  --listen "127.0.0.1:$port" --metrics "$out/metrics.jsonl" --dashboard 127.0.0.1:0
echo "== evaluating the saved checkpoint on one device"
"$bin" eval --load "$out/vit.ckpt"
echo "== auditing and plotting the run"
"$bin" audit "$out/metrics.jsonl"
"$bin" plot "$out/metrics.jsonl" -o "$out/run.png"
"$bin" plot "$out/metrics.jsonl" -o "$out/report.html"
echo "demo: plot $out/run.png, report $out/report.html (the dashboard's page of the run),"
echo "      metrics $out/metrics.jsonl, checkpoint $out/vit.ckpt,"
echo "      cluster file $out/cluster.toml, node logs in $out/logs"
echo "== serving the checkpoint over HTTP through a node failure (deploy/serve-demo.sh)"
"$root/deploy/serve-demo.sh" "$out/vit.ckpt"
