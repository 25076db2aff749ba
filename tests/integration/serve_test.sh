#!/usr/bin/env bash
# `salamander infer` and `salamander serve` as a user meets them: a trained
# checkpoint's accuracy through a pipeline equals `eval --load`; the HTTP
# endpoint (Open Inference Protocol / KServe v2) answers health, metadata and
# inference, refuses bad requests with a 4xx and a message, a full queue with
# 503 and Retry-After, exposes Prometheus metrics, and stops cleanly on
# SIGTERM. Usage: serve_test.sh PATH/TO/salamander
set -euo pipefail
bin="$1"
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  [ -f "$work/serve.err" ] && tail -20 "$work/serve.err"
  exit 1
}
command -v curl >/dev/null || { echo "SKIP: curl is not installed (deploy/install-deps.sh)"; exit 77; }

grep -q -- "--max-batch" <<<"$("$bin" infer --help)" || fail "infer --help lists no --max-batch"
grep -q -- "--max-queue" <<<"$("$bin" serve --help)" || fail "serve --help lists no --max-queue"
if out=$("$bin" infer --dataset synthetic 2>&1); then fail "infer without --stages/--cluster accepted"; fi
grep -q -- "--stages N" <<<"$out" || fail "no hint at --stages: $out"
if out=$("$bin" serve --stages 2 --hang-timeout 1 2>&1); then fail "--hang-timeout 1 accepted"; fi

# a trained checkpoint: the pipeline's accuracy is eval's, to the example
"$bin" train --model cnn --dataset synthetic --epochs 1 --max-batches 30 --save c.ckpt \
  --metrics none >train.log 2>&1 || fail "train: $(tail -3 train.log)"
want=$("$bin" eval --load c.ckpt --dataset synthetic 2>/dev/null | sed -n 's/^test accuracy: //p')
got=$("$bin" infer --load c.ckpt --dataset synthetic --stages 3 --plan even --metrics none \
  2>infer.err | sed -n 's/^test accuracy: //p')
[ -n "$want" ] && [ "$want" = "$got" ] || fail "infer accuracy '$got', eval says '$want': $(tail -3 infer.err)"

# the HTTP endpoint; a queue of 2 (a full queue is tried below)
"$bin" serve --load c.ckpt --stages 2 --listen 127.0.0.1:0 --max-batch 64 \
  --batch-delay-ms 3000 --max-queue 2 --max-body-mb 0.05 --metrics serve.jsonl \
  --supervisor-listen 127.0.0.1:0 >serve.out 2>serve.err &
server=$!
for _ in $(seq 1 300); do
  grep -q "^listening: " serve.out 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || fail "serve exited"
  sleep 0.1
done
url=$(sed -n 's/^listening: //p' serve.out)
[ -n "$url" ] || fail "serve printed no address"
grep -q '"live":true' <<<"$(curl -sf "$url/v2/health/live")" || fail "live"
for _ in $(seq 1 300); do
  curl -sf "$url/v2/health/ready" >/dev/null && break
  sleep 0.1
done
grep -q '"ready":true' <<<"$(curl -sf "$url/v2/health/ready")" || fail "never ready"
meta=$(curl -sf "$url/v2/models/cnn")
grep -q '"shape":\[-1,1,28,28\]' <<<"$meta" || fail "metadata: $meta"
grep -q '"datatype":"FP32"' <<<"$meta" || fail "metadata datatype: $meta"

# one request, its answer equal to one process's (the first rows of the data set)
ones=$(python3 -c 'print(",".join(["0.5"]*784))')
body="{\"id\":\"r1\",\"inputs\":[{\"name\":\"input\",\"shape\":[1,1,28,28],\"datatype\":\"FP32\",\"data\":[$ones]}]}"
code() { curl -s -o "$work/body" -w '%{http_code}' "$@"; }
[ "$(code -XPOST "$url/v2/models/cnn/infer" -d "$body")" = 200 ] || fail "infer: $(cat body)"
grep -q '"shape":\[1,10\]' body || fail "output shape: $(cat body)"
grep -q '"id":"r1"' body || fail "the request id is not echoed: $(cat body)"

# bad requests: 4xx with a message saying what is wrong
expect() {
  local want="$1" pattern="$2"
  shift 2
  local got
  got=$(code "$@")
  [ "$got" = "$want" ] || fail "$* -> $got, expected $want: $(cat body)"
  grep -qF -- "$pattern" body || fail "$* -> no '$pattern' in: $(cat body)"
}
expect 400 "malformed JSON" -XPOST "$url/v2/models/cnn/infer" -d '{"inputs": ['
expect 400 "the model takes [-1,1,28,28]" -XPOST "$url/v2/models/cnn/infer" \
  -d '{"inputs":[{"name":"input","shape":[1,3,28,28],"datatype":"FP32","data":[1]}]}'
expect 400 "the model takes FP32" -XPOST "$url/v2/models/cnn/infer" \
  -d '{"inputs":[{"name":"input","shape":[1,1,28,28],"datatype":"INT64","data":[1]}]}'
expect 400 "needs 784" -XPOST "$url/v2/models/cnn/infer" \
  -d '{"inputs":[{"name":"input","shape":[1,1,28,28],"datatype":"FP32","data":[1,2]}]}'
expect 400 "needs far more" -XPOST "$url/v2/models/cnn/infer" \
  -d '{"inputs":[{"name":"input","shape":[9223372036854775807,1,28,28],"datatype":"FP32","data":[1]}]}'
expect 400 "input datatype '5'" -XPOST "$url/v2/models/cnn/infer" \
  -d '{"inputs":[{"name":"input","shape":[1,1,28,28],"datatype":5,"data":[1]}]}'
expect 404 "unknown model 'resnet'" -XPOST "$url/v2/models/resnet/infer" -d "$body"
# (that one counts to no model; a version the model does not have counts to it)
expect 404 "unknown version '9'" -XPOST "$url/v2/models/cnn/versions/9/infer" -d "$body"
expect 404 "no such path" "$url/v2/elsewhere"
# a PUT without a length is refused at once, not read until the timeout
expect 411 "needs a Content-Length" -X PUT "$url/v2"
expect 404 "no such path: DELETE /v2/models/cnn" -X DELETE "$url/v2/models/cnn"
big=$(python3 -c 'print("[" + ",".join(["0.5"]*20000) + "]")')
expect 413 "larger than the limit" -XPOST "$url/v2/models/cnn/infer" \
  -d "{\"inputs\":[{\"name\":\"input\",\"shape\":[25,1,28,28],\"datatype\":\"FP32\",\"data\":$big}]}"

# a full queue: paused from the console, nothing is sent on; two requests
# wait (the queue holds 2), the third is refused at once
sup=$(sed -n 's/.*supervisor listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' serve.err | head -1)
[ -n "$sup" ] || fail "no supervisor address in the log"
"$bin" console "$sup" --exec "pause" >/dev/null 2>&1 || fail "console pause"
curl -s -o /dev/null -XPOST "$url/v2/models/cnn/infer" -d "$body" &
c1=$!
curl -s -o /dev/null -XPOST "$url/v2/models/cnn/infer" -d "$body" &
c2=$!
queued=""
for _ in $(seq 1 600); do
  curl -s "$url/metrics" | grep -q '^salamander_queue_depth{model="cnn"} 2$' && { queued=1; break; }
  sleep 0.1
done
[ -n "$queued" ] || fail "the two requests never queued"
got=$(curl -s -D "$work/headers" -o "$work/body" -w '%{http_code}' -XPOST \
  "$url/v2/models/cnn/infer" -d "$body")
[ "$got" = 503 ] || fail "a full queue answered $got, not 503: $(cat body)"
grep -qi '^retry-after: 1' headers || fail "503 without Retry-After: $(cat headers)"
grep -q "queue is full" body || fail "503 body: $(cat body)"
"$bin" console "$sup" --exec "resume" >/dev/null 2>&1 || fail "console resume"
wait "$c1" "$c2"

# the console on a serving job: requests and latency instead of batches and loss
console=$("$bin" console "$sup" --exec "status; plan; metrics" 2>&1) || fail "console: $console"
grep -q '^\[serving\] 3 requests' <<<"$console" || fail "console status: $console"
grep -q "busy" <<<"$console" || fail "console plan: $console"
grep -q "latency        p50" <<<"$console" || fail "console metrics: $console"
# the console saves the served weights: the same accuracy as the checkpoint served
"$bin" console "$sup" --exec "checkpoint save $work/served.ckpt" >/dev/null 2>&1 ||
  fail "checkpoint save on a serving job"
again=$("$bin" eval --load "$work/served.ckpt" --dataset synthetic 2>/dev/null |
  sed -n 's/^test accuracy: //p')
[ "$again" = "$want" ] || fail "the served weights give $again, the checkpoint $want"
# re-planning a serving job from the console: a bad balance is refused with
# why, a good one is taken while the service goes on
if out=$("$bin" console "$sup" --exec "repartition 9,9" 2>&1); then fail "repartition 9,9 accepted"; fi
grep -q "covers 18 layers, the model has 4" <<<"$out" || fail "repartition 9,9: $out"
out=$("$bin" console "$sup" --exec "repartition 3,1; plan" 2>&1) || fail "repartition 3,1: $out"
for _ in $(seq 1 50); do
  grep -q "\[0,3)" <<<"$out" && break
  sleep 0.1
  out=$("$bin" console "$sup" --exec "plan" 2>&1)
done
grep -q "\[0,3)" <<<"$out" || fail "repartition 3,1 not taken: $out"
# the same port twice: a clear error, not a crash
port=${url##*:}
if out=$(timeout 60 "$bin" serve --stages 1 --listen "127.0.0.1:$port" --metrics none 2>&1); then
  fail "a second server on port $port started"
fi
grep -q "cannot listen on 127.0.0.1:$port" <<<"$out" || fail "port in use: $out"

metrics=$(curl -sf "$url/metrics")
for m in 'salamander_requests_total{model="cnn"} 3' 'code="400"} 6' 'code="404"} 1' \
  'code="413"} 1' 'code="503"} ' 'salamander_request_latency_seconds_count{model="cnn"} 3' \
  'salamander_queue_depth' 'salamander_stage_busy_seconds_total{model="cnn",stage="1"'; do
  grep -qF -- "$m" <<<"$metrics" || fail "/metrics has no '$m': $metrics"
done

# SIGTERM: answers what it accepted, exits 0, and the log has serve lines and an end
kill -TERM "$server"
wait "$server" || fail "serve exited with $? on SIGTERM"
server=""
grep -q '"event":"serve"' serve.jsonl || fail "no serve line in the metrics log"
grep -q '"event":"end".*"phase":"finished"' serve.jsonl || fail "no end in the metrics log"
"$bin" plot serve.jsonl -o serve.png >/dev/null 2>&1 || fail "plot of a serving run"
[ -s serve.png ] || fail "no plot written"
echo "serve_test: all checks passed"
