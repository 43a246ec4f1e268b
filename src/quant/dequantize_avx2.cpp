// AVX2 dequantization (compiled with -mavx2 -mfma -mf16c). Bit-identical to the reference: quants
// are unpacked as integers, converted to float exactly, then scaled with the reference's own
// float operations (a multiply, then an add or subtract of the min); scales and mins are computed
// in scalar code exactly as the reference computes them.
#include <immintrin.h>

#include <cassert>
#include <cstring>

#include "core/half.hpp"
#include "quant/block_formats.hpp"
#include "quant/dequantize.hpp"

namespace infer {
namespace {

using namespace quant;

// 32 signed bytes -> 4 x 8 floats, stored at y[0..31].
inline void store_i8x32(__m256i q, __m256 d, float* y) {
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int k = 0; k < 4; ++k)
    _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k])), d));
}

// 8 signed bytes (low half of v) -> 8 floats: the quants of one 8-element group.
inline __m256 i8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

// What follows the multiply by the scale, as the reference formula has it.
enum class MinOp { none, add, sub };

// y = q * ds[k] (then + or - ms[k]) for each 8-element group k of a 32-element run: K-quant
// sub-blocks of 16 change scale every two groups.
template <MinOp kOp>
inline void store_scaled_i8x32(__m256i q, const float ds[4], const float ms[4], float* y) {
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int k = 0; k < 4; ++k) {
    __m256 v = _mm256_mul_ps(i8x8_to_ps(parts[k]), _mm256_set1_ps(ds[k]));
    if constexpr (kOp == MinOp::add) v = _mm256_add_ps(v, _mm256_set1_ps(ms[k]));
    if constexpr (kOp == MinOp::sub) v = _mm256_sub_ps(v, _mm256_set1_ps(ms[k]));
    _mm256_storeu_ps(y + 8 * k, v);
  }
}

// Nibbles of 16 bytes -> 32 bytes: bytes 0..15 the low nibbles, 16..31 the high nibbles (the
// legacy-block element order).
inline __m256i nibbles_lo_hi(const uint8_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), _mm_and_si128(raw, mask));
}

// Bit j of the 32-bit word -> byte j = 0x10 when set, 0 otherwise.
inline __m256i bits_to_0x10(uint32_t bits) {
  const __m256i shuffle = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                                             0x0303030303030303);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuffle);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

void avx2_f16(const uint16_t* h, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) y[i] = f16_to_f32(h[i]);
}

void avx2_bf16(const uint16_t* h, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) y[i] = bf16_to_f32(h[i]);
}

void avx2_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK)
    store_i8x32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)), _mm256_set1_ps(f16_to_f32(b->d)), y);
}

void avx2_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK)
    store_i8x32(_mm256_sub_epi8(nibbles_lo_hi(b->qs), _mm256_set1_epi8(8)), _mm256_set1_ps(f16_to_f32(b->d)), y);
}

void avx2_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
    const float ds[4] = {d, d, d, d}, ms[4] = {m, m, m, m};
    store_scaled_i8x32<MinOp::add>(nibbles_lo_hi(b->qs), ds, ms, y);
  }
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian host, as the format
  return v;
}

void avx2_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const __m256i q = _mm256_or_si256(nibbles_lo_hi(b->qs), bits_to_0x10(load_u32(b->qh)));
    store_i8x32(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), _mm256_set1_ps(f16_to_f32(b->d)), y);
  }
}

void avx2_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
    const float ds[4] = {d, d, d, d}, ms[4] = {m, m, m, m};
    store_scaled_i8x32<MinOp::add>(_mm256_or_si256(nibbles_lo_hi(b->qs), bits_to_0x10(load_u32(b->qh))), ds, ms, y);
  }
}

void avx2_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  const __m256i three = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
    for (int half = 0; half < 2; ++half) {
      const __m256i qs = load32(b->qs + 32 * half);
      for (int k = 0; k < 4; ++k) {  // 32-element slice at bit shift 2k: sub-blocks s, s + 1
        const int s = 8 * half + 2 * k;
        const float dl0 = d * static_cast<float>(b->scales[s] & 0x0F);
        const float dl1 = d * static_cast<float>(b->scales[s + 1] & 0x0F);
        const float ml0 = dmin * static_cast<float>(b->scales[s] >> 4);
        const float ml1 = dmin * static_cast<float>(b->scales[s + 1] >> 4);
        const float ds[4] = {dl0, dl0, dl1, dl1}, ms[4] = {ml0, ml0, ml1, ml1};
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), three);
        store_scaled_i8x32<MinOp::sub>(q, ds, ms, y + 128 * half + 32 * k);
      }
    }
  }
}

void avx2_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i four = _mm256_set1_epi8(4);
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d);
    const __m256i hmask = load32(b->hmask);
    for (int half = 0; half < 2; ++half) {
      const __m256i qs = load32(b->qs + 32 * half);
      for (int k = 0; k < 4; ++k) {
        const int slice = 4 * half + k;  // element e / 32: also the hmask bit
        const int s = 2 * slice;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), three);
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << slice));
        const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), _mm256_setzero_si256());
        const __m256i q = _mm256_sub_epi8(low, _mm256_and_si256(clear, four));
        const float dl0 = d * static_cast<float>(q3k_scale(b->scales, s));
        const float dl1 = d * static_cast<float>(q3k_scale(b->scales, s + 1));
        const float ds[4] = {dl0, dl0, dl1, dl1};
        store_scaled_i8x32<MinOp::none>(q, ds, nullptr, y + 32 * slice);
      }
    }
  }
}

// Q4_K and Q5_K share scales and nibble order; Q5_K adds a fifth bit per element.
template <bool kFifthBit>
void avx2_q4_q5_k(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, float d, float dmin, float* y) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i high = kFifthBit ? load32(qh) : _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {  // 64 elements: sub-blocks 2c (low nibbles), 2c + 1 (high)
    const __m256i raw = load32(qs + 32 * c);
    for (int h = 0; h < 2; ++h) {
      const int sub = 2 * c + h;
      __m256i q = _mm256_and_si256(h ? _mm256_srli_epi16(raw, 4) : raw, mask);
      if (kFifthBit) {
        const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(high, sub), one);
        q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));
      }
      const ScaleMin sm = kquant_scale_min(scales, sub);
      const float dl = d * static_cast<float>(sm.sc);
      const float ml = dmin * static_cast<float>(sm.m);
      const float ds[4] = {dl, dl, dl, dl}, ms[4] = {ml, ml, ml, ml};
      store_scaled_i8x32<MinOp::sub>(q, ds, ms, y + 32 * sub);
    }
  }
}

void avx2_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK)
    avx2_q4_q5_k<false>(b->scales, b->qs, nullptr, f16_to_f32(b->d), f16_to_f32(b->dmin), y);
}

void avx2_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK)
    avx2_q4_q5_k<true>(b->scales, b->qs, b->qh, f16_to_f32(b->d), f16_to_f32(b->dmin), y);
}

void avx2_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i bias = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d);
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = load32(b->ql + 64 * half);
      const __m256i ql1 = load32(b->ql + 64 * half + 32);
      const __m256i qh = load32(b->qh + 32 * half);
      for (int k = 0; k < 4; ++k) {  // slice k: low nibble of ql0/ql1 for k < 2, high for k >= 2
        const __m256i src = (k % 2) ? ql1 : ql0;
        const __m256i low = _mm256_and_si256(k < 2 ? src : _mm256_srli_epi16(src, 4), mask);
        const __m256i hi2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(hi2, 4)), bias);
        const int s = 8 * half + 2 * k;
        const float dl0 = d * static_cast<float>(b->scales[s]);
        const float dl1 = d * static_cast<float>(b->scales[s + 1]);
        const float ds[4] = {dl0, dl0, dl1, dl1};
        store_scaled_i8x32<MinOp::none>(q, ds, nullptr, y + 128 * half + 32 * k);
      }
    }
  }
}

// n elements of blocks -> the typed block loop.
template <class Block, void (*kLoop)(const Block*, float*, int64_t), int kBlock>
void blocks(const void* src, float* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kBlock == 0);
  kLoop(static_cast<const Block*>(src), dst, n / kBlock);
}

}  // namespace

void dequantize_f16_avx2(const void* src, float* dst, int64_t n) noexcept {
  assert(n >= 0);
  avx2_f16(static_cast<const uint16_t*>(src), dst, n);
}

void dequantize_bf16_avx2(const void* src, float* dst, int64_t n) noexcept {
  assert(n >= 0);
  avx2_bf16(static_cast<const uint16_t*>(src), dst, n);
}

void dequantize_q4_0_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ4_0, avx2_q4_0, kQK>(src, dst, n); }
void dequantize_q4_1_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ4_1, avx2_q4_1, kQK>(src, dst, n); }
void dequantize_q5_0_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ5_0, avx2_q5_0, kQK>(src, dst, n); }
void dequantize_q5_1_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ5_1, avx2_q5_1, kQK>(src, dst, n); }
void dequantize_q8_0_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ8_0, avx2_q8_0, kQK>(src, dst, n); }
void dequantize_q2_k_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ2_K, avx2_q2_k, kQKK>(src, dst, n); }
void dequantize_q3_k_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ3_K, avx2_q3_k, kQKK>(src, dst, n); }
void dequantize_q4_k_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ4_K, avx2_q4_k, kQKK>(src, dst, n); }
void dequantize_q5_k_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ5_K, avx2_q5_k, kQKK>(src, dst, n); }
void dequantize_q6_k_avx2(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ6_K, avx2_q6_k, kQKK>(src, dst, n); }

}  // namespace infer
