// F32 dot products in a fixed summation order that depends only on n: the same inputs give the
// same bits on every call, whatever else runs (the batch-invariance invariant rests on this).
//
//   dot_f32_ref    partial sums s[i % 8] += a[i] * b[i] (multiply, then add) in increasing i,
//                  then ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)).
//   dot_f32_avx2   the same 8 partial sums, each updated with a fused multiply-add (one rounding
//                  instead of two), 8 elements per step; a last partial group is zero-padded; the
//                  same tree.
//
// The two differ only by the fusing, so scalar and AVX2 results may differ in the last bits; each
// is deterministic. The tile variants compute several dots at once, each result bit-identical to
// the single dot of the same ISA: they only share loads and hide the FMA latency (a single dot is
// one dependency chain; a 4 x 2 tile runs eight).
#pragma once

#include <cstdint>

namespace infer {

float dot_f32_ref(const float* a, const float* b, int64_t n) noexcept;
// y[k] = dot(x, w[k]) for k < 4.
void dot4_f32_ref(const float* x, const float* const* w, int64_t n, float* y) noexcept;
// y0[k] = dot(x0, w[k]), y1[k] = dot(x1, w[k]) for k < 4.
void dot4x2_f32_ref(const float* x0, const float* x1, const float* const* w, int64_t n, float* y0,
                    float* y1) noexcept;

// Call only when the CPU has AVX2 and FMA.
float dot_f32_avx2(const float* a, const float* b, int64_t n) noexcept;
void dot4_f32_avx2(const float* x, const float* const* w, int64_t n, float* y) noexcept;
void dot4x2_f32_avx2(const float* x0, const float* x1, const float* const* w, int64_t n, float* y0,
                     float* y1) noexcept;

// The variant for active_isa().
float dot_f32(const float* a, const float* b, int64_t n) noexcept;

}  // namespace infer
