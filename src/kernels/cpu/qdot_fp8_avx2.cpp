// The FP8 E4M3 weight-only dot with AVX2 + F16C (arithmetic in quant/fp8_rows.hpp; bit-identical to
// qdot_f8_row_ref). An e4m3fn code is an F16 value scaled by 2^-8: sign to bit 15, the other seven
// bits to bits 13-7 (exponent bias 7 against 15, subnormals included); F16C widens it and a
// product by 256 restores the value exactly. Lanes 0-7 in one register, 8-15 in another. INT8
// weight-only rows (W8A16) widen their codes to int32 and convert them, exactly.
#include <immintrin.h>

#include <cassert>

#include "kernels/cpu/qdot.hpp"
#include "quant/fp8_rows.hpp"

namespace infer {
namespace {

enum class Codes { e4m3, i8 };

template <Codes kCodes>
inline __m256 decode8(const uint8_t* q) {
  if constexpr (kCodes == Codes::i8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
  } else {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
    const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8),
                                   _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7F)), 7));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
  }
}

inline float finish(__m256 lo, __m256 hi, float s) {
  const __m256 t = _mm256_add_ps(lo, hi);
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return (_mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1))) * s;
}

template <Codes kCodes, int R>
void rows_dot(const uint8_t* q, const float* s, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m256 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m256 w0 = decode8<kCodes>(q + i), w1 = decode8<kCodes>(q + i + 8);
    for (int r = 0; r < R; ++r) {
      const auto* x = reinterpret_cast<const float*>(a + r * as) + i;
      lo[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), lo[r]);
      hi[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r * ys] = finish(lo[r], hi[r], s[r]);
}

// The row's scale (weight-only), or its product with each activation row's (W8A8).
template <bool kW8A8, Codes kCodes = Codes::e4m3>
void dot(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  assert(n >= 0 && n % kF8RowBlock == 0);
  const auto* q = static_cast<const uint8_t*>(w);
  const float sw = f8_row_scale(w, n);
  const auto* ab = static_cast<const uint8_t*>(a);
  const auto scale = [&](int64_t r) { return kW8A8 ? sw * f8_act_scale(ab + r * a_stride, n) : sw; };
  by_fours(n_a, [&]<int R>(int64_t r) {
    float s[R];
    for (int k = 0; k < R; ++k) s[k] = scale(r + k);
    rows_dot<kCodes, R>(q, s, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
  });
}

}  // namespace

void qdot_f8_row_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<false>(w, a, as, n_a, n, y, ys);
}
void qdot_f8_w8a8_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<true>(w, a, as, n_a, n, y, ys);
}
void qdot_i8_w8a16_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<false, Codes::i8>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
