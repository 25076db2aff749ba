#!/usr/bin/env bash
# `salamander split` as a user meets it: help and refusals of bad input; a
# split job over node processes on loopback in which the console shows its
# status and kills a client; an emulated node slowed almost to a stop is
# out of the round once it reports no progress for --stall seconds, and
# takes part again at its speed; a node killed (kill -9) mid-run does not
# stall the others and, started again on its port, its client takes part
# again; SIGTERM keeps the last round's checkpoint, from which a second run
# resumes with its counters; plot draws both runs. Usage: split_test.sh BIN
set -euo pipefail
bin="$1"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../deploy/free_port.sh" # free_port
work=$(mktemp -d)
job=""
nodes=()
cleanup() {
  if [ -n "$job" ]; then kill -TERM "$job" 2>/dev/null || true; wait "$job" 2>/dev/null || true; fi
  for pid in "${nodes[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
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
grep -q -- "--local-fraction" <<<"$("$bin" split --help)" || fail "--help lists no --local-fraction"
grep -q "adasplit" <<<"$("$bin" split --help)" || fail "--help names no methods"
refused() { # PATTERN ARGS...: the command fails and says PATTERN
  local pattern="$1" out
  shift
  if out=$("$bin" split "$@" 2>&1); then fail "accepted: $*"; fi
  grep -qF -- "$pattern" <<<"$out" || fail "'$*' said: $out"
}
refused "--clients N" --rounds 1
refused "known: vanilla, splitfed, adasplit" --clients 2 --method splitnn
refused "--cut 3: client conv1..fc1" --clients 2 --cut 4
refused "--resume needs --checkpoint" --clients 2 --resume
refused "lists 2 speeds for 3 clients" --clients 3 --client-shares 1,0.5
touch exists.ckpt
refused "--resume to carry on from it" --clients 2 --checkpoint exists.ckpt

# ---- three node processes; n1 is an emulated device, n3 will be killed
. "$here/node_procs.sh" # start_node I [PORT] [OPTIONS...]
: >c.toml
for i in 1 2 3; do
  if [ "$i" = 1 ]; then start_node 1 0 --cpu-share 0.9 --dilate; else start_node "$i"; fi
  p=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "n$i.out")
  eval "port_$i=$p"
  printf '[[node]]\nname = "n%s"\naddress = "127.0.0.1:%s"\n\n' "$i" "$p" >>c.toml
done
sup_port=$(free_port)
common=(--method splitfed --dataset synthetic --model mlp:hidden=64 --cut 1 --iid
        --max-samples 640 --batch-size 32)
"$bin" split --cluster c.toml "${common[@]}" --rounds 100000 --stall 3 --checkpoint run1.ckpt \
  --metrics run1.jsonl --listen "127.0.0.1:$sup_port" --hang-timeout 2 >job.out 2>job.err &
job=$!
con() { "$bin" --log-level warn console "127.0.0.1:$sup_port" --timeout 10 --exec "$1"; }
# (keys are written sorted: a round line's clients come before its "event",
# and round_start lines are not round lines)
rounds_with() { # the number of round lines whose clients match PATTERN
  local n
  n=$(grep -c -- "$1.*\"event\":\"round\"," run1.jsonl 2>/dev/null) || true
  echo "${n:-0}"
}
wait_for() { # DESCRIPTION COMMAND...: until the command succeeds (at most 90 s)
  local what="$1"
  shift
  for _ in $(seq 1 360); do
    "$@" && return 0
    kill -0 "$job" 2>/dev/null || fail "split exited while waiting for $what"
    sleep 0.25
  done
  fail "never: $what"
}
has_rounds() { [ "$(rounds_with '')" -ge "$1" ]; }
wait_for "two rounds" has_rounds 2

out=$(con status) || fail "console status: $out"
grep -q "split learning, method splitfed" <<<"$out" || fail "status: $out"
grep -q "across the cut: .* up, .* down" <<<"$out" || fail "status bytes: $out"
out=$(con nodes) || fail "console nodes: $out"
grep -q "client 2: .* rounds" <<<"$out" || fail "nodes: $out"
out=$(con metrics) || fail "console metrics: $out"
grep -q "GFLOP on clients" <<<"$out" || fail "metrics: $out"
out=$(con "kill client 0") || fail "kill client: $out"
grep -q "rejoins a later round" <<<"$out" || fail "kill client: $out"
out=$(con pause) || fail "pause: $out"
grep -q "no new one starts" <<<"$out" || fail "pause: $out"
out=$(con pause) || fail "pause again: $out"
grep -q "already paused" <<<"$out" || fail "pause again: $out"
out=$(con resume) || fail "resume: $out"
grep -q "the next round starts" <<<"$out" || fail "resume: $out"
if out=$(con "repartition 1,1" 2>&1); then fail "repartition accepted: $out"; fi
grep -q "no pipeline" <<<"$out" || fail "repartition refusal: $out"

# n1 almost stops (a batch would take minutes): out of its round once it has
# been silent for --stall seconds; the others' rounds go on
out=$(con "slow node n1 0.00001") || fail "slow: $out"
stalled() { grep -q '"event":"client_out".*"node":"n1".*no progress' run1.jsonl; }
wait_for "n1 out of a round for no progress" stalled
before=$(rounds_with '')
wait_for "rounds without n1" has_rounds $((before + 2))
out=$(con "slow node n1 1") || fail "slow back: $out"
back1=$(rounds_with '"node":"n1"')
n1_back() { [ "$(rounds_with '"node":"n1"')" -gt "$back1" ]; }
wait_for "n1 back in a round" n1_back

# node n3 dies: the rounds go on without it
kill -KILL "$pid_3"
wait "$pid_3" 2>/dev/null || true
before=$(rounds_with '')
wait_for "rounds without n3" has_rounds $((before + 2))
grep -q '"event":"failure"' run1.jsonl || fail "no failure event for n3"
# the log says why in words, not CAF's "remote_link_unreachable" (or "none")
grep -q "node n3 went away: its connection broke" job.err || fail "no cause in: $(grep 'went away' job.err)"
# ... and is back on its port: its client takes part again
start_node 3 "$port_3"
back=$(rounds_with '"node":"n3"')
n3_back() { [ "$(rounds_with '"node":"n3"')" -gt "$back" ]; }
wait_for "n3's client back in a round" n3_back

# SIGTERM: the job stops, the checkpoint holds its last round
kill -TERM "$job"
wait "$job" || fail "split exited with $? on SIGTERM"
job=""
grep -q "stopped: SIGTERM" job.err || fail "no stop line: $(tail -3 job.err)"
last=$(grep '"event":"round",' run1.jsonl | tail -1 | sed 's/.*"round":\([0-9]*\).*/\1/')
up=$(grep '"event":"round",' run1.jsonl | tail -1 | sed 's/.*"bytes_up":\([0-9]*\).*/\1/')
[ -s run1.ckpt ] || fail "no checkpoint"
# its plain layers are a whole model (client 0's side and the server's)
"$bin" eval --load run1.ckpt --dataset synthetic >eval.out 2>eval.err ||
  fail "eval --load of a split checkpoint: $(tail -3 eval.err)"
grep -qi "accuracy" eval.out || fail "eval said: $(cat eval.out)"

# a second run resumes from it (local clients now, as many), its counters too
"$bin" split --clients 3 "${common[@]}" --rounds $((last + 1)) --checkpoint run1.ckpt --resume \
  --metrics run2.jsonl >run2.out 2>run2.err || fail "resume: $(tail -3 run2.err)"
grep -q "resuming from run1.ckpt: round $last" run2.err || fail "resume line: $(grep resum run2.err)"
grep -q "^rounds: $((last + 1))$" run2.out || fail "resumed rounds: $(cat run2.out)"
up2=$(sed -n 's/^bytes up: //p' run2.out)
[ "$up2" -gt "$up" ] || fail "bytes up did not carry on: $up then $up2"
grep -q "^c3 score: " run2.out || fail "no c3 score: $(cat run2.out)"

# both runs on one plot
if command -v gnuplot >/dev/null; then
  "$bin" plot run1.jsonl run2.jsonl -o both.png >plot.out 2>plot.err || fail "plot: $(cat plot.err)"
  [ -s both.png ] || fail "no png"
fi
echo "PASS"
