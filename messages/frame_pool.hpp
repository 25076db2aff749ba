// The pool of large receive buffers behind messages::acquire_words
// (tensor_codec.hpp), on its own so that what empties it does not include
// the codec.
#pragma once

#include <cstddef>

namespace salamander::messages {

/// Frees the pooled buffers (up to eight, each as large as the largest
/// frames lately received: a stage's replica snapshot, hundreds of MB for a
/// large model) and returns how many bytes that gave back. A node calls it
/// when it drops a job, so that it goes back to its idle size.
size_t release_frame_pool();

} // namespace salamander::messages
