// The quants of a block as AVX2 vectors, for the AVX2 files (qdot_avx2.cpp's dots,
// qgemm_avx2_impl.hpp's packing), and the F16 scale and 8-lane tree both use. A 32-element block: one
// vector of 32 quants in element order (quants(): Q4_0 and Q5_0 with their offsets applied,
// signed; Q4_1 and Q5_1 unsigned). A K-quant
// super-block: 8 vectors of 32 unsigned quants in element order (kquants(); vector v: elements
// 32v..32v+31), the type's offset not applied (Q2_K 0..3, Q3_K 0..7 with the high bit set where
// the file's hmask bit is, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63). Include only from *_avx2.cpp
// files (compiled with AVX2, FMA and F16C).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/block_formats.hpp"

namespace infer::avx2_quants {
// Everything here has internal linkage (the anonymous namespace): each ISA's file keeps its own
// copy, compiled with its flags, which the linker cannot swap for another file's
// (tests/integration/isa_symbols.py).
namespace {

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the reference's tree over a chain's 8 lanes.
inline float lane_tree(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// (v >> shift) & mask in every byte (the 16-bit shift's spill into a byte's top bits is masked off).
inline __m256i shifted_bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), bytes(mask));
}

// 16 packed bytes -> 32 quants: low nibbles are elements 0-15, high nibbles 16-31.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), bytes(0x0F));
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

inline __m256i quants(const quant::BlockQ4_0& b) { return _mm256_sub_epi8(nibbles(b.qs), bytes(8)); }
inline __m256i quants(const quant::BlockQ4_1& b) { return nibbles(b.qs); }
inline __m256i quants(const quant::BlockQ5_0& b) {
  // q - 16: the nibble, minus 16 where the fifth bit is clear.
  return _mm256_or_si256(nibbles(b.qs), _mm256_andnot_si256(bit_bytes(b.qh), bytes(0xF0)));
}
inline __m256i quants(const quant::BlockQ5_1& b) {
  return _mm256_or_si256(nibbles(b.qs), _mm256_and_si256(bit_bytes(b.qh), bytes(0x10)));
}
inline __m256i quants(const quant::BlockQ8_0& b) { return load32(b.qs); }

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

// out[t] lane j = dword t of in[j].
inline void transpose8(const __m256i* in, __m256i* out) {
  __m256i t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_epi32(in[2 * k], in[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi32(in[2 * k], in[2 * k + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    out[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
    out[k + 4] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
  }
}

}  // namespace
}  // namespace infer::avx2_quants
