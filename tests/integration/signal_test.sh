#!/usr/bin/env bash
# SIGINT and SIGTERM on a training supervisor: the first stops the job at the
# next flush, writes the final checkpoint (--save) and the metrics log's
# `end` event, and says so; a second one stops at once.
# Usage: signal_test.sh PATH/TO/salamander
set -euo pipefail
set -m # background jobs keep SIGINT (a non-interactive shell would ignore it for them)
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
pid=""
finish() {
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap finish EXIT
cd "$work"
fail() { echo "FAIL: $*"; [ -f out ] && tail -20 out; exit 1; }

# a long job (it would take minutes); returns once N batches are in its log
start_job() {
  "$bin" train --stages 2 --dataset synthetic --epochs 200 --save "$work/final.ckpt" \
    --metrics "$work/m.jsonl" "${big[@]}" >out 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    local n
    n=$(grep -c '"event":"batch"' m.jsonl 2>/dev/null) || n=0
    [ "$n" -ge "$1" ] && return 0
    kill -0 "$pid" 2>/dev/null || fail "the job ended early"
    sleep 0.1
  done
  fail "no $1 batches within a minute"
}
big=()
stopped_by() { # SIGNAL CODE: one signal, a clean stop at the flush
  rm -f final.ckpt m.jsonl
  start_job 5
  kill -"$1" "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=""
  [ "$rc" = "$2" ] || fail "$1: exit $rc, expected $2"
  grep -q "SIG$1: stopping at the next flush, then saving $work/final.ckpt" out \
    || fail "$1: no message that it stops"
  grep -q "stopped by SIG$1 after" out || fail "$1: no closing message"
  [ -s final.ckpt ] || fail "$1: no final checkpoint"
  local end
  end=$(grep '"event":"end"' m.jsonl) || fail "$1: no end event"
  grep -q "\"stopped\":\"SIG$1\"" <<<"$end" || fail "$1: end event does not say stopped: $end"
  grep -q '"phase":"finished"' <<<"$end" || fail "$1: end event not finished: $end"
  # the saved weights saw every committed batch exactly once
  "$bin" audit m.jsonl >/dev/null || fail "$1: audit of a stopped job failed"
  "$bin" eval --load final.ckpt --dataset synthetic >/dev/null 2>&1 \
    || fail "$1: the saved checkpoint does not load"
}
stopped_by INT 130
stopped_by TERM 143

# two signals: the second stops at once. (Batches of 4096 take seconds, so
# the second comes while the first waits for the flush; signals sent back to
# back could merge into one.)
rm -f final.ckpt m.jsonl
big=(--batch-size 4096)
start_job 1
kill -TERM "$pid"
for _ in $(seq 1 600); do grep -q "stopping at the next flush" out && break; sleep 0.05; done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" = 143 ] || fail "two SIGTERMs: exit $rc"
grep -q "SIGTERM again: stopping at once" out || fail "two SIGTERMs: no message"
echo "signal tests passed"
