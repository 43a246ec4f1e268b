// Weight rows to F32, one function per type and ISA: every type llama-quantize's usual presets
// produce (block layouts in quant/block_formats.hpp). kernels/cpu/dtype_traits.hpp picks the one
// for a DType and the active ISA.
//
// The _ref functions are the scalar reference; the _avx2 ones (AVX2 + FMA + F16C: call them only
// when the CPU has them) give bit-identical results (each element is the same float operations in
// the same order, never fused). Preconditions, asserted: n >= 0 a multiple of the type's block
// size, src holds n elements' worth of blocks, dst holds n floats.
#pragma once

#include <cstdint>

namespace infer {

// F32 rows are copied (every ISA).
void dequantize_f32(const void* src, float* dst, int64_t n) noexcept;

void dequantize_f16_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_bf16_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q4_0_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q4_1_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q5_0_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q5_1_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q8_0_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q2_k_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q3_k_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q4_k_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q5_k_ref(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q6_k_ref(const void* src, float* dst, int64_t n) noexcept;

void dequantize_f16_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_bf16_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q4_0_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q4_1_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q5_0_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q5_1_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q8_0_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q2_k_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q3_k_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q4_k_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q5_k_avx2(const void* src, float* dst, int64_t n) noexcept;
void dequantize_q6_k_avx2(const void* src, float* dst, int64_t n) noexcept;

}  // namespace infer
