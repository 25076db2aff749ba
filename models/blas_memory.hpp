// The memory LibTorch's libraries (its BLAS, oneDNN) keep between jobs, and
// giving it back.
#pragma once

#include <cstddef>

namespace salamander::models {

/// OpenBLAS packs a matrix product's operands into buffers from a pool of
/// its own (one per caller computing at once: a 128 MB reservation each on
/// x86-64, 32 MB on arm64 in 0.3.21), and the pages a job's products touched stay
/// resident until the process ends: OpenBLAS has no call to give them back
/// (measured: 10.6 MB on a node after a ViT-Small job). Takes every free
/// buffer whose first page is resident out of OpenBLAS's pool, so that no
/// product can use it meanwhile, discards the pages of its first 16 MB
/// (MADV_DONTNEED: the next product that takes it finds zero pages, as in
/// a fresh buffer; 16 MB is no more than a buffer on x86-64 and arm64, and
/// the products of the models here touch its first 5-11 MB) and puts it
/// back. Buffers in use stay as they are. Returns the resident bytes given
/// back: 0 when LibTorch's BLAS is not OpenBLAS, on other machines, or when
/// nothing was resident.
size_t release_blas_buffers();

/// oneDNN, which LibTorch runs convolutions on, keeps every primitive it
/// made (up to 1,024: the descriptors in the heap, the kernels it compiled
/// in mappings of their own) so that the next call of the same shape skips
/// making it again. A job's shapes are of no use to the next job (measured:
/// 0.6 MB of heap and 0.2 MB of compiled code on a node after the CNN and
/// ViT-Small). Empties the cache and keeps its capacity; the next call of
/// a shape makes its primitive again, with the same result. Returns the
/// number of primitives dropped when oneDNN says (0 when it does not, or
/// when LibTorch runs without it). The cache is the process's: nodes that
/// share one (tests, an embedded node) empty it for each other, and one that
/// computes meanwhile makes its primitives again.
size_t release_onednn_primitives();

} // namespace salamander::models
