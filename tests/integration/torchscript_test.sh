#!/usr/bin/env bash
# Models in from PyTorch (`--model torchscript:FILE`), as a user meets it:
# Debian's python3-torch scripts a small nn.Sequential (convolution,
# BatchNorm, pooling, Flatten, dense layers); salamander describes it, trains
# it as a 3-stage pipeline and on one device with the same micro-batches,
# and the two give the same weights (to 1e-5); a 3-stage pipeline over node
# processes whose middle stage is crashed mid-job (console pause, chaos
# kill-stage, resume) recovers and still ends with those weights; the
# trained checkpoint serves (infer) with eval's accuracy; and its export
# loads straight back into the original scripted module (same names) with
# the same accuracy. Files that are not a scripted Sequential are refused
# with why. Usage: torchscript_test.sh BIN
set -euo pipefail
bin="$1"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../deploy/free_port.sh" # free_port
root=$(cd "$here/../.." && pwd)
py=/usr/bin/python3 # Debian's, with python3-torch (deploy/install-deps.sh)
work=$(mktemp -d)
sup=""
cleanup() {
  if [ -n "$sup" ]; then kill -TERM "$sup" 2>/dev/null || true; wait "$sup" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err "$work"/logs/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  exit 1
}
"$py" -c 'import torch' 2>/dev/null || fail "$py cannot import torch (python3-torch missing?)"
export PYTHONPATH="$root/deploy/pytorch"

# (a file: TorchScript reads a custom module's source)
cat >make_models.py <<'PY'
import torch
from torch import nn
torch.manual_seed(3)
net = nn.Sequential(
    nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(4 * 14 * 14, 32), nn.ReLU(), nn.Linear(32, 10))
torch.jit.script(net).save("seq.pt")
class Wrapped(nn.Module):  # not a Sequential: refused
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(784, 10)
    def forward(self, x):
        return self.body(x.flatten(1))
torch.jit.script(Wrapped()).save("wrapped.pt")
torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(784, 7))).save("seven.pt")
PY
"$py" make_models.py || fail "scripting the models"

# ---- described like a zoo model; bad files refused with why
desc=$("$bin" describe torchscript:seq.pt) || fail "describe: $desc"
grep -q "BatchNorm2d" <<<"$desc" || fail "describe shows no BatchNorm2d layer: $desc"
[ "$(grep -cE '^ *[0-9]+  [0-9] ' <<<"$desc")" = 8 ] || fail "describe: not 8 layers: $desc"
refused() { # PATTERN MODEL
  local out
  if out=$("$bin" describe "$2" 2>&1); then fail "accepted $2"; fi
  grep -qF -- "$1" <<<"$out" || fail "$2 said: $out"
}
refused "not an nn.Sequential" torchscript:wrapped.pt
refused "outputs 7 values per sample, not 10 class scores" torchscript:seven.pt
refused "cannot be read" torchscript:missing.pt
head -c 2000 /dev/urandom >junk.pt
refused "does not load" torchscript:junk.pt

# ---- a 3-stage pipeline equals one device with the same micro-batches
common=(--model torchscript:seq.pt --max-batches 200 --batch-size 32 --micro-batches 4)
"$bin" train "${common[@]}" --log-level warn --save one.ckpt >one.out 2>one.err || fail "one device"
"$bin" train "${common[@]}" --log-level warn --stages 3 --balance 3,2,3 --save three.ckpt \
  >three.out 2>three.err \
  || fail "3 stages"
. "$here/job_procs.sh" # con, pause_job, same_weights
same_weights one.ckpt three.ckpt

# ---- the same pipeline over node processes, its middle stage crashed while paused
port=$(free_port)
SALAMANDER_BIN="$bin" SALAMANDER_LOG_DIR="$work/logs" "$root/deploy/local-cluster.sh" 3 "$work/c.toml" \
  "$bin" supervisor --cluster "$work/c.toml" "${common[@]}" --balance 3,2,3 \
  --replicate-every 5 --listen "127.0.0.1:$port" --save chaos.ckpt >chaos.out 2>chaos.err &
sup=$!
pause_job
grep -q "killed" <<<"$("$bin" chaos --supervisor "127.0.0.1:$port" kill-stage 1)" || fail "kill-stage"
con resume >/dev/null || fail "resume"
wait "$sup" || fail "the job with a crashed stage failed"
sup=""
grep -q "recovered from 1 failure(s)" chaos.err || fail "no recovery: $(tail -3 chaos.err)"
same_weights one.ckpt chaos.ckpt

# ---- served, and back in PyTorch, with eval's accuracy
acc=$("$bin" eval --load three.ckpt --log-level warn | sed -n 's/^test accuracy: //p')
[ -n "$acc" ] || fail "eval printed no accuracy"
served=$("$bin" infer --load three.ckpt --stages 2 --log-level warn 2>infer.err \
  | sed -n 's/^test accuracy: //p')
[ "$served" = "$acc" ] || fail "infer over 2 stages: $served, eval: $acc ($(tail -3 infer.err))"
theirs=$("$py" - <<'PY'
import torch, salamander_torch
model = torch.jit.load("seq.pt")
model.load_state_dict(torch.load("three.ckpt.pt"))  # strict: every name matches
model.eval()
correct, total = salamander_torch.accuracy(model, *salamander_torch.fashion_mnist())
print(f"{correct / total:.4f}")
PY
) || fail "the export does not load into the scripted module"
[ "$theirs" = "$acc" ] || fail "PyTorch says $theirs, eval $acc"
echo "torchscript: 3 stages = one device, recovery exact, accuracy $acc in salamander and PyTorch"
