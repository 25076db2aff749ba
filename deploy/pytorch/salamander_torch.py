"""salamander's zoo models as plain torch.nn modules, for weights exported
with `salamander export`.

    salamander export --load run.ckpt -o model.pt   # writes model.pt and model.pt.json

    import salamander_torch
    model = salamander_torch.load("model.pt")      # an nn.Sequential in eval mode
    logits = model(images)                          # N x 1 x 28 x 28 for Fashion-MNIST

`model.pt` is an ordinary state dict (`torch.load` returns a dict of
tensors); `model.pt.json` is the model's description (`salamander describe
MODEL --json`). `build(description)` makes the equivalent module: an
`nn.Sequential` whose children are the layers in order, named as salamander
names them (conv1, conv2, fc1, head; stem, g1b1, ...; embed, block1, ...),
each with the submodules and parameters its C++ twin has
(models/layered_model.cpp), so `load_state_dict` matches every key. The
forward passes are the same operations in the same order, so the same
LibTorch gives the same outputs.

Fashion-MNIST input is scaled as salamander scales it: `fashion_mnist(path)`
reads the IDX files (gzipped or not) and returns (images, labels) ready for
the model.
"""

import gzip
import json
import math
import os

import torch
from torch import nn
import torch.nn.functional as F

FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530


class Dense(nn.Module):
    """dense: flattens its input, a Linear, then ReLU unless it is a head."""

    def __init__(self, a):
        super().__init__()
        self.fc = nn.Linear(a["in"], a["out"])
        self.relu = a["relu"] != 0

    def forward(self, x):
        if x.dim() > 2:
            x = x.flatten(1)
        x = self.fc(x)
        return torch.relu(x) if self.relu else x


class Conv(nn.Module):
    """conv: a same-padded convolution, ReLU, and a 2x2 max-pool if asked."""

    def __init__(self, a):
        super().__init__()
        k = a["kernel"]
        self.conv = nn.Conv2d(a["in_ch"], a["out_ch"], k, padding=k // 2)
        self.pool = a["pool"] != 0

    def forward(self, x):
        x = torch.relu(self.conv(x))
        return F.max_pool2d(x, 2) if self.pool else x


class Stem(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.conv = nn.Conv2d(a["in_ch"], a["out_ch"], 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(a["out_ch"])

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, a):
        super().__init__()
        cin, cout, stride = a["in_ch"], a["out_ch"], a["stride"]
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        if stride != 1 or cin != cout:
            self.proj = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
            self.proj_bn = nn.BatchNorm2d(cout)
        else:
            self.proj = None

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        shortcut = self.proj_bn(self.proj(x)) if self.proj is not None else x
        return torch.relu(y + shortcut)


class PoolHead(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.fc = nn.Linear(a["in_ch"], a["classes"])

    def forward(self, x):
        return self.fc(x.mean((2, 3)))


class VitEmbed(nn.Module):
    def __init__(self, a):
        super().__init__()
        dim, patch = a["dim"], a["patch"]
        self.proj = nn.Conv2d(a["channels"], dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, a["tokens"], dim))

    def forward(self, x):
        p = self.proj(x).flatten(2).transpose(1, 2)
        c = self.cls.expand(p.size(0), 1, p.size(2))
        return torch.cat([c, p], 1) + self.pos


# A block's two residual halves, x + attention(ln1(x)) and x + mlp(ln2(x)):
# one layer (vit_block), or two (vit_attn, vit_mlp) that a plan may cut
# between. The halves name their parameters as the block does.
def _attention_parts(m, a):
    dim = a["dim"]
    m.heads = a["heads"]
    m.ln1 = nn.LayerNorm(dim)
    m.qkv = nn.Linear(dim, 3 * dim)
    m.out = nn.Linear(dim, dim)


def _attention_half(m, x):
    b, t, d = x.shape
    h = m.heads
    q, k, v = m.qkv(m.ln1(x)).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
    att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(float(d // h)), -1)
    ctx = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
    return x + m.out(ctx)


def _mlp_parts(m, a):
    m.ln2 = nn.LayerNorm(a["dim"])
    m.fc1 = nn.Linear(a["dim"], a["mlp"])
    m.fc2 = nn.Linear(a["mlp"], a["dim"])


def _mlp_half(m, x):
    return x + m.fc2(F.gelu(m.fc1(m.ln2(x))))


class VitBlock(nn.Module):
    def __init__(self, a):
        super().__init__()
        _attention_parts(self, a)
        _mlp_parts(self, a)

    def forward(self, x):
        return _mlp_half(self, _attention_half(self, x))


class VitAttn(nn.Module):
    """The attention half of a block (`vit:...,sublayers=2`)."""

    def __init__(self, a):
        super().__init__()
        _attention_parts(self, a)

    def forward(self, x):
        return _attention_half(self, x)


class VitMlp(nn.Module):
    """The MLP half of a block (`vit:...,sublayers=2`)."""

    def __init__(self, a):
        super().__init__()
        _mlp_parts(self, a)

    def forward(self, x):
        return _mlp_half(self, x)


class VitHead(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.ln = nn.LayerNorm(a["dim"])
        self.fc = nn.Linear(a["dim"], a["classes"])

    def forward(self, x):
        return self.fc(self.ln(x.select(1, 0)))


LAYER_KINDS = {
    "dense": Dense,
    "conv": Conv,
    "stem": Stem,
    "residual": Residual,
    "pool_head": PoolHead,
    "vit_embed": VitEmbed,
    "vit_block": VitBlock,
    "vit_attn": VitAttn,
    "vit_mlp": VitMlp,
    "vit_head": VitHead,
}


def build(description):
    """The torch.nn module for a description (a dict, as `salamander describe
    MODEL --json` prints it): an nn.Sequential of the named layers."""
    model = nn.Sequential()
    for layer in description["layers"]:
        kind = layer["kind"]
        if kind not in LAYER_KINDS:
            raise ValueError(f"layer {layer['name']} has kind {kind!r}, which this module "
                             f"does not know (known: {', '.join(sorted(LAYER_KINDS))})")
        model.add_module(layer["name"], LAYER_KINDS[kind](layer["attrs"]))
    return model


def load(path, description_path=None):
    """The exported model at `path` (its description from `path + '.json'`
    unless given), weights loaded, in eval mode."""
    with open(description_path or path + ".json") as f:
        description = json.load(f)
    model = build(description)
    model.load_state_dict(torch.load(path))
    return model.eval()


def _read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    header = 4 + 4 * dims
    return torch.frombuffer(bytearray(data[header:]), dtype=torch.uint8).reshape(shape)


def fashion_mnist(directory="/usr/share/datasets/fashion-mnist", split="t10k"):
    """(images N x 1 x 28 x 28 float32, labels N int64), scaled as salamander
    scales them."""
    def find(base):
        for name in (base, base + ".gz"):
            path = os.path.join(directory, name)
            if os.path.exists(path):
                return path
        raise FileNotFoundError(f"{base}[.gz] not in {directory}")
    images = _read_idx(find(f"{split}-images-idx3-ubyte"))
    labels = _read_idx(find(f"{split}-labels-idx1-ubyte"))
    x = images.unsqueeze(1).to(torch.float32).div_(255.0).sub_(FASHION_MNIST_MEAN)
    return x.div_(FASHION_MNIST_STD), labels.to(torch.int64)


@torch.no_grad()
def accuracy(model, images, labels, batch_size=1000):
    """(correct, total) of the model's arg-max over the examples, in batches
    of `batch_size` as `salamander eval` runs them."""
    correct = 0
    for b in range(0, images.size(0), batch_size):
        logits = model(images[b:b + batch_size])
        correct += int((logits.argmax(1) == labels[b:b + batch_size]).sum())
    return correct, images.size(0)


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(
        description="Evaluate weights exported by `salamander export` on the Fashion-MNIST "
                    "test split, in PyTorch.")
    parser.add_argument("state_dict", help="the file `salamander export -o` wrote")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                        help="directory with the Fashion-MNIST IDX files")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load(args.state_dict)
    correct, total = accuracy(model, *fashion_mnist(args.data))
    print(f"test accuracy: {correct / total:.4f} ({correct} / {total})")
