// AVX2 + FMA dot products (order documented in dot.hpp).
#include <immintrin.h>

#include "kernels/cpu/dot.hpp"

namespace infer {
namespace {

// Lanes j < count set: the zero-padded last group.
inline __m256i first_lanes(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as dot_f32_ref combines its partial sums.
inline float reduce(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l + (l + 4)
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                // lanes 0 + 2, 1 + 3
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));                             // lane 0 + 1
}

// The dots of RX x rows against RW weight rows: y[r][k] = dot(x[r], w[k]). The operations of one
// dot (which lane, which order) do not depend on RW or RX.
template <int RW, int RX>
inline void dot_tile(const float* const* x, const float* const* w, int64_t n, float* const* y) {
  __m256 acc[RX][RW];
  for (int r = 0; r < RX; ++r)
    for (int k = 0; k < RW; ++k) acc[r][k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xv[RX];
    for (int r = 0; r < RX; ++r) xv[r] = _mm256_loadu_ps(x[r] + i);
    for (int k = 0; k < RW; ++k) {
      const __m256 wv = _mm256_loadu_ps(w[k] + i);
      for (int r = 0; r < RX; ++r) acc[r][k] = _mm256_fmadd_ps(wv, xv[r], acc[r][k]);
    }
  }
  if (i < n) {
    const __m256i mask = first_lanes(n - i);
    __m256 xv[RX];
    for (int r = 0; r < RX; ++r) xv[r] = _mm256_maskload_ps(x[r] + i, mask);
    for (int k = 0; k < RW; ++k) {
      const __m256 wv = _mm256_maskload_ps(w[k] + i, mask);
      for (int r = 0; r < RX; ++r) acc[r][k] = _mm256_fmadd_ps(wv, xv[r], acc[r][k]);
    }
  }
  for (int r = 0; r < RX; ++r)
    for (int k = 0; k < RW; ++k) y[r][k] = reduce(acc[r][k]);
}

}  // namespace

float dot_f32_avx2(const float* a, const float* b, int64_t n) noexcept {
  float out;
  float* y[1] = {&out};
  dot_tile<1, 1>(&a, &b, n, y);
  return out;
}

void dot4_f32_avx2(const float* x, const float* const* w, int64_t n, float* y) noexcept {
  dot_tile<4, 1>(&x, w, n, &y);
}

void dot4x2_f32_avx2(const float* x0, const float* x1, const float* const* w, int64_t n, float* y0,
                     float* y1) noexcept {
  const float* x[2] = {x0, x1};
  float* y[2] = {y0, y1};
  dot_tile<4, 2>(x, w, n, y);
}

}  // namespace infer
