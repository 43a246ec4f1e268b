// Element-wise ops of the transformer block, over [cols, rows] F32 views. Each element's result
// depends on that element alone, so rows never influence each other.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.hpp"

namespace infer::ops {

// x += y (same shape).
Status add(Backend& be, const TensorView& x, const TensorView& y);
// x[r] += bias for every row (bias: F32 [cols]).
Status add_bias(Backend& be, const TensorView& x, const TensorView& bias);
// x *= s.
Status scale(Backend& be, const TensorView& x, float s);
// x = tanh(x / cap) * cap (Gemma's logit soft-capping).
Status softcap(Backend& be, const TensorView& x, float cap);

// Each row's blocks of `block` columns multiplied by H_block, the orthonormal Walsh-Hadamard
// matrix (kernels/cpu/hadamard.hpp's butterflies, the same bits on every ISA): the online input
// rotation of a linear layer whose weight was stored rotated (TensorInfo::input_rotation). `block`
// a power of two from 2 to kMaxInputRotation dividing the columns.
inline constexpr int kMaxInputRotation = 1 << 15;
Status hadamard(Backend& be, const TensorView& x, int block);

// The gated activations of the MLP: out = act(gate) * up, element-wise (out may be gate).
//   silu: gate / (1 + exp(-gate))                 (SwiGLU: Llama, Qwen, Phi-3)
//   gelu: GELU, tanh approximation, through ggml's F16 table (GeGLU: Gemma)
enum class Activation : uint8_t { silu, gelu };
Status glu(Backend& be, Activation act, const TensorView& gate, const TensorView& up, const TensorView& out);

// out row i = x row rows[i] (rows inside x, checked).
Status copy_rows(Backend& be, const TensorView& x, std::span<const int32_t> rows, const TensorView& out);

}  // namespace infer::ops
