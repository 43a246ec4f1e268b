// Force-included (-include) into the *_avx512.cpp kernel files where INFER_EMULATED_ISA_TESTS
// compiles them once more for AVX2 + FMA + F16C (src/CMakeLists.txt): SIMDe (Debian's
// libsimde-dev) implements the AVX-512 intrinsics in portable code under their own names, and the
// ones SIMDe 0.7.4 lacks are written below from Intel's definitions, each exact (integer
// operations, conversions that are exact or round to nearest as the instruction does, masked
// loads that touch only the selected bytes). The kernels then run, slowly, on a CPU without
// AVX-512, so that their tests compare them with the scalar reference there too
// (infer-emulated-isa-tests, tests/unit/CMakeLists.txt). Never part of the library.
// SIMDe takes GCC's own __m512 types (immintrin.h declares them whatever the flags) as its own.
#pragma once
#include <immintrin.h>
#include <string.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

typedef int infer_emu_v16si __attribute__((vector_size(64)));
typedef float infer_emu_v16sf __attribute__((vector_size(64)));
typedef double infer_emu_v8df __attribute__((vector_size(64)));
typedef short infer_emu_v32hi __attribute__((vector_size(64)));
typedef short infer_emu_v16hi __attribute__((vector_size(32)));
typedef unsigned short infer_emu_v16hu __attribute__((vector_size(32)));
typedef unsigned char infer_emu_v32qu __attribute__((vector_size(32)));
typedef float infer_emu_v8sf __attribute__((vector_size(32)));
typedef signed char infer_emu_v16qs __attribute__((vector_size(16)));
typedef unsigned char infer_emu_v16qu __attribute__((vector_size(16)));

static inline __m512 infer_emu_cvtepi32_ps(__m512i a) {
  return (__m512)__builtin_convertvector((infer_emu_v16si)a, infer_emu_v16sf);
}
static inline __m512i infer_emu_srai_epi32(__m512i a, unsigned imm) {
  return (__m512i)((infer_emu_v16si)a >> (int)(imm > 31 ? 31 : imm));
}
static inline __m512i infer_emu_cvtepi8_epi32(__m128i a) {
  return (__m512i)__builtin_convertvector((infer_emu_v16qs)a, infer_emu_v16si);
}
static inline __m512i infer_emu_cvtepu8_epi32(__m128i a) {
  return (__m512i)__builtin_convertvector((infer_emu_v16qu)a, infer_emu_v16si);
}
static inline __m512i infer_emu_cvtepu16_epi32(__m256i a) {
  return (__m512i)__builtin_convertvector((infer_emu_v16hu)a, infer_emu_v16si);
}
static inline __m512i infer_emu_cvtepu8_epi16(__m256i a) {
  return (__m512i)__builtin_convertvector((infer_emu_v32qu)a, infer_emu_v32hi);
}
static inline __m256i infer_emu_cvtepi32_epi16(__m512i a) {  // truncates, as vpmovdw
  return (__m256i)__builtin_convertvector((infer_emu_v16si)a, infer_emu_v16hi);
}
static inline __m512 infer_emu_cvtph_ps(__m256i a) {
  __m256 h[2] = {_mm256_cvtph_ps(_mm256_castsi256_si128(a)), _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1))};
  __m512 r;
  memcpy(&r, h, 64);
  return r;
}
static inline __m512d infer_emu_cvtps_pd(__m256 a) {
  return (__m512d)__builtin_convertvector((infer_emu_v8sf)a, infer_emu_v8df);
}
static inline float infer_emu_cvtss_f32(__m512 a) { return a[0]; }
static inline __m256 infer_emu_extractf32x8_ps(__m512 a, int imm) {
  __m256 r;
  memcpy(&r, (const char*)&a + 32 * (imm & 1), 32);
  return r;
}
static inline __m512 infer_emu_shuffle_f32x4(__m512 a, __m512 b, int imm) {
  __m512 r;
  for (int k = 0; k < 4; ++k) memcpy((char*)&r + 16 * k, (const char*)(k < 2 ? &a : &b) + 16 * ((imm >> 2 * k) & 3), 16);
  return r;
}
static inline __m512i infer_emu_mask_i32gather_epi32(__m512i src, __mmask16 k, __m512i idx, const void* base, int scale) {
  infer_emu_v16si r = (infer_emu_v16si)src, ix = (infer_emu_v16si)idx;
  for (int i = 0; i < 16; ++i)
    if (k >> i & 1) memcpy(&r[i], (const char*)base + (long long)ix[i] * scale, 4);
  return (__m512i)r;
}
static inline __m512i infer_emu_i32gather_epi32(__m512i idx, const void* base, int scale) {
  return infer_emu_mask_i32gather_epi32(_mm512_setzero_si512(), 0xFFFF, idx, base, scale);
}
static inline __mmask16 infer_emu_mask_cmp_ps_mask(__mmask16 k, __m512 a, __m512 b, int imm) {
  return (__mmask16)(k & simde_mm512_cmp_ps_mask(a, b, imm));
}
static inline __mmask16 infer_emu_cmplt_epi32_mask(__m512i a, __m512i b) {
  infer_emu_v16si x = (infer_emu_v16si)a, y = (infer_emu_v16si)b;
  unsigned m = 0;
  for (int i = 0; i < 16; ++i) m |= (unsigned)(x[i] < y[i]) << i;
  return (__mmask16)m;
}
static inline void infer_emu_mask_storeu_ps(void* p, __mmask16 k, __m512 v) {
  for (int i = 0; i < 16; ++i)
    if (k >> i & 1) memcpy((char*)p + 4 * i, (const char*)&v + 4 * i, 4);
}
static inline void infer_emu_mm256_mask_storeu_ps(void* p, __mmask8 k, __m256 v) {
  for (int i = 0; i < 8; ++i)
    if (k >> i & 1) memcpy((char*)p + 4 * i, (const char*)&v + 4 * i, 4);
}
static inline __m512i infer_emu_maskz_loadu_epi8(__mmask64 k, const void* p) {
  unsigned char r[64] = {0};
  for (int i = 0; i < 64; ++i)
    if (k >> i & 1) r[i] = ((const unsigned char*)p)[i];
  __m512i v;
  memcpy(&v, r, 64);
  return v;
}
static inline int infer_emu_reduce_add_epi32(__m512i a) {
  infer_emu_v16si x = (infer_emu_v16si)a;
  unsigned s = 0;
  for (int i = 0; i < 16; ++i) s += (unsigned)x[i];
  return (int)s;
}
static inline float infer_emu_reduce_max_ps(__m512 a) {  // max is exact: any order gives the same
  float m = a[0];
  for (int i = 1; i < 16; ++i) m = a[i] > m ? a[i] : m;
  return m;
}

#define _mm512_cvtepi32_ps(a) infer_emu_cvtepi32_ps(a)
#define _mm512_srai_epi32(a, imm) infer_emu_srai_epi32((a), (imm))
#define _mm512_cvtepi8_epi32(a) infer_emu_cvtepi8_epi32(a)
#define _mm512_cvtepu8_epi32(a) infer_emu_cvtepu8_epi32(a)
#define _mm512_cvtepu16_epi32(a) infer_emu_cvtepu16_epi32(a)
#define _mm512_cvtepu8_epi16(a) infer_emu_cvtepu8_epi16(a)
#define _mm512_cvtepi32_epi16(a) infer_emu_cvtepi32_epi16(a)
#define _mm512_cvtph_ps(a) infer_emu_cvtph_ps(a)
#define _mm512_cvtps_pd(a) infer_emu_cvtps_pd(a)
#define _mm512_cvtss_f32(a) infer_emu_cvtss_f32(a)
#define _mm512_extractf32x8_ps(a, imm) infer_emu_extractf32x8_ps((a), (imm))
#define _mm512_shuffle_f32x4(a, b, imm) infer_emu_shuffle_f32x4((a), (b), (imm))
#define _mm512_i32gather_epi32(idx, base, scale) infer_emu_i32gather_epi32((idx), (base), (scale))
#define _mm512_mask_i32gather_epi32(src, k, idx, base, scale) infer_emu_mask_i32gather_epi32((src), (k), (idx), (base), (scale))
#define _mm512_mask_cmp_ps_mask(k, a, b, imm) infer_emu_mask_cmp_ps_mask((k), (a), (b), (imm))
#define _mm512_cmplt_epi32_mask(a, b) infer_emu_cmplt_epi32_mask((a), (b))
#define _mm512_mask_storeu_ps(p, k, v) infer_emu_mask_storeu_ps((p), (k), (v))
#define _mm256_mask_storeu_ps(p, k, v) infer_emu_mm256_mask_storeu_ps((p), (k), (v))
#define _mm512_maskz_loadu_epi8(k, p) infer_emu_maskz_loadu_epi8((k), (p))
#define _mm512_reduce_add_epi32(a) infer_emu_reduce_add_epi32(a)
#define _mm512_reduce_max_ps(a) infer_emu_reduce_max_ps(a)
#define _cvtu64_mask64(a) ((__mmask64)(a))

// The kernels' own #if __AVX512F__ paths (after SIMDe, which would otherwise take them as native).
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
#define __AVX512VNNI__ 1
