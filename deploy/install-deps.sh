#!/usr/bin/env bash
# Installs salamander's build and run dependencies from Debian's packages.
# Idempotent: packages already present are left alone, and apt is only asked
# when something is missing. Needs root (or sudo) the first time.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libcaf-dev                      # actors + network-transparent messaging
  libtorch-dev                    # LibTorch (CPU)
  libopenblas0-pthread            # LibTorch on the reference BLAS is ~40x slower
  libcapnp-dev capnproto          # wire and file formats
  libspdlog-dev libfmt-dev        # logging
  catch2                          # tests
  libcli11-dev                    # command line
  libtomlplusplus-dev             # cluster files
  libssl-dev                      # cluster secret (HMAC-SHA256)
  nlohmann-json3-dev              # metrics log (JSON lines)
  libedit-dev                     # console line editing and history (BSD licence)
  zlib1g-dev                      # gzipped IDX files, CRC32
  dataset-fashion-mnist           # the real data set
  gnuplot-nox                     # plots
  universal-ctags                 # tests/lint: the length of every function (issue 27)
  libcpp-httplib-dev              # serve: the HTTP endpoint (Open Inference Protocol)
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc  # serve --grpc-listen: KServe v2 over gRPC
  python3-grpcio                  # the tests' gRPC client (stubs made at test time by protoc)
  python3-numpy                   # the tests' Triton-style client
  wrk hey curl                    # serve: HTTP load benchmark, the tests' client
  python3-torch                   # export: the tests load exported weights in PyTorch
  iproute2 procps tmux bc            # netns testbed, process control
  openssl                         # deploy/make-certs.sh: the cluster CA and node certificates
  clang-14 libfuzzer-14-dev libclang-rt-14-dev  # fuzz harnesses, ASan/UBSan/TSan builds
  libjs-chart.js                  # the dashboard's charts (3.9.1, MIT), compiled into the binary
  chromium                        # the dashboard's browser test (headless)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js drives the browser test (npm's playwright-core, below). A machine
# that has a node already keeps it (Debian's npm package would conflict
# with another vendor's nodejs); one without gets Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm: playwright-core (pinned by tests/browser/package-lock.json) drives
# Debian's chromium in the dashboard's browser test; it downloads no browser.
root=$(cd "$(dirname "$0")/.." && pwd)
browser_tests="$root/tests/browser"
want=$(sed -n 's/.*"playwright-core": "\([0-9.]*\)".*/\1/p' "$browser_tests/package.json")
have=$(sed -n 's/.*"version": "\([0-9.]*\)".*/\1/p' \
  "$browser_tests/node_modules/playwright-core/package.json" 2>/dev/null | head -1 || true)
if [ "$want" != "$have" ]; then
  echo "install-deps: npm ci in tests/browser (playwright-core $want)"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$browser_tests" --no-audit --no-fund \
    --loglevel=error
fi
