#!/usr/bin/env bash
# deploy/make-certs.sh [-o DIR] [--days N] [--host HOST]... NAME...
#
# Makes a cluster CA and one certificate per NAME, signed by it, with the
# `openssl` tool. Each process of the cluster then runs with `--tls DIR/NAME`
# (or SALAMANDER_TLS=DIR/NAME): it presents DIR/NAME/cert.pem and accepts
# only peers whose certificate the same CA signed.
#
#   DIR/ca.pem, DIR/ca.key   the CA; ca.key signs new names and never leaves
#                            the machine that runs this script
#   DIR/NAME/ca.pem          a copy of the CA certificate (what peers check)
#   DIR/NAME/cert.pem        NAME's certificate (CN=NAME, EC P-256)
#   DIR/NAME/key.pem         NAME's private key (mode 600)
#
# --host HOST (repeatable) adds a host name or IP address that HTTPS clients
# use (`serve --https`) to the subjectAltName of every NAME issued in this
# run, beside DNS:NAME, e.g. --host serve.lan --host 192.0.2.10.
#
# Run again with new names to add devices: an existing CA is reused, and an
# existing NAME is left alone (delete DIR/NAME to issue it again).
# Copy DIR/NAME to the device that runs NAME, e.g.
#   scp -r certs/pi-1 pi@pi-1:/etc/salamander/tls
set -euo pipefail

usage() {
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
}

out=certs
days=825
names=()
hosts=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=${2:?-o needs a directory}; shift 2 ;;
    --days) days=${2:?--days needs a number}; shift 2 ;;
    --host) hosts+=("${2:?--host needs a host name or IP address}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "make-certs: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
if [ ${#names[@]} -eq 0 ]; then
  echo "make-certs: name at least one process (supervisor, node names, console)" >&2
  usage >&2
  exit 2
fi
case "$days" in ''|*[!0-9]*) echo "make-certs: --days must be a whole number" >&2; exit 2 ;; esac
if ! command -v openssl >/dev/null; then
  echo "make-certs: the openssl tool is missing (apt-get install openssl)" >&2
  exit 1
fi
for n in "${names[@]}"; do
  case "$n" in
    ''|*[!A-Za-z0-9._-]*) echo "make-certs: '$n': names take letters, digits, '.', '_' and '-'" >&2; exit 2 ;;
  esac
done

# the subjectAltName entries: DNS:NAME, then each --host as IP: or DNS:
alt_hosts=""
for h in "${hosts[@]+"${hosts[@]}"}"; do
  if [[ "$h" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || [[ "$h" == *:* && "$h" =~ ^[0-9A-Fa-f:.]+$ ]]; then
    alt_hosts+=",IP:$h"
  elif [[ "$h" =~ ^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]]; then
    alt_hosts+=",DNS:$h"
  else
    echo "make-certs: --host '$h': a host name (letters, digits, '.', '-') or an IP address" >&2
    exit 2
  fi
done

mkdir -p "$out"
umask 077
if [ ! -f "$out/ca.pem" ] || [ ! -f "$out/ca.key" ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$out/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$out/ca.key" -sha256 -days "$days" \
    -subj "/CN=salamander CA $(hostname) $(date -u +%Y-%m-%dT%H:%M:%SZ)" -out "$out/ca.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
  echo "make-certs: new CA $out/ca.pem (keep $out/ca.key on this machine)"
else
  echo "make-certs: using the CA in $out"
fi
chmod 644 "$out/ca.pem"

for n in "${names[@]}"; do
  dir="$out/$n"
  if [ -f "$dir/cert.pem" ] && [ -f "$dir/key.pem" ]; then
    echo "make-certs: $dir exists, left alone${alt_hosts:+ (no --host added: delete $dir to issue it again)}"
    continue
  fi
  mkdir -p "$dir"
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/key.pem" 2>/dev/null
  ext=$(mktemp)
  # Both roles: every salamander process accepts connections and dials them.
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyAgreement\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:%s%s\n' "$n" "$alt_hosts" >"$ext"
  openssl req -new -key "$dir/key.pem" -subj "/CN=$n" 2>/dev/null |
    openssl x509 -req -CA "$out/ca.pem" -CAkey "$out/ca.key" -CAcreateserial \
      -days "$days" -sha256 -extfile "$ext" -out "$dir/cert.pem" 2>/dev/null
  rm -f "$ext"
  cp "$out/ca.pem" "$dir/ca.pem"
  chmod 700 "$dir"
  chmod 600 "$dir/key.pem"
  chmod 644 "$dir/cert.pem" "$dir/ca.pem"
  echo "make-certs: $dir (CN=$n, subjectAltName DNS:$n$alt_hosts, valid $days days): run it with --tls $dir"
done
