# Sourced by the integration scripts that start node processes on loopback.
# Needs: $bin (the salamander binary), an array `nodes` (the pids, for the
# script's cleanup) and a function `fail`.

# start_node I [PORT] [OPTIONS...]: node process nI listening on 127.0.0.1:PORT
# (0: any), its pid in $pid_I, its stdout in nI.out; waits until it listens.
start_node() {
  local i="$1" port="${2:-0}"
  shift 2 || shift $#
  "$bin" node --name "n$i" --listen "127.0.0.1:$port" "$@" >"n$i.out" 2>"n$i.log" &
  nodes+=($!)
  eval "pid_$i=$!"
  for _ in $(seq 1 200); do
    grep -q "listening on" "n$i.out" 2>/dev/null && break
    sleep 0.05
  done
  grep -q "listening on" "n$i.out" || fail "node n$i did not start"
}
