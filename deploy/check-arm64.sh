#!/usr/bin/env bash
# Cross-builds salamander for arm64 (aarch64) Debian 12 and runs it under
# qemu-user: the unit tests and a short embedded pipeline training. Prints the
# time of every step at the end.
#
# Everything comes from Debian's packages: the host's cross toolchain
# (g++-aarch64-linux-gnu), qemu-user-static, and an arm64 sysroot that
# debootstrap unpacks (first stage only) outside the repository. The host's
# amd64 packages are never removed or replaced (libtorch-dev is not Multi-Arch,
# so arm64 -dev packages cannot be co-installed with the amd64 ones).
set -Eeuo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<EOF
Usage: deploy/check-arm64.sh [options] [BUILD_DIR]

Cross-builds salamander for arm64 Debian 12, runs the unit tests and a short
embedded pipeline training under qemu-aarch64-static, and prints the time of
each step.

  BUILD_DIR              build directory (default: $root/build-arm64)
  --sysroot DIR          arm64 sysroot (default: \$SALAMANDER_ARM64_ROOT, then
                         /var/cache/salamander/arm64-sysroot); made on first use,
                         reused afterwards
  --rebuild-sysroot      delete the sysroot and make it again
  --mirror URL           Debian mirror (default: http://deb.debian.org/debian)
  -j, --jobs N           compile jobs (default: \$SALAMANDER_JOBS, then 2); the
                         build runs under nice -n 10
  --max-batches N        batches the training runs (default: 20)
  --build-only           stop after the build (no qemu runs)
  --no-train             skip the training run
  -h, --help             this text

Needs root for apt-get (host tools) and debootstrap (the sysroot), the first
time. Disk: the sysroot takes ~1.1 GB (+230 MB of .debs beside it), the build ~650 MB.
EOF
}

sysroot=${SALAMANDER_ARM64_ROOT:-/var/cache/salamander/arm64-sysroot}
mirror=http://deb.debian.org/debian
jobs=${SALAMANDER_JOBS:-2}
max_batches=20
build=""
rebuild_sysroot=0
build_only=0
no_train=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --sysroot) sysroot=${2:?--sysroot needs a directory}; shift 2 ;;
    --sysroot=*) sysroot=${1#*=}; shift ;;
    --rebuild-sysroot) rebuild_sysroot=1; shift ;;
    --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
    --mirror=*) mirror=${1#*=}; shift ;;
    -j|--jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    -j*) jobs=${1#-j}; shift ;;
    --max-batches) max_batches=${2:?--max-batches needs a number}; shift 2 ;;
    --max-batches=*) max_batches=${1#*=}; shift ;;
    --build-only) build_only=1; shift ;;
    --no-train) no_train=1; shift ;;
    -*) echo "check-arm64: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$build" ] || { echo "check-arm64: one BUILD_DIR only" >&2; exit 2; }
       build=$1; shift ;;
  esac
done
build=${build:-$root/build-arm64}
case "$jobs" in ''|*[!0-9]*|0) echo "check-arm64: --jobs wants a positive number" >&2; exit 2 ;; esac
case "$max_batches" in ''|*[!0-9]*|0) echo "check-arm64: --max-batches wants a positive number" >&2; exit 2 ;; esac
sysroot=$(realpath -m "$sysroot")
build=$(realpath -m "$build")
case "$sysroot" in /|/usr|/usr/*|/etc|/etc/*|"$root"|"$root"/*)
  echo "check-arm64: refusing sysroot $sysroot (use a directory of its own, outside the repo)" >&2
  exit 2 ;;
esac
if [ "$build" = "$root/build" ]; then
  echo "check-arm64: $build is the native build directory; use another one" >&2
  exit 2
fi

triplet=aarch64-linux-gnu
toolchain=$root/cmake/aarch64-linux-gnu.cmake
qemu=/usr/bin/qemu-aarch64-static
deb_cache=$(dirname "$sysroot")/arm64-debs      # downloaded .debs, kept for a rebuild
stamp=$sysroot/.salamander-sysroot
logs=$build/arm64-logs
summary_file=$build/arm64-summary.txt

# The arm64 side of deploy/install-deps.sh: the libraries salamander builds
# against (headers, .so, CMake/pkg-config files). Build tools and the capnp
# schema compiler are the host's.
arm64_packages=(
  libcaf-dev libtorch-dev libopenblas0-pthread libcapnp-dev libspdlog-dev libfmt-dev
  catch2 libcli11-dev libtomlplusplus-dev libssl-dev nlohmann-json3-dev
  libedit-dev zlib1g-dev libcpp-httplib-dev
)
host_packages=(
  g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user-static debootstrap
  debian-archive-keyring cmake ninja-build pkg-config capnproto file
)

# ---- step bookkeeping --------------------------------------------------------
step=""
declare -a summary=()
t_start=0
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
begin() { step=$1; t_start=$(now); echo; echo "==== check-arm64: $step ===="; }
record() { summary+=("$1"); echo "check-arm64: $1"; }
# children_cpu VAR: user+sys seconds of this script's finished children, from
# bash's times builtin (run in this shell: a $(...) subshell would see none)
children_cpu() {
  local out
  times >"$cpu_tmp"
  out=$(tail -n 1 "$cpu_tmp" | awk '{ t = 0; for (i = 1; i <= NF; i++) { split($i, a, "m"); sub(/s$/, "", a[2]); t += a[1] * 60 + a[2] }; printf "%.1f", t }')
  printf -v "$1" '%s' "$out"
}
cpu_tmp=$(mktemp)
trap 'rm -f "$cpu_tmp"' EXIT
on_error() {
  local rc=$?
  echo >&2
  echo "check-arm64: FAILED in step '${step:-setup}' (exit $rc)${1:+; see $1}" >&2
  if [ ${#summary[@]} -gt 0 ]; then printf '  %s\n' "${summary[@]}" >&2; fi
  exit "$rc"
}
trap 'on_error "${log:-}"' ERR
log=""

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# ---- 1. host tools -----------------------------------------------------------
begin "host tools"
missing=()
for p in "${host_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "check-arm64: installing ${missing[*]}"
  $SUDO apt-get update -qq
  # never let apt remove or replace anything the native build needs
  if $SUDO apt-get install -s --no-install-recommends "${missing[@]}" | grep -q '^Remv'; then
    echo "check-arm64: installing ${missing[*]} would remove packages; not doing it" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    --no-remove "${missing[@]}"
else
  echo "check-arm64: all ${#host_packages[@]} host packages present"
fi
# install-deps.sh may have gained a library this list lacks
for p in $(grep -oE '\b[a-z0-9][a-z0-9+.-]*-dev\b' "$root/deploy/install-deps.sh" | sort -u); do
  case " ${arm64_packages[*]} " in *" $p "*) ;;
    *) echo "check-arm64: warning: $p (deploy/install-deps.sh) is not in this script's arm64 list" >&2 ;;
  esac
done
record "host_tools_s: $(secs "$t_start" "$(now)")"

# Maintainer scripts did not run in the sysroot: do what they would do for
# the libraries salamander loads. Idempotent; runs on every invocation.
fix_sysroot() {
  # update-alternatives: BLAS and LAPACK are OpenBLAS (pthread), as
  # deploy/install-deps.sh makes them on the board (reference BLAS is ~40x
  # slower). libopenblas.so.0 must be beside them: the linker looks for the
  # shims' dependency ($ORIGIN) in the directory it found them in.
  local libdir=$sysroot/usr/lib/$triplet lib
  for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
    [ -e "$libdir/openblas-pthread/$lib" ] || { echo "check-arm64: $libdir/openblas-pthread/$lib missing" >&2; return 1; }
    $SUDO ln -sfn "openblas-pthread/$lib" "$libdir/$lib"
  done
  for lib in libblas.so liblapack.so libopenblas.so; do
    if [ -e "$libdir/openblas-pthread/$lib" ]; then $SUDO ln -sfn "openblas-pthread/$lib" "$libdir/$lib"; fi
  done
  # ldconfig: the loader's cache, made by the sysroot's own (static) ldconfig
  # under qemu.
  mkdir -p "$logs"
  if ! $SUDO "$qemu" "$sysroot/sbin/ldconfig" -r "$sysroot" 2>"$logs/ldconfig.log"; then
    echo "check-arm64: warning: ldconfig under qemu failed (see $logs/ldconfig.log); runs use LD_LIBRARY_PATH" >&2
  fi
}

# ---- 2. arm64 sysroot --------------------------------------------------------
begin "arm64 sysroot ($sysroot)"
want_stamp="bookworm arm64 ${arm64_packages[*]}"
if [ "$rebuild_sysroot" = 1 ] && [ -e "$sysroot" ]; then
  echo "check-arm64: --rebuild-sysroot: removing $sysroot"
  $SUDO rm -rf --one-file-system "$sysroot"
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  echo "check-arm64: reusing the sysroot"
  fix_sysroot
  record "arm64_sysroot_s: $(secs "$t_start" "$(now)") (reused)"
else
  if [ -f "$stamp" ]; then
    echo "check-arm64: the sysroot at $sysroot was made for other packages:" >&2
    echo "  has:   $(cat "$stamp")" >&2
    echo "  wants: $want_stamp" >&2
    echo "  run again with --rebuild-sysroot" >&2
    exit 1
  fi
  if [ -e "$sysroot" ] && [ -n "$(ls -A "$sysroot" 2>/dev/null)" ]; then
    if [ -d "$sysroot/debootstrap" ]; then
      echo "check-arm64: removing an unfinished sysroot at $sysroot"
      $SUDO rm -rf --one-file-system "$sysroot"
    else
      echo "check-arm64: $sysroot exists and is not a sysroot this script made; remove it or pick another --sysroot" >&2
      exit 1
    fi
  fi
  $SUDO mkdir -p "$sysroot" "$deb_cache"
  mkdir -p "$logs"
  log=$logs/debootstrap.log
  include=$(IFS=,; echo "${arm64_packages[*]}")
  echo "check-arm64: debootstrap --foreign (download ~230 MB + unpack ~1.1 GB; log: $log)"
  # First stage only: downloads and unpacks, runs no arm64 code. Enough for
  # headers and libraries; maintainer scripts (alternatives, ldconfig) are
  # done below by hand.
  if ! $SUDO debootstrap --arch=arm64 --foreign --variant=minbase --merged-usr \
        --cache-dir="$deb_cache" --include="$include" bookworm "$sysroot" "$mirror" \
        >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "check-arm64: debootstrap failed" >&2
    false
  fi
  # The first stage unpacks only the "required" packages; the rest (the
  # libraries asked for and their dependencies) are downloaded but left for the
  # second stage, which runs arm64 code. Unpack them all here, as debootstrap
  # does (keeping the merged-/usr directory symlinks).
  n=0
  while read -r pkg deb; do
    [ -f "$sysroot$deb" ] || { echo "check-arm64: $pkg: $sysroot$deb missing" >&2; false; }
    dpkg-deb --fsys-tarfile "$sysroot$deb" | $SUDO tar -C "$sysroot" --keep-directory-symlink -xf -
    n=$((n + 1))
  done <"$sysroot/debootstrap/debpaths"
  echo "check-arm64: unpacked $n packages"
  # the .debs stay in $deb_cache; the sysroot's copies are not needed
  $SUDO find "$sysroot/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -delete
  log=""

  # Absolute symlinks (e.g. lib/ld-linux-aarch64.so.1 -> /lib/aarch64-linux-gnu/...)
  # would point into the host: make them relative, inside the sysroot.
  fixed=0
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    rel=$(realpath -s -m --relative-to="$(dirname "$link")" "$sysroot$target")
    $SUDO ln -sfn "$rel" "$link"
    fixed=$((fixed + 1))
  done < <(find "$sysroot/usr" "$sysroot/etc" -xdev -type l -lname '/*' -print0)
  echo "check-arm64: made $fixed absolute symlinks relative"

  fix_sysroot
  for f in usr/lib/$triplet/cmake/Torch/TorchConfig.cmake usr/lib/$triplet/libtorch.so \
           usr/include/caf/all.hpp usr/lib/$triplet/libcaf_core.so usr/include/capnp/message.h \
           usr/lib/$triplet/libblas.so.3 lib/ld-linux-aarch64.so.1; do
    [ -e "$sysroot/$f" ] || { echo "check-arm64: the sysroot lacks $f" >&2; false; }
  done
  echo "$want_stamp" | $SUDO tee "$stamp" >/dev/null
  record "arm64_sysroot_s: $(secs "$t_start" "$(now)") (made)"
fi
sysroot_size=$(du -sh --one-file-system "$sysroot" 2>/dev/null | cut -f1)
record "arm64_sysroot_size: $sysroot_size"

# host capnp generates code for the sysroot's libcapnp: versions must match
host_capnp=$(capnp --version | awk '{print $NF}')
if ! grep -q "CAPNP_VERSION_MINOR $(echo "$host_capnp" | cut -d. -f2)\b" "$sysroot/usr/include/capnp/common.h"; then
  echo "check-arm64: host capnp $host_capnp differs from the sysroot's libcapnp" >&2
  false
fi

# ---- 3. configure ------------------------------------------------------------
begin "configure ($build)"
mkdir -p "$logs"
log=$logs/configure.log
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DSALAMANDER_ARM64_SYSROOT="$sysroot" 2>&1 | tee "$log"
log=""
record "arm64_configure_s: $(secs "$t_start" "$(now)")"

# ---- 4. build ----------------------------------------------------------------
begin "build (ninja -j$jobs, nice -n 10)"
targets=(salamander unit_pure_tests unit_operate_tests unit_torch_tests)
log=$logs/build.log
children_cpu cpu0
nice -n 10 ninja -C "$build" -j "$jobs" "${targets[@]}" 2>&1 | tee "$log"
log=""
record "arm64_build_s: $(secs "$t_start" "$(now)")"
# CPU time does not depend on what else the machine runs (wall time does)
children_cpu cpu1
record "arm64_build_cpu_s: $(secs "$cpu0" "$cpu1") (user+sys of the compilers and linker)"
bin=$build/apps/salamander
file -L "$bin" | grep -q 'ARM aarch64' || { echo "check-arm64: $bin is not an arm64 executable" >&2; false; }
record "arm64_binary: $(du -h "$bin" | cut -f1) $(file -bL "$bin" | cut -d, -f1-2)"

if [ "$build_only" = 1 ]; then
  step="summary"
  echo; echo "==== check-arm64: summary ===="
  printf '%s\n' "${summary[@]}" | tee "$summary_file"
  exit 0
fi

# ---- runs under qemu ---------------------------------------------------------
export QEMU_LD_PREFIX=$sysroot
# paths as the arm64 program sees them (qemu maps them into the sysroot)
export LD_LIBRARY_PATH=/usr/lib/$triplet/openblas-pthread:/usr/lib/$triplet
export OPENBLAS_NUM_THREADS=1
run_arm64() { "$qemu" -L "$sysroot" "$@"; }

# ---- 5. unit tests -----------------------------------------------------------
begin "unit tests under qemu"
total_pass=0
total_fail=0
failed_names=()
# parse_catch LOG -> "passed failed" from Catch2 v2's console summary
parse_catch() {
  awk '
    /^All tests passed/ { for (i = 1; i <= NF; i++) if ($i ~ /^test$/) { n = $(i-1) } ; p = n; f = 0; done = 1 }
    /^test cases:/ { gsub(/\|/, " "); p = 0; f = 0
                     for (i = 1; i <= NF; i++) { if ($(i+1) == "passed") p = $i; if ($(i+1) == "failed") f = $i }
                     done = 1 }
    END { if (done) print p + 0, f + 0; else print "-" }' "$1"
}
for t in unit_pure_tests unit_operate_tests unit_torch_tests; do
  exe=$build/tests/$t
  tlog=$logs/$t.log
  t0=$(now)
  rc=0
  (cd "$build/tests" && run_arm64 "$exe" "[unit]" --durations no) >"$tlog" 2>&1 || rc=$?
  counts=$(parse_catch "$tlog")
  if [ "$counts" = "-" ]; then
    # no summary: the run died (signal, qemu). Run its test cases one by one.
    echo "check-arm64: $t ended without a summary (exit $rc); running its test cases one by one"
    p=0; f=0
    while IFS= read -r name; do
      [ -n "$name" ] || continue
      spec=$(printf '%s' "$name" | sed 's/[][\\,*]/\\&/g')
      rc1=0
      (cd "$build/tests" && run_arm64 "$exe" "$spec" --durations no) >>"$tlog.each" 2>&1 || rc1=$?
      if [ $rc1 -eq 0 ]; then p=$((p + 1)); else f=$((f + 1)); failed_names+=("$t: $name (exit $rc1)"); fi
    done < <(run_arm64 "$exe" "[unit]" --list-test-names-only 2>/dev/null)
    counts="$p $f"
  else
    while IFS= read -r name; do failed_names+=("$t: $name"); done < <(
      awk '/^-+$/ && length($0) > 70 { if (!hdr) { hdr = 1; getline name } else hdr = 0; next }
           / FAILED:$/ { print name }' "$tlog" | sort -u)
  fi
  read -r p f <<<"$counts"
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
  record "arm64_$t: $p passed, $f failed, $(secs "$t0" "$(now)") s (exit $rc; log: $tlog)"
  tail -n 3 "$tlog"
done
record "arm64_unit_tests: $total_pass passed, $total_fail failed"
record "arm64_unit_tests_s: $(secs "$t_start" "$(now)")"
for n in "${failed_names[@]+"${failed_names[@]}"}"; do record "arm64_unit_failed: $n"; done

# ---- 6. training -------------------------------------------------------------
if [ "$no_train" = 0 ]; then
  begin "embedded pipeline training under qemu"
  work=$build/arm64-train
  mkdir -p "$work"
  log=$logs/train.log
  train_cmd=(train --model cnn --dataset synthetic --stages 2 --epochs 1
             --max-batches "$max_batches" --threads 1 --metrics none)
  echo "check-arm64: salamander ${train_cmd[*]}"
  rc=0
  (cd "$work" && timeout 1800 "$qemu" -L "$sysroot" "$bin" "${train_cmd[@]}") 2>&1 | tee "$log" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "check-arm64: training under qemu failed (exit $rc); see $log" >&2
    false
  fi
  record "arm64_train_s: $(secs "$t_start" "$(now)") (${max_batches} batches, 2 stages)"
  record "arm64_train_result: $(grep -E '^(throughput|test accuracy):' "$log" | paste -sd ' ' -)"
  log=""
fi

# ---- summary -----------------------------------------------------------------
step="summary"
arch=$(dpkg-query -W -f='${Architecture}' libtorch-dev 2>/dev/null || true)
if [ -n "$arch" ] && [ "$arch" != amd64 ] && [ "$(dpkg --print-architecture)" = amd64 ]; then
  echo "check-arm64: warning: the host's libtorch-dev is now $arch" >&2
fi
record "host_libtorch_dev: ${arch:-not installed}"
echo
echo "==== check-arm64: summary ===="
printf '%s\n' "${summary[@]}" | tee "$summary_file"
trap - ERR
if [ "$total_fail" -ne 0 ]; then
  echo "check-arm64: $total_fail unit test case(s) failed under qemu (logs: $logs)" >&2
  exit 1
fi
