#!/usr/bin/env bash
# Continual learning from a stream, as a user meets it: bad sources refused
# with why; a pipeline trains on a file while a producer appends records to
# it, and ends when the producer has been quiet for --stream-idle-end; a
# replayed stream (EMULATED arrival) trained over node processes, with a
# node killed mid-stream (console pause, chaos kill-node, resume), ends with
# the weights of the same stream trained without a fault (exact replay from
# the stream log), every batch once (audit), and the accuracy after every
# epoch of the stream in the metrics log. Usage: stream_test.sh BIN
set -euo pipefail
bin="$1"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../deploy/free_port.sh" # free_port
root=$(cd "$here/../.." && pwd)
py=/usr/bin/python3 # Debian's, with python3-torch (deploy/install-deps.sh)
work=$(mktemp -d)
sup=""
writer=""
cleanup() {
  for p in $sup $writer; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err "$work"/logs/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  exit 1
}

# ---- bad input
grep -q -- "--stream-log" <<<"$("$bin" train --help)" || fail "train --help lists no --stream-log"
refused() { # PATTERN ARGS...
  local pattern="$1" out
  shift
  if out=$("$bin" train "$@" 2>&1); then fail "accepted: $*"; fi
  grep -qF -- "$pattern" <<<"$out" || fail "'$*' said: $out"
}
refused "RATE must be above 0" --stages 2 --stream replay:0
refused "unknown source 'kafka'" --stages 2 --stream kafka:x
refused "does not exist" --stages 2 --stream file:nosuch.bin
refused "--stream trains a pipeline" --stream replay:100
refused "drop --dataset synthetic" --stages 2 --stream replay:100 --dataset synthetic

# ---- a file that grows while a 2-stage pipeline trains on it
: >grow.bin
"$py" - <<'PY' &
import gzip, time
with gzip.open("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") as f:
    pixels = f.read()[16:]
with gzip.open("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz") as f:
    labels = f.read()[8:]
with open("grow.bin", "ab") as out:
    for chunk in range(24):  # 24 x 40 samples over ~2.4 s: 30 batches of 32
        recs = b"".join(bytes([labels[i]]) + pixels[784 * i:784 * (i + 1)]
                        for i in range(40 * chunk, 40 * (chunk + 1)))
        out.write(recs)
        out.flush()
        time.sleep(0.1)
PY
writer=$!
"$bin" train --stages 2 --model cnn --stream file:grow.bin --stream-idle-end 3 --batch-size 32 \
  --max-batches 10 --epochs 1000 --metrics grow.jsonl --stream-log grow.log \
  >grow.out 2>grow.err || fail "training on a growing file failed"
wait "$writer"
writer=""
grep -q "the stream ended after 30 batches" grow.err || fail "stream end: $(tail -3 grow.err)"
grep -q "^test accuracy:" grow.out || fail "no accuracy"
"$bin" audit grow.jsonl >/dev/null || fail "audit of the file stream run"
[ "$(grep -c '"event":"evaluated"' grow.jsonl)" -ge 3 ] || fail "fewer than 3 evaluations"

# ---- a replayed stream: fault-free, then with a node killed mid-stream
common=(--model cnn --stream replay:640 --batch-size 32 --max-batches 20 --epochs 3 --seed 4
        --balance 2,1,1 --replicate-every 4)
"$bin" train --stages 3 "${common[@]}" --log-level warn --stream-log clean.log --metrics clean.jsonl \
  --save clean.ckpt >clean.out 2>clean.err || fail "fault-free stream run"
port=$(free_port)
. "$here/job_procs.sh" # con, pause_job, same_weights
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/logs" "$root/deploy/local-cluster.sh" 3 "$work/c.toml" \
  "$bin" supervisor --cluster "$work/c.toml" "${common[@]}" --stream-log chaos.log \
  --metrics chaos.jsonl --listen "127.0.0.1:$port" --save chaos.ckpt >chaos.out 2>chaos.err &
sup=$!
pause_job
grep -q "killing itself" <<<"$("$bin" chaos --supervisor "127.0.0.1:$port" kill-node node2)" \
  || fail "chaos kill-node"
sleep 1
con resume >/dev/null || fail "resume"
wait "$sup" || fail "the stream job with a killed node failed"
sup=""
grep -q "recovered from 1 failure(s)" chaos.err || fail "no recovery: $(tail -3 chaos.err)"
"$bin" audit chaos.jsonl >/dev/null || fail "audit: a batch missing or twice"
cmp clean.log/batch-000000000059.bin chaos.log/batch-000000000059.bin \
  || fail "the two runs' streams differ"
same_weights clean.ckpt chaos.ckpt
[ "$(grep -c '"event":"evaluated"' chaos.jsonl)" = 3 ] || fail "not 3 evaluations"
echo "stream: file and replayed streams trained; a killed node replayed exactly"
