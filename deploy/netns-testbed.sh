#!/usr/bin/env bash
# A one-machine testbed of emulated edge devices: each node runs in its own
# Linux network namespace behind a shaped link, the way it would on its own
# board. Like local-cluster.sh, it writes a cluster file, runs COMMAND with
# $SALAMANDER_CLUSTER exported (in the root namespace, where the supervisor
# belongs), and tears everything down when it exits (COMMAND ends, Ctrl-C,
# SIGTERM or a failure). Must run as root.
#
#   deploy/netns-testbed.sh N CLUSTER_FILE [COMMAND...]
#
# Topology (names all start with "sal-", and nothing else is touched):
#
#   root namespace: bridge sal-br0 10.77.0.1/24  <- supervisor / COMMAND
#     |- sal-veth1 <-veth-> eth0 10.77.0.11 in namespace sal-node1 (lo up)
#     |- sal-veth2 <-veth-> eth0 10.77.0.12 in namespace sal-node2
#     ...
#   node I listens on 10.77.0.(10+I):7101; nodes reach each other over the
#   bridge, so node-to-node traffic crosses both nodes' links.
#
# Each link is shaped in both directions (a qdisc on each end of the veth):
# netem (rate, delay, loss) where the kernel has it, else tbf (rate only;
# delay and loss are then NOT emulated and a warning says so).
#
# Environment:
#   SALAMANDER_NET="rate=1gbit delay=1ms"  link of every node (keys: rate=,
#       delay= one-way per direction, loss=; "none": unshaped)
#   SALAMANDER_NET_I="rate=50mbit delay=5ms"  node I; its keys override
#   SALAMANDER_CPU=S, SALAMANDER_CPU_I=S   CPU share: adds --cpu-share S
#   SALAMANDER_NODE_ARGS_I="--mem-mb 512"  more arguments for node I
#   SALAMANDER_KILL_AFTER=I:S[,I:S...]     SIGKILL node I S seconds after
#       COMMAND starts (chaos)
#   SALAMANDER_LINK_DOWN_AFTER=I:S[:F][,...]  set node I's link down S
#       seconds after COMMAND starts (it falls off the network); back up
#       after F more seconds if F is given
#   SALAMANDER_CHAOS_FROM=start|connected  the chaos times above count from
#       COMMAND's start (default), or from when a supervisor has connected to
#       every node (each node's log says so): on a loaded host a supervisor
#       can take seconds to start, and a cut meant for mid-run would land
#       before the job began
#   SALAMANDER_LOG_DIR   node logs (default: a temporary directory, printed)
#   SALAMANDER_BIN       the salamander binary (default: build/apps/salamander)
#   SALAMANDER_NETNS_SUBNET=10.77.0   first three octets of the /24
#   SALAMANDER_NETNS_PORT=7101        the port every node listens on
#   SALAMANDER_NET_STRICT=1  fail instead of warning when delay/loss cannot
#       be emulated
#   SALAMANDER_SECRET    passed through to the nodes (plain inheritance)
#
# Exit status: COMMAND's; 2 on bad usage; 77 when this machine cannot host
# the testbed (not root, no network namespaces, veth or bridges); 1 when the
# testbed fails to come up. One testbed runs at a time (a lock in /run);
# leftovers of a testbed that died without cleaning up are removed first,
# and listed.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "netns-testbed: $*" >&2; exit 1; }
cannot() { echo "netns-testbed: $*" >&2; exit 77; }
say() { echo "netns-testbed: $*" >&2; }

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
if [ $# -lt 2 ]; then
  echo "usage: netns-testbed.sh N CLUSTER_FILE [COMMAND...]   (--help for more)" >&2
  exit 2
fi
n=$1
cluster=$2
shift 2
[[ "$n" =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 200 ] || { echo "netns-testbed: N must be 1..200, got '$n'" >&2; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SALAMANDER_BIN:-$root/build/apps/salamander}
subnet=${SALAMANDER_NETNS_SUBNET:-10.77.0}
port=${SALAMANDER_NETNS_PORT:-7101}
bridge=sal-br0
[[ "$subnet" =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || { echo "netns-testbed: SALAMANDER_NETNS_SUBNET must look like 10.77.0, got '$subnet'" >&2; exit 2; }
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || { echo "netns-testbed: bad SALAMANDER_NETNS_PORT '$port'" >&2; exit 2; }
ns_of() { echo "sal-node$1"; }
veth_of() { echo "sal-veth$1"; }
addr_of() { echo "$subnet.$((10 + $1))"; }

# ---- link settings: parsed and checked before anything is created ---------
declare -A net_rate net_delay net_loss
rate_re='^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$'
delay_re='^[0-9]+(\.[0-9]+)?(us|ms|s)$'
loss_re='^[0-9]+(\.[0-9]+)?%$'
parse_net() { # NODE SPEC SOURCE: overlays SPEC's keys onto node NODE's settings
  local i=$1 spec=$2 from=$3 kv key val
  for kv in $spec; do
    if [ "$kv" = none ]; then
      net_rate[$i]=""; net_delay[$i]=""; net_loss[$i]=""; continue
    fi
    key=${kv%%=*}; val=${kv#*=}
    [ "$key" != "$kv" ] || die "$from: '$kv' is not key=value"
    case "$key" in
      rate) [[ "$val" =~ $rate_re ]] || die "$from: rate '$val' (want e.g. 100mbit, 1gbit)"; net_rate[$i]=$val ;;
      delay) [[ "$val" =~ $delay_re ]] || die "$from: delay '$val' (want e.g. 5ms)"; net_delay[$i]=$val ;;
      loss) [[ "$val" =~ $loss_re ]] || die "$from: loss '$val' (want e.g. 0.5%)"; net_loss[$i]=$val ;;
      *) die "$from: unknown key '$key' (rate, delay, loss)" ;;
    esac
  done
}
node_args=()
for i in $(seq 1 "$n"); do
  net_rate[$i]=""; net_delay[$i]=""; net_loss[$i]=""
  parse_net "$i" "${SALAMANDER_NET-rate=1gbit delay=1ms}" SALAMANDER_NET
  v="SALAMANDER_NET_$i"; parse_net "$i" "${!v:-}" "$v"
  args=""
  v="SALAMANDER_CPU_$i"; cpu=${!v:-${SALAMANDER_CPU:-}}
  [ -z "$cpu" ] || args="--cpu-share $cpu"
  v="SALAMANDER_NODE_ARGS_$i"; args="$args ${!v:-}"
  node_args[$i]=$args
done
# chaos events: "I:S" or "I:S:F", comma-separated; times in microseconds
to_us() { awk -v s="$1" 'BEGIN { if (s !~ /^[0-9]+(\.[0-9]+)?$/) exit 1; printf "%d", s * 1000000 }'; }
events=() # "due_us action node"
add_events() { # VAR ACTION
  local var=$1 action=$2 spec item node after for_s
  spec=${!var:-}
  [ -n "$spec" ] || return 0
  IFS=, read -r -a items <<<"$spec"
  for item in "${items[@]}"; do
    IFS=: read -r node after for_s <<<"$item"
    [[ "$node" =~ ^[0-9]+$ ]] && [ "$node" -ge 1 ] && [ "$node" -le "$n" ] || die "$var: no node '$node' in '$item'"
    after=$(to_us "${after:-}") || die "$var: '$item' needs I:SECONDS"
    if [ "$action" = kill ] && [ -n "${for_s:-}" ]; then die "$var: '$item': I:SECONDS only"; fi
    events+=("$after $action $node")
    if [ -n "${for_s:-}" ]; then
      for_s=$(to_us "$for_s") || die "$var: '$item': bad seconds"
      events+=("$((after + for_s)) up $node")
    fi
  done
}
add_events SALAMANDER_KILL_AFTER kill
add_events SALAMANDER_LINK_DOWN_AFTER down

# ---- can this machine host it? ---------------------------------------------
[ "$(id -u)" -eq 0 ] || cannot "must run as root (network namespaces, veths and qdiscs need CAP_NET_ADMIN and CAP_SYS_ADMIN); try sudo"
for tool in ip tc nsenter flock; do
  command -v "$tool" >/dev/null || cannot "needs '$tool' (iproute2, util-linux)"
done
[ -x "$bin" ] || die "no salamander binary at $bin (build it, or set SALAMANDER_BIN)"

lockfile=/run/sal-netns-testbed.lock
[ -d /run ] && [ -w /run ] || lockfile=/tmp/sal-netns-testbed.lock
pidfile=${lockfile%.lock}.pids
exec 9>"$lockfile"
# -w: a testbed killed outright may leave a short-lived child (a sleep) holding the lock
flock -w 3 9 || die "another netns-testbed is running (lock $lockfile held); one at a time, as they share names and addresses"

# everything in the root namespace whose name is ours
our_links() { ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -E '^sal-(br0|veth[0-9]+)$' || true; }
our_netns() { ip netns list 2>/dev/null | awk '{ print $1 }' | grep -E '^sal-node[0-9]+$' || true; }
alive() { # PID: running (a zombie is not)
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
stop_pids() { # PID...: SIGTERM, up to 5 s to leave, then SIGKILL
  local pid left t
  [ $# -gt 0 ] || return 0
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for t in $(seq 1 50); do
    left=0
    for pid in "$@"; do if alive "$pid"; then left=1; fi; done
    [ "$left" = 1 ] || break
    sleep 0.1
  done
  for pid in "$@"; do
    if alive "$pid"; then
      say "pid $pid ignored SIGTERM for 5 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for t in $(seq 1 20); do
    left=0
    for pid in "$@"; do if alive "$pid"; then left=1; fi; done
    [ "$left" = 1 ] || break
    sleep 0.1
  done
}
remove_cgroups() { # PID...: the CPU-share cgroups a node makes for itself; they outlive a SIGKILL
  local pid d
  for pid in "$@"; do
    for d in "/sys/fs/cgroup/salamander-$pid" "/sys/fs/cgroup/cpu/salamander-$pid"; do
      [ ! -d "$d" ] || rmdir "$d" 2>/dev/null || true
    done
  done
}
# Takes down whatever of ours exists: processes in our namespaces (and our
# recorded nodes), their cgroups, qdiscs, veths, namespaces, the bridge.
teardown() {
  local ns pids=() pid link
  for ns in $(our_netns); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$pid"); done
  done
  if [ -f "$pidfile" ]; then
    mapfile -t recorded <"$pidfile"
    for pid in "${recorded[@]}"; do
      # a recorded node outside our namespaces (not expected); pids are reused, so
      # only a salamander that is not in the root namespace
      if alive "$pid" && grep -q salamander "/proc/$pid/cmdline" 2>/dev/null \
         && [[ " ${pids[*]} " != *" $pid "* ]] && [ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/self/ns/net)" ]; then
        pids+=("$pid")
      fi
    done
  fi
  stop_pids "${pids[@]}"
  if [ -f "$pidfile" ]; then
    mapfile -t recorded <"$pidfile"
    remove_cgroups "${recorded[@]}"
  fi
  remove_cgroups "${pids[@]}"
  for link in $(our_links); do
    tc qdisc del dev "$link" root 2>/dev/null || true
    [ "$link" = "$bridge" ] || ip link del "$link" 2>/dev/null || true
  done
  for ns in $(our_netns); do ip netns del "$ns" 2>/dev/null || true; done
  ip link del "$bridge" 2>/dev/null || true
  rm -f "$pidfile"
}

leftover_ns=$(our_netns | tr '\n' ' ')
leftover_links=$(our_links | tr '\n' ' ')
if [ -n "$leftover_ns$leftover_links" ] || [ -s "$pidfile" ]; then
  say "a previous testbed did not clean up; removing its leftovers first:"
  [ -z "$leftover_ns" ] || say "  namespaces: $leftover_ns"
  [ -z "$leftover_links" ] || say "  links: $leftover_links"
  for ns in $leftover_ns; do
    p=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [ -z "$p" ] || say "  processes in $ns: $p"
  done
  [ ! -s "$pidfile" ] || say "  node pids recorded in $pidfile: $(tr '\n' ' ' <"$pidfile")"
  teardown
  left=$({ our_netns; our_links; } | tr '\n' ' ')
  [ -z "$left" ] || die "could not remove the leftovers: $left"
fi
if [ -n "$(ip -4 route show "$subnet.0/24" 2>/dev/null)" ] \
   || ip -4 -o addr show | grep -q " inet $subnet\.[0-9]*/"; then
  die "$subnet.0/24 is already in use on this machine; choose another with SALAMANDER_NETNS_SUBNET"
fi

# ---- from here on, everything is ours and goes on exit ---------------------
logs=${SALAMANDER_LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
node_pids=()
cmd_pid=""
cleanup() {
  local rc=$?
  set +e
  trap '' INT TERM HUP
  if [ -n "$cmd_pid" ] && alive "$cmd_pid"; then
    say "stopping the command (pid $cmd_pid)"
    stop_pids "$cmd_pid"
  fi
  stop_pids "${node_pids[@]}"
  teardown
  local left
  left=$({ our_netns; our_links; } | tr '\n' ' ')
  [ -z "$left" ] || say "WARNING: could not remove: $left"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
: >"$pidfile"

ip link add "$bridge" type bridge 2>"$logs/setup.err" \
  || cannot "cannot create a bridge: $(cat "$logs/setup.err")"
ip addr add "$subnet.1/24" dev "$bridge"
ip link set "$bridge" up
netem=""
for i in $(seq 1 "$n"); do
  ns=$(ns_of "$i"); veth=$(veth_of "$i")
  ip netns add "$ns" 2>"$logs/setup.err" \
    || cannot "'ip netns add' is not permitted here: $(cat "$logs/setup.err")"
  ip link add "$veth" type veth peer name eth0 netns "$ns" 2>"$logs/setup.err" \
    || cannot "cannot create a veth pair: $(cat "$logs/setup.err")"
  ip link set "$veth" master "$bridge"
  ip link set "$veth" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  if [ -z "$netem" ]; then
    if tc qdisc add dev "$veth" root netem delay 0ms 2>/dev/null; then
      tc qdisc del dev "$veth" root
      netem=yes
    else
      netem=no
    fi
  fi
done

# shaping
if [ "$netem" = no ]; then
  unemulated=""
  for i in $(seq 1 "$n"); do
    [ -z "${net_delay[$i]}${net_loss[$i]}" ] || unemulated="$unemulated node$i"
  done
  if [ -n "$unemulated" ]; then
    msg="this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): delay and loss are NOT emulated for$unemulated; rates are, with tbf"
    [ "${SALAMANDER_NET_STRICT:-0}" = 1 ] && die "$msg"
    say "WARNING: $msg"
  fi
fi
tbf_burst() { # RATE -> bytes: 4 ms at the rate, at least 32 KiB (a GSO segment or two)
  awk -v r="$1" 'BEGIN {
    match(r, /^[0-9.]+/); v = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1)
    m["bit"] = 1/8; m["kbit"] = 1e3/8; m["mbit"] = 1e6/8; m["gbit"] = 1e9/8; m["tbit"] = 1e12/8
    m["bps"] = 1; m["kbps"] = 1e3; m["mbps"] = 1e6; m["gbps"] = 1e9; m["tbps"] = 1e12
    b = v * m[u] * 0.004; if (b < 32768) b = 32768; printf "%d", b }'
}
shape() { # NODE -> tc arguments after "root", or nothing
  local i=$1 rate=${net_rate[$1]} delay=${net_delay[$1]} loss=${net_loss[$1]}
  if [ "$netem" = yes ]; then
    [ -n "$rate$delay$loss" ] || return 0
    echo "netem limit 10000${delay:+ delay $delay}${rate:+ rate $rate}${loss:+ loss $loss}"
  elif [ -n "$rate" ]; then
    echo "tbf rate $rate burst $(tbf_burst "$rate") latency 100ms"
  fi
}
summary=()
for i in $(seq 1 "$n"); do
  q=$(shape "$i")
  if [ -n "$q" ]; then
    # shellcheck disable=SC2086
    tc qdisc add dev "$(veth_of "$i")" root $q    # towards the node
    # shellcheck disable=SC2086
    tc -n "$(ns_of "$i")" qdisc add dev eth0 root $q  # from the node
  fi
  s="${net_rate[$i]:+rate ${net_rate[$i]} }${net_delay[$i]:+delay ${net_delay[$i]} }${net_loss[$i]:+loss ${net_loss[$i]}}"
  kind=${q%% *}
  # shellcheck disable=SC2086
  na=$(echo ${node_args[$i]})
  summary+=("node$i $(addr_of "$i"):$port ${s:+$s}(${kind:-unshaped})${na:+ $na}")
done

# nodes: nsenter rather than `ip netns exec`, which mounts a fresh /sys in
# which /sys/fs/cgroup is empty, so --cpu-share would lose its cgroup quota
for i in $(seq 1 "$n"); do
  # shellcheck disable=SC2086
  nsenter --net="/run/netns/$(ns_of "$i")" "$bin" node --name "node$i" \
    --listen "$(addr_of "$i"):$port" ${node_args[$i]} \
    >"$logs/node$i.out" 2>"$logs/node$i.log" </dev/null 9>&- &
  node_pids[$i]=$!
  echo "$!" >>"$pidfile"
  disown "$!" # watched through /proc, and no "Killed" notice from bash after chaos
done
: >"$cluster"
for i in $(seq 1 "$n"); do
  for _ in $(seq 1 200); do
    grep -q "listening on" "$logs/node$i.out" 2>/dev/null && break
    alive "${node_pids[$i]}" || break
    sleep 0.05
  done
  want="$(addr_of "$i"):$port"
  grep -q "listening on $want" "$logs/node$i.out" 2>/dev/null \
    || die "node$i did not start on $want; see $logs/node$i.log: $(tail -3 "$logs/node$i.log" 2>/dev/null)"
  printf '[[node]]\nname = "node%s"\naddress = "%s"\n\n' "$i" "$want" >>"$cluster"
done

# reachability: root -> every node, and every node -> every other node
# (a bare TCP connect, which a node ignores)
reach() { timeout 3 bash -c "exec 3<>/dev/tcp/$1/$port" 2>/dev/null; }
for i in $(seq 1 "$n"); do
  reach "$(addr_of "$i")" || die "the root namespace cannot reach node$i at $(addr_of "$i"):$port"
  for j in $(seq 1 "$n"); do
    [ "$i" != "$j" ] || continue
    nsenter --net="/run/netns/$(ns_of "$i")" timeout 3 bash -c "exec 3<>/dev/tcp/$(addr_of "$j")/$port" 2>/dev/null \
      || die "node$i cannot reach node$j at $(addr_of "$j"):$port over $bridge (bridge netfilter? check sysctl net.bridge.bridge-nf-call-iptables and the FORWARD chain)"
  done
done

say "$n nodes in network namespaces on $bridge ($subnet.0/24), cluster file $cluster, logs in $logs"
for s in "${summary[@]}"; do say "  $s"; done
export SALAMANDER_CLUSTER=$cluster

now_us() { echo "${EPOCHREALTIME/./}"; }
start=$(now_us)
chaos_from=${SALAMANDER_CHAOS_FROM:-start}
case "$chaos_from" in start | connected) ;; *) die "SALAMANDER_CHAOS_FROM must be start or connected, got '$chaos_from'" ;; esac
all_connected() {
  local i
  for i in $(seq 1 "$n"); do
    grep -q "supervisor authenticated" "$logs/node$i.log" 2>/dev/null || return 1
  done
}
run_due_events() {
  local k due action node t
  if [ "$chaos_from" = connected ]; then
    all_connected || return 0
    chaos_from=start
    start=$(now_us)
    say "CHAOS: every node has its supervisor; the chaos clock starts now"
  fi
  for k in "${!events[@]}"; do
    read -r due action node <<<"${events[$k]}"
    t=$(( $(now_us) - start ))
    [ "$t" -ge "$due" ] || continue
    unset "events[$k]"
    case "$action" in
      kill) say "CHAOS: kill -9 node$node (pid ${node_pids[$node]}) at $((t / 1000)) ms"
            kill -KILL "${node_pids[$node]}" 2>/dev/null || true ;;
      down) say "CHAOS: link of node$node down ($(veth_of "$node")) at $((t / 1000)) ms"
            ip link set "$(veth_of "$node")" down ;;
      up)   say "CHAOS: link of node$node up again ($(veth_of "$node")) at $((t / 1000)) ms"
            ip link set "$(veth_of "$node")" up ;;
    esac
  done
}
declare -A reported
watch_nodes() {
  local i
  for i in $(seq 1 "$n"); do
    if [ -z "${reported[$i]:-}" ] && ! alive "${node_pids[$i]}"; then
      reported[$i]=1
      say "node$i (pid ${node_pids[$i]}) has exited; see $logs/node$i.log"
    fi
  done
}
if [ $# -gt 0 ]; then
  # in the background so that a signal to this script acts at once (and the
  # command gets SIGTERM); stdin stays the terminal's
  "$@" <&0 9>&- &
  cmd_pid=$!
  while alive "$cmd_pid"; do
    run_due_events
    watch_nodes
    sleep 0.1
  done
  rc=0
  wait "$cmd_pid" || rc=$?
  cmd_pid=""
  exit "$rc"
else
  say "press Ctrl-C to stop the nodes and remove the testbed"
  while true; do
    run_due_events
    watch_nodes
    sleep 0.2
  done
fi
