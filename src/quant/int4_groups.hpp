// INT4 weights in groups along the row (DType::i4_g32, i4_g64, i4_g128): the W4A16 scheme of
// compressed-tensors / vLLM ("pack-quantized", 4-bit int weights, one scale and zero point per
// group of G input columns, activations kept in float), in a block layout of libinfer's own.
//
// A block holds one group of G elements (G = 32, 64 or 128) in G / 2 + 8 bytes:
//
//   0   d    f32          the group's scale
//   4   z    f32          its zero point, an integer in [0, 15] (8 for symmetric weights)
//   8   qs   u8[G / 2]    the codes q_i in [0, 15]: w_i = d * (q_i - z)
//
// Within each run of 32 elements (c = 0, 1, ...), byte qs[16c + k] holds element 32c + k in its
// low nibble and element 32c + 16 + k in its high nibble (Q4_0's order: a SIMD register of bytes
// gives 16 or 32 consecutive elements with one mask or one shift).
//
// compressed-tensors stores the signed value v = q - 8 in [-8, 7] and the zero point zp = z - 8,
// both packed eight to an int32 (weight_packed [rows, n / 8]; weight_zero_point packed along the
// rows, [ceil(rows / 8), groups]), and dequantizes (v - zp) * scale: the same numbers.
//
// A dot of weight row w with an F32 activation row x (kernels/cpu/qdot.hpp) runs, lane l = i mod 16
// (i ascending):
//   per group b:   a_l = 0;  a_l = fma(float(q_i) - z_b, x_i, a_l) for i in the group
//                  acc_l = fma(a_l, d_b, acc_l)
// then the fixed tree t_l = acc_l + acc_{l+8} (l < 8), u_l = t_l + t_{l+4} (l < 4),
// v_l = u_l + u_{l+2} (l < 2), y = v_0 + v_1. float(q_i) - z_b is exact; every variant runs
// exactly these steps and gives the same bits.
//
// Quantizer (from_float and the checkpoint writer): per group, a search over candidate scales for
// the least squared error Σ imp_i (w_i - d (q_i - z))^2, with imp_i = 1 or an importance matrix's
// E[x_i^2] (quantize_groups_i4 below); each candidate's scale is refined by least squares on its
// codes, then rounded to the storage precision of the scale and the codes re-chosen for it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/dtype.hpp"
#include "infer/status.hpp"

namespace infer {

inline constexpr int64_t kI4RunElements = 32;

// The group size of an INT4 type (32, 64, 128), or 0 for any other type.
constexpr int64_t i4_group_size(DType t) noexcept {
  return t == DType::i4_g32 ? 32 : t == DType::i4_g64 ? 64 : t == DType::i4_g128 ? 128 : 0;
}
// The INT4 type of a group size, or nullopt.
std::optional<DType> i4_type_of_group(int64_t group) noexcept;
constexpr int64_t i4_block_bytes(int64_t group) noexcept { return group / 2 + 8; }

// How the scale is stored where the weights go (a checkpoint's scale dtype): the quantizer rounds
// each scale to it before it picks the codes.
enum class ScalePrecision { f32, f16, bf16 };

struct I4QuantOptions {
  int64_t group = 128;
  bool symmetric = true;                          // z = 8 in every group
  const float* importance = nullptr;              // n weights per column (E[x_j^2]); nullptr: uniform
  ScalePrecision scale_precision = ScalePrecision::f32;
};

// One row of n floats (n a multiple of o.group, x finite) into n / group blocks at dst.
void quantize_row_i4(const float* x, void* dst, int64_t n, const I4QuantOptions& o) noexcept;
// The squared error Σ imp_j (x_j - deq_j)^2 of a row quantized so (the quantizer's objective),
// without writing it: what AWQ's scale search evaluates.
double i4_row_error(const float* x, int64_t n, const I4QuantOptions& o) noexcept;

// The quantizer's pieces, for GPTQ (quant/gptq.hpp): a group's (d, z) as quantize_row_i4 chooses
// them (d = 0 for an all-zero group), with the objective's value on the group, and a value's code
// for them.
struct I4Group {
  float d = 0.0f, z = 8.0f;
  double err = 0.0;
};
I4Group i4_choose_group(const float* x, const float* importance, int64_t g, bool symmetric, ScalePrecision p) noexcept;
// Its scalar twin (i4_choose_group runs four values at a time where the baseline has SSE2): the
// same bits.
I4Group i4_choose_group_ref(const float* x, const float* importance, int64_t g, bool symmetric, ScalePrecision p) noexcept;
int i4_code(float x, I4Group grp) noexcept;
// Writes block b (g values' codes for grp, in the block layout) of a row at dst.
void i4_store_block(void* dst, int64_t g, int64_t b, I4Group grp, const float* x) noexcept;

// from_float of the three types: symmetric, uniform importance, f32 scales.
void quantize_row_i4_g32(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_i4_g64(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_i4_g128(const float* x, void* dst, int64_t n) noexcept;
// dst[i] = d * (q_i - z), one f32 product.
void dequantize_i4_g32(const void* src, float* dst, int64_t n) noexcept;
void dequantize_i4_g64(const void* src, float* dst, int64_t n) noexcept;
void dequantize_i4_g128(const void* src, float* dst, int64_t n) noexcept;

// compressed-tensors' pack-quantized INT4 weight, unpacked: the signed values v = q - 8 in
// [-8, 7] as int8 [rows, n] (row major), scales as f32 [rows, n / group], zero points as int8
// [rows, n / group] (zp in [-8, 7]; empty: symmetric). `group` may be any multiple of the type's
// group that divides n (a group of 256, or one per row, repeats its scale over 128-element blocks).
struct Int4GroupWeight {
  std::span<const int8_t> values;
  std::span<const float> scale;
  std::span<const int8_t> zero_point;
  int64_t rows = 0, n = 0, group = 0;
};
// dst (rows * n / G blocks of the type with group G) <- the weight, exactly. Errors
// (invalid_argument): sizes that disagree, G not dividing the group, a value or zero point
// outside [-8, 7], a scale negative or not finite.
Status i4_rows_from_compressed(const Int4GroupWeight& w, DType type, void* dst);
// The reverse, for one row of the type: values (n), scale and zero point (n / G each).
void i4_row_to_compressed(const void* src, DType type, int64_t n, int8_t* values, float* scale, int8_t* zero_point) noexcept;

// The int32 words of compressed-tensors' pack_to_int32 (4 bits, element i at bits 4 (i mod 8) of
// word i / 8, stored as v + 8) and back. n a multiple of 8.
void pack_int4_words(const int8_t* values, int64_t n, int32_t* words) noexcept;
void unpack_int4_words(const int32_t* words, int64_t n, int8_t* values) noexcept;

}  // namespace infer
