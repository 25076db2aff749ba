# Wire and file format for tensors and weight snapshots.
#
# A tensor is its dtype, its shape and its bytes in row-major (C) order,
# little-endian. The bytes are split into chunks because a Data field holds at
# most 2^29-1 bytes; readers must accept any chunking.
@0xa39033b6e28741ae;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("salamander::wire");

enum DType {
  float32 @0;
  float64 @1;
  float16 @2;
  bfloat16 @3;
  int64 @4;
  int32 @5;
  int16 @6;
  int8 @7;
  uint8 @8;
  bool @9;
}

struct Tensor {
  dtype @0 :DType;
  shape @1 :List(Int64);
  chunks @2 :List(Data);
}

struct NamedTensor {
  name @0 :Text;
  tensor @1 :Tensor;
}

# Weights of one layer. Parameter and buffer names are relative to the layer
# (`conv.weight`); optimizer state is named `<param>/<slot>` (`conv.weight/exp_avg`).
# Under the async schedule the parameters of the older versions that batches
# still to come train on are stashed beside them, named `<param>@-<k>` for
# version `version - k` (`conv.weight@-1`).
struct LayerWeights {
  index @0 :UInt32;
  name @1 :Text;
  params @2 :List(NamedTensor);
  buffers @3 :List(NamedTensor);
  optimizerState @4 :List(NamedTensor);
  stashed @5 :List(NamedTensor);
}

struct WeightSnapshot {
  fingerprint @0 :Text;   # identifies the architecture (models::describe)
  model @1 :Text;         # canonical model spec, for error messages
  version @2 :UInt64;     # number of batches committed into these weights
  optimizer @3 :Text;     # optimizer kind, "" when no state is included
  layers @4 :List(LayerWeights);
}
