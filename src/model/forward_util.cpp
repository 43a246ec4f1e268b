#include "model/forward_util.hpp"

#include <algorithm>
#include <string>

#include "core/status_macros.hpp"

namespace infer {

Status Scratch::reserve(size_t floats) {
  if (floats <= buf_.size() / sizeof(float)) return Status::ok();
  auto b = AlignedBuffer::allocate(floats * sizeof(float));
  if (!b.ok()) return b.status();
  buf_ = std::move(b).value();
  return Status::ok();
}

namespace {

// The table covers `pos`, and every block from `first` to `pos` is a block of the pool.
Status check_table(std::span<const int32_t> table, const KvView& kv, int64_t pool, int32_t first, int32_t pos,
                   const char* which) {
  if (static_cast<size_t>(pos / kv.block_size) >= table.size())
    return invalid_argument("batch: position " + std::to_string(pos) + " has no KV block" + which);
  for (size_t i = static_cast<size_t>(first / kv.block_size); i <= static_cast<size_t>(pos / kv.block_size); ++i)
    if (table[i] < 0 || table[i] >= pool) return invalid_argument(std::string("batch: KV block id out of range") + which);
  return Status::ok();
}

}  // namespace

Status check_batch(const Batch& b, const KvView& kv, int n_layer, int64_t n_vocab, int n_kv_heads, int head_dim) {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq.size() != n || b.wants_logits.size() != n)
    return invalid_argument("batch: per-row arrays differ in length");
  if (kv.n_kv_heads != n_kv_heads || kv.head_dim != head_dim)
    return invalid_argument("batch: KV cache shape does not match the model");
  if (!kv.windowed.empty() && (kv.windowed.size() != static_cast<size_t>(n_layer) || kv.slot.size() != kv.windowed.size()))
    return invalid_argument("batch: KV cache layers do not match the model");
  bool any_full = kv.windowed.empty(), any_window = false;
  for (uint8_t w : kv.windowed) (w ? any_window : any_full) = true;
  for (size_t r = 0; r < n; ++r) {
    if (b.tokens[r] < 0 || b.tokens[r] >= n_vocab)
      return invalid_argument("batch: token id " + std::to_string(b.tokens[r]) + " outside the vocabulary (" +
                              std::to_string(n_vocab) + ")");
    if (b.seq[r] < 0 || static_cast<size_t>(b.seq[r]) >= b.sequences.size())
      return invalid_argument("batch: row " + std::to_string(r) + " names no sequence");
    const int32_t pos = b.positions[r];
    if (pos < 0) return invalid_argument("batch: negative position " + std::to_string(pos));
    const BatchSequence& s = b.sequences[static_cast<size_t>(b.seq[r])];
    if (any_full) INFER_RETURN_IF_ERROR(check_table(s.blocks, kv, kv.n_blocks, 0, pos, ""));
    if (any_window) {
      const int32_t first = pos >= kv.sliding_window ? pos - kv.sliding_window + 1 : 0;
      INFER_RETURN_IF_ERROR(check_table(s.window_blocks, kv, kv.n_window_blocks, first, pos, " (sliding-window layers)"));
    }
  }
  return Status::ok();
}

Status BatchAttention::plan(const Batch& b, const KvView& kv, const AttentionShape& shape, int threads) {
  shape_ = shape;
  threads_hint_ = std::max(1, threads);
  rows_.clear();
  n_ctx_.clear();
  first_window_.clear();
  group_begin_.clear();
  group_seq_.clear();
  const int32_t n = static_cast<int32_t>(b.rows());
  // Rows of each sequence in batch order (increasing positions), cut into groups.
  for (int32_t s = 0; s < static_cast<int32_t>(b.sequences.size()); ++s) {
    int in_group = 0;
    for (int32_t r = 0; r < n; ++r) {
      if (b.seq[static_cast<size_t>(r)] != s) continue;
      if (in_group == 0) {
        group_begin_.push_back(static_cast<int32_t>(rows_.size()));
        group_seq_.push_back(s);
      }
      const int32_t pos = b.positions[static_cast<size_t>(r)];
      rows_.push_back(r);
      n_ctx_.push_back(pos + 1);
      first_window_.push_back(pos >= kv.sliding_window && kv.sliding_window > 0 ? pos - kv.sliding_window + 1 : 0);
      in_group = (in_group + 1) % kRowsPerGroup;
    }
  }
  group_begin_.push_back(static_cast<int32_t>(rows_.size()));
  zeros_.assign(rows_.size(), 0);
  scratch_stride_ = attention_rows_scratch_floats(shape, kRowsPerGroup);
  // Few row groups (decoding a few sequences): split each group's heads into parts as well, so
  // that every thread has work. Parts follow KV heads first, so K/V tiles stay shared.
  const int n_groups = static_cast<int>(group_seq_.size());
  head_parts_ = 1;
  if (n_groups < threads_hint_) {
    // The fewest parts that give every thread a task; whole KV heads per part when possible.
    const int want = (threads_hint_ + n_groups - 1) / n_groups;
    int best = 0;
    for (int p = want; p <= shape.n_head && best == 0; ++p)
      if (shape.n_kv_heads % p == 0 || (p % shape.n_kv_heads == 0 && shape.n_head % p == 0)) best = p;
    head_parts_ = best > 0 ? best : 1;
  }
  return scratch_.reserve(static_cast<size_t>(scratch_stride_) * static_cast<size_t>(n_groups * head_parts_));
}

void BatchAttention::run(const Batch& b, const KvView& kv, int layer, const float* q, int64_t q_stride, float* out,
                         int64_t out_stride, ThreadPool& pool) {
  const bool windowed = kv.is_windowed(layer);
  float* scratch = scratch_.data();
  const int parts = head_parts_, heads_per_part = shape_.n_head / parts;
  pool.parallel_for(
      group_seq_.size() * static_cast<size_t>(parts),
      [&](size_t begin, size_t end) {
        for (size_t task = begin; task < end; ++task) {
          const size_t g = task / static_cast<size_t>(parts);
          const int part = static_cast<int>(task % static_cast<size_t>(parts));
          const int32_t lo = group_begin_[g], hi = group_begin_[g + 1];
          const BatchSequence& seq = b.sequences[static_cast<size_t>(group_seq_[g])];
          AttentionRows rows;
          rows.q = q;
          rows.q_stride = q_stride;
          rows.out = out;
          rows.out_stride = out_stride;
          rows.rows = rows_.data() + lo;
          rows.n_ctx = n_ctx_.data() + lo;
          rows.first = (windowed ? first_window_.data() : zeros_.data()) + lo;
          rows.n_rows = hi - lo;
          attention_rows(shape_, kv, layer, seq.table(kv, layer), rows, scratch + static_cast<int64_t>(task) * scratch_stride_,
                         part * heads_per_part, (part + 1) * heads_per_part);
        }
      },
      1);
}

uint64_t model_fingerprint(const ModelFile& f, std::optional<DType> weight_type) {
  auto fnv1a = [](const uint8_t* p, uint64_t n, uint64_t h) {
    for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  };
  const uint64_t h = fnv1a(f.file().data(), f.data_offset(), 1469598103934665603ull);
  // The weights' identity: the file (its header and size) and the type matrices were converted to.
  const uint64_t ids[2] = {f.file_size(), weight_type ? 1 + static_cast<uint64_t>(*weight_type) : 0};
  return fnv1a(reinterpret_cast<const uint8_t*>(ids), sizeof ids, h);
}

}  // namespace infer
