#include "kernels/cpu/attention.hpp"

#include <algorithm>

#include "core/isa_variants.hpp"

namespace infer {

#define INFER_DECLARE_ATTENTION(ns)                                                                                 \
  namespace ns {                                                                                                    \
  void kv_store(const KvView& kv, int layer, std::span<const int32_t> blocks, int32_t pos, const float* k,          \
                const float* v) noexcept;                                                                           \
  void attention_row(const float* q, const AttentionShape& shape, const KvView& kv, int layer,                      \
                     std::span<const int32_t> blocks, int32_t n_ctx, float* out, float* scratch, int32_t first) noexcept; \
  void attention_rows(const AttentionShape& shape, const KvView& kv, int layer, std::span<const int32_t> blocks,    \
                      const AttentionRows& rows, float* scratch, int head_begin, int head_end, int chunk,           \
                      float* partials) noexcept;                                                                    \
  void attention_combine(const AttentionShape& shape, const KvView& kv, const AttentionRows& rows,                 \
                         const float* partials, int n_chunks, int64_t chunk_stride, float* scratch, int head_begin, \
                         int head_end) noexcept;                                                                    \
  }
INFER_DECLARE_ATTENTION(isa_ref)
INFER_DECLARE_ATTENTION(isa_avx2)
INFER_DECLARE_ATTENTION(isa_avx512)
#undef INFER_DECLARE_ATTENTION

namespace {
constexpr int64_t kTile = kAttentionTile;
}  // namespace

int64_t attention_scratch_floats(int head_dim) noexcept { return (kTile + 4) * static_cast<int64_t>(head_dim) + kTile; }

int64_t attention_rows_scratch_floats(const AttentionShape& shape, int n_rows) noexcept {
  const int64_t hd = shape.head_dim, group = shape.n_head / std::max(1, shape.n_kv_heads);
  // K tile (transposed), V tile, and per (row, head): the chunk's accumulator, probabilities, m
  // and sum, the folded chunks' accumulator, m and sum, and the rotated query.
  return 2 * kTile * hd + static_cast<int64_t>(n_rows) * group * (3 * hd + kTile + 4);
}

int64_t attention_partial_floats(const AttentionShape& shape, int n_rows) noexcept {
  return static_cast<int64_t>(n_rows) * shape.n_head * (shape.head_dim + 2);
}


void kv_store(const KvView& kv, int layer, std::span<const int32_t> blocks, int32_t pos, const float* k,
              const float* v) noexcept {
  INFER_ISA_DISPATCH(kv_store, kv, layer, blocks, pos, k, v);
}

void attention_row(const float* q, const AttentionShape& shape, const KvView& kv, int layer,
                   std::span<const int32_t> blocks, int32_t n_ctx, float* out, float* scratch, int32_t first) noexcept {
  INFER_ISA_DISPATCH(attention_row, q, shape, kv, layer, blocks, n_ctx, out, scratch, first);
}

void attention_rows(const AttentionShape& shape, const KvView& kv, int layer, std::span<const int32_t> blocks,
                    const AttentionRows& rows, float* scratch, int head_begin, int head_end, int chunk,
                    float* partials) noexcept {
  INFER_ISA_DISPATCH(attention_rows, shape, kv, layer, blocks, rows, scratch, head_begin, head_end, chunk, partials);
}

void attention_combine(const AttentionShape& shape, const KvView& kv, const AttentionRows& rows, const float* partials,
                       int n_chunks, int64_t chunk_stride, float* scratch, int head_begin, int head_end) noexcept {
  INFER_ISA_DISPATCH(attention_combine, shape, kv, rows, partials, n_chunks, chunk_stride, scratch, head_begin, head_end);
}

}  // namespace infer
