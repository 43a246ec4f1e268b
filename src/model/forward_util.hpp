// What the decoder checks of a batch before touching memory, and the weights' fingerprint.
#pragma once

#include <cstdint>
#include <optional>

#include "core/kv_view.hpp"
#include "format/model_file.hpp"
#include "infer/status.hpp"
#include "model/batch.hpp"

namespace infer {

// Per-row arrays of one length, token ids inside the vocabulary, and a KV layout with the model's
// layers. (The attention plan checks the rest: each row's sequence, positions and block tables.)
Status check_batch(const Batch& b, const KvView& kv, int n_layer, int64_t n_vocab);

// Identity of the weights and architecture: the file's header (metadata + tensor table) and size.
uint64_t model_fingerprint(const ModelFile& f, std::optional<DType> weight_type = {});

}  // namespace infer
