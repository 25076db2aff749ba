#!/usr/bin/env bash
# Several models in one `salamander serve` (issue 30 item 5): a repository in
# Triton's NAME/VERSION/model.ckpt layout, the repository extension over HTTP
# and gRPC (index, load and unload behind the cluster secret, 403 without
# it), a reload to a new version and a load and unload of another model
# while requests stream to one model, none of them lost
# (tests/integration/model_repository.py); then --load NAME=PATH twice
# without a secret, and the command line's refusals. Loopback only.
# Usage: model_repository_test.sh PATH/TO/salamander
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
py=/usr/bin/python3 # Debian's, with python3-numpy and python3-grpcio
work=$(mktemp -d)
server=""
stop_server() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=""
  fi
}
trap 'stop_server; rm -rf "$work"' EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  [ -f serve.err ] && { echo "--- serve.err"; tail -20 serve.err; }
  exit 1
}
command -v curl >/dev/null || { echo "SKIP: curl is not installed (deploy/install-deps.sh)"; exit 77; }
# shellcheck source=kserve_stubs.sh
. "$here/kserve_stubs.sh"
kserve_stubs stubs

# two versions of a CNN (other weights), an MLP, and a model with no version
train() {
  "$bin" train --model "$1" --dataset synthetic --epochs 1 --max-batches "$2" --seed "$3" \
    --save "$4" --metrics none >train.log 2>&1 || fail "train $1: $(tail -3 train.log)"
}
mkdir -p repo/cnn/1 repo/cnn/2 repo/digits/7 repo/broken/1 spare
train cnn 10 1 repo/cnn/1/model.ckpt
train cnn 10 2 repo/cnn/2/model.ckpt
train mlp 10 1 repo/digits/7/model.ckpt
cp repo/cnn/1/model.ckpt spare/v3.ckpt
printf 'not the secret of this cluster' >wrong
printf 'a-secret-for-the-repository-test' >secret
chmod 600 secret wrong

start_server() {
  "$bin" serve "$@" --listen 127.0.0.1:0 --metrics none >serve.out 2>serve.err &
  server=$!
  for _ in $(seq 1 600); do
    grep -q "^listening: " serve.out 2>/dev/null && break
    kill -0 "$server" 2>/dev/null || fail "serve exited: $(tail -3 serve.err)"
    sleep 0.1
  done
  url=$(sed -n 's/^listening: //p' serve.out)
  [ -n "$url" ] || fail "serve printed no address"
  for _ in $(seq 1 600); do
    curl -sf "$url/v2/health/ready" >/dev/null && return 0
    kill -0 "$server" 2>/dev/null || fail "serve exited before it was ready"
    sleep 0.1
  done
  fail "not ready after 60 s: $(curl -s "$url/v2/health/ready")"
}

start_server --repository repo --stages 2 --secret-file secret --grpc-listen 127.0.0.1:0
for _ in $(seq 1 100); do
  grep -q "^grpc listening: " serve.out && break
  sleep 0.1
done
grpc=$(sed -n 's/^grpc listening: //p' serve.out)
[ -n "$grpc" ] || fail "serve printed no gRPC address"
out=$(PYTHONPATH="$work/stubs" "$py" "$here/model_repository.py" "$url" "$grpc" secret \
  repo spare/v3.ckpt 2>&1) || fail "$out"
echo "$out"
stop_server
grep -q "stopped cnn: " serve.err || fail "no final line for cnn: $(tail -5 serve.err)"

# --load NAME=PATH twice, no secret: both served, load and unload refused
start_server --load repo/cnn/2/model.ckpt --load small=repo/digits/7/model.ckpt --stages 2
index=$(curl -s -XPOST "$url/v2/repository/index")
grep -q '"name":"cnn","state":"READY"' <<<"$index" || fail "index: $index"
grep -q '"name":"small","state":"READY"' <<<"$index" || fail "index: $index"
got=$(curl -s -o body -w '%{http_code}' -XPOST -H "Authorization: Bearer x" \
  "$url/v2/repository/models/small/unload")
[ "$got" = 403 ] && grep -q "this server has none" body || fail "unload without a secret: $got $(cat body)"
curl -sf "$url/v2/models/small/ready" >/dev/null || fail "small was unloaded without a secret"
stop_server

# the command line's refusals, each naming what is wrong
refused() {
  local pattern="$1"
  shift
  if timeout 120 "$bin" serve "$@" --listen 127.0.0.1:0 --metrics none >refused.out 2>&1; then
    fail "serve $* started"
  fi
  grep -qF -- "$pattern" refused.out || fail "serve $*: no '$pattern' in: $(cat refused.out)"
}
refused "two models are named 'cnn'" --load repo/cnn/1/model.ckpt --load repo/cnn/2/model.ckpt --stages 1
refused "is not a directory" --repository nowhere --stages 1
refused "--name names the one model" --load a=repo/cnn/1/model.ckpt --load b=repo/cnn/2/model.ckpt \
  --name c --stages 1
mkdir empty
refused "holds no model" --repository empty --stages 1
echo "model_repository: ok"
