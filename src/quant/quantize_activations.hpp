// F32 activation rows to the types the quantized dot products take (block layouts in
// quant/block_formats.hpp; kernels/cpu/dtype_traits.hpp says which type meets which weight type), exactly as llama.cpp's CPU backend converts them on x86 with AVX2
// before a mul_mat (ggml-cpu: quantize_row_q8_0 / q8_1, which differ from ggml's reference
// quantizers; quantize_row_q8_K, which is the reference one; fp32_to_fp16 / fp32_to_bf16).
//
// Rounding, per type (u = the element, all arithmetic in float):
//   Q8_0   per 32: amax = max|x|; d = amax / 127 stored as F16 (nearest even);
//          q = round-half-even(x * (127 / amax)) (the multiplier is 127 / amax, not 1 / d)
//   Q8_1   as Q8_0, plus s = F16(d * Σq) with the unrounded F32 d
//   Q8_K   per 256: m = the first element of largest magnitude (signed); iscale = -127 / m;
//          q = min(127, round-half-even(iscale * x)), so m maps to -127; d = 1 / iscale as F32;
//          bsums = Σq per 16. An all-zero block gives d = 0, q = 0, bsums = 0.
//   F16 / BF16   each element rounded to nearest even
// The error of a quantized element is at most d / 2 (plus the F16 rounding of d for Q8_0 / Q8_1):
// x * (127 / amax) differs from x / d by at most a few float roundings, far below the half step.
//
// Preconditions, asserted: n >= 0 a multiple of the block size (32, 256; any for F16 / BF16);
// x finite; dst holds the row (dtype_row_bytes of the type).
#pragma once

#include <cstdint>

namespace infer {

void quantize_activations_q8_0(const float* x, void* dst, int64_t n) noexcept;
void quantize_activations_q8_1(const float* x, void* dst, int64_t n) noexcept;
void quantize_activations_q8_k(const float* x, void* dst, int64_t n) noexcept;
void round_activations_f16(const float* x, void* dst, int64_t n) noexcept;
void round_activations_bf16(const float* x, void* dst, int64_t n) noexcept;
// F32 activations (for F32 weights) are copied.
void copy_activations_f32(const float* x, void* dst, int64_t n) noexcept;

}  // namespace infer
