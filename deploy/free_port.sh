# Sourced by deploy/demo.sh and the integration tests. free_port prints a TCP port on loopback
# that nothing listens on, chosen below the kernel's ephemeral range: the
# kernel never hands a port from there to an outgoing connection or to a
# `--listen HOST:0`, so the node processes a test starts cannot take it
# between the choice and the bind (a random port in 20000-40000 could, and
# did: `cannot listen on 127.0.0.1:37804` in CI).
free_port() {
  local low=32768 p
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  [ "$low" -gt 12000 ] || low=32768
  for _ in $(seq 1 200); do
    p=$(( 10000 + RANDOM % (low - 10000) ))
    # a connect that succeeds means someone listens there
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "free_port: no free port below $low on 127.0.0.1" >&2
  return 1
}
