// The FP8 E4M3 weight-only dot with AVX-512 (arithmetic in quant/fp8_rows.hpp; bit-identical to
// qdot_f8_row_ref): the 16 lanes in one register, codes decoded through their F16 bits as in
// qdot_fp8_avx2.cpp, 4 activation rows per pass over the weight row (prefill reuses each decode).
#include "kernels/cpu/qgemm_avx512_util.hpp"

#include <cassert>

#include "kernels/cpu/qdot.hpp"
#include "quant/fp8_rows.hpp"

namespace infer {
namespace {

inline __m512 decode16(const uint8_t* q) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8),
                                    _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7));
  return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
}

inline float finish(__m512 acc, float s) {
  const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return (_mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1))) * s;
}

template <int R>
void rows_dot(const uint8_t* q, const float* s, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 wv = decode16(q + i);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(reinterpret_cast<const float*>(a + r * as) + i), acc[r]);
  }
  for (int r = 0; r < R; ++r) y[r * ys] = finish(acc[r], s[r]);
}

// The row's scale (weight-only), or its product with each activation row's (W8A8).
template <bool kW8A8>
void dot(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  assert(n >= 0 && n % kF8RowBlock == 0);
  const auto* q = static_cast<const uint8_t*>(w);
  const float sw = f8_row_scale(w, n);
  const auto* ab = static_cast<const uint8_t*>(a);
  const auto scale = [&](int64_t r) { return kW8A8 ? sw * f8_act_scale(ab + r * a_stride, n) : sw; };
  by_fours(n_a, [&]<int R>(int64_t r) {
    float s[R];
    for (int k = 0; k < R; ++k) s[k] = scale(r + k);
    rows_dot<R>(q, s, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
  });
}

}  // namespace

void qdot_f8_row_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<false>(w, a, as, n_a, n, y, ys);
}
void qdot_f8_w8a8_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<true>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
