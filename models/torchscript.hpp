// Models in from PyTorch: a TorchScript file of an nn.Sequential.
//
// Why: users come with PyTorch models. `--model torchscript:FILE` takes a
// file written by `torch.jit.script(nn.Sequential(...)).save(FILE)` and
// treats its top-level children as the layers salamander profiles, plans,
// places, replicates and recovers, as it treats the zoo's. describe() loads
// the file and runs one example through the children to learn their shapes;
// each layer is built as a fresh copy of its child from the file (every
// process, every stage: its own parameters), wrapped so that its parameters
// and buffers keep their PyTorch names under the layer's (`0.weight`,
// `3.bn.running_mean`): a checkpoint exported with `salamander export` loads
// straight back into the original nn.Sequential.
//
// The weights come from the file, not from the seed. Every node reads the
// file at the same absolute path (copy it to each device); the fingerprint
// covers its content, so a node with another file under that name is
// refused like a node with another build.
// This header is free of LibTorch (main() includes it); build_script_layer()
// is declared in layered_model.hpp.
#pragma once

#include "models/model_desc.hpp"

namespace salamander::models {

/// Lets describe() read `torchscript:FILE` models (it cannot without
/// LibTorch). Idempotent; the salamander binary calls it at start.
void enable_torchscript();

} // namespace salamander::models
