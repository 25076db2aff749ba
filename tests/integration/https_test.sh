#!/usr/bin/env bash
# `salamander serve --https` as a user meets it: a certificate from
# deploy/make-certs.sh --host 127.0.0.1 that curl verifies with ca.pem; the
# same outputs over HTTPS as over plain HTTP from the same weights; health
# and metrics over HTTPS; a plaintext request to the HTTPS port refused with
# a hint while the server goes on; a TLS client that sends nothing cut by the
# idle bound; connections past the bound answered 503 over TLS; with
# --https-client-ca, clients without a certificate of that CA refused and
# one with a make-certs certificate served. Loopback only.
# Usage: https_test.sh PATH/TO/salamander
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
certs_sh="$here/../../deploy/make-certs.sh"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]+"${pids[@]}"}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${pids[@]+"${pids[@]}"}"; do
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err; do
    [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }
  done
  exit 1
}
for tool in curl openssl python3 protoc grpc_python_plugin; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (deploy/install-deps.sh)"; exit 77; }
done
py=/usr/bin/python3 # Debian's, with python3-grpcio
"$py" -c 'import grpc' 2>/dev/null ||
  { echo "SKIP: $py cannot import grpc (python3-grpcio, deploy/install-deps.sh)"; exit 77; }

# material: the server's certificate names the address clients use
"$certs_sh" -o certs --host 127.0.0.1 serve client >certs.log 2>&1 || fail "make-certs: $(cat certs.log)"
"$certs_sh" -o other rogue >>certs.log 2>&1 || fail "make-certs (other CA): $(cat certs.log)"
openssl x509 -in certs/serve/cert.pem -noout -ext subjectAltName | grep -q "IP Address:127.0.0.1" ||
  fail "--host 127.0.0.1 is not in the certificate's subjectAltName"
if out=$("$certs_sh" -o certs --host 'not a host' x 2>&1); then fail "make-certs took --host 'not a host'"; fi

# bad input: clear errors before anything starts
if out=$(env -u SALAMANDER_TLS "$bin" serve --stages 1 --https --metrics none 2>&1); then
  fail "--https without TLS material started"
fi
grep -q -- "give --tls DIR" <<<"$out" || fail "--https without --tls: $out"
if out=$("$bin" serve --stages 1 --https-client-ca certs/ca.pem --metrics none 2>&1); then
  fail "--https-client-ca without --https started"
fi
grep -q -- "add --https" <<<"$out" || fail "--https-client-ca without --https: $out"
if out=$("$bin" serve --stages 1 --https --tls certs/serve --https-client-ca certs.log \
  --metrics none 2>&1); then
  fail "--https-client-ca of a file with no certificate started"
fi
grep -q "holds no PEM certificate" <<<"$out" || fail "--https-client-ca certs.log: $out"

# start NAME ARGS...: a server in the background, its URL in $url once it serves
start() {
  local name="$1"
  shift
  "$bin" serve --stages 1 --model cnn --seed 7 --no-batching --listen 127.0.0.1:0 \
    --metrics none "$@" >"$name.out" 2>"$name.err" &
  pids+=($!)
  eval "${name}_pid=$!"
}
url_of() {
  local name="$1" pid="$2" u=""
  for _ in $(seq 1 600); do
    u=$(sed -n 's/^listening: //p' "$name.out" 2>/dev/null)
    [ -n "$u" ] && break
    kill -0 "$pid" 2>/dev/null || fail "$name exited before listening"
    sleep 0.1
  done
  [ -n "$u" ] || fail "$name printed no address"
  echo "$u"
}
ca=(--cacert certs/ca.pem)
start plain
start secure --https --tls certs/serve --http-threads 2 --grpc-listen 127.0.0.1:0
start mutual --https --tls certs/serve --https-client-ca certs/ca.pem --grpc-listen 127.0.0.1:0
plain_url=$(url_of plain "$plain_pid")
url=$(url_of secure "$secure_pid")
mutual_url=$(url_of mutual "$mutual_pid")
[[ "$plain_url" == http://* ]] || fail "plain serve listens on $plain_url"
[[ "$url" == https://127.0.0.1:* ]] || fail "serve --https listens on $url"
[[ "$mutual_url" == https://127.0.0.1:* ]] || fail "serve --https-client-ca listens on $mutual_url"
client=(--cert certs/client/cert.pem --key certs/client/key.pem)
for _ in $(seq 1 600); do
  curl -sf "$plain_url/v2/health/ready" >/dev/null &&
    curl -sf "${ca[@]}" "$url/v2/health/ready" >/dev/null &&
    curl -sf "${ca[@]}" "${client[@]}" "$mutual_url/v2/health/ready" >/dev/null && break
  sleep 0.2
done

# health, metadata over HTTPS, the certificate verified by name (the IP)
grep -q '"ready":true' <<<"$(curl -sf "${ca[@]}" "$url/v2/health/ready")" || fail "HTTPS ready"
grep -q '"live":true' <<<"$(curl -sf "${ca[@]}" "$url/v2/health/live")" || fail "HTTPS live"
grep -q '"shape":\[-1,1,28,28\]' <<<"$(curl -sf "${ca[@]}" "$url/v2/models/cnn")" ||
  fail "HTTPS metadata"
# a name the certificate does not hold fails verification; no CA fails too
port=${url##*:}
if curl -sf "${ca[@]}" "https://localhost:$port/v2/health/live" >/dev/null 2>&1; then
  fail "curl accepted a certificate for 127.0.0.1 as localhost"
fi
if curl -sf "$url/v2/health/live" >/dev/null 2>&1; then
  fail "curl verified the server without the cluster CA"
fi
# TLS 1.2 and 1.3 served, TLS 1.1 refused
curl -sf "${ca[@]}" --tls-max 1.2 "$url/v2/health/live" >/dev/null || fail "TLS 1.2 refused"
curl -sf "${ca[@]}" --tlsv1.3 "$url/v2/health/live" >/dev/null || fail "TLS 1.3 refused"
# a client offering only TLS 1.1 (allowed on its side) gets the server's
# protocol_version alert, and the refusal is logged
tls11=$(echo | timeout 30 openssl s_client -connect "127.0.0.1:${url##*:}" -tls1_1 \
  -cipher 'DEFAULT@SECLEVEL=0' 2>&1) || true
grep -q "alert protocol version" <<<"$tls11" || fail "TLS 1.1 not refused by the server: $tls11"
for _ in $(seq 1 50); do grep -q "unsupported protocol" secure.err && break; sleep 0.1; done
grep -q "HTTPS: refused the connection from 127.0.0.1:[0-9]*: unsupported protocol" secure.err ||
  fail "the TLS 1.1 client is not logged"

# the same request over HTTPS and over plain HTTP: the same outputs
python3 -c 'import json; print(json.dumps({"id": "h1", "inputs": [{"name": "input",
  "shape": [2, 1, 28, 28], "datatype": "FP32",
  "data": [((i * 37) % 101) / 100.0 for i in range(2 * 784)]}]}))' >req.json
json="Content-Type: application/json"
code() { curl -s -o "$work/body" -w '%{http_code}' "$@"; }
[ "$(code -XPOST "$plain_url/v2/models/cnn/infer" -H "$json" -d @req.json)" = 200 ] || fail "plain infer: $(cat body)"
mv body plain.json
[ "$(code "${ca[@]}" -XPOST "$url/v2/models/cnn/infer" -H "$json" -d @req.json)" = 200 ] || fail "HTTPS infer: $(cat body)"
mv body secure.json
# curl -d without a JSON Content-Type: httplib's 8 KiB form limit, said as such
[ "$(code "${ca[@]}" -XPOST "$url/v2/models/cnn/infer" -d @req.json)" = 413 ] ||
  fail "a 9 KB form-encoded body: $(cat body)"
grep -q "send Content-Type: application/json" body || fail "form-encoded 413: $(cat body)"
python3 - plain.json secure.json <<'EOF' || fail "HTTPS outputs differ from HTTP's"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
da, db = a["outputs"][0]["data"], b["outputs"][0]["data"]
assert len(da) == 20 and b["outputs"][0]["shape"] == [2, 10], b
assert da == db, (da, db)
assert b["id"] == "h1", b
EOF

# a plaintext request to the HTTPS port: refused with a hint, logged, and the
# server goes on
got=$(code "http://127.0.0.1:$port/v2/health/live") || true
[ "$got" = 400 ] || fail "plain HTTP to the HTTPS port -> $got: $(cat body)"
grep -q "this port speaks HTTPS" body || fail "no hint for a plaintext client: $(cat body)"
grep -q "HTTPS: refused the connection from 127.0.0.1:[0-9]*: a plaintext HTTP request" secure.err ||
  fail "the plaintext client is not logged"
curl -sf "${ca[@]}" "$url/v2/health/live" >/dev/null || fail "HTTPS after a plaintext client"

# clients that open a connection and send nothing: cut by the first-byte
# bound (2 s), TLS or not, while others are served meanwhile
python3 - "$port" >silent.log 2>&1 <<'EOF' &
import socket, ssl, sys, time
port = int(sys.argv[1])
ctx = ssl.create_default_context(cafile="certs/ca.pem")
t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
raw = socket.create_connection(("127.0.0.1", port))
start = time.monotonic()
t.settimeout(30)
raw.settimeout(30)
assert t.recv(100) == b"", "the TLS client got bytes"
tls_s = time.monotonic() - start
assert raw.recv(100) == b"", "the silent TCP client got bytes"
raw_s = time.monotonic() - start
print(f"silent TLS cut after {tls_s:.2f} s, silent TCP after {raw_s:.2f} s")
assert 1.0 <= tls_s <= 15, tls_s
assert 1.0 <= raw_s <= 15, raw_s
EOF
silent=$!
pids+=("$silent")
sleep 0.5
[ "$(code "${ca[@]}" -XPOST "$url/v2/models/cnn/infer" -H "$json" -d @req.json)" = 200 ] ||
  fail "HTTPS infer beside silent clients: $(cat body)"
wait "$silent" || fail "silent clients: $(cat silent.log)"
cat silent.log

# past the bound (2 threads x 4 connections), a new connection gets 503 over
# TLS; the holders send one byte of a TLS record and stall (the handshake
# bound, 5 s, holds them)
python3 - "$port" >holders.log 2>&1 <<'EOF' &
import socket, sys, time
port = int(sys.argv[1])
held = []
for _ in range(8):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"\x16")
    held.append(s)
print("holding", len(held), flush=True)
time.sleep(20)
EOF
holders=$!
pids+=("$holders")
for _ in $(seq 1 100); do grep -q holding holders.log && break; sleep 0.1; done
sleep 0.3
got=$(curl -s -D "$work/headers" -o "$work/body" -w '%{http_code}' "${ca[@]}" "$url/v2/health/live") || true
[ "$got" = 503 ] || fail "a connection past the bound -> '$got': $(cat body)"
grep -qi '^retry-after: 1' headers || fail "503 without Retry-After: $(cat headers)"
grep -q "too many connections" body || fail "503 body: $(cat body)"
kill "$holders" 2>/dev/null || true
wait "$holders" 2>/dev/null || true
for _ in $(seq 1 100); do
  curl -sf "${ca[@]}" "$url/v2/health/live" >/dev/null && break
  sleep 0.2
done
curl -sf "${ca[@]}" "$url/v2/health/live" >/dev/null || fail "HTTPS after the holders left"

metrics=$(curl -sf "${ca[@]}" "$url/metrics") || fail "HTTPS /metrics"
python3 - <<EOF || fail "metrics over HTTPS: $metrics"
import re
m = """$metrics"""
def value(name):
    # (the transport's series are the server's: no model label)
    found = re.search(r"^" + name + r"(?:\{model=\"cnn\"\})? (\S+)$", m, re.M)
    assert found, name
    return float(found.group(1))
assert value("salamander_requests_total") == 2, value("salamander_requests_total")
assert value("salamander_https_handshakes_refused_total") >= 1
assert value("salamander_http_connections_refused_total") >= 1
assert value("salamander_http_too_slow_total") >= 1
EOF

# --https-client-ca: no certificate, or another CA's, refused; a make-certs
# certificate served
if curl -sf "${ca[@]}" "$mutual_url/v2/health/live" >/dev/null 2>&1; then
  fail "a client without a certificate was served"
fi
if curl -sf "${ca[@]}" --cert other/rogue/cert.pem --key other/rogue/key.pem \
  "$mutual_url/v2/health/live" >/dev/null 2>&1; then
  fail "a client with another CA's certificate was served"
fi
[ "$(code "${ca[@]}" "${client[@]}" -XPOST "$mutual_url/v2/models/cnn/infer" -H "$json" -d @req.json)" = 200 ] ||
  fail "a client with a certificate of the CA: $(cat body)"
python3 -c 'import json,sys; a=json.load(open("plain.json")); b=json.load(open(sys.argv[1]));
assert a["outputs"] == b["outputs"]' body || fail "mutual TLS outputs differ"
grep -q "HTTPS: refused the connection from 127.0.0.1:[0-9]*: .*certificate" mutual.err ||
  fail "the refused client certificates are not logged"

# gRPC beside HTTPS: TLS with the same certificate, and with --https-client-ca
# the same client certificates asked
mkdir stubs
protoc --python_out=stubs --grpc_out=stubs --plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" \
  -I "$here/../../apps" "$here/../../apps/kserve.proto" || fail "protoc kserve.proto"
secure_grpc=$(sed -n 's/^grpc listening: //p' secure.out)
mutual_grpc=$(sed -n 's/^grpc listening: //p' mutual.out)
[ -n "$secure_grpc" ] && [ -n "$mutual_grpc" ] || fail "no gRPC address printed"
PYTHONPATH=stubs "$py" - "$secure_grpc" "$mutual_grpc" <<'EOF' || fail "gRPC over TLS"
import sys, grpc, kserve_pb2 as pb, kserve_pb2_grpc as rpc
secure, mutual = sys.argv[1:3]
read = lambda p: open(p, "rb").read()
ca = read("certs/ca.pem")
def live(address, creds):
    stub = rpc.GRPCInferenceServiceStub(grpc.secure_channel(address, creds) if creds
                                        else grpc.insecure_channel(address))
    try:
        return stub.ServerLive(pb.ServerLiveRequest(), timeout=20).live
    except grpc.RpcError as e:
        return e.code()
assert live(secure, grpc.ssl_channel_credentials(root_certificates=ca)) is True, "TLS refused"
assert live(secure, None) == grpc.StatusCode.UNAVAILABLE, "plaintext gRPC served on the TLS port"
mine = grpc.ssl_channel_credentials(root_certificates=ca, private_key=read("certs/client/key.pem"),
                                    certificate_chain=read("certs/client/cert.pem"))
rogue = grpc.ssl_channel_credentials(root_certificates=ca, private_key=read("other/rogue/key.pem"),
                                     certificate_chain=read("other/rogue/cert.pem"))
assert live(mutual, mine) is True, "a client certificate of the CA refused"
assert live(mutual, grpc.ssl_channel_credentials(root_certificates=ca)) == grpc.StatusCode.UNAVAILABLE, \
    "a client without a certificate served"
assert live(mutual, rogue) == grpc.StatusCode.UNAVAILABLE, "another CA's certificate served"
EOF

# SIGTERM: every server exits 0
for name in plain secure mutual; do
  pid_var="${name}_pid"
  kill -TERM "${!pid_var}"
  wait "${!pid_var}" || fail "$name exited with $? on SIGTERM"
done
pids=()
echo "https_test: all checks passed"
