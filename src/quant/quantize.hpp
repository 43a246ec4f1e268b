// F32 rows to Q8_0 / Q4_0 with ggml's reference (round-to-nearest, no importance weights)
// quantizers: what llama-quantize writes for these types without an imatrix, byte for byte.
// Used for load-time quantization of F16/BF16/F32 weights.
//
// Preconditions, asserted: n >= 0 a multiple of 32; x finite; dst holds n / 32 blocks.
#pragma once

#include <cstdint>

namespace infer {

// Per block of 32: d = max|x| / 127, q = round-half-away(x / d); |x - d16*q| <= 0.5 d + 127 |d - d16|
// where d16 is d rounded to F16.
void quantize_row_q8_0_ref(const float* x, void* dst, int64_t n) noexcept;

// Per block of 32: d = -m / 8 where m is the element of largest magnitude (the first one on a
// tie), q = min(15, trunc(x / d + 8.5)), so m itself maps to q = 0 and the opposite extreme clips
// at q = 15 (error up to |d|); elsewhere the error is at most 0.5 |d| plus the F16 rounding of d.
void quantize_row_q4_0_ref(const float* x, void* dst, int64_t n) noexcept;

}  // namespace infer
