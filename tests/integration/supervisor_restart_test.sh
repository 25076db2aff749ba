#!/usr/bin/env bash
# The supervisor survives its own death (README, "When the supervisor
# dies"), over node processes on loopback:
#   1. kill -9 of the supervisor mid-job (batches in flight), a restart
#      after a delay with
#      `supervisor --resume RUN_DIR`: the job finishes with the weights of a
#      fault-free run and every batch exactly once (audit);
#   2. the same, with a node also killed while no supervisor ran, carried
#      on by the same command line again (no --resume): the resumed job goes
#      on without the node;
#   3. a node that joined (node --join, in no cluster file) offers itself
#      again to the supervisor resumed on the same --listen port and is
#      planned in; weights and lineage as in 1;
#   4. a supervisor that never returns: nodes with --leave-without-supervisor
#      leave cleanly (exit 0) after --supervisor-grace; one without the flag
#      drops the job and serves the next supervisor.
# The fault-free run is made on the same nodes first, so the resumed jobs
# also run on nodes that served a job before. Usage: supervisor_restart_test.sh BIN
set -euo pipefail
bin="$1"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's, with python3-torch (deploy/install-deps.sh)
work=$(mktemp -d)
nodes=()
sup=""
cleanup() {
  for p in $sup "${nodes[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err "$work"/n*.log; do [ -f "$f" ] && { echo "--- $f"; tail -12 "$f"; }; done
  exit 1
}
. "$here/node_procs.sh"
. "$here/job_procs.sh" # (con, same_weights)

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds (generous bounds:
# a loaded host may take seconds to start a process)
wait_for() {
  local what="$1" secs="$2"
  shift 2
  for _ in $(seq 1 $((secs * 10))); do
    "$@" && return 0
    sleep 0.1
  done
  fail "waited ${secs} s for $what"
}
port_of() { sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "n$1.out"; }
cluster_file() { # FILE NODE...
  local f="$1"
  shift
  : >"$f"
  for i in "$@"; do printf '[[node]]\nname = "n%s"\naddress = "127.0.0.1:%s"\n\n' "$i" "$(port_of "$i")" >>"$f"; done
}
batches() { local n; n=$(grep -c '"event":"batch"' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
at_least() { [ "$(batches "$1")" -ge "$2" ]; } # LOG N: N batches logged
job=(--model mlp --dataset synthetic --epochs 3 --max-batches 200 --batch-size 32
     --plan even --replicate-every 5 --threads 1)

# ---- bad input: --resume says what it cannot do, at once
if out=$("$bin" supervisor --resume "$work/nosuch" 2>&1); then fail "--resume of nothing accepted"; fi
grep -q "there is no .*nosuch/job.json" <<<"$out" || fail "--resume of nothing said: $out"
mkdir -p "$work/other"
echo '{"format":1,"argv":["supervisor","--cluster","x.toml"],"cwd":"/"}' >"$work/other/job.json"
if out=$("$bin" supervisor --resume "$work/other" --epochs 9 2>&1); then fail "--resume with options accepted"; fi
grep -q "takes no other option (--epochs)" <<<"$out" || fail "--resume with options said: $out"
grep -q -- "--supervisor-grace" <<<"$("$bin" node --help)" || fail "node --help lists no --supervisor-grace"

for i in 1 2 3; do start_node "$i" 0 --supervisor-grace 120; done
cluster_file c.toml 1 2 3

# ---- the fault-free run (the nodes then hold a finished job's leftovers)
"$bin" supervisor --cluster c.toml "${job[@]}" --save ref.ckpt --metrics ref/metrics.jsonl \
  >ref.out 2>ref.err || fail "fault-free run: $(tail -5 ref.err)"

# run NAME HOW [kill-node I]: start the job, kill -9 its supervisor once 30
# batches are logged (batches are in flight), kill node I too, wait, and
# carry the job on: HOW is `resume` (supervisor --resume RUN_DIR) or `again`
# (the same command line again)
run_killed() {
  local name="$1" how="$2" victim="${3:-}"
  "$bin" supervisor --cluster c.toml "${job[@]}" --save "$name.ckpt" --metrics "$name/metrics.jsonl" \
    >"$name.out" 2>"$name.err" &
  sup=$!
  wait_for "30 batches of $name" 300 at_least "$name/metrics.jsonl" 30
  kill -KILL "$sup"
  wait "$sup" 2>/dev/null || true
  sup=""
  at_least "$name/metrics.jsonl" 600 && fail "$name: the job finished before the kill"
  [ -f "$name/central.ckpt" ] || fail "$name: no central replica on disk after 30 batches"
  [ -f "$name/job_state.json" ] || fail "$name: no job_state.json"
  for i in 1 2 3; do
    [ -n "$victim" ] && [ "$i" = "$victim" ] && continue
    wait_for "n$i to notice its supervisor went away" 60 grep -q "the supervisor went away" "n$i.log"
  done
  if [ -n "$victim" ]; then
    local p="pid_$victim"
    kill -KILL "${!p}"
    wait "${!p}" 2>/dev/null || true
  fi
  sleep 2 # the outage
  if [ "$how" = resume ]; then
    "$bin" supervisor --resume "$name" >"$name.resume.out" 2>"$name.resume.err" &
  else
    "$bin" supervisor --cluster c.toml "${job[@]}" --save "$name.ckpt" --metrics "$name/metrics.jsonl" \
      >"$name.resume.out" 2>"$name.resume.err" &
  fi
  sup=$!
  wait "$sup" || fail "$name: the resumed job failed: $(tail -5 "$name.resume.err")"
  sup=""
  if [ "$how" = again ]; then
    grep -q "this same command ran in $name and its supervisor stopped" "$name.resume.err" \
      || fail "$name: the same command again did not say it carries the job on: $(head -5 "$name.resume.err")"
  fi
  grep -q "RESUMED" "$name.resume.err" || fail "$name: no RESUMED line: $(tail -5 "$name.resume.err")"
  [ -f "$name/metrics-resume1.jsonl" ] || fail "$name: no metrics-resume1.jsonl"
  "$bin" audit "$name/metrics-resume1.jsonl" >"$name.audit" 2>&1 \
    || fail "$name: audit of the resumed job: $(cat "$name.audit")"
  same_weights ref.ckpt "$name.ckpt"
  # a finished job is not resumed again
  if out=$("$bin" supervisor --resume "$name" 2>&1); then fail "$name: a finished job resumed"; fi
  grep -q "that job finished" <<<"$out" || fail "$name: resuming a finished job said: $out"
}

# ---- 1. kill -9 of the supervisor, restarted after a delay
run_killed killed resume
grep -q '"event":"resumed"' killed/metrics-resume1.jsonl || fail "no resumed event"

# ---- 2. the same, and node n3 killed while no supervisor ran; carried on by
# the same command again
run_killed killed_node again 3
grep -q "n3 at 127.0.0.1:.* is unreachable" killed_node.resume.err \
  || fail "the resumed job did not say n3 is gone: $(head -20 killed_node.resume.err)"
grep -q '"nodes_gone":\["n3"\]' killed_node/metrics-resume1.jsonl || fail "resume event lacks n3"

# ---- 3. a node that joined (--join, in no cluster file) offers itself again
# to the supervisor resumed on the same --listen port, and is planned in
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cluster_file j.toml 1 2
"$bin" supervisor --cluster j.toml --listen "127.0.0.1:$port" "${job[@]}" --save joined.ckpt \
  --metrics joined/metrics.jsonl >joined.out 2>joined.err &
sup=$!
# held at its start (pause) until n6 has joined, so that it cannot finish
# first (a loaded host may profile the nodes for a while before it pauses)
pause_job 180
start_node 6 0 --join "127.0.0.1:$port" --supervisor-grace 120
wait_for "n6 to join" 60 grep -q "n6 joined" n6.log
con resume >/dev/null || fail "resume after the join: $(tail -3 joined.err)"
wait_for "n6 in a plan" 300 grep -q "n6\[" joined.err
wait_for "30 batches of joined" 300 at_least joined/metrics.jsonl 30
kill -KILL "$sup"
wait "$sup" 2>/dev/null || true
sup=""
at_least joined/metrics.jsonl 600 && fail "joined: the job finished before the kill"
wait_for "n6 to offer itself again" 60 grep -q "offering the node to it again" n6.log
sleep 2 # the outage
"$bin" supervisor --resume joined >joined.resume.out 2>joined.resume.err &
sup=$!
# held (pause) until n6 is back: the resumed job, 300-odd batches of an MLP,
# may otherwise end in the 2 s before n6 offers itself again
pause_job 180
wait_for "n6 to join again" 60 grep -q "joined again" n6.log
con resume >/dev/null || fail "resume after n6 joined again: $(tail -3 joined.resume.err)"
wait "$sup" || fail "joined: the resumed job failed: $(tail -5 joined.resume.err)"
sup=""
grep -q "n6\[" joined.resume.err || fail "n6 was not planned in again: $(grep plan joined.resume.err)"
"$bin" audit joined/metrics-resume1.jsonl >joined.audit 2>&1 || fail "joined: audit: $(cat joined.audit)"
same_weights ref.ckpt joined.ckpt
kill -TERM "$pid_6"
wait "$pid_6" 2>/dev/null || true

# ---- 4. a supervisor that never returns
kill -TERM "$pid_1" "$pid_2"
wait "$pid_1" "$pid_2" 2>/dev/null || true
nodes=()
start_node 4 0 --supervisor-grace 2 --leave-without-supervisor
start_node 5 0 --supervisor-grace 2
cluster_file g.toml 4 5
"$bin" supervisor --cluster g.toml "${job[@]}" --metrics g/metrics.jsonl >g.out 2>g.err &
sup=$!
wait_for "batches of the last job" 300 at_least g/metrics.jsonl 3
kill -KILL "$sup"
wait "$sup" 2>/dev/null || true
sup=""
# n4 leaves by itself, cleanly, once the grace is over
for _ in $(seq 1 600); do kill -0 "$pid_4" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid_4" 2>/dev/null; then fail "n4 still runs 60 s after its supervisor died"; fi
rc=0
wait "$pid_4" || rc=$?
[ "$rc" = 0 ] || fail "n4 left with exit code $rc"
grep -q "no supervisor came back within 2 s: dropped 1 stage(s) and the replicas; leaving" n4.log \
  || fail "n4 did not say why it left: $(tail -3 n4.log)"
grep -q "leaving (no supervisor came back" n4.log || fail "n4 did not leave cleanly: $(tail -3 n4.log)"
# n5 drops the job, stays up, and serves the next supervisor
wait_for "n5 to drop the job" 60 grep -q "dropped 1 stage(s) and the replicas; idle" n5.log
kill -0 "$pid_5" || fail "n5 left without --leave-without-supervisor"
cluster_file h.toml 5
"$bin" supervisor --cluster h.toml --model mlp --dataset synthetic --epochs 1 --max-batches 5 \
  --metrics h/metrics.jsonl >h.out 2>h.err || fail "n5 did not serve the next job: $(tail -5 h.err)"
echo "supervisor restart: all checks passed"
