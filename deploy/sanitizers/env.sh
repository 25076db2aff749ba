# Sourced, not run: `. deploy/sanitizers/env.sh address|thread [LOG_DIR]`.
# Exports the runtime options of a sanitizer build (deploy/build.sh
# --sanitize=...): stop at the first report, our suppression files (each
# entry says why), stacks on every report. With LOG_DIR, every process's
# ASan, LSan and TSan reports (the test binaries and the `salamander node`
# processes they start) go to LOG_DIR/<sanitizer>.<pid> as well as making
# that process fail; UBSan's stay on stderr (see run-sanitized-tests.sh).
# shellcheck shell=bash
san_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
san_log=
if [ -n "${2:-}" ]; then
  mkdir -p "$2"
  san_log=$(cd "$2" && pwd)
fi
case "${1:-}" in
  address)
    ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:suppressions=$san_dir/asan.supp"
    LSAN_OPTIONS="suppressions=$san_dir/lsan.supp:print_suppressions=0"
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$san_dir/ubsan.supp"
    if [ -n "$san_log" ]; then
      # UBSan's reports do not go to a log_path in gcc 12's ASan+UBSan
      # runtime (tested): they stay on stderr, and the test script finds
      # them in the tests' output
      ASAN_OPTIONS+=":log_path=$san_log/asan"
    fi
    export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
    ;;
  thread)
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$san_dir/tsan.supp"
    TSAN_OPTIONS+=":print_suppressions=0"
    if [ -n "$san_log" ]; then
      TSAN_OPTIONS+=":log_path=$san_log/tsan"
    fi
    export TSAN_OPTIONS
    ;;
  *)
    echo "sanitizers/env.sh: want address or thread, got '${1:-}'" >&2
    return 2
    ;;
esac
