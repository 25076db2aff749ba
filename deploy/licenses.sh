#!/usr/bin/env bash
# Writes deploy/licenses.md's table of the shared libraries the built
# `salamander` binary loads: each one's Debian package and the licences its
# copyright file declares (LibTorch's dependencies included: Debian links
# libtorch against its own packages instead of bundling them).
#
#   deploy/licenses.sh [PATH/TO/salamander] > table.md
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/apps/salamander}
[ -x "$bin" ] || { echo "licenses: no binary at $bin (build first)" >&2; exit 2; }

declare -A libs_of
while read -r lib; do
  [ -e "$lib" ] || continue
  real=$(readlink -f "$lib")
  pkg=$({ dpkg -S "$real" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true; } | head -1 |
    cut -d: -f1)
  [ -n "$pkg" ] || pkg="not-from-a-package"
  libs_of[$pkg]+="$(basename "$lib" | sed 's/\.so.*//') "
done < <(ldd "$bin" | awk '/=> \//{print $3} /^\t\/lib/{print $1}')

echo "| Debian package | libraries loaded | licences (its copyright file) |"
echo "|---|---|---|"
for pkg in $(printf '%s\n' "${!libs_of[@]}" | sort); do
  copyright=/usr/share/doc/${pkg%%:*}/copyright
  lic="-"
  if [ -f "$copyright" ]; then
    lic=$({ grep -E '^License:' "$copyright" || true; } | sed 's/^License: *//' | sort -u |
      paste -sd ';' | sed 's/;/; /g')
    [ -n "$lic" ] || lic="(free-form copyright file: see $copyright)"
  fi
  echo "| $pkg | ${libs_of[$pkg]% } | $lic |"
done
