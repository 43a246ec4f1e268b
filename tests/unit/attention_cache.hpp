// A one-layer KV cache of `positions` token slots for one sequence, for the attention tests and
// benchmarks: its blocks in scrambled order (a permutation while 7 and the block count are coprime).
#pragma once

#include <cstring>
#include <vector>

#include "core/half.hpp"
#include "core/kv_view.hpp"

namespace infer::test {

struct AttentionCache {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> blocks;
  KvView view;

  AttentionCache(DType type, int n_kv_heads, int head_dim, int block_size, int positions) {
    const int n_blocks = (positions + block_size - 1) / block_size;
    view.n_kv_heads = n_kv_heads;
    view.head_dim = head_dim;
    view.block_size = block_size;
    view.n_groups = 1;
    view.groups[0].n_layers = 1;
    view.groups[0].n_blocks = n_blocks;
    view.kv_type = type;
    view.elem_bytes = type == DType::f32 ? 4 : 2;
    const size_t bytes = static_cast<size_t>(n_blocks) * n_kv_heads * block_size * head_dim * view.elem_bytes;
    k.assign(bytes, 0);
    v.assign(bytes, 0);
    view.groups[0].k_base = k.data();
    view.groups[0].v_base = v.data();
    for (int b = 0; b < n_blocks; ++b) blocks.push_back((b * 7 + 3) % n_blocks);
  }
  // Element i of the K and V storage (in storage order) <- keys[i], values[i], in the cache type.
  void fill(const std::vector<float>& keys, const std::vector<float>& values) {
    for (size_t i = 0; i < keys.size(); ++i) {
      put(k, i, keys[i]);
      put(v, i, values[i]);
    }
  }
  // The value the cache holds for element (head, pos, i) of K or V, as a float.
  float at(const std::vector<uint8_t>& buf, int head, int pos, int i) const {
    const size_t off = (((static_cast<size_t>(blocks[static_cast<size_t>(pos / view.block_size)]) * view.n_kv_heads + head) *
                             view.block_size + pos % view.block_size) * view.head_dim + i) * view.elem_bytes;
    if (view.kv_type == DType::f32) {
      float f;
      std::memcpy(&f, &buf[off], 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, &buf[off], 2);
    return f16_to_f32(h);
  }

 private:
  void put(std::vector<uint8_t>& buf, size_t i, float x) const {
    if (view.kv_type == DType::f32) {
      std::memcpy(&buf[4 * i], &x, 4);
    } else {
      const uint16_t h = f32_to_f16(x);
      std::memcpy(&buf[2 * i], &h, 2);
    }
  }
};

}  // namespace infer::test
