// A one-layer KV cache of `positions` token slots for one sequence, for the attention tests and
// benchmarks: its blocks in scrambled order (a permutation while 7 and the block count are coprime).
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "core/kv_view.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/fp8_rows.hpp"
#include "quant/quantize_activations.hpp"

namespace infer::test {

// x <- H_n x per block of n, H_n[i][j] = (-1)^popcount(i & j) / sqrt(n) (Sylvester's
// Walsh-Hadamard matrix, orthonormal), as a float64 matrix product: the reference of the
// kernels' butterflies (kernels/cpu/hadamard.hpp).
inline void hadamard_reference(double* x, int len, int n) {
  std::vector<double> y(static_cast<size_t>(n));
  for (int b = 0; b < len; b += n) {
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += (__builtin_popcount(static_cast<unsigned>(i & j)) % 2 ? -x[b + j] : x[b + j]);
      y[static_cast<size_t>(i)] = s / std::sqrt(double(n));
    }
    std::copy(y.begin(), y.end(), x + b);
  }
}

struct AttentionCache {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> blocks;
  KvView view;

  // k_rotation / v_rotation: a rotated cache (core/kv_view.hpp), 0 for none.
  AttentionCache(DType type, int n_kv_heads, int head_dim, int block_size, int positions, int k_rotation = 0, int v_rotation = 0) {
    const int n_blocks = (positions + block_size - 1) / block_size;
    view.n_kv_heads = n_kv_heads;
    view.head_dim = head_dim;
    view.block_size = block_size;
    view.n_groups = 1;
    view.groups[0].n_layers = 1;
    view.groups[0].n_blocks = n_blocks;
    view.kv_type = type;
    view.row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(head_dim));
    view.k_rotation = k_rotation;
    view.v_rotation = v_rotation;
    const size_t bytes = static_cast<size_t>(n_blocks) * n_kv_heads * block_size * view.row_bytes;
    k.assign(bytes, 0);
    v.assign(bytes, 0);
    view.groups[0].k_base = k.data();
    view.groups[0].v_base = v.data();
    for (int b = 0; b < n_blocks; ++b) blocks.push_back((b * 7 + 3) % n_blocks);
  }
  // Element i of K and V in storage order (row i / head_dim) <- keys[i], values[i], stored as
  // the cache type stores them (kv_store's conversion; a rotated cache's rows rotated first, in
  // float64 rounded to float).
  void fill(const std::vector<float>& keys, const std::vector<float>& values) {
    const size_t hd = static_cast<size_t>(view.head_dim);
    for (size_t r = 0; r * hd < keys.size(); ++r) {
      store(k.data() + r * view.row_bytes, rotated(keys.data() + r * hd, view.k_rotation).data());
      store(v.data() + r * view.row_bytes, rotated(values.data() + r * hd, view.v_rotation).data());
    }
  }
  // A row rotated in blocks of n (n = 0: as it is), in float64, rounded to float.
  std::vector<float> rotated(const float* row, int n) const {
    std::vector<double> x(row, row + view.head_dim);
    if (n > 0) hadamard_reference(x.data(), view.head_dim, n);
    return std::vector<float>(x.begin(), x.end());
  }
  // The value the cache holds for element (head, pos, i) of K or V, as a float.
  float at(const std::vector<uint8_t>& buf, int head, int pos, int i) const {
    const size_t row = (static_cast<size_t>(blocks[static_cast<size_t>(pos / view.block_size)]) * view.n_kv_heads + head) *
                           view.block_size + pos % view.block_size;
    std::vector<float> values(static_cast<size_t>(view.head_dim));
    const uint8_t* stored = buf.data() + row * view.row_bytes;
    if (view.kv_type == DType::f8_e4m3)
      for (size_t j = 0; j < values.size(); ++j) values[j] = e4m3_to_f32(stored[j]);
    else
      dequantize_row_ref(view.kv_type, stored, values.data(), view.head_dim);
    return values[static_cast<size_t>(i)];
  }

 private:
  void store(uint8_t* row, const float* x) const {
    switch (view.kv_type) {
      case DType::f32: std::memcpy(row, x, static_cast<size_t>(view.head_dim) * 4); return;
      case DType::bf16: round_activations_bf16(x, row, view.head_dim); return;
      case DType::q8_0: quantize_activations_q8_0(x, row, view.head_dim); return;
      case DType::f8_e4m3:
        for (int j = 0; j < view.head_dim; ++j) row[j] = f32_to_e4m3(x[j]);
        return;
      default: round_activations_f16(x, row, view.head_dim); return;
    }
  }
};

}  // namespace infer::test
