// Precompiled for every torch translation unit (see CMakeLists.txt).
// Torch comes first on purpose: glog's CHECK must not replace Catch2's.
#pragma once
#include <torch/torch.h>
