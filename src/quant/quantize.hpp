// F32 rows to the GGUF weight types with ggml's reference quantizers (no importance weights):
// what llama-quantize writes for these types without an imatrix, byte for byte. Used by load-time
// quantization and by infer-quantize.
//
// Byte identity needs ggml's float arithmetic operation for operation: the same order, no fused
// multiply-add (llama.cpp compiles ggml-quants.c for baseline x86-64, and we build with
// -ffp-contract=off), ties to even where ggml rounds with its float trick.
//
// Preconditions, asserted: n >= 0 a multiple of the type's block size (32, or 256 for the
// K-quants); x finite; dst holds n / block_size blocks.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace infer {

// Per block of 32: d = max|x| / 127, q = round-half-away(x / d); |x - d16*q| <= 0.5 d + 127 |d - d16|
// where d16 is d rounded to F16.
void quantize_row_q8_0_ref(const float* x, void* dst, int64_t n) noexcept;

// Per block of 32: d = -m / 8 where m is the element of largest magnitude (the first one on a
// tie), q = min(15, trunc(x / d + 8.5)), so m itself maps to q = 0 and the opposite extreme clips
// at q = 15 (error up to |d|); elsewhere the error is at most 0.5 |d| plus the F16 rounding of d.
void quantize_row_q4_0_ref(const float* x, void* dst, int64_t n) noexcept;

// Per block of 32: m = min x, d = (max - min) / 15, q = min(15, trunc((x - m) / d + 0.5)).
void quantize_row_q4_1_ref(const float* x, void* dst, int64_t n) noexcept;

// As Q4_0 with 5 bits: d = -m / 16, q = min(31, trunc(x / d + 16.5)).
void quantize_row_q5_0_ref(const float* x, void* dst, int64_t n) noexcept;

// As Q4_1 with 5 bits: d = (max - min) / 31, q = trunc((x - m) / d + 0.5).
void quantize_row_q5_1_ref(const float* x, void* dst, int64_t n) noexcept;

// K-quants (quantize_kquants.cpp): per sub-block a scale (and a min) fitted by a small search
// that minimizes a weighted squared (Q2_K: absolute) error, the sub-block scales quantized to 4
// or 6 bits against F16 super-block factors, then every element re-rounded against the stored
// scales. The round trip error of an element is at most about half its sub-block's stored step,
// plus clipping where a fitted scale is smaller than the range needs.
void quantize_row_q2_k_ref(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_q3_k_ref(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_q4_k_ref(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_q5_k_ref(const float* x, void* dst, int64_t n) noexcept;
void quantize_row_q6_k_ref(const float* x, void* dst, int64_t n) noexcept;

// With importance weights qw (one per element of the row, llama-quantize --imatrix: the imatrix
// column importance, src/quant/imatrix.hpp), as ggml's quantize_row_*_impl: each group's fit
// minimizes the error weighted by qw · sqrt(sigma² + x²) (sigma² the row's or super-block's mean
// square; Q6_K by qw alone), and the K-quants' sub-block scales and mins are fitted under their
// summed weights. n is one row (the 32-block types weigh by the whole row's mean square).
void quantize_row_q4_0_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q4_1_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q5_0_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q5_1_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q2_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q3_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q4_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q5_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;
void quantize_row_q6_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept;

// The quantizer of `type` that reads importance weights, or null where ggml ignores them (Q8_0)
// or the type is not quantized (F32, F16, BF16).
using RowQuantizerWeighted = void (*)(const float* x, void* dst, int64_t n, const float* qw) noexcept;
RowQuantizerWeighted weighted_quantizer(DType type) noexcept;

}  // namespace infer
