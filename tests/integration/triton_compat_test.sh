#!/usr/bin/env bash
# Stock KServe v2 / Triton clients against `salamander serve`: a trained CNN
# served over two stages, driven by tests/integration/triton_compat.py the
# way tritonclient.http drives Triton (binary tensor data by default, JSON
# when asked, FP16 and BF16 inputs, versioned paths, statistics, model
# configuration, Triton's metrics), every answer compared with PyTorch's on
# the exported weights; and KServe v2 over gRPC (`--grpc-listen`) from
# python3-grpcio with stubs generated here from apps/kserve.proto: the same
# answers to the byte and the same errors. Loopback only.
# Usage: triton_compat_test.sh PATH/TO/salamander
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
py=/usr/bin/python3 # Debian's, with python3-torch and python3-numpy
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  [ -f serve.err ] && { echo "--- serve.err"; tail -15 serve.err; }
  exit 1
}
command -v curl >/dev/null || { echo "SKIP: curl is not installed (deploy/install-deps.sh)"; exit 77; }
"$py" -c 'import torch, numpy' 2>/dev/null ||
  { echo "SKIP: $py cannot import torch and numpy (python3-torch, deploy/install-deps.sh)"; exit 77; }
# shellcheck source=kserve_stubs.sh
. "$here/kserve_stubs.sh"
kserve_stubs stubs

"$bin" train --model cnn --dataset synthetic --epochs 1 --max-batches 30 --save c.ckpt \
  --metrics none >train.log 2>&1 || fail "train: $(tail -3 train.log)"
"$bin" export --load c.ckpt -o c.pt --log-level warn >export.log 2>&1 ||
  fail "export: $(cat export.log)"
"$bin" serve --load c.ckpt --stages 2 --plan even --listen 127.0.0.1:0 \
  --grpc-listen 127.0.0.1:0 --max-body-mb 1 --metrics none >serve.out 2>serve.err &
server=$!
for _ in $(seq 1 600); do
  grep -q "^listening: " serve.out 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || fail "serve exited"
  sleep 0.1
done
url=$(sed -n 's/^listening: //p' serve.out)
[ -n "$url" ] || fail "serve printed no address"
for _ in $(seq 1 100); do
  grep -q "^grpc listening: " serve.out && break
  sleep 0.1
done
grpc=$(sed -n 's/^grpc listening: //p' serve.out)
[ -n "$grpc" ] || fail "serve printed no gRPC address"
for _ in $(seq 1 600); do
  curl -sf "$url/v2/health/ready" >/dev/null && break
  kill -0 "$server" 2>/dev/null || fail "serve exited before it was ready"
  sleep 0.1
done
out=$(PYTHONPATH="$here:$here/../../deploy/pytorch:$work/stubs" "$py" "$here/triton_compat.py" \
  "$url" cnn c.pt "$grpc" 2>&1) ||
  fail "$out"
echo "$out"
