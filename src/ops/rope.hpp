// Rotary position embeddings, in two steps: a table of cos/sin per row (one per position, shared
// by every layer that rotates alike), then the rotation of Q or K heads by it.
//
//   norm style (Llama): rotates adjacent pairs (x[2i], x[2i+1])
//   neox style (Gemma, Qwen, Phi-3): rotates (x[i], x[i + n_rot/2])
//
// Angles as llama.cpp computes them: theta_i = pos * freq_scale / factor_i * base^(-2i/n_rot), the
// power built by repeated float multiplication.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.hpp"

namespace infer::ops {

enum class RopeStyle : uint8_t { norm, neox };

struct RopeSpec {
  int n_rot = 0;                        // rotated dimensions of each head (even, <= head size)
  float base = 10000.0f;
  float freq_scale = 1.0f;              // 1 / linear scaling factor
  const float* freq_factors = nullptr;  // n_rot/2 per-pair divisors (Llama 3, Phi-3 long context), or null
};

// table: [n_rot, positions.size()] (row r: cos0, sin0, cos1, sin1, ... for positions[r]).
Status rope_table(Backend& be, const RopeSpec& spec, std::span<const int32_t> positions, const TensorView& table);
// Rotates the first n_rot dimensions of each head of every row of x ([n_heads * head_dim, rows])
// by the table's row of the same index.
Status rope(Backend& be, const TensorView& x, int n_heads, int head_dim, int n_rot, RopeStyle style, const TensorView& table);

}  // namespace infer::ops
