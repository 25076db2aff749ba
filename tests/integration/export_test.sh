#!/usr/bin/env bash
# Weights out to PyTorch, as a user meets it: `salamander export` writes a
# checkpoint's weights as a state dict and the model's description beside
# it; Debian's python3-torch loads them into the torch.nn module that
# deploy/pytorch/salamander_torch.py builds (strict: no key missing or left
# over) and its test accuracy on Fashion-MNIST equals `salamander eval
# --load`, for a model of each layer family (dense + conv, BatchNorm
# residual blocks, ViT). Bad input is refused with what is wrong.
# Usage: export_test.sh BIN
set -euo pipefail
bin="$1"
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's, with python3-torch (deploy/install-deps.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  exit 1
}
"$py" -c 'import torch' 2>/dev/null || fail "$py cannot import torch (python3-torch missing?)"
export PYTHONPATH="$here/../../deploy/pytorch"

# ---- bad input
grep -q -- "--output" <<<"$("$bin" export --help)" || fail "export --help lists no --output"
if out=$("$bin" export --load missing.ckpt -o m.pt 2>&1); then fail "exported a missing file"; fi
grep -q "missing.ckpt" <<<"$out" || fail "missing file: $out"
head -c 4096 /dev/urandom >junk.ckpt
if out=$("$bin" export --load junk.ckpt -o m.pt 2>&1); then fail "exported junk"; fi
grep -q "junk.ckpt is not a salamander checkpoint" <<<"$out" || fail "junk: $out"
[ ! -e m.pt ] || fail "a refused export left m.pt"

# ---- one model of each layer family: train a little, eval, export, load in PyTorch
check() { # NAME MODEL
  local name="$1" model="$2" ours theirs
  "$bin" train --model "$model" --max-batches 25 --batch-size 32 --save "$name.ckpt" \
    --log-level warn >"$name.train" 2>&1 || fail "$name: train: $(tail -3 "$name.train")"
  ours=$("$bin" eval --load "$name.ckpt" --log-level warn | sed -n 's/^test accuracy: //p')
  [ -n "$ours" ] || fail "$name: eval printed no accuracy"
  "$bin" export --load "$name.ckpt" -o "$name.pt" --log-level warn >"$name.export" \
    || fail "$name: export"
  grep -q "exported .* tensors .* to $name.pt" "$name.export" || fail "$name: $(cat "$name.export")"
  [ -s "$name.pt.json" ] || fail "$name: no description beside the state dict"
  # a plain dict of tensors, whatever reads it; then the module's accuracy
  # (one Python per model: importing torch is most of its time)
  theirs=$("$py" - "$name.pt" <<'PY'
import sys, torch, salamander_torch
sd = torch.load(sys.argv[1])
assert type(sd) is dict and sd and all(isinstance(v, torch.Tensor) for v in sd.values()), sd.keys()
torch.set_num_threads(1)
correct, total = salamander_torch.accuracy(salamander_torch.load(sys.argv[1]),
                                           *salamander_torch.fashion_mnist())
print(f"{correct / total:.4f}")
PY
) || fail "$name: PyTorch could not load or evaluate the export"
  [ -n "$theirs" ] || fail "$name: PyTorch printed no accuracy"
  [ "$ours" = "$theirs" ] || fail "$name: salamander eval says $ours, PyTorch $theirs"
  echo "$name ($model): eval --load $ours, PyTorch $theirs"
  eval "acc_$name=$ours"
}
check mlp "mlp:hidden=64,depth=2"
check cnn "cnn:c1=4,c2=8,hidden=32"
check resnet "resnet:width=4,blocks=1"
check vit "vit:size=tiny,depth=1"

# an untrained model's accuracy is near chance: equal accuracies above mean the weights arrived
awk -v a="$acc_mlp" 'BEGIN { exit !(a > 0.5) }' || fail "25 batches gave the MLP only $acc_mlp"
# the module's own command line, as the README shows it
script=$("$py" "$here/../../deploy/pytorch/salamander_torch.py" cnn.pt) || fail "salamander_torch.py cnn.pt"
grep -q "^test accuracy: $acc_cnn (" <<<"$script" || fail "salamander_torch.py says '$script', eval $acc_cnn"

# an output that cannot be written: said, and nothing half-written
if out=$("$bin" export --load cnn.ckpt -o no/such/dir/m.pt 2>&1); then fail "wrote into a missing directory"; fi
grep -q "cannot write state dict no/such/dir/m.pt" <<<"$out" || fail "unwritable: $out"
echo "export: ok"
