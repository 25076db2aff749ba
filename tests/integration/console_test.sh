#!/usr/bin/env bash
# `salamander console` as an operator uses it: every command through --exec
# against a real cluster of node processes on loopback, the cluster secret,
# the metrics log, plot and audit. Usage: console_test.sh PATH/TO/salamander
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../deploy/free_port.sh" # free_port
bin="$1"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
sup_pid=""
# the script waits for its command before it stops the nodes: end the
# supervisor itself (it runs until its many epochs are done otherwise)
stop_job() {
  pkill -TERM -f -- "--listen 127.0.0.1:$port" 2>/dev/null || true
  [ -n "$sup_pid" ] && wait "$sup_pid" 2>/dev/null || true
  sup_pid=""
}
cleanup() {
  stop_job
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err "$work"/logs/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  exit 1
}
con() { "$bin" --log-level warn console "127.0.0.1:$port" --timeout 10 --secret-file "$work/secret" --exec "$1"; }
# waits until `con CMD` prints something matching PATTERN
await() {
  for _ in $(seq 1 120); do
    grep -q -- "$2" <<<"$(con "$1" 2>/dev/null)" && return 0
    sleep 0.25
  done
  fail "'$1' never showed '$2'; last: $(con "$1" 2>&1 | head -5)"
}

# parse errors are caught before connecting, with a hint; exit 2
if out=$("$bin" console 127.0.0.1:1 --exec 'stauts' 2>&1); then fail "typo accepted"; else rc=$?; fi
[ "$rc" = 2 ] || fail "typo: exit $rc"
grep -q "did you mean 'status'" <<<"$out" || fail "typo message: $out"
if out=$("$bin" console 127.0.0.1:1 --exec 'status; kill stage x' 2>&1); then fail "bad stage accepted"; fi
grep -q "'x' is not a stage number" <<<"$out" || fail "bad stage message: $out"
if out=$("$bin" console 127.0.0.1:1 --exec 'slow node n1 3' 2>&1); then fail "factor 3 accepted"; fi
grep -q "FACTOR must be a number in (0, 1]" <<<"$out" || fail "bad factor message: $out"
if out=$("$bin" console 127.0.0.1:1 --exec 'checkpoint save' 2>&1); then fail "checkpoint without path"; fi
grep -q "usage: checkpoint save PATH" <<<"$out" || fail "checkpoint usage: $out"
# nobody listening: exit 1, and the message says how to get a supervisor to listen
if out=$("$bin" console 127.0.0.1:1 --exec 'status' 2>&1); then fail "no supervisor, yet status"; else rc=$?; fi
[ "$rc" = 1 ] || fail "no supervisor: exit $rc"
grep -q "supervisor --listen" <<<"$out" || fail "no supervisor message: $out"

# a cluster with a secret: 3 nodes (node3 emulates a slow device), a long job
echo "correct horse" >"$work/secret"
chmod 600 "$work/secret"
port=$(free_port)
for i in 1 2 3; do export "SALAMANDER_NODE_ARGS_$i=--secret-file $work/secret"; done
export SALAMANDER_NODE_ARGS_3="--secret-file $work/secret --cpu-share 0.5 --dilate"
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/logs" "$root/deploy/local-cluster.sh" 3 "$work/c.toml" \
  "$bin" supervisor --cluster "$work/c.toml" --secret-file "$work/secret" --model mlp \
  --dataset synthetic --epochs 400 --plan even --replicate-every 0 --listen "127.0.0.1:$port" \
  --metrics "$work/m.jsonl" >"$work/sup.out" 2>"$work/sup.err" &
sup_pid=$!

# a rate while it trains (at an epoch's end it evaluates, and shows none)
await status "\[training\].* [0-9][0-9]* samples/s"
out=$(con status) || fail "status: $out"
grep -q "plan v1: node1\[0,1) node2\[1,2) node3\[2,3)" <<<"$out" || fail "status plan: $out"
out=$(con nodes) || fail "nodes: $out"
for n in node1 node2 node3; do
  grep -Eq "^$n +ok +stage [0-2]" <<<"$out" || fail "nodes row of $n: $out"
done
grep -q "emulated: cpu-share 0.5" <<<"$out" || fail "nodes shows no emulation: $out"
grep -q "s ago" <<<"$out" || fail "nodes shows no heartbeat: $out"
out=$(con plan) || fail "plan: $out"
grep -Eq "^1 +node2 +\[1,2\) " <<<"$out" || fail "plan rows: $out"
grep -Eq "[0-9.]+ ms" <<<"$out" || fail "plan shows no measured time: $out"
out=$(con metrics) || fail "metrics: $out"
grep -q "each exactly once: yes" <<<"$out" || fail "metrics lineage: $out"
grep -q "metrics log    $work/m.jsonl" <<<"$out" || fail "metrics log path: $out"
out=$(con help) || fail "help: $out"
for c in status nodes plan metrics "kill stage N" "slow node NAME FACTOR" repartition replicate \
         "checkpoint save PATH" pause resume; do
  grep -q "$c" <<<"$out" || fail "help lacks $c: $out"
done

# the job has a secret: a console without it may look but not touch, and
# one with a wrong secret is turned away
out=$("$bin" --log-level warn console "127.0.0.1:$port" --exec 'status; pause' 2>&1) \
  && fail "a console without the secret paused the job"
grep -Eq "\[(training|evaluating)\] epoch" <<<"$out" || fail "a console without the secret cannot even look: $out"
grep -q "prove it first" <<<"$out" || fail "no refusal for pause without the secret: $out"
echo "wrong" >"$work/wrong"
chmod 600 "$work/wrong"
if out=$("$bin" console "127.0.0.1:$port" --secret-file "$work/wrong" --exec 'status' 2>&1); then
  fail "a console with the wrong secret was let in"
fi
grep -q "refused this console" <<<"$out" || fail "wrong console secret message: $out"
grep -q "REFUSED a console" "$work/sup.err" || fail "the supervisor did not log the refused console"

# pause holds the job at a flush; a checkpoint taken there evaluates
out=$(con pause) || fail "pause: $out"
grep -q "paused at batch" <<<"$out" || fail "pause reply: $out"
await status "\[paused\]"
# while paused, no frozen rate
grep -q -- "- samples/s (paused)" <<<"$(con status)" || fail "a paused status shows a rate: $(con status)"
a=$(con status | sed -n 's/.*committed \([0-9]*\) batches.*/\1/p')
sleep 1
b=$(con status | sed -n 's/.*committed \([0-9]*\) batches.*/\1/p')
[ -n "$a" ] && [ "$a" = "$b" ] || fail "paused job moved on: $a -> $b"
out=$(con "checkpoint save '$work/mid point.ckpt'") || fail "checkpoint: $out"
grep -q "saved checkpoint $work/mid point.ckpt (version $a," <<<"$out" || fail "checkpoint reply: $out"
grep -q "^test accuracy:" <<<"$("$bin" eval --load "$work/mid point.ckpt" --dataset synthetic 2>/dev/null)" \
  || fail "the console's checkpoint does not evaluate"
# a file name that is not UTF-8 (Latin-1) is saved and reported as saved
latin1="$work/caf"$'\xe9'".ckpt"
out=$(con "checkpoint save '$latin1'" 2>&1) || fail "checkpoint to a Latin-1 name: $out"
grep -q "saved checkpoint" <<<"$out" && [ -f "$latin1" ] || fail "checkpoint to a Latin-1 name: $out"
# replicate at the flush: version $a; with --replicate-every 0 this is the
# only replica, so a later failure must roll back to exactly it
out=$(con replicate) || fail "replicate: $out"
grep -q "replicating version $a of all 3 stages" <<<"$out" || fail "replicate reply: $out"
out=$(con "pause") || fail "second pause: $out"
grep -q "already paused" <<<"$out" || fail "second pause reply: $out"
out=$(con resume) || fail "resume: $out"
grep -q "resumed at batch $a" <<<"$out" || fail "resume reply: $out"
await status "\[training\]"

# repartition with a balance, then let the planner decide
out=$(con "repartition 2,1") || fail "repartition: $out"
grep -q "re-plan scheduled" <<<"$out" || fail "repartition reply: $out"
await status "plan v2: node1\[0,2) node2\[2,3)"
if out=$(con "repartition 1,x" 2>&1); then fail "bad balance accepted"; fi
grep -q "not a list of layer counts" <<<"$out" || fail "bad balance message: $out"

# slow down an emulated node; then failures: a stage crash, a node's process
out=$(con "slow node node3 0.5") || fail "slow: $out"
grep -q "node node3 now runs at 0.25" <<<"$out" || fail "slow reply: $out"
out=$(con "kill stage 0") || fail "kill stage: $out"
grep -q "stage 0 on node node1 killed" <<<"$out" || fail "kill stage reply: $out"
await metrics "recoveries     1 "
out=$(con metrics)
grep -q "rolled back to version $a)" <<<"$out" || fail "recovery did not use the console's replica ($a): $out"
out=$(con "kill node node2") || fail "kill node: $out"
grep -q "node node2 is killing itself" <<<"$out" || fail "kill node reply: $out"
await metrics "recoveries     2 "
out=$(con nodes)
grep -Eq "^node2 +dead" <<<"$out" || fail "node2 not shown dead: $out"

# runtime errors: exit 1 with the supervisor's reason; the other commands still run
if out=$(con "kill node nosuch; status" 2>&1); then fail "killed a node that does not exist"; fi
grep -q "no live node named nosuch" <<<"$out" || fail "kill nosuch message: $out"
if grep -q "bad_config" <<<"$out"; then fail "an error category shown to the user: $out"; fi
# (the job may be evaluating between epochs when status runs)
grep -Eq "\[(training|evaluating)\] epoch" <<<"$out" || fail "status after a failed command did not run: $out"
if out=$(con "kill stage 99" 2>&1); then fail "killed stage 99"; fi
grep -q "there is no stage 99" <<<"$out" || fail "kill stage 99 message: $out"

# the metrics log has every kind of event this job went through
for e in start plan batch pause resume checkpoint replicate replan failure recovery_plan recovered; do
  grep -q "\"event\":\"$e\"" "$work/m.jsonl" || fail "metrics log has no $e event"
done
# a console whose supervisor goes away says so at once and ends, exit 1
# (not one --timeout per command)
# (its input is a FIFO this script writes: the later commands reach it only
# after the supervisor is gone, however slowly the console starts)
mkfifo "$work/gone.in"
"$bin" --log-level warn console "127.0.0.1:$port" --timeout 30 --secret-file "$work/secret" \
  <"$work/gone.in" >"$work/gone.out" 2>"$work/gone.err" &
gone_pid=$!
exec 7>"$work/gone.in"
echo status >&7
# stop the job only once this console is connected (its first status came
# back): a loaded host can take seconds to start it
for _ in $(seq 1 600); do
  grep -q "epoch" "$work/gone.out" 2>/dev/null && break
  kill -0 "$gone_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "epoch" "$work/gone.out" || fail "the console to outlive its supervisor never connected: $(cat "$work/gone.err")"
stop_job
printf 'status\nstatus\n' >&7 # one write, while the console still reads
exec 7>&-
gone_start=$(date +%s)
gone_rc=0
wait "$gone_pid" || gone_rc=$?
gone_took=$(( $(date +%s) - gone_start ))
[ "$gone_rc" = 1 ] || fail "console after its supervisor went: exit $gone_rc"
grep -q "the supervisor at 127.0.0.1:$port is gone" "$work/gone.err" \
  || fail "console after its supervisor went: $(cat "$work/gone.err")"
[ "$gone_took" -lt 10 ] || fail "console took $gone_took s to notice its supervisor was gone"
pgrep -f -- "$work/c.toml" >/dev/null && fail "processes of the job are left: $(pgrep -af -- "$work/c.toml")"
"$bin" plot "$work/m.jsonl" -o "$work/run.png" >"$work/plot.out" 2>"$work/plot.err" \
  || fail "plot: $(cat "$work/plot.err")"
[ "$(head -c 4 "$work/run.png" | tail -c 3)" = "PNG" ] || fail "plot wrote no PNG"
grep -q "failure" "$work/plot.err" || fail "plot marked no failures: $(cat "$work/plot.err")"
# (a supervisor that stops on SIGTERM writes its end line: cut it off, as
# a supervisor that died would have)
grep -v '"event":"end"' "$work/m.jsonl" >"$work/unfinished.jsonl"
if out=$("$bin" audit "$work/unfinished.jsonl" 2>&1); then fail "audit of an unfinished job passed"; else rc=$?; fi
[ "$rc" = 2 ] && grep -q "has no end line" <<<"$out" || fail "audit of an unfinished job: $rc $out"

# a job that ends: the audit finds every batch exactly once
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/logs2" "$root/deploy/local-cluster.sh" 2 "$work/c2.toml" \
  "$bin" supervisor --cluster "$work/c2.toml" --secret-file "$work/secret" --model mlp \
  --dataset synthetic --epochs 1 --plan even --metrics "$work/m2.jsonl" \
  >"$work/sup2.out" 2>"$work/sup2.err" || fail "short job"
out=$("$bin" audit "$work/m2.jsonl") || fail "audit: $out"
grep -q "lineage: 64 batches, each exactly once: yes" <<<"$out" || fail "audit: $out"

# the cluster secret: a node with a wrong secret and one with none are
# refused, logged on both sides, and get no stage; the job runs without them
echo "wrong" >"$work/wrong"
chmod 600 "$work/wrong"
export SALAMANDER_NODE_ARGS_1="--secret-file $work/secret"
export SALAMANDER_NODE_ARGS_2="--secret-file $work/wrong"
export SALAMANDER_NODE_ARGS_3=""
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/logs3" "$root/deploy/local-cluster.sh" 3 "$work/c3.toml" \
  "$bin" supervisor --cluster "$work/c3.toml" --secret-file "$work/secret" --model mlp \
  --dataset synthetic --epochs 1 --plan even --metrics none >"$work/sup3.out" 2>"$work/sup3.err" \
  || fail "job with refused nodes"
grep -q "REFUSED node node2 did not prove the cluster secret" "$work/sup3.err" || fail "no refusal of node2"
grep -q "REFUSED node node3 did not prove the cluster secret" "$work/sup3.err" || fail "no refusal of node3"
grep -q "REFUSED by the supervisor" "$work/logs3/node2.log" || fail "node2 did not log its refusal"
grep -q "REFUSED by the supervisor" "$work/logs3/node3.log" || fail "node3 did not log its refusal"
grep -q "plan v1: node1\[0,3)" "$work/sup3.err" || fail "refused nodes got stages: $(grep plan "$work/sup3.err")"
grep -q "^test accuracy:" "$work/sup3.out" || fail "the job without the refused nodes did not finish"
# a supervisor with the wrong secret gets nothing from any node
if SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/logs4" "$root/deploy/local-cluster.sh" 1 "$work/c4.toml" \
  "$bin" supervisor --cluster "$work/c4.toml" --secret-file "$work/wrong" --model mlp \
  --dataset synthetic --epochs 1 --metrics none >"$work/sup4.out" 2>"$work/sup4.err"; then
  fail "a supervisor with the wrong secret ran a job"
fi
grep -q "no node proved the cluster secret" "$work/sup4.err" || fail "wrong supervisor secret: $(tail -3 "$work/sup4.err")"
echo "console: all checks passed"
