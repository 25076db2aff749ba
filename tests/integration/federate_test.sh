#!/usr/bin/env bash
# `salamander federate` as a user meets it: help and refusals of bad input;
# a federated job over node processes on loopback in which one node is
# killed (kill -9) mid-run and started again on its port, and its client
# takes part again; the console's status, nodes and kill client for a
# federated job; SIGTERM keeps the last round's checkpoint, from which a
# second run resumes; plot draws both runs. Usage: federate_test.sh BIN
set -euo pipefail
bin="$1"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../deploy/free_port.sh" # free_port
work=$(mktemp -d)
fed=""
nodes=()
cleanup() {
  if [ -n "$fed" ]; then kill -TERM "$fed" 2>/dev/null || true; wait "$fed" 2>/dev/null || true; fi
  for pid in "${nodes[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${nodes[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  exit 1
}

# ---- help and bad input, each refused with what to do
grep -q -- "--client-shares" <<<"$("$bin" federate --help)" || fail "--help lists no --client-shares"
grep -q "elfish" <<<"$("$bin" federate --help)" || fail "--help names no strategies"
refused() { # PATTERN ARGS...: the command fails and says PATTERN
  local pattern="$1" out
  shift
  if out=$("$bin" federate "$@" 2>&1); then fail "accepted: $*"; fi
  grep -qF -- "$pattern" <<<"$out" || fail "'$*' said: $out"
}
refused "--clients N" --rounds 1
refused "known: fedavg, deadline, elfish" --clients 2 --strategy fedprox
refused "lists 2 speeds for 3 clients" --clients 3 --client-shares 1,0.5
refused "not a positive speed" --clients 2 --client-shares 1,fast
refused "--resume needs --checkpoint" --clients 2 --resume
refused "dense and conv" --clients 2 --model resnet --dataset synthetic
refused "for IID shards give --iid" --clients 2 --alpha 0
refused "excludes" --clients 2 --alpha 0.5 --iid
refused "--restricted-softmax" --clients 2 --restricted-softmax 1.5
touch exists.ckpt
refused "--resume to carry on from it" --clients 2 --checkpoint exists.ckpt

# ---- three node processes; node 3 will be killed and started again
. "$here/node_procs.sh" # start_node I [PORT] [OPTIONS...]
: >c.toml
for i in 1 2 3; do
  start_node "$i"
  p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "n$i.out")
  eval "port_$i=$p"
  printf '[[node]]\nname = "n%s"\naddress = "127.0.0.1:%s"\n\n' "$i" "$p" >>c.toml
done
sup_port=$(free_port)
"$bin" federate --cluster c.toml --strategy elfish --rounds 100000 --dataset synthetic \
  --model mlp:hidden=64 --max-samples 400 --iid --checkpoint run1.ckpt \
  --metrics run1.jsonl --listen "127.0.0.1:$sup_port" --hang-timeout 2 >fed.out 2>fed.err &
fed=$!
con() { "$bin" --log-level warn console "127.0.0.1:$sup_port" --timeout 10 --exec "$1"; }
# (keys are written sorted: a round line's contributions come before its
# "event", and round_start lines are not round lines)
rounds_with() { # the number of round lines whose contributions match PATTERN
  local n
  n=$(grep -c -- "$1.*\"event\":\"round\"," run1.jsonl 2>/dev/null) || true
  echo "${n:-0}"
}
wait_for() { # DESCRIPTION COMMAND...: until the command succeeds (at most 60 s)
  local what="$1"
  shift
  for _ in $(seq 1 240); do
    "$@" && return 0
    kill -0 "$fed" 2>/dev/null || fail "federate exited while waiting for $what"
    sleep 0.25
  done
  fail "never: $what"
}
has_rounds() { [ "$(rounds_with '')" -ge "$1" ]; }
wait_for "two rounds" has_rounds 2

out=$(con status) || fail "console status: $out"
grep -q "federated, strategy elfish" <<<"$out" || fail "status: $out"
grep -q "test accuracy" <<<"$out" || fail "status accuracy: $out"
out=$(con nodes) || fail "console nodes: $out"
grep -q "client 2: keep" <<<"$out" || fail "nodes: $out"
out=$(con "kill client 0") || fail "kill client: $out"
grep -q "rejoins a later round" <<<"$out" || fail "kill client: $out"
if out=$(con "repartition 1,1" 2>&1); then fail "repartition accepted: $out"; fi
grep -q "no pipeline" <<<"$out" || fail "repartition refusal: $out"

# node n3 dies: the rounds go on without it
kill -KILL "$pid_3"
wait "$pid_3" 2>/dev/null || true
before=$(rounds_with '')
wait_for "rounds without n3" has_rounds $((before + 3))
grep -q '"event":"failure"' run1.jsonl || fail "no failure event for n3"
# ... and is back on its port: its client takes part again
start_node 3 "$port_3"
back=$(rounds_with '"node":"n3"')
n3_back() { [ "$(rounds_with '"node":"n3"')" -gt "$back" ]; }
wait_for "n3's client back in a round" n3_back

# SIGTERM: the job stops, the checkpoint holds its last round
kill -TERM "$fed"
wait "$fed" || fail "federate exited with $? on SIGTERM"
fed=""
grep -q "stopped: SIGTERM" fed.err || fail "no stop line: $(tail -3 fed.err)"
last=$(grep '"event":"round",' run1.jsonl | tail -1 | sed 's/.*"round":\([0-9]*\).*/\1/')
[ -s run1.ckpt ] || fail "no checkpoint"

# a second run resumes from it (local clients now, same shards count)
"$bin" federate --clients 3 --strategy elfish --rounds $((last + 2)) --dataset synthetic \
  --model mlp:hidden=64 --max-samples 400 --iid --checkpoint run1.ckpt --resume \
  --metrics run2.jsonl >run2.out 2>run2.err || fail "resume: $(tail -3 run2.err)"
grep -q "resuming from run1.ckpt: round $last" run2.err || fail "resume line: $(grep resum run2.err)"
grep -q "^rounds: $((last + 2))$" run2.out || fail "resumed rounds: $(cat run2.out)"

# a device with its own data (node --data DIR): its client trains on that,
# not on a shard of the experiment's
fm=/usr/share/datasets/fashion-mnist
if [ -f "$fm/train-labels-idx1-ubyte.gz" ]; then
  mkdir own
  cp "$fm"/train-* own/
  "$bin" node --name own1 --listen 127.0.0.1:0 --data "$work/own" >own1.out 2>own1.log &
  nodes+=($!)
  for _ in $(seq 1 200); do grep -q "listening on" own1.out 2>/dev/null && break; sleep 0.05; done
  p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' own1.out)
  printf '[[node]]\nname = "own1"\naddress = "127.0.0.1:%s"\n' "$p" >own.toml
  "$bin" federate --cluster own.toml --rounds 1 --model mlp:hidden=32 --test-samples 500 \
    --metrics own.jsonl >own.fed.out 2>own.fed.err || fail "own data: $(tail -3 own.fed.err)"
  grep -q "the node's own data in $work/own (60000 examples)" own.jsonl ||
    fail "own data not used: $(grep profile own.jsonl)"
else
  echo "(no Fashion-MNIST in $fm: the node --data part is skipped)"
fi

# both runs on one plot
if command -v gnuplot >/dev/null; then
  "$bin" plot run1.jsonl run2.jsonl -o both.png >plot.out 2>plot.err || fail "plot: $(cat plot.err)"
  [ -s both.png ] || fail "no png"
fi
echo "PASS"
