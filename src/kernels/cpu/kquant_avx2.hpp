// The quants of a K-quant super-block as AVX2 vectors, for the AVX2 files (qdot_avx2.cpp's dots,
// qgemm_avx2.cpp's packing): 8 vectors of 32 unsigned quants in element order (vector v:
// elements 32v..32v+31), the type's offset not applied (Q2_K 0..3, Q3_K 0..7 with the high bit
// set where the file's hmask bit is, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63). Include only from
// *_avx2.cpp files (compiled with AVX2, FMA and F16C).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "quant/block_formats.hpp"

namespace infer::avx2_kquant {

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// (v >> shift) & mask in every byte (the 16-bit shift's spill into a byte's top bits is masked off).
inline __m256i shifted_bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), bytes(mask));
}

inline void kquants(const quant::BlockQ2_K& b, __m256i* q) {
  for (int v = 0; v < 8; ++v) q[v] = shifted_bits(load32(b.qs + 32 * (v / 4)), 2 * (v % 4), 3);
}
// Low bits | high bit << 2; the reference's offset 4 applies where the high bit is clear.
inline void kquants(const quant::BlockQ3_K& b, __m256i* q) {
  const __m256i hmask = load32(b.hmask);
  for (int v = 0; v < 8; ++v) {
    const __m256i low = shifted_bits(load32(b.qs + 32 * (v / 4)), 2 * (v % 4), 3);
    q[v] = _mm256_or_si256(low, _mm256_slli_epi16(shifted_bits(hmask, v, 1), 2));
  }
}
// Q4_K (qh nullptr) and Q5_K: nibble | fifth bit << 4.
template <class Block>
inline void kquants_q45k(const Block& b, const uint8_t* qh, __m256i* q) {
  const __m256i high = qh ? load32(qh) : _mm256_setzero_si256();
  for (int v = 0; v < 8; ++v) {
    const __m256i packed = load32(b.qs + 32 * (v / 2));
    const __m256i low = v % 2 ? shifted_bits(packed, 4, 0x0F) : _mm256_and_si256(packed, bytes(0x0F));
    q[v] = _mm256_or_si256(low, _mm256_slli_epi16(shifted_bits(high, v, 1), 4));
  }
}
inline void kquants(const quant::BlockQ4_K& b, __m256i* q) { kquants_q45k(b, nullptr, q); }
inline void kquants(const quant::BlockQ5_K& b, __m256i* q) { kquants_q45k(b, b.qh, q); }
// Low 4 bits | high 2 bits << 4.
inline void kquants(const quant::BlockQ6_K& b, __m256i* q) {
  for (int v = 0; v < 8; ++v) {
    const int h = v / 4, j = v % 4;
    const __m256i ql = load32(b.ql + 64 * h + 32 * (j % 2));
    const __m256i low = j < 2 ? _mm256_and_si256(ql, bytes(0x0F)) : shifted_bits(ql, 4, 0x0F);
    q[v] = _mm256_or_si256(low, _mm256_slli_epi16(shifted_bits(load32(b.qh + 32 * h), 2 * j, 3), 4));
  }
}

}  // namespace infer::avx2_kquant
