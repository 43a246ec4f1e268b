// INT8 weights in groups along the row (DType::i8_g32, i8_g64, i8_g128): compressed-tensors'
// W8A16 preset as llm-compressor writes it today ("pack-quantized", 8-bit symmetric int weights,
// one scale per group of G input columns, activations kept in float), in a block layout of
// libinfer's own. (The per-channel W8A16 of older presets is DType::i8_w8a16, quant/int8_rows.hpp.)
//
// A block holds one group of G elements (G = 32, 64 or 128) in G + 4 bytes:
//
//   0   d    f32        the group's scale
//   4   qs   i8[G]      the codes q_i in [-128, 127]: w_i = d * q_i
//
// A dot of weight row w with an F32 activation row x (kernels/cpu/qdot.hpp) runs the INT4 groups'
// steps (quant/int4_groups.hpp) with q_i in place of q_i - z, lane l = i mod 16 (i ascending):
//   per group b:   a_l = 0;  a_l = fma(float(q_i), x_i, a_l) for i in the group
//                  acc_l = fma(a_l, d_b, acc_l)
// then the fixed tree t_l = acc_l + acc_{l+8} (l < 8), u_l = t_l + t_{l+4} (l < 4),
// v_l = u_l + u_{l+2} (l < 2), y = v_0 + v_1. Every variant runs exactly these steps: the same bits.
//
// Quantizer (from_float and infer-quantize's w8a16 --group): per group d = max|w| / 127 (f32, then
// rounded to the checkpoint's scale precision), q = round-half-even(w / d) clamped to [-127, 127],
// an all-zero group d = 0, q = 0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/dtype.hpp"
#include "quant/int4_groups.hpp"  // ScalePrecision
#include "infer/status.hpp"

namespace infer {

// The group size of an INT8 group type (32, 64, 128), or 0 for any other type.
constexpr int64_t i8_group_size(DType t) noexcept {
  return t == DType::i8_g32 ? 32 : t == DType::i8_g64 ? 64 : t == DType::i8_g128 ? 128 : 0;
}
// The INT8 group type of a group size, or nullopt.
std::optional<DType> i8_type_of_group(int64_t group) noexcept;
constexpr int64_t i8_block_bytes(int64_t group) noexcept { return group + 4; }

// One row of n floats (n a multiple of group, x finite) into n / group blocks at dst, each group's
// scale rounded to `p` (where the checkpoint stores it) before its codes are picked: the codes
// are the nearest for the stored scale.
void quantize_row_i8_groups(const float* x, void* dst, int64_t n, int64_t group, ScalePrecision p) noexcept;
// A group's scale as that quantizer picks it (max|x| / 127, rounded to p) and a value's code for it.
float i8_group_scale(const float* x, int64_t group, ScalePrecision p) noexcept;
int8_t i8_code(float x, float d) noexcept;

void quantize_row_i8_g32(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_i8_g64(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_i8_g128(const float* x, void* dst, int64_t n) noexcept;
// dst[i] = d * q_i, one f32 product.
void dequantize_i8_g32(const void* src, float* dst, int64_t n) noexcept;
void dequantize_i8_g64(const void* src, float* dst, int64_t n) noexcept;
void dequantize_i8_g128(const void* src, float* dst, int64_t n) noexcept;

// compressed-tensors' pack-quantized 8-bit group weight, unpacked: values int8 [rows, n] (row
// major), scales f32 [rows, n / group]. `group` may be any multiple of the type's group that
// divides n (a group of 256, or one per row, repeats its scale over 128-element blocks).
struct Int8GroupWeight {
  std::span<const int8_t> values;
  std::span<const float> scale;
  int64_t rows = 0, n = 0, group = 0;
};
// dst (rows * n / G blocks of the type with group G) <- the weight, exactly. Errors
// (invalid_argument): sizes that disagree, G not dividing the group, a scale negative or not finite.
Status i8_groups_from_compressed(const Int8GroupWeight& w, DType type, void* dst);

}  // namespace infer
