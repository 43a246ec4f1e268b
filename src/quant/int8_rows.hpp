// INT8 with one scale per row (DType::i8_row): symmetric per-output-channel weights and dynamic
// per-token activations, the W8A8 scheme of vLLM / compressed-tensors ("int8 channel-wise
// weights, dynamic per-token activations"), in a row layout of libinfer's own.
//
// A row of n elements (n a multiple of 32) takes n + 8 bytes:
//
//   0      q    i8[n]    the quants
//   n      s    f32      the row's scale: x_i ~ s * q_i
//   n + 4  sum  i32      Σ q_i (what the VNNI kernels subtract after shifting the other operand
//                        to unsigned: Σ (a + 128) q = Σ a q + 128 Σ q)
//
// Weights (from_float, at load): s = max|w| / 127 (f32), q = round-half-even(w / s), so
// |w - s q| <= s / 2 up to the rounding of the f32 division; an all-zero row has s = 0, q = 0.
// Activations (from_float_activation, per call): s = max|x| / 127, q = round-half-even(x * (127 /
// max|x|)) clamped to [-127, 127], as vLLM's dynamic_scaled_int8_quant does (a product, not a
// division). Weights converted from a checkpoint keep its quants (-128 included) and scale.
//
// A dot of weight row w and activation row a (kernels/cpu/qdot.hpp) is
//   y = float(Σ_i qw_i qa_i) * (sw * sa)
// the integer sum exact in int32 (|Σ| <= n * 128 * 127 < 2^31 for n <= 2^17, checked at load), its
// conversion to f32 rounded to nearest even, then one f32 product with the rounded product of the
// scales: every ISA and every tiling gives the same bits.
#pragma once

#include <cstdint>
#include <span>

#include "infer/status.hpp"

namespace infer {

inline constexpr int64_t kI8RowBlock = 32;          // n must be a multiple of this
inline constexpr int64_t kI8RowMaxElements = 1 << 17;  // keeps every integer dot inside int32

// The online input rotation libinfer gives an INT8 W8A8 matrix of n columns (TensorInfo::
// input_rotation; --weight-type int8 and infer-quantize's int8 checkpoints alike): the largest power
// of two dividing n, at most 4096 (32 or more, n being a multiple of 32). The per-token
// quantization of a rotated activation row no longer takes its one scale from a few outlier
// channels: H spreads each over the block.
inline constexpr int32_t kI8MaxInputRotation = 4096;
inline constexpr int32_t i8_input_rotation(int64_t n) {
  const int64_t low = n & -n;
  return static_cast<int32_t>(low < kI8MaxInputRotation ? low : kI8MaxInputRotation);
}

// Bytes of a row of n elements (n + 8).
inline constexpr int64_t i8_row_bytes(int64_t n) { return n + 8; }

// Field access on a row of n elements.
inline float i8_row_scale(const void* row, int64_t n) noexcept;
inline int32_t i8_row_sum(const void* row, int64_t n) noexcept;
// Writes a row's scale and Σ q after its n quants.
void i8_row_store_trailer(void* row, int64_t n, float s, int32_t sum) noexcept;

// Weights: the per-channel quantizer above. Preconditions, asserted: n a multiple of 32, x finite.
void quantize_row_i8_row(const float* x, void* dst, int64_t n) noexcept;
// Activations: the per-token quantizer above (active ISA's variant; all give the same bytes).
void quantize_activations_i8_row(const float* x, void* dst, int64_t n) noexcept;
void quantize_activations_i8_row_ref(const float* x, void* dst, int64_t n) noexcept;
// dst[i] = s * q_i.
void dequantize_i8_row(const void* src, float* dst, int64_t n) noexcept;

// The compressed-tensors layout of an INT8 channel-wise weight: `weight` int8 [rows, n] (row
// major, as safetensors stores a [out, in] tensor) and `weight_scale` [rows, 1] (one scale per
// output channel) or a single scale (per tensor: rows == 1 in `scale`, applied to every row).
// Scales as f32 (F16 / BF16 checkpoints convert exactly first).
struct Int8ChannelWeight {
  std::span<const int8_t> weight;  // rows * n
  std::span<const float> scale;    // rows, or 1 (per tensor)
  int64_t rows = 0, n = 0;
};
// dst (rows * i8_row_bytes(n) bytes) <- the weight in i8_row layout: quants copied, scale stored,
// Σ q computed. Exact: to_compressed_int8() gives back the same quants and scales. Errors
// (invalid_argument): n not a multiple of 32 or above 2^17, spans of the wrong size, a scale
// that is not finite or negative.
Status i8_rows_from_compressed(const Int8ChannelWeight& w, void* dst);
// The reverse: rows of i8_row back to the compressed-tensors arrays (one scale per row).
void i8_rows_to_compressed(const void* src, int64_t rows, int64_t n, int8_t* weight, float* scale) noexcept;

inline float i8_row_scale(const void* row, int64_t n) noexcept {
  float s;
  __builtin_memcpy(&s, static_cast<const uint8_t*>(row) + n, 4);
  return s;
}
inline int32_t i8_row_sum(const void* row, int64_t n) noexcept {
  int32_t s;
  __builtin_memcpy(&s, static_cast<const uint8_t*>(row) + n + 4, 4);
  return s;
}

}  // namespace infer
