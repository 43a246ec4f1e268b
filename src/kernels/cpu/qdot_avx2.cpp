// AVX2 dot products, bit-identical to the scalar ones in qdot.cpp: the integer sums are exact
// however they are grouped (maddubs pairs cannot saturate: |weight quant| <= 128 and activation
// quants lie in [-127, 127], so a pair is at most 2 * 128 * 127 < 2^15), and the float steps are
// the ones qdot.hpp lists, in the same order, fused where the reference calls std::fma.
#include <immintrin.h>

#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "quant/block_formats.hpp"

namespace infer {
namespace {

using namespace quant;

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the scalar lane tree.
inline float lane_tree(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 16 packed bytes -> 32 quants: low nibbles are elements 0-15, high nibbles 16-31.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0F));
}

// Bit j of the little-endian u32 at p -> byte j: 0xFF when set, 0 otherwise.
inline __m256i bit_bytes(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

// Signed weight quants: the 8 lanes of 4-element integer dots (lane p: elements 4p..4p+3).
inline __m256i lane_dots(__m256i w, __m256i a) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
// Unsigned weight quants (0..63).
inline __m256i lane_dots_unsigned(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// ---- legacy blocks: quants as signed (or, for the _1 types, unsigned) bytes ----

inline __m256i quants(const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles(b.qs), _mm256_set1_epi8(8)); }
inline __m256i quants(const BlockQ4_1& b) { return nibbles(b.qs); }
inline __m256i quants(const BlockQ5_0& b) {
  // q - 16: the nibble, minus 16 where the fifth bit is clear.
  return _mm256_or_si256(nibbles(b.qs), _mm256_andnot_si256(bit_bytes(b.qh), _mm256_set1_epi8(static_cast<char>(0xF0))));
}
inline __m256i quants(const BlockQ5_1& b) {
  return _mm256_or_si256(nibbles(b.qs), _mm256_and_si256(bit_bytes(b.qh), _mm256_set1_epi8(0x10)));
}
inline __m256i quants(const BlockQ8_0& b) { return load32(b.qs); }

template <class Block>
float dot_lanes_q8_0(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 dd = _mm256_set1_ps(half(wb[i].d) * half(ab[i].d));
    acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(lane_dots(quants(wb[i]), load32(ab[i].qs))), acc);
  }
  return lane_tree(acc);
}

template <class Block>
float dot_lanes_q8_1(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_1*>(a);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    mins = std::fma(half(wb[i].m), half(ab[i].s), mins);
    const __m256 dd = _mm256_set1_ps(half(wb[i].d) * half(ab[i].d));
    acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(lane_dots_unsigned(quants(wb[i]), load32(ab[i].qs))), acc);
  }
  return lane_tree(acc) + mins;
}

float dot_q4_0(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int32_t dot = hsum_i32(lane_dots(quants(wb[i]), load32(ab[i].qs)));
    acc = std::fma(static_cast<float>(dot), half(wb[i].d) * half(ab[i].d), acc);
  }
  return acc;
}

// ---- K-quants ----

// Per-128-bit-lane 16-bit scales: the low 16 elements of a 32-element vector belong to sub-block
// s, the high 16 to s + 1 (16-element sub-blocks).
inline __m256i scale_pair(int s0, int s1) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(s1)), _mm_set1_epi16(static_cast<short>(s0)));
}
// Σ over a 32-element vector of scale * q * a, as 8 int32 lanes.
inline __m256i scaled(__m256i q_unsigned, __m256i a, __m256i scales16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q_unsigned, a), scales16);
}
inline __m256i shifted_bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

int32_t bsum_dot(const int* coef, const int16_t* bsums, int len) {
  int32_t s = 0;
  for (int j = 0; j < kQKK / len; ++j) {
    int32_t b = 0;
    for (int k = 0; k < len / 16; ++k) b += bsums[len / 16 * j + k];
    s += coef[j] * b;
  }
  return s;
}

float dot_q2_k(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  const auto* wb = static_cast<const BlockQ2_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sc[16], m[16];
    for (int s = 0; s < 16; ++s) {
      sc[s] = wb[i].scales[s] & 0x0F;
      m[s] = wb[i].scales[s] >> 4;
    }
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load32(wb[i].qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const int s = 8 * h + 2 * k;
        sum = _mm256_add_epi32(sum, scaled(shifted_bits(qs, 2 * k, 3), load32(ab[i].qs + 128 * h + 32 * k), scale_pair(sc[s], sc[s + 1])));
      }
    }
    float r = half(wb[i].d) * static_cast<float>(hsum_i32(sum));
    r = std::fma(-half(wb[i].dmin), static_cast<float>(bsum_dot(m, ab[i].bsums, 16)), r);
    acc = std::fma(r, ab[i].d, acc);
  }
  return acc;
}

float dot_q3_k(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  const auto* wb = static_cast<const BlockQ3_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = q3k_scale(wb[i].scales, s);
    // Quants taken unsigned (low bits | high bit << 2, 0..7); the offset 4 comes off via bsums.
    const __m256i hmask = load32(wb[i].hmask);
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load32(wb[i].qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const int s = 8 * h + 2 * k;
        const __m256i q = _mm256_or_si256(shifted_bits(qs, 2 * k, 3), _mm256_slli_epi16(shifted_bits(hmask, 4 * h + k, 1), 2));
        sum = _mm256_add_epi32(sum, scaled(q, load32(ab[i].qs + 128 * h + 32 * k), scale_pair(sc[s], sc[s + 1])));
      }
    }
    const int32_t total = hsum_i32(sum) - 4 * bsum_dot(sc, ab[i].bsums, 16);
    acc = std::fma(half(wb[i].d) * static_cast<float>(total), ab[i].d, acc);
  }
  return acc;
}

template <class Block>
void scales_mins(const Block& b, int* sc, int* m) {
  for (int j = 0; j < 8; ++j) {
    const ScaleMin sm = kquant_scale_min(b.scales, j);
    sc[j] = sm.sc;
    m[j] = sm.m;
  }
}

float dot_q4_k(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f, accm = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sc[8], m[8];
    scales_mins(wb[i], sc, m);
    const float dd = half(wb[i].d) * ab[i].d;
    const float dm = half(wb[i].dmin) * ab[i].d;
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load32(wb[i].qs + 32 * c);
      const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
      const __m256i hi = shifted_bits(v, 4, 0x0F);
      const __m256i t = _mm256_add_epi32(
          scaled(lo, load32(ab[i].qs + 64 * c), _mm256_set1_epi16(static_cast<short>(sc[2 * c]))),
          scaled(hi, load32(ab[i].qs + 64 * c + 32), _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1]))));
      const int16_t* bs = ab[i].bsums + 4 * c;
      const int32_t mins = m[2 * c] * (bs[0] + bs[1]) + m[2 * c + 1] * (bs[2] + bs[3]);
      acc = std::fma(static_cast<float>(hsum_i32(t)), dd, acc);
      accm = std::fma(static_cast<float>(mins), dm, accm);
    }
  }
  return acc - accm;
}

float dot_q5_k(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  const auto* wb = static_cast<const BlockQ5_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sc[8], m[8];
    scales_mins(wb[i], sc, m);
    const __m256i qh = load32(wb[i].qh);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load32(wb[i].qs + 32 * c);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi8(0x0F)),
                                         _mm256_slli_epi16(shifted_bits(qh, 2 * c, 1), 4));
      const __m256i hi = _mm256_or_si256(shifted_bits(v, 4, 0x0F), _mm256_slli_epi16(shifted_bits(qh, 2 * c + 1, 1), 4));
      sum = _mm256_add_epi32(sum, scaled(lo, load32(ab[i].qs + 64 * c), _mm256_set1_epi16(static_cast<short>(sc[2 * c]))));
      sum = _mm256_add_epi32(sum, scaled(hi, load32(ab[i].qs + 64 * c + 32), _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1]))));
    }
    float r = half(wb[i].d) * static_cast<float>(hsum_i32(sum));
    r = std::fma(-half(wb[i].dmin), static_cast<float>(bsum_dot(m, ab[i].bsums, 32)), r);
    acc = std::fma(r, ab[i].d, acc);
  }
  return acc;
}

float dot_q6_k(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = wb[i].scales[s];
    // Quants taken unsigned (0..63); the offset 32 comes off via bsums.
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load32(wb[i].ql + 64 * h);
      const __m256i ql1 = load32(wb[i].ql + 64 * h + 32);
      const __m256i qh = load32(wb[i].qh + 32 * h);
      const __m256i low[4] = {_mm256_and_si256(ql0, _mm256_set1_epi8(0x0F)), _mm256_and_si256(ql1, _mm256_set1_epi8(0x0F)),
                              shifted_bits(ql0, 4, 0x0F), shifted_bits(ql1, 4, 0x0F)};
      for (int k = 0; k < 4; ++k) {
        const int s = 8 * h + 2 * k;
        const __m256i q = _mm256_or_si256(low[k], _mm256_slli_epi16(shifted_bits(qh, 2 * k, 3), 4));
        sum = _mm256_add_epi32(sum, scaled(q, load32(ab[i].qs + 128 * h + 32 * k), scale_pair(sc[s], sc[s + 1])));
      }
    }
    const int32_t total = hsum_i32(sum) - 32 * bsum_dot(sc, ab[i].bsums, 16);
    acc = std::fma(half(wb[i].d) * static_cast<float>(total), ab[i].d, acc);
  }
  return acc;
}

// ---- F16 / BF16 ----

inline __m256 load8(const uint16_t* p, bool bf16) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  return _mm256_cvtph_ps(v);
}

template <bool kBf16>
float dot_half(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0);
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* ah = static_cast<const uint16_t*>(a);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(load8(wh + i, kBf16), load8(ah + i, kBf16), acc);
  if (i < n) {
    // Zero padding leaves a lane's sum as it was (it is never -0: it starts at +0).
    uint16_t wt[8] = {}, at[8] = {};
    std::memcpy(wt, wh + i, static_cast<size_t>(n - i) * 2);
    std::memcpy(at, ah + i, static_cast<size_t>(n - i) * 2);
    acc = _mm256_fmadd_ps(load8(wt, kBf16), load8(at, kBf16), acc);
  }
  return lane_tree(acc);
}

}  // namespace

QDotFn qdot_kernel_avx2(DType weight) noexcept {
  switch (weight) {
    case DType::f16: return dot_half<false>;
    case DType::bf16: return dot_half<true>;
    case DType::q8_0: return dot_lanes_q8_0<BlockQ8_0>;
    case DType::q5_0: return dot_lanes_q8_0<BlockQ5_0>;
    case DType::q4_0: return dot_q4_0;
    case DType::q4_1: return dot_lanes_q8_1<BlockQ4_1>;
    case DType::q5_1: return dot_lanes_q8_1<BlockQ5_1>;
    case DType::q2_k: return dot_q2_k;
    case DType::q3_k: return dot_q3_k;
    case DType::q4_k: return dot_q4_k;
    case DType::q5_k: return dot_q5_k;
    case DType::q6_k: return dot_q6_k;
    default: assert(false && "no quantized dot for this type"); return nullptr;
  }
}

}  // namespace infer
