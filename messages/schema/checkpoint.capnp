# Checkpoint file body. The file is a fixed 32-byte header (magic
# "SALMCKPT", format version, body length, CRC-32 of the body) followed by
# this message in flat-array form; see messages/checkpoint.hpp.
@0xfccbda47b4313542;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("salamander::wire");

using import "tensor.capnp".WeightSnapshot;

struct Checkpoint {
  snapshot @0 :WeightSnapshot;
  createdUnixMs @1 :Int64;
  seed @2 :UInt64;        # data order seed the weights were trained with
  epoch @3 :UInt64;       # epochs completed
  batchesInEpoch @4 :UInt64;
  note @5 :Text;
  trainSeconds @6 :Float64; # training time of the runs that wrote it (0: not kept)
}
