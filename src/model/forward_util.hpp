// Pieces every architecture's forward pass shares: growable scratch buffers, the batch checks,
// the weights' fingerprint.
#pragma once

#include <cstdint>

#include "core/aligned_buffer.hpp"
#include "format/model_file.hpp"
#include "infer/status.hpp"
#include "kv/kv_cache.hpp"
#include "model/batch.hpp"

namespace infer {

// A buffer that only grows: steady-state steps reuse it without allocating.
class Scratch {
 public:
  Status reserve(size_t floats);
  float* data() { return buf_.as<float>(); }

 private:
  AlignedBuffer buf_;
};

// What a model checks of a batch before touching memory: per-row arrays of one length, token
// ids inside the vocabulary, each row's sequence named, a KV block for every position each
// layer's table must hold (for a windowed layer: the positions the row sees), block ids inside
// their pool, and a KV layout matching the model's.
Status check_batch(const Batch& b, const KvView& kv, int n_layer, int64_t n_vocab, int n_kv_heads, int head_dim);

// Identity of the weights and architecture: the file's header (metadata + tensor table) and size.
uint64_t model_fingerprint(const ModelFile& f);

}  // namespace infer
