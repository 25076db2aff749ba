#!/usr/bin/env bash
# `salamander --help` and `salamander CMD --help` for every subcommand, each
# against its golden copy in tests/golden/help/ (top-level: salamander.txt).
# Why: the options are declared beside each command; this keeps what users
# read (names, order, defaults, checks, help texts) from drifting when that
# code moves. The program's path in the usage lines reads `salamander`.
# Run with a clean environment, so nothing the caller exported
# (SALAMANDER_TLS, SALAMANDER_SECRET, ...) can reach the text; CLI11 formats
# to fixed columns, whatever the terminal.
# Usage: help_golden_test.sh PATH/TO/salamander GOLDEN_DIR
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
golden="$(cd "$2" && pwd)"
commands=(train supervisor node eval export infer serve federate split describe chaos
          console plot audit)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failed=0
check() { # NAME ARGS...: the help of ARGS against GOLDEN_DIR/NAME.txt, kept in NAME.out
  local name="$1"
  shift
  local out rc=0
  env -i PATH="$PATH" "$bin" "$@" --help >"$name.raw" 2>&1 || rc=$?
  out=$(cat "$name.raw"; printf x) # (x: keeps the trailing newlines)
  out=${out%x}
  printf '%s' "${out//"$bin"/salamander}" >"$name.out"
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: salamander $* --help exited $rc: $out"
    failed=1
  elif ! diff -u "$golden/$name.txt" "$name.out" >"$name.diff" 2>&1; then
    echo "FAIL: salamander $* --help differs from $golden/$name.txt:"
    cat "$name.diff"
    failed=1
  fi
}
check salamander
for c in "${commands[@]}"; do
  check "$c" "$c"
done
# every subcommand the program lists has its golden file
listed=$(sed -n '/^Subcommands:/,$p' salamander.out | awk 'NR > 1 && NF { print $1 }')
for c in $listed; do
  if [ ! -f "$golden/$c.txt" ]; then
    echo "FAIL: subcommand $c has no golden help ($golden/$c.txt)"
    failed=1
  fi
done
if [ "$failed" -eq 0 ]; then
  echo "OK: --help of salamander and its ${#commands[@]} subcommands as in $golden"
fi
exit "$failed"
