#include "kernels/cpu/attention.hpp"

#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/ops.hpp"

namespace infer {
namespace {

// Loads head_dim elements of a cache row as floats.
inline void load_row(const KvView& kv, const uint8_t* row, float* dst) noexcept {
  if (kv.kv_type == DType::f32) {
    std::memcpy(dst, row, static_cast<size_t>(kv.head_dim) * 4);
  } else {
    const auto* h = reinterpret_cast<const uint16_t*>(row);
    for (int i = 0; i < kv.head_dim; ++i) dst[i] = f16_to_f32(h[i]);
  }
}

inline void store_row(const KvView& kv, uint8_t* row, const float* src) noexcept {
  if (kv.kv_type == DType::f32) {
    std::memcpy(row, src, static_cast<size_t>(kv.head_dim) * 4);
  } else {
    auto* h = reinterpret_cast<uint16_t*>(row);
    for (int i = 0; i < kv.head_dim; ++i) h[i] = f32_to_f16(src[i]);
  }
}

}  // namespace

void kv_store(const KvView& kv, int layer, std::span<const int32_t> blocks, int32_t pos, const float* k,
              const float* v) noexcept {
  const int32_t block = blocks[static_cast<size_t>(pos / kv.block_size)];
  const int32_t slot = pos % kv.block_size;
  const uint64_t row_bytes = static_cast<uint64_t>(kv.head_dim) * kv.elem_bytes;
  for (int h = 0; h < kv.n_kv_heads; ++h) {
    store_row(kv, kv.k_block(layer, block, h) + slot * row_bytes, k + static_cast<int64_t>(h) * kv.head_dim);
    store_row(kv, kv.v_block(layer, block, h) + slot * row_bytes, v + static_cast<int64_t>(h) * kv.head_dim);
  }
}

void attention_row(const float* q, const AttentionShape& shape, const KvView& kv, int layer,
                   std::span<const int32_t> blocks, int32_t n_ctx, float* out, float* scratch) noexcept {
  const int hd = shape.head_dim;
  const int group = shape.n_head / shape.n_kv_heads;
  const uint64_t row_bytes = static_cast<uint64_t>(hd) * kv.elem_bytes;
  float* scores = scratch;
  float* row = scratch + n_ctx;
  float* acc = row + hd;
  for (int h = 0; h < shape.n_head; ++h) {
    const int kvh = h / group;
    const float* qh = q + static_cast<int64_t>(h) * hd;
    for (int32_t t = 0; t < n_ctx; ++t) {
      const uint8_t* k = kv.k_block(layer, blocks[static_cast<size_t>(t / kv.block_size)], kvh) + (t % kv.block_size) * row_bytes;
      load_row(kv, k, row);
      scores[t] = dot_f32(qh, row, hd) * shape.scale;
    }
    softmax_inplace(scores, n_ctx);
    for (int i = 0; i < hd; ++i) acc[i] = 0.0f;
    for (int32_t t = 0; t < n_ctx; ++t) {
      const uint8_t* v = kv.v_block(layer, blocks[static_cast<size_t>(t / kv.block_size)], kvh) + (t % kv.block_size) * row_bytes;
      load_row(kv, v, row);
      const float w = scores[t];
      for (int i = 0; i < hd; ++i) acc[i] += w * row[i];
    }
    std::memcpy(out + static_cast<int64_t>(h) * hd, acc, static_cast<size_t>(hd) * 4);
  }
}

}  // namespace infer
