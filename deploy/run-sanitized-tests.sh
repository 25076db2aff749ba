#!/usr/bin/env bash
# Builds salamander with a sanitizer and runs the unit and actor tests under
# it (issue 15, item 5). Too slow for CI and not part of deploy/run-tests.sh.
# Usage: deploy/run-sanitized-tests.sh address|thread [BUILD_DIR] [-- CTEST_ARGS...]
#   address: ASan+UBSan (+LSan at exit), default dir build-asan
#   thread:  TSan,                       default dir build-tsan
# Every process's reports, the `salamander node` processes the actor tests
# start included, are kept in BUILD_DIR/sanitizer-logs/<time>/ (UBSan's, which
# only go to stderr, gathered from the tests' whole output, ctest.log there)
# and printed at the end; the run fails if a test fails or any report was
# written.
# Suppressions: deploy/sanitizers/*.supp; the record: deploy/sanitizers/README.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=${1:-}
case $sanitize in
  address) build=$root/build-asan ;;
  thread) build=$root/build-tsan ;;
  *) echo "usage: $0 address|thread [BUILD_DIR] [-- CTEST_ARGS...]" >&2; exit 2 ;;
esac
shift
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  build=$1
  shift
fi
[ "${1:-}" = "--" ] && shift

t0=$(date +%s)
"$root/deploy/build.sh" --sanitize="$sanitize" "$build"
t1=$(date +%s)

logs=$build/sanitizer-logs/$(date -u +%Y%m%dT%H%M%SZ)
# shellcheck source=sanitizers/env.sh
. "$root/deploy/sanitizers/env.sh" "$sanitize" "$logs"
# One LibTorch/OpenBLAS thread per process, as in deploy/run-tests.sh.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cd "$build"
status=0
# Every test's whole output is kept (-V): UBSan's reports, from the test
# binaries and the node processes alike, are only found there. The console
# shows a line per test.
set +e
ctest -L 'unit|actor' -V -j "${SALAMANDER_TEST_JOBS:-2}" "$@" 2>&1 | tee "$logs/ctest.log" |
  grep --line-buffered -E '^ *[0-9]+/[0-9]+ Test +#|% tests passed|\((Failed|Timeout|SEGFAULT|Subprocess aborted|Not Run)\)'
status=${PIPESTATUS[0]}
set -e
t2=$(date +%s)
if grep -q "runtime error:" "$logs/ctest.log"; then
  grep -B2 -A12 "runtime error:" "$logs/ctest.log" >"$logs/ubsan-reports.txt"
  echo "UBSan: $(grep -c "runtime error:" "$logs/ctest.log") report(s) in $logs/ctest.log" >&2
fi

reports=$(find "$logs" -type f ! -name ctest.log | sort)
if [ -n "$reports" ]; then
  for f in $reports; do
    echo "==== $f"
    cat "$f"
  done
  echo "sanitizer reports: $(echo "$reports" | wc -l) file(s) in $logs" >&2
  [ "$status" -eq 0 ] && status=1
else
  echo "sanitizer reports: none ($logs)"
fi
echo "run-sanitized-tests ($sanitize): build $((t1 - t0)) s, tests $((t2 - t1)) s, exit $status"
exit "$status"
