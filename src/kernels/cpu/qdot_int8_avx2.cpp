// The INT8 row-scaled dot with AVX2 (quant/int8_rows.hpp states the arithmetic; bit-identical to
// qdot_i8_row_ref: the integer sum is exact). maddubs multiplies unsigned by signed bytes, so the
// weight's sign moves onto the activation: |w| * sign(w) a; a pair of products is at most
// 2 * 128 * 127 = 32512 and never saturates the int16 sum.
#include <immintrin.h>

#include <cassert>

#include "kernels/cpu/qdot.hpp"
#include "quant/int8_rows.hpp"

namespace infer {
namespace {

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// R activation rows (at a + r * as) against weight row w: the weight bytes are loaded once.
template <int R>
void rows_dot(const int8_t* w, float sw, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; i += 32) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    const __m256i wabs = _mm256_sign_epi8(wv, wv);
    for (int r = 0; r < R; ++r) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * as + i));
      const __m256i p = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(av, wv));
      acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p, ones));
    }
  }
  for (int r = 0; r < R; ++r)
    y[r * ys] = static_cast<float>(hsum(acc[r])) * (sw * i8_row_scale(a + r * as, n));
}

}  // namespace

void qdot_i8_row_avx2(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y,
                      int64_t y_stride) noexcept {
  assert(n >= 0 && n % kI8RowBlock == 0);
  const auto* qw = static_cast<const int8_t*>(w);
  const float sw = i8_row_scale(w, n);
  const auto* ab = static_cast<const uint8_t*>(a);
  int64_t r = 0;
  for (; r + 4 <= n_a; r += 4) rows_dot<4>(qw, sw, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
  for (; r < n_a; ++r) rows_dot<1>(qw, sw, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
}

}  // namespace infer
