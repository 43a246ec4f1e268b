// The element-wise kernels for AVX2 (core/isa_variants.hpp), and gelu_mul_avx2, the AVX2 + F16C
// twin of gelu_mul_ref.
#define INFER_ISA_NS isa_avx2
#include "kernels/cpu/ops_impl.hpp"

#include <immintrin.h>

namespace infer {

void gelu_mul_avx2(const float* g, const float* u, float* y, int64_t n) noexcept {
  const uint16_t* table = gelu_f16_table();
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i), up = _mm256_loadu_ps(u + i);
    // x rounded to f16 (to nearest even, as f32_to_f16), the table entry, back to float.
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    const __m256i word = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), h, 2);
    const __m256i low16 = _mm256_and_si256(word, _mm256_set1_epi32(0xFFFF));
    const __m128i gelu16 = _mm_packus_epi32(_mm256_castsi256_si128(low16), _mm256_extracti128_si256(low16, 1));
    __m256 r = _mm256_mul_ps(_mm256_cvtph_ps(gelu16), up);
    r = _mm256_blendv_ps(r, _mm256_mul_ps(x, up), _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
    r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
    _mm256_storeu_ps(y + i, r);
  }
  gelu_mul_ref(g + i, u + i, y + i, n - i);
}

}  // namespace infer
