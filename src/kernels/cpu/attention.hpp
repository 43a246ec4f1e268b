// Causal self-attention of one query row over a sequence's paged KV cache.
#pragma once

#include <cstdint>
#include <span>

#include "kv/kv_cache.hpp"

namespace infer {

struct AttentionShape {
  int n_head = 0;
  int n_kv_heads = 0;  // n_head is a multiple (grouped-query attention)
  int head_dim = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
};

// For each head h: out_h = softmax(scale * q_h · K_t, t < n_ctx) · V_t, reading K/V of `layer`
// through the sequence's block table. `scratch` holds at least n_ctx + 2 * head_dim floats.
// The result depends only on q and this sequence's cache, never on other rows of the batch.
void attention_row(const float* q, const AttentionShape& shape, const KvView& kv, int layer,
                   std::span<const int32_t> blocks, int32_t n_ctx, float* out, float* scratch) noexcept;

// Stores one token's K and V (n_kv_heads * head_dim floats each) at `pos` of a sequence.
void kv_store(const KvView& kv, int layer, std::span<const int32_t> blocks, int32_t pos, const float* k,
              const float* v) noexcept;

}  // namespace infer
