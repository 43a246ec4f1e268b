// Force-included (-include) into the *_avxvnni.cpp kernel files where INFER_EMULATED_ISA_TESTS
// compiles them once more for AVX2 + FMA + F16C (cmake/emulated_isa/avx512.h says why): AVX-VNNI's
// two instructions, written from Intel's definitions with AVX2 operations, exactly (each 32-bit
// lane adds its products to acc without saturating, wrapping as they do).
#pragma once
#include <immintrin.h>

// acc + Σ over each 4-byte lane of u * s (u unsigned bytes, s signed), wrapping: bytes 0 and 2 of
// each lane, then 1 and 3, widened to words, whose two products vpmaddwd adds exactly.
static inline __m256i infer_emu_dpbusd_avx_epi32(__m256i acc, __m256i u, __m256i s) {
  const __m256i u_even = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF)), u_odd = _mm256_srli_epi16(u, 8);
  const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), s_odd = _mm256_srai_epi16(s, 8);
  return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd)));
}
// acc + Σ over each lane's 2 words of a * b (signed), wrapping. vpmaddwd's only overflow (both
// pairs -32768 * -32768) gives 0x80000000, as the wrapped sum does.
static inline __m256i infer_emu_dpwssd_avx_epi32(__m256i acc, __m256i a, __m256i b) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#define _mm256_dpbusd_avx_epi32(acc, u, s) infer_emu_dpbusd_avx_epi32((acc), (u), (s))
#define _mm256_dpwssd_avx_epi32(acc, a, b) infer_emu_dpwssd_avx_epi32((acc), (a), (b))
#define __AVXVNNI__ 1
