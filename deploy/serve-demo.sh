#!/usr/bin/env bash
# Serving through a failure: `salamander serve` puts a checkpoint behind an
# HTTP endpoint (Open Inference Protocol / KServe v2) as a pipeline over
# three node processes on this machine; `hey` keeps 8 connections busy for
# 15 s; node2 is killed (SIGKILL) after 8 s. The service re-plans over the
# two survivors and sends again what was in flight: hey's status codes show
# every request answered 200. Then /metrics and a plot of the run.
#
#   deploy/serve-demo.sh [CHECKPOINT]   (default: runs/demo/vit.ckpt, the
#                                        demo's; a CNN is trained here first
#                                        if no checkpoint is there)
# The model is served under the checkpoint's file name without .ckpt.
# Expects a build (deploy/demo.sh runs it at its end).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/apps/salamander"
out="$root/runs/serve-demo"
mkdir -p "$out"
ckpt=${1:-$root/runs/demo/vit.ckpt}
if [ $# -eq 0 ] && [ ! -f "$ckpt" ]; then
  ckpt="$root/runs/demo/cnn.ckpt"
  if [ ! -f "$ckpt" ]; then
    echo "== no checkpoint given or in runs/demo: training the CNN for one epoch first"
    mkdir -p "$(dirname "$ckpt")"
    "$bin" train --model cnn --epochs 1 --save "$ckpt" --metrics none
  fi
elif [ ! -f "$ckpt" ]; then
  echo "serve-demo: no checkpoint at $ckpt" >&2
  exit 2
fi
export SALAMANDER_LOG_DIR="$out/logs"
SALAMANDER_SECRET=${SALAMANDER_SECRET:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
export SALAMANDER_SECRET
body="$out/request.json"
python3 - "$body" <<'PY'
import json, sys
# one 28x28 image: a bright square on black (any FP32 image of the right shape will do)
img = [[[1.0 if 8 <= r < 20 and 8 <= c < 20 else 0.0 for c in range(28)] for r in range(28)]]
json.dump({"id": "demo", "inputs": [{"name": "input", "shape": [1, 1, 28, 28],
           "datatype": "FP32", "data": [img]}]}, open(sys.argv[1], "w"))
PY
echo "== serving $ckpt on 3 node processes; node2 is killed (SIGKILL) after 8 s"
SALAMANDER_KILL_AFTER=2:8 "$root/deploy/local-cluster.sh" 3 "$out/cluster.toml" \
  bash -c '
    set -euo pipefail
    bin="$1"; ckpt="$2"; out="$3"; body="$4"; name="$5"
    "$bin" serve --load "$name=$ckpt" --cluster "$SALAMANDER_CLUSTER" --listen 127.0.0.1:0 \
      --metrics "$out/metrics.jsonl" >"$out/serve.out" 2>"$out/serve.log" &
    server=$!
    trap "kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true" EXIT
    for _ in $(seq 1 300); do grep -q "^listening: " "$out/serve.out" 2>/dev/null && break; sleep 0.1; done
    url=$(sed -n "s/^listening: //p" "$out/serve.out")
    for _ in $(seq 1 300); do curl -sf "$url/v2/health/ready" >/dev/null && break; sleep 0.1; done
    echo "== ready: $url; one request by hand:"
    echo "   curl -s -X POST $url/v2/models/$name/infer -H \"Content-Type: application/json\" -d @$body"
    curl -s -X POST "$url/v2/models/$name/infer" -H "Content-Type: application/json" -d @"$body" | cut -c1-160
    echo
    echo "== 15 s of load (hey, 8 connections); the kill comes at 8 s"
    hey -z 15s -c 8 -m POST -T application/json -D "$body" "$url/v2/models/$name/infer" |
      sed -n "/Summary/,/Latency distribution/p;/Status code distribution/,\$p"
    echo "== /metrics (excerpt)"
    curl -s "$url/metrics" | grep -E "^salamander_(requests_total|recoveries_total|resent_total|request_failures_total.*code=\"5)"
  ' serve-demo "$bin" "$ckpt" "$out" "$body" "$(basename "$ckpt" .ckpt)"
grep -E "FAILURE|RECOVERED" "$out/serve.log" || true
"$bin" plot "$out/metrics.jsonl" -o "$out/serve.png"
echo "serve-demo: plot $out/serve.png, metrics $out/metrics.jsonl, logs in $out"
