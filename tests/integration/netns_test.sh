#!/usr/bin/env bash
# Real jobs over deploy/netns-testbed.sh: nodes in their own network
# namespaces behind shaped links, a link cut mid-run, large weights over slow
# links (pipeline snapshots, federated updates), and the testbed leaving
# nothing behind however it ends. Usage: netns_test.sh PATH/TO/salamander
# Exits 77 (skip) when not root or network namespaces are not permitted.
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
testbed="$root/deploy/netns-testbed.sh"
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
for tool in ip tc nsenter flock; do
  command -v "$tool" >/dev/null || skip "needs $tool (iproute2, util-linux)"
done
probe="sal-probe-$$"
if ! err=$(ip netns add "$probe" 2>&1); then skip "'ip netns add' is not permitted here: $err"; fi
# adding can succeed where entering fails (inside a chroot, /var/run/netns is
# not a mount the kernel accepts)
if ! err=$(ip netns exec "$probe" ip link set lo up 2>&1); then
  ip netns del "$probe" 2>/dev/null || true
  skip "'ip netns exec' is not permitted here: $err"
fi
ip netns del "$probe"

work=$(mktemp -d)
tb="" # a testbed running in the background, stopped (and so torn down) if a check fails
finish() {
  if [ -n "$tb" ]; then kill -TERM "$tb" 2>/dev/null || true; wait "$tb" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap finish EXIT
cd "$work" # the supervisor writes runs/ (metrics) into its working directory
export SALAMANDER_BIN="$bin"
ms() { echo $(( ${EPOCHREALTIME/./} / 1000 )); }
# what the testbed makes: namespaces sal-nodeI, links sal-br0 / sal-vethI,
# nodes listening on 10.77.0.x
assert_clean() {
  local ns links procs
  ns=$(ip netns list | awk '{ print $1 }' | grep -E '^sal-' || true)
  links=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -E '^sal-' || true)
  procs=$(pgrep -af 'salamander node --name node[0-9]+ --listen 10\.77\.0\.' || true)
  [ -z "$ns$links$procs" ] || fail "$1: left behind: namespaces [$ns] links [$links] processes [$procs]"
  # new stale groups only: a node that starts removes the stale groups it
  # finds, those from before this test included
  local d
  for d in $(stale_cgroups); do
    grep -qxF "$d" <<<"$stale_before" || fail "$1: left the CPU-share cgroup $d of a dead node"
  done
}
# cgroups a node made for --cpu-share whose process is gone
stale_cgroups() {
  local d
  for d in /sys/fs/cgroup/salamander-* /sys/fs/cgroup/cpu/salamander-*; do
    [ -d "$d" ] && [ ! -e "/proc/${d##*-}" ] && echo "$d"
  done
  return 0
}
testbed_rc() { # runs the testbed; 77 from it means this machine cannot host it
  local rc=0
  "$@" || rc=$?
  [ "$rc" != 77 ] || skip "the testbed cannot run here: $(tail -1 "$work/last.err")"
  return "$rc"
}
stale_before=$(stale_cgroups)
# A run killed by ctest's timeout (SIGKILL: no trap runs) leaves its testbed
# behind; the testbed removes such leftovers when it starts, and every step
# below checks that nothing is left after it.
if ! (assert_clean "before the test" >/dev/null); then
  echo "netns: a previous run left its testbed behind; the first testbed removes it"
fi

# 1. a short job over three namespaced nodes, node 2 on a slow link and a
#    quarter of a core; the shaping is in place on both ends of its link, and
#    the cluster secret reaches the nodes
t0=$(ms)
rc=0
SALAMANDER_SECRET="netns-test-$$-$RANDOM" \
SALAMANDER_LOG_DIR="$work/l1" SALAMANDER_NET_2="rate=50mbit delay=5ms" SALAMANDER_CPU_2=0.25 \
  testbed_rc "$testbed" 3 "$work/c1.toml" bash -c '
    tc qdisc show dev sal-veth2 >"$0/qdisc-root"
    tc -n sal-node2 qdisc show dev eth0 >"$0/qdisc-node"
    exec "$1" supervisor --cluster "$SALAMANDER_CLUSTER" --dataset synthetic --max-batches 20 \
      --epochs 1 --plan even' "$work" "$bin" >"$work/j1.out" 2>"$work/last.err" || rc=$?
t1=$(ms)
cp "$work/last.err" "$work/j1.err"
[ "$rc" = 0 ] || fail "short job exited $rc: $(tail -5 "$work/j1.err")"
grep -q "^test accuracy:" "$work/j1.out" || fail "short job printed no accuracy: $(cat "$work/j1.out")"
grep -q "done: 20 batches" "$work/j1.err" || fail "short job did not finish 20 batches: $(tail -3 "$work/j1.err")"
grep -q 'address = "10.77.0.12:7101"' "$work/c1.toml" || fail "cluster file: $(cat "$work/c1.toml")"
grep -q "rate 50Mbit" "$work/qdisc-root" || fail "node2's link is not shaped towards it: $(cat "$work/qdisc-root")"
grep -q "rate 50Mbit" "$work/qdisc-node" || fail "node2's link is not shaped from it: $(cat "$work/qdisc-node")"
grep -q "cpu-share 0.25" "$work/l1/node2.log" || fail "node2 emulates no CPU share: $(head -3 "$work/l1/node2.log")"
for i in 1 2 3; do
  grep -q "leaving (SIGTERM)" "$work/l1/node$i.log" || fail "node$i did not leave cleanly: $(tail -3 "$work/l1/node$i.log")"
  if grep -q "no cluster secret" "$work/l1/node$i.log"; then fail "SALAMANDER_SECRET did not reach node$i"; fi
done
assert_clean "after the short job"
echo "netns: short job over 3 namespaced nodes: $((t1 - t0)) ms"

# 2. node 2 falls off the network mid-run: the supervisor notices within the
#    hang timeout and recovers without it
t0=$(ms)
rc=0
SALAMANDER_LOG_DIR="$work/l2" SALAMANDER_LINK_DOWN_AFTER=2:2 SALAMANDER_CHAOS_FROM=connected \
  testbed_rc "$testbed" 3 "$work/c2.toml" "$bin" supervisor --cluster "$work/c2.toml" \
  --dataset synthetic --epochs 5 --plan even --hang-timeout 2 \
  >"$work/j2.out" 2>"$work/last.err" || rc=$?
t1=$(ms)
cp "$work/last.err" "$work/j2.err"
[ "$rc" = 0 ] || fail "job with a cut link exited $rc: $(tail -5 "$work/j2.err")"
grep -q "CHAOS: link of node2 down" "$work/j2.err" || fail "the link was never cut: $(tail -5 "$work/j2.err")"
grep -q "recovered from 1 failure(s).*lost: node2" "$work/j2.err" \
  || fail "no recovery from the cut-off node: $(tail -5 "$work/j2.err")"
grep -q "^recoveries: 1" "$work/j2.out" || fail "job with a cut link printed no recoveries: $(cat "$work/j2.out")"
grep -q "^test accuracy:" "$work/j2.out" || fail "job with a cut link printed no accuracy"
assert_clean "after the job with a cut link"
echo "netns: job recovering from a cut link: $((t1 - t0)) ms"

# 2b. every node falls off the network for 5 s (all links down): the job
#     pauses with no nodes left, then takes the same processes back as their
#     links return, and finishes. 24 epochs: a node whose link returns waits
#     up to the redial interval (4 s) and its admission before it is back, and
#     on a loaded host 12 epochs ended before the last one was (full ctest -j2)
t0=$(ms)
rc=0
SALAMANDER_LOG_DIR="$work/l2b" SALAMANDER_LINK_DOWN_AFTER=1:3:5,2:3:5,3:3:5 SALAMANDER_CHAOS_FROM=connected \
  testbed_rc "$testbed" 3 "$work/c2b.toml" "$bin" supervisor --cluster "$work/c2b.toml" \
  --dataset synthetic --epochs 24 --plan even --hang-timeout 2 \
  >"$work/j2b.out" 2>"$work/last.err" || rc=$?
t1=$(ms)
cp "$work/last.err" "$work/j2b.err"
[ "$rc" = 0 ] || fail "job over an outage exited $rc: $(tail -5 "$work/j2b.err")"
grep -q "CHAOS: link of node3 up again" "$work/j2b.err" \
  || fail "the links never came back (job too short?): $(tail -5 "$work/j2b.err")"
grep -q "no nodes are left" "$work/j2b.err" || fail "the outage did not pause the job: $(tail -5 "$work/j2b.err")"
for i in 1 2 3; do
  grep -q "node node$i is back: admitted again" "$work/j2b.err" \
    || fail "node$i was not taken back after the outage: $(grep -i "node$i" "$work/j2b.err" | tail -5)"
done
grep -q "^test accuracy:" "$work/j2b.out" || fail "job over an outage printed no accuracy"
assert_clean "after the job over an outage"
echo "netns: job over a 5 s outage of every link, nodes taken back: $((t1 - t0)) ms"

# 2c. a node on a slow link (8 Mbit/s) holds the whole model, whose weights
#     with Adam's state (5.4 MB) take about 5 s to reach the supervisor, more
#     than the hang timeout (2 s): replicated at batch 6 and gathered at the
#     end in parts that each take a fraction of it, so the node is never
#     taken for hung (as one message, CAF dropped it mid-snapshot, and the
#     job rolled back and replayed for ever: hence the 120 s bound)
t0=$(ms)
rc=0
SALAMANDER_LOG_DIR="$work/l2c" SALAMANDER_NET="rate=8mbit" \
  testbed_rc "$testbed" 1 "$work/c2c.toml" timeout 120 "$bin" --log-level debug supervisor \
  --cluster "$work/c2c.toml" --dataset synthetic --model mlp:hidden=384 --max-batches 8 \
  --epochs 1 --replicate-every 6 --hang-timeout 2 --pause-timeout 5 \
  >"$work/j2c.out" 2>"$work/last.err" || rc=$?
t1=$(ms)
cp "$work/last.err" "$work/j2c.err"
[ "$rc" = 0 ] || fail "job over a slow link exited $rc: $(grep -E "FAILURE|went away|paused" "$work/j2c.err" | head -3)"
if grep -E "FAILURE|went away" "$work/j2c.err"; then fail "the node on a slow link was taken for hung"; fi
grep -q "^test accuracy:" "$work/j2c.out" || fail "job over a slow link printed no accuracy"
# the premise: one snapshot took longer than the hang timeout to arrive
grep -E "holder on central: a snapshot of [5-9]\.[0-9] MB from .* in [0-9]+ part\(s\) over ([2-9]|[1-9][0-9])\." \
  "$work/j2c.err" >/dev/null || fail "no snapshot took over 2 s to arrive (the link is not slow?): $(grep "a snapshot of" "$work/j2c.err" | head -3)"
assert_clean "after the job over a slow link"
echo "netns: a node on an 8 Mbit/s link replicates 5 MB snapshots in parts, hang timeout 2 s: $((t1 - t0)) ms"

# 2d. a federated round of a 51 MB model (mlp:hidden=3200) over links shaped
#     to 10 MB/s: the global weights down and each update up take 5 s,
#     more than the hang timeout (2 s); they go in parts, so the round
#     completes with both clients and no node is taken for hung (as one
#     message, both nodes were dropped and the round had no update)
t0=$(ms)
rc=0
SALAMANDER_LOG_DIR="$work/l2d" SALAMANDER_NET="rate=80mbit" \
  testbed_rc "$testbed" 2 "$work/c2d.toml" timeout 180 "$bin" --log-level debug federate \
  --cluster "$work/c2d.toml" --rounds 1 --dataset synthetic --model mlp:hidden=3200 \
  --max-samples 128 --hang-timeout 2 \
  >"$work/j2d.out" 2>"$work/last.err" || rc=$?
t1=$(ms)
cp "$work/last.err" "$work/j2d.err"
[ "$rc" = 0 ] || fail "federated job over 10 MB/s links exited $rc: $(grep -E "went away|warning" "$work/j2d.err" | head -3)"
if grep -E "went away|is out of round" "$work/j2d.err"; then fail "a node on a 10 MB/s link was taken for hung"; fi
grep -q "^dropped updates: 0" "$work/j2d.out" || fail "updates were dropped: $(cat "$work/j2d.out")"
grep -q "2/2 clients took part" "$work/j2d.err" || fail "the round did not have both clients: $(grep "round 1/1" "$work/j2d.err")"
# the premise: an update of 51 MB took longer than the hang timeout to arrive
grep -E "weights of 5[0-9]\.[0-9] MB from .* in [0-9]+ part\(s\) over ([3-9]|[1-9][0-9])\." \
  "$work/j2d.err" >/dev/null || fail "no update took over 3 s to arrive (the link is not slow?): $(grep "weights of" "$work/j2d.err" | head -3)"
assert_clean "after the federated job over slow links"
echo "netns: a federated round of a 51 MB model over 10 MB/s links, in parts, hang timeout 2 s: $((t1 - t0)) ms"

# 3. SIGTERM to the testbed mid-job: the job is stopped and everything removed
t0=$(ms)
SALAMANDER_LOG_DIR="$work/l3" "$testbed" 2 "$work/c3.toml" "$bin" supervisor \
  --cluster "$work/c3.toml" --dataset synthetic --epochs 100 --plan even \
  >"$work/j3.out" 2>"$work/j3.err" &
tb=$!
for _ in $(seq 1 100); do
  grep -q "\[training\]" "$work/j3.err" 2>/dev/null && break
  sleep 0.1
done
grep -q "\[training\]" "$work/j3.err" || fail "the job to interrupt never trained: $(tail -5 "$work/j3.err")"
kill -TERM "$tb"
rc=0
wait "$tb" || rc=$?
tb=""
t1=$(ms)
[ "$rc" = 143 ] || fail "interrupted testbed exited $rc, not 143: $(tail -3 "$work/j3.err")"
assert_clean "after SIGTERM to the testbed"
echo "netns: SIGTERM mid-job, torn down: $((t1 - t0)) ms"

# 4. a testbed killed outright leaves everything; the next one says what and
#    removes it before starting
t0=$(ms)
SALAMANDER_LOG_DIR="$work/l4" "$testbed" 2 "$work/c4.toml" \
  bash -c 'echo $$ >"$0"; exec sleep 60' "$work/sleeper.pid" >/dev/null 2>"$work/j4.err" &
tb=$!
for _ in $(seq 1 100); do
  [ -s "$work/sleeper.pid" ] && break
  sleep 0.1
done
[ -s "$work/sleeper.pid" ] || fail "the testbed to kill never started its command: $(tail -5 "$work/j4.err")"
{ kill -KILL "$tb"; wait "$tb"; } 2>/dev/null || true
tb=""
kill -TERM "$(cat "$work/sleeper.pid")" 2>/dev/null || true
grep -q "^sal-node1" <<<"$(ip netns list)" || fail "SIGKILL left no namespaces to clean (test is wrong?)"
rc=0
"$testbed" 1 "$work/c5.toml" true >/dev/null 2>"$work/j5.err" || rc=$?
t1=$(ms)
[ "$rc" = 0 ] || fail "testbed after a killed one exited $rc: $(cat "$work/j5.err")"
grep -q "did not clean up" "$work/j5.err" || fail "leftovers were not reported: $(cat "$work/j5.err")"
grep -q "namespaces: .*sal-node2" "$work/j5.err" || fail "leftover namespaces not listed: $(cat "$work/j5.err")"
grep -q "processes in sal-node" "$work/j5.err" || fail "leftover nodes not listed: $(cat "$work/j5.err")"
assert_clean "after cleaning up a killed testbed"
echo "netns: leftovers of a SIGKILLed testbed listed and removed: $((t1 - t0)) ms"
echo "netns: all checks passed"
