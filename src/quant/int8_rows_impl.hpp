// The per-token INT8 activation quantizer (quant/int8_rows.hpp) with AVX2 intrinsics, compiled for
// AVX2 and for AVX-512 (core/isa_variants.hpp): included by int8_rows_{avx2,avx512}.cpp inside
// namespace infer::INFER_ISA_NS. Same bytes as quantize_activations_i8_row_ref: max|x| is exact in
// any order, x * id is one rounded product, and cvtps rounds half to even as nearbyint does. No
// include guard.
#include <immintrin.h>

#include <cassert>
#include <cstring>

#include "quant/int8_rows.hpp"

namespace infer::INFER_ISA_NS {

void quantize_activations_i8_row(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kI8RowBlock == 0);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float amax = _mm_cvtss_f32(h);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  auto* q = static_cast<int8_t*>(dst);
  __m256i sums = _mm256_setzero_si256();
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = 0; i < n; i += 32) {
    const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), id));
    const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), id));
    const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), id));
    const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), id));
    sums = _mm256_add_epi32(sums, _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d)));
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm256_permutevar8x32_epi32(bytes, order));
  }
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  const float scale = amax / 127.0f;
  const int32_t sum = _mm_cvtsi128_si32(s);
  std::memcpy(q + n, &scale, 4);
  std::memcpy(q + n + 4, &sum, 4);
}

}  // namespace infer::INFER_ISA_NS
