// The activation converters' code, compiled once per ISA (core/isa_variants.hpp): included by
// quantize_activations_{ref,avx2,avx512}.cpp inside namespace infer::INFER_ISA_NS;
// quantize_activations.cpp dispatches. Contract in quantize_activations.hpp. No include guard.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/half.hpp"
#include "quant/block_formats.hpp"
#include "quant/quantize_activations.hpp"

namespace infer::INFER_ISA_NS {
namespace {

using namespace quant;

// nearbyint rounds half to even in the default rounding mode, as ggml's _mm256_round_ps and its
// nearest_int() do; -ffp-contract=off keeps the product rounded before it is rounded to an integer.
inline int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

#if defined(__AVX2__)
// The AVX2 and AVX-512 variants: 8 elements per vector, the same float operations (a maximum and
// a product are exact or singly rounded whatever the order; cvtps rounds half to even in the
// default rounding mode, as nearbyint does), quants saturated to int8 as the scalar min / cast do
// for the values that occur (|q| <= 127).
inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
inline float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
// 32 quants round-half-even(x[j] * s) as int8, in element order.
inline __m256i quants32(const float* x, __m256 s) {
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), s));
  // packs work per 128-bit half: bytes [x0-3 x8-11 x16-19 x24-27 | x4-7 x12-15 x20-23 x28-31].
  const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
#endif

// Q8_0 and Q8_1 share the block prefix; returns d (unrounded) and writes the quants.
float quantize_block_32(const float* x, int8_t* qs) {
#if defined(__AVX2__)
  __m256 m = abs8(_mm256_loadu_ps(x));
  for (int k = 1; k < 4; ++k) m = _mm256_max_ps(abs8(_mm256_loadu_ps(x + 8 * k)), m);
  const float amax = max8(m);
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), quants32(x, _mm256_set1_ps(id)));
#else
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < kQK; ++j) qs[j] = static_cast<int8_t>(round_even(x[j] * id));
#endif
  return amax / 127.0f;
}

// f32_to_f16 (core/half.hpp) without branches: every case is computed and the right one selected,
// so the compiler vectorizes a row's conversion (F16 prefill converts every activation row of
// every matmul; the branchy scalar version took 7% of it). Same bits for every input, NaN payloads
// included (tests/unit/test_quantize_activations.cpp compares them).
inline uint16_t f32_to_f16_select(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  // Normal: rebias the exponent, round the mantissa to 10 bits (nearest even; a carry into the
  // exponent is right, up to infinity).
  const uint32_t v = abs - 0x38000000u;
  const uint32_t normal = (v + 0x0fffu + ((v >> 13) & 1u)) >> 13;
  // Subnormal or zero: the significand shifted right by 14..24 bits, nearest even (further: 0).
  const uint32_t shift = std::min(126u - (abs >> 23), 31u);
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t subnormal = (mant + ((1u << shift) >> 1) - 1u + ((mant >> shift) & 1u)) >> shift;
  const uint32_t nan = 0x7e00u | ((abs >> 13) & 0x3ffu);
  const uint32_t r = abs > 0x7f800000u ? nan : abs >= 0x477ff000u ? 0x7c00u : abs < 0x38800000u ? subnormal : normal;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace

void quantize_activations_q8_0(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) b->d = f32_to_f16(quantize_block_32(x, b->qs));
}

void quantize_activations_q8_1(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    const float d = quantize_block_32(x, b->qs);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += b->qs[j];
    b->d = f32_to_f16(d);
    b->s = f32_to_f16(d * static_cast<float>(sum));
  }
}

void quantize_activations_q8_k(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK) {
    float amax = 0.0f;
    float extreme = 0.0f;  // the first element of largest magnitude, with its sign
#if defined(__AVX2__)
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQKK / 8; ++k) m = _mm256_max_ps(abs8(_mm256_loadu_ps(x + 8 * k)), m);
    amax = max8(m);
    for (int k = 0; k < kQKK / 8; ++k) {
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(abs8(_mm256_loadu_ps(x + 8 * k)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hits != 0) {
        extreme = x[8 * k + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
#else
    for (int j = 0; j < kQKK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    }
#endif
    if (amax == 0.0f) {
      std::memset(static_cast<void*>(b), 0, sizeof *b);
      continue;
    }
    const float iscale = -127.0f / extreme;
#if defined(__AVX2__)
    for (int k = 0; k < kQKK / 32; ++k) {
      const __m256i q = quants32(x + 32 * k, _mm256_set1_ps(iscale));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b->qs + 32 * k), q);
      // Σq of each 16: bytes to int16 pairs, then madd against ones sums 16 into 2 x 4 lanes.
      const __m256i w = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
      // w: lanes 0-3 elements 0..15, lanes 4-7 elements 16..31, 4 each.
      const __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
      const __m128i s = _mm_hadd_epi32(_mm_hadd_epi32(lo, hi), _mm_setzero_si128());
      b->bsums[2 * k] = static_cast<int16_t>(_mm_cvtsi128_si32(s));
      b->bsums[2 * k + 1] = static_cast<int16_t>(_mm_extract_epi32(s, 1));
    }
#else
    for (int j = 0; j < kQKK; ++j) b->qs[j] = static_cast<int8_t>(std::min(127, round_even(iscale * x[j])));
    for (int s = 0; s < kQKK / 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b->qs[16 * s + j];
      b->bsums[s] = static_cast<int16_t>(sum);
    }
#endif
    b->d = 1.0f / iscale;
  }
}

void round_activations_f16(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0);
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16_select(x[i]);
}

void round_activations_bf16(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0);
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
}


}  // namespace infer::INFER_ISA_NS
