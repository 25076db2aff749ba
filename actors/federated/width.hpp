// Width slicing of the zoo's dense and conv models for federated clients:
// the layout algorithms/federated.hpp works on, the sub-model a client
// builds when it keeps only some units of each hidden layer, and the
// conversions between weight snapshots and the strategies' flat arrays.
//
// Why here: the strategies are pure and know nothing of torch or the zoo;
// the client and the job both need the same answer to "which tensor
// elements does a sub-model hold", so it is computed in one place.
#pragma once

#include "algorithms/federated.hpp"
#include "models/model_desc.hpp"
#include "models/weights.hpp"

namespace salamander::actors {

namespace fed = algorithms::fed;

/// The layout of a model made of dense and conv layers (mlp, cnn): each
/// layer's output units, the last one unsliced. Throws std::invalid_argument
/// naming the first layer of another kind.
fed::model_layout width_layout(const models::model_desc& desc);

/// The description of the sub-model that keeps `kept` (empty: the whole
/// model): the same layers, narrower. Its fingerprint names the widths, so
/// a snapshot of one sub-model does not restore into another.
models::model_desc sub_desc(const models::model_desc& desc, const fed::unit_sets& kept);

/// The parameters of `snap` in layout order, flattened. Throws
/// std::invalid_argument naming a parameter the snapshot does not hold.
fed::flat_params to_flat(const models::weight_snapshot& snap, const fed::model_layout& layout);

/// A snapshot of `values` shaped as the sub-model `sub` (from sub_desc)
/// holds them; `version` is the snapshot's.
models::weight_snapshot to_snapshot(const fed::flat_params& values,
                                    const fed::model_layout& layout,
                                    const models::model_desc& sub, uint64_t version);

/// The snapshot's parameters written into a model built from `sub`.
void load_params(models::layered_model& model, const models::weight_snapshot& snap);

} // namespace salamander::actors
