#!/usr/bin/env bash
# Issue 27: no non-test function in actors/ or apps/ is over 100 lines.
# Counts each function definition from the line of its name to its closing
# brace, as universal-ctags finds them (free functions, members defined in
# a class, actor behaviours with their handlers). Before that, checks on a
# made-up file that it finds a function of 101 lines and passes one of 100,
# so a ctags that reads nothing cannot pass the tree.
#   tests/lint/function_length.sh SOURCE_DIR [MAX_LINES]
set -euo pipefail
root=${1:?usage: function_length.sh SOURCE_DIR [MAX_LINES]}
max=${2:-100}
ctags=$(command -v ctags-universal || command -v universal-ctags || command -v ctags || true)
if [ -z "$ctags" ] || ! "$ctags" --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "SKIP: universal-ctags is not installed (deploy/install-deps.sh installs it)"
  exit 77
fi

# name|file|first line|last line, for every function definition in the files named
lengths() {
  "$ctags" --languages=C++ --kinds-C++=f --fields=+ne -x --_xformat="%N|%F|%n|%e" "$@" |
    awk -F'|' -v max="$max" '$4 != "" && $4 - $3 + 1 > max { print $2 ":" $3 " " $1 " (" $4 - $3 + 1 " lines)" }'
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
body() { for ((i = 0; i < $1; ++i)); do echo "  x += $i;"; done; }
{
  echo "int longer(int x) {"; body $((max - 1)); echo "}"
  echo "int exact(int x) {"; body $((max - 2)); echo "}"
} >"$scratch/made_up.cpp"
found=$(lengths "$scratch/made_up.cpp")
if ! grep -q " longer " <<<"$found" || grep -q " exact " <<<"$found"; then
  echo "FAIL: on a made-up file, expected only 'longer' ($((max + 1)) lines) over $max, got:"
  echo "${found:-(nothing)}"
  exit 1
fi

cd "$root"
over=$(lengths -R actors apps)
if [ -n "$over" ]; then
  echo "FAIL: functions over $max lines in actors/ or apps/ (issue 27):"
  echo "$over"
  exit 1
fi
echo "no function in actors/ or apps/ is over $max lines"
