// FP8 E4M3 weights with one f32 scale per row (DType::f8_row: per output channel) or one per
// matrix (DType::f8_tensor: the same rows, every row carrying the matrix's scale), weight-only:
// activations stay F32 (or FP8 as well: DType::f8_w8a8, below). The OCP "e4m3fn" encoding, as torch.float8_e4m3fn and compressed-tensors
// store it:
//
//   bit 7 sign, bits 6-3 exponent (bias 7), bits 2-0 mantissa
//   exponent 0: subnormal m * 2^-9;  else (1 + m/8) * 2^(e-7);  S.1111.111 is NaN (no infinities)
//   largest finite 448 (0x7E), smallest subnormal 2^-9
//
// A row of n elements (n a multiple of 32) takes n + 8 bytes:
//
//   0      q      u8[n]   the e4m3 codes
//   n      s      f32     the scale: x_i ~ s * e4m3(q_i)
//   n + 4  zero   u32     reserved, 0 (the trailer has I8_ROW's size)
//
// Quantizer: s = max|w| / 448 (per row, or over the whole matrix), q = e4m3(w / s) rounded to
// nearest, ties to the even code, saturating at ±448 (what torch's clamp to ±448 then
// .to(float8_e4m3fn) gives). The CPU has no FP8 arithmetic: a dot of weight row q (scale s) with
// an F32 activation row x decodes each code exactly (a 256-entry table, or its F16 bits) and
// computes, lane l = i mod 16 (i ascending), fused:
//   acc_l = fma(e4m3(q_i), x_i, acc_l)
// then the fixed tree t_l = acc_l + acc_{l+8} (l < 8), u_l = t_l + t_{l+4} (l < 4),
// v_l = u_l + u_{l+2} (l < 2), y = (v_0 + v_1) * s. Every variant runs exactly these steps.
//
// W8A8-FP8 (DType::f8_w8a8, what vLLM computes for FP8_DYNAMIC checkpoints on FP8 hardware): the
// activations are quantized per token at each matmul, s_a = max|x| / 448 (f32), codes
// e4m3(x_i / s_a) (the weights' rounding); an all-zero row has s_a = 0 and codes 0. An activation
// row (DType::f8_act) holds the codes decoded, n f32 values e4m3(q_i), then s_a and 4 zero bytes
// (4n + 8 bytes): decoded once per row and call, not once per weight row. The dot is the
// weight-only one on those values, scaled by the rounded product of the two scales:
//   y = (v_0 + v_1) * (s * s_a)
// every product e4m3 x e4m3 is exact in f32 (4 + 4 significant bits), the sums round as above.
#pragma once

#include <cstdint>
#include <span>

#include "infer/status.hpp"

namespace infer {

inline constexpr int64_t kF8RowBlock = 32;

// The value of an e4m3fn code (NaN for 0x7F / 0xFF).
float e4m3_to_f32(uint8_t code) noexcept;
// v (finite) to the nearest e4m3fn code, ties to the even code, saturating at ±448.
uint8_t f32_to_e4m3(float v) noexcept;

// Weights, per row (DType::f8_row). Precondition: n a multiple of 32, x finite.
void quantize_row_f8_row(const float* x, void* dst, int64_t n) noexcept;
// One row with a given scale (the per-tensor conversion: s = max|W| / 448 over the matrix).
void quantize_row_f8_scaled(const float* x, void* dst, int64_t n, float scale) noexcept;
// Writes a row's trailer after its n codes: the scale, then 4 zero bytes.
void f8_row_store_trailer(void* row, int64_t n, float s) noexcept;
// Activations of W8A8-FP8 (DType::f8_act), per token as above. Precondition: n a multiple of 32.
void quantize_activations_f8(const float* x, void* dst, int64_t n) noexcept;
inline float f8_act_scale(const void* row, int64_t n) noexcept {
  float s;
  __builtin_memcpy(&s, static_cast<const uint8_t*>(row) + 4 * n, 4);
  return s;
}
// dst[i] = s * e4m3(q_i) (one f32 rounding).
void dequantize_f8_row(const void* src, float* dst, int64_t n) noexcept;
inline float f8_row_scale(const void* row, int64_t n) noexcept {
  float s;
  __builtin_memcpy(&s, static_cast<const uint8_t*>(row) + n, 4);
  return s;
}

// compressed-tensors' FP8 weight: `weight` float8_e4m3fn [rows, n] (its codes) and `weight_scale`
// [rows, 1] (per channel) or one scale (per tensor), as f32. dst: rows * (n + 8) bytes. Errors
// (invalid_argument): n not a positive multiple of 32, spans of the wrong size, a NaN code, a
// scale negative or not finite.
struct Fp8Weight {
  std::span<const uint8_t> weight;
  std::span<const float> scale;
  int64_t rows = 0, n = 0;
};
Status f8_rows_from_compressed(const Fp8Weight& w, void* dst);
// The reverse (one scale per row).
void f8_rows_to_compressed(const void* src, int64_t rows, int64_t n, uint8_t* weight, float* scale) noexcept;

}  // namespace infer
