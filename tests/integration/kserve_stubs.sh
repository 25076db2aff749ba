# Sourced by the tests that drive `salamander serve` over gRPC from Python
# (triton_compat_test.sh, model_repository_test.sh). kserve_stubs DIR skips
# the test (exit 77) when Debian's python3-grpcio or protoc's gRPC plugin is
# missing, else writes the client's stubs for apps/kserve.proto into DIR:
# from the proto the server was built from, with Debian's protoc, which
# matches Debian's python3-protobuf (python3-grpc-tools' does not).
# Needs $py (the Python that runs the client), $here (tests/integration)
# and fail().
kserve_stubs() {
  "$py" -c 'import grpc' 2>/dev/null ||
    { echo "SKIP: $py cannot import grpc (python3-grpcio, deploy/install-deps.sh)"; exit 77; }
  local tool
  for tool in protoc grpc_python_plugin; do
    command -v "$tool" >/dev/null ||
      { echo "SKIP: $tool is not installed (protobuf-compiler-grpc, deploy/install-deps.sh)"; exit 77; }
  done
  mkdir -p "$1"
  protoc --python_out="$1" --grpc_out="$1" \
    --plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" \
    -I "$here/../../apps" "$here/../../apps/kserve.proto" || fail "protoc kserve.proto"
}
