// Weight rows to F32: every type llama-quantize's usual presets produce (block layouts in
// quant/block_formats.hpp).
//
// dequantize_row_ref is the scalar reference; dequantize_row runs the variant for active_isa()
// and gives bit-identical results (each element is the same float operations in the same order,
// never fused). Preconditions, asserted: can_dequantize(t), n >= 0 a multiple of the type's block
// size, src holds n elements' worth of blocks, dst holds n floats.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace infer {

// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
bool can_dequantize(DType t) noexcept;

void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n) noexcept;
void dequantize_row(DType t, const void* src, float* dst, int64_t n) noexcept;

// The AVX2 + FMA + F16C variant (same contract); call only when the CPU has them.
void dequantize_row_avx2(DType t, const void* src, float* dst, int64_t n) noexcept;

}  // namespace infer
