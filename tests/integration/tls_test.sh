#!/usr/bin/env bash
# TLS between salamander processes, as an operator sets it up: certificates
# from deploy/make-certs.sh, a job over TLS node processes and a console over
# TLS; bad material refused before anything connects; a plaintext peer, and a
# peer whose certificate another CA signed, refused with a log line on the
# side that refused them. Usage: tls_test.sh PATH/TO/salamander
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../deploy/free_port.sh" # free_port
bin="$1"
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v openssl >/dev/null || { echo "SKIP: the openssl tool is missing"; exit 77; }
work=$(mktemp -d)
nodes=()
cleanup() {
  for p in "${nodes[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${nodes[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log "$work"/*.err; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  exit 1
}
source "$root/tests/integration/node_procs.sh"
port_of() { sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "n$1.out"; }
# a cut handshake is logged after this long (the default is 10 s)
export SALAMANDER_TLS_HANDSHAKE_S=2
export SALAMANDER_TLS=none # nothing from the caller's environment

"$root/deploy/make-certs.sh" -o certs sup n1 n2 console >/dev/null
"$root/deploy/make-certs.sh" -o rogue n2 >/dev/null # the same name, another CA

# bad material: a clear error before anything listens or connects
expect_refused() { # WHAT PATTERN COMMAND...
  local what="$1" pattern="$2"
  shift 2
  if out=$("$@" 2>&1); then fail "$what accepted"; fi
  grep -q -- "$pattern" <<<"$out" || fail "$what: $out"
}
expect_refused "a missing TLS directory" "cannot read .*nowhere/ca.pem" \
  "$bin" node --name x --listen 127.0.0.1:0 --tls "$work/nowhere"
mkdir mixed && cp certs/n1/ca.pem certs/n1/cert.pem mixed/ && cp certs/n2/key.pem mixed/
expect_refused "another certificate's key" "is not the key of" \
  "$bin" node --name x --listen 127.0.0.1:0 --tls "$work/mixed"
mkdir foreign && cp certs/n1/ca.pem foreign/ && cp rogue/n2/cert.pem rogue/n2/key.pem foreign/
expect_refused "a certificate of another CA" "does not verify against" \
  "$bin" node --name x --listen 127.0.0.1:0 --tls "$work/foreign"
expect_refused "a bad handshake bound" "SALAMANDER_TLS_HANDSHAKE_S" \
  env SALAMANDER_TLS_HANDSHAKE_S=soon "$bin" node --name x --listen 127.0.0.1:0 --tls "$work/certs/n1"

# a job over TLS, with a console over TLS
start_node 1 0 --tls certs/n1
start_node 2 0 --tls certs/n2
grep -q "TLS: this process is n1" n1.log || fail "node 1 does not say it runs TLS"
printf '[[node]]\nname = "n1"\naddress = "127.0.0.1:%s"\n\n[[node]]\nname = "n2"\naddress = "127.0.0.1:%s"\n' \
  "$(port_of 1)" "$(port_of 2)" >c.toml
sport=$(free_port)
"$bin" supervisor --cluster c.toml --tls certs/sup --model mlp --dataset synthetic --epochs 400 \
  --plan even --listen "127.0.0.1:$sport" --metrics none >sup.out 2>sup.err &
sup=$!
con() { "$bin" --log-level warn console "127.0.0.1:$sport" --timeout 10 "$@"; }
status=""
for _ in $(seq 1 600); do
  status=$(con --tls certs/console --exec status 2>/dev/null) && grep -q "training" <<<"$status" && break
  kill -0 "$sup" 2>/dev/null || fail "the TLS job ended early: $(tail -5 sup.err)"
  sleep 0.1
done
grep -q "plan v" <<<"$status" || fail "console over TLS: $status"
# a plaintext console cannot talk to a TLS supervisor, and the supervisor
# says it cut it off
if out=$(con --exec status 2>&1); then fail "a plaintext console was answered: $out"; fi
grep -q "no supervisor at" <<<"$out" || fail "the plaintext console's error: $out"
plain_refused="TLS: (the connection from 127.0.0.1:[0-9]+ (did not finish its handshake|closed before)|handshake from 127.0.0.1:[0-9]+ failed)"
for _ in $(seq 1 100); do grep -Eq "$plain_refused" sup.err && break; sleep 0.1; done
grep -Eq "$plain_refused" sup.err || fail "the supervisor did not log the plaintext console: $(grep TLS sup.err)"
out=$(con --tls certs/console --exec metrics) || fail "console metrics over TLS: $out"
grep -q "each exactly once: yes" <<<"$out" || fail "TLS job's lineage: $out"
kill -TERM "$sup"
wait "$sup" || true
grep -q "SIGTERM" sup.err || fail "the TLS job did not stop on SIGTERM: $(tail -5 sup.err)"

# a plaintext supervisor cannot use TLS nodes; node 1 says why
if "$bin" supervisor --cluster c.toml --model mlp --dataset synthetic --epochs 1 \
  --plan even --metrics none >plain.out 2>plain.err; then
  fail "a plaintext supervisor trained on TLS nodes"
fi
grep -q "n1" plain.err || fail "plaintext supervisor's error names no node: $(tail -3 plain.err)"
grep -Eq "$plain_refused" n1.log || fail "node 1 did not log the plaintext supervisor: $(grep TLS n1.log)"

# a TLS supervisor refuses a plaintext node, and says the node does not speak TLS
start_node 3 0
printf '[[node]]\nname = "n3"\naddress = "127.0.0.1:%s"\n' "$(port_of 3)" >plain.toml
if "$bin" supervisor --cluster plain.toml --tls certs/sup --model mlp --dataset synthetic \
  --epochs 1 --metrics none >tp.out 2>tp.err; then
  fail "a TLS supervisor trained on a plaintext node"
fi
grep -Eq "TLS: .*127.0.0.1:$(port_of 3).*(does not speak TLS|a plaintext peer)" tp.err \
  || fail "the TLS supervisor did not say why: $(tail -4 tp.err)"

# a node whose certificate another CA signed: both sides refuse and say so
mkdir rogue-ca && cp rogue/ca.pem rogue/n2/cert.pem rogue/n2/key.pem rogue-ca/
start_node 4 0 --tls rogue-ca
printf '[[node]]\nname = "n4"\naddress = "127.0.0.1:%s"\n' "$(port_of 4)" >rogue.toml
if "$bin" supervisor --cluster rogue.toml --tls certs/sup --model mlp --dataset synthetic \
  --epochs 1 --metrics none >rg.out 2>rg.err; then
  fail "a TLS supervisor trained on a node of another CA"
fi
grep -Eq "TLS: (refused the connection to|127.0.0.1:[0-9]+ refused this process)" rg.err \
  || fail "the supervisor did not log the foreign node: $(grep -i tls rg.err)"
for _ in $(seq 1 100); do grep -q "TLS: .*refused" n4.log && break; sleep 0.1; done
grep -Eq "TLS: (refused the connection from|127.0.0.1:[0-9]+ refused this process)" n4.log \
  || fail "the foreign node did not log the refusal: $(grep -i tls n4.log)"

# every node still serves a TLS job after all that
"$bin" supervisor --cluster c.toml --tls certs/sup --model mlp --dataset synthetic --epochs 1 \
  --plan even --metrics none >again.out 2>again.err || fail "TLS job after refusals: $(tail -5 again.err)"
grep -q "^test accuracy:" again.out || fail "the second TLS job printed no accuracy"
echo "tls: ok"
