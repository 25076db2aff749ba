# Sourced by the integration scripts that drive a running job and compare
# its weights. Needs: $bin, $py (Debian's python3 with python3-torch), $port
# (the supervisor's --listen port) and a function `fail`.

# con CMD: one console command against the supervisor on $port
con() { "$bin" --log-level warn console "127.0.0.1:$port" --timeout 10 --exec "$1"; }

# pause_job [SECONDS]: asks until the job says it paused (it may still be
# starting, or evaluating between epochs); fails after about SECONDS (default
# 20) of asking
pause_job() {
  local out
  for _ in $(seq 1 $((${1:-20} * 10))); do
    if out=$(con pause 2>/dev/null) && grep -q "paused at batch" <<<"$out"; then return 0; fi
    sleep 0.1
  done
  fail "the job could not be paused"
}

# same_weights A.ckpt B.ckpt: both exported, every tensor equal to 1e-5
same_weights() {
  "$bin" export --load "$1" -o "$1.pt" --log-level warn >/dev/null || fail "export $1"
  "$bin" export --load "$2" -o "$2.pt" --log-level warn >/dev/null || fail "export $2"
  "$py" - "$1.pt" "$2.pt" <<'PY' || fail "$1 and $2 differ"
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert a.keys() == b.keys(), (a.keys(), b.keys())
worst = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
print(f"max |difference| {worst:.2e} over {len(a)} tensors")
assert worst <= 1e-5
PY
}
