// Pieces every architecture's forward pass shares: growable scratch buffers, the batch checks,
// the weights' fingerprint.
#pragma once

#include <cstdint>
#include <optional>

#include "core/aligned_buffer.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/attention.hpp"
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

// Attention for every row of a batch, rows grouped by sequence (up to kRowsPerGroup consecutive
// rows of one sequence per kernel call, so each K/V tile is converted once per group) and the
// groups spread over the pool. Each row's result is attention_row's, bit for bit.
class BatchAttention {
 public:
  static constexpr int kRowsPerGroup = 16;

  // Groups the batch's rows; call once per forward step, before run(). `threads`: the pool's size.
  Status plan(const Batch& b, const KvView& kv, const AttentionShape& shape, int threads);
  // out row r = attention of q row r over its sequence's cache in `layer`.
  void run(const Batch& b, const KvView& kv, int layer, const float* q, int64_t q_stride, float* out, int64_t out_stride,
           ThreadPool& pool);

 private:
  AttentionShape shape_;
  std::vector<int32_t> rows_, n_ctx_, first_window_, zeros_;  // grouped row order
  std::vector<int32_t> group_begin_, group_seq_;              // group g: rows_[begin[g], begin[g+1])
  int64_t scratch_stride_ = 0;
  int head_parts_ = 1, threads_hint_ = 1;  // query heads of a group split in head_parts_ tasks
  Scratch scratch_;
};

// What a model checks of a batch before touching memory: per-row arrays of one length, token
// ids inside the vocabulary, each row's sequence named, a KV block for every position each
// layer's table must hold (for a windowed layer: the positions the row sees), block ids inside
// their pool, and a KV layout matching the model's.
Status check_batch(const Batch& b, const KvView& kv, int n_layer, int64_t n_vocab, int n_kv_heads, int head_dim);

// Identity of the weights and architecture: the file's header (metadata + tensor table) and size.
uint64_t model_fingerprint(const ModelFile& f, std::optional<DType> weight_type = {});

}  // namespace infer
