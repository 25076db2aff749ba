#!/usr/bin/env bash
# Starts N `salamander node` processes on loopback and writes a cluster file
# for them; stops them all when it exits (Ctrl-C, or the command given ends).
#
#   deploy/local-cluster.sh N CLUSTER_FILE [COMMAND...]
#
# With a COMMAND, runs it (it can use $SALAMANDER_CLUSTER) and then stops the
# nodes; without one, waits until interrupted. Node logs go to
# $SALAMANDER_LOG_DIR (default: a temporary directory, printed).
# Node i (1-based) emulates a device when $SALAMANDER_NODE_ARGS_i is set,
# e.g. SALAMANDER_NODE_ARGS_4="--cpu-share 0.25". SALAMANDER_KILL_AFTER=I:S
# kills node I with SIGKILL S seconds after the command starts (chaos).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SALAMANDER_BIN:-$root/build/apps/salamander}
n=${1:?usage: local-cluster.sh N CLUSTER_FILE [COMMAND...]}
cluster=${2:?usage: local-cluster.sh N CLUSTER_FILE [COMMAND...]}
shift 2
logs=${SALAMANDER_LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

: >"$cluster"
for i in $(seq 1 "$n"); do
  out="$logs/node$i.out"
  extra_var="SALAMANDER_NODE_ARGS_$i"
  # shellcheck disable=SC2086
  "$bin" node --name "node$i" --listen 127.0.0.1:0 ${!extra_var:-} >"$out" 2>"$logs/node$i.log" &
  pids+=($!)
  for _ in $(seq 1 100); do
    grep -q "listening on" "$out" 2>/dev/null && break
    sleep 0.05
  done
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")
  if [ -z "$port" ]; then
    echo "local-cluster: node$i did not start; see $logs/node$i.log" >&2
    exit 1
  fi
  printf '[[node]]\nname = "node%s"\naddress = "127.0.0.1:%s"\n\n' "$i" "$port" >>"$cluster"
done
echo "local-cluster: $n nodes on loopback, cluster file $cluster, logs in $logs" >&2
export SALAMANDER_CLUSTER=$cluster
if [ $# -gt 0 ]; then
  if [ -n "${SALAMANDER_KILL_AFTER:-}" ]; then
    victim=${SALAMANDER_KILL_AFTER%%:*}
    after=${SALAMANDER_KILL_AFTER##*:}
    victim_pid=${pids[$((victim - 1))]}
    ( sleep "$after"; echo "local-cluster: CHAOS: kill -9 node$victim (pid $victim_pid)" >&2;
      kill -KILL "$victim_pid" 2>/dev/null || true ) &
  fi
  "$@"
else
  echo "local-cluster: press Ctrl-C to stop the nodes" >&2
  while true; do sleep 3600; done
fi
