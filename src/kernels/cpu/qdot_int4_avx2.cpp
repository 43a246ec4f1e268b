// The INT4 group dot with AVX2 (arithmetic in quant/int4_groups.hpp; bit-identical to
// qdot_i4_g*_ref): lanes 0-7 in one register, 8-15 in another. A run's bytes 0-7 widen to lanes
// 0-7 and bytes 8-15 to lanes 8-15; each lane's low nibble is its element 32c + l, the high nibble
// element 32c + 16 + l, taken in that order. 4 activation rows per pass over the weight row.
#include <immintrin.h>

#include <cassert>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "quant/int4_groups.hpp"

namespace infer {
namespace {

// How far ahead of its blocks a row's dot prefetches (kernels/cpu/qdot_avx2.cpp measured it).
constexpr int kPrefetchBytes = 2048;

inline __m256i widen8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
// float(q) - z for the low and the high nibbles of 8 widened bytes.
inline __m256 low_codes(__m256i b, __m256 z) {
  return _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(15))), z);
}
inline __m256 high_codes(__m256i b, __m256 z) { return _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4)), z); }

inline float tree(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_add_ps(lo, hi);
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return _mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1));
}

template <int64_t G, int R>
void rows_dot(const uint8_t* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m256 acc_lo[R], acc_hi[R];
  for (int r = 0; r < R; ++r) acc_lo[r] = acc_hi[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / G; ++b) {
    const uint8_t* blk = w + b * i4_block_bytes(G);
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
    float d, z;
    std::memcpy(&d, blk, 4);
    std::memcpy(&z, blk + 4, 4);
    const __m256 zv = _mm256_set1_ps(z);
    __m256 part_lo[R], part_hi[R];
    for (int r = 0; r < R; ++r) part_lo[r] = part_hi[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < G / kI4RunElements; ++c) {
      const __m256i b0 = widen8(blk + 8 + 16 * c), b1 = widen8(blk + 16 + 16 * c);
      const __m256 l0 = low_codes(b0, zv), l1 = low_codes(b1, zv);
      const __m256 h0 = high_codes(b0, zv), h1 = high_codes(b1, zv);
      for (int r = 0; r < R; ++r) {
        const float* x = reinterpret_cast<const float*>(a + r * as) + b * G + 32 * c;
        part_lo[r] = _mm256_fmadd_ps(l0, _mm256_loadu_ps(x), part_lo[r]);
        part_hi[r] = _mm256_fmadd_ps(l1, _mm256_loadu_ps(x + 8), part_hi[r]);
        part_lo[r] = _mm256_fmadd_ps(h0, _mm256_loadu_ps(x + 16), part_lo[r]);
        part_hi[r] = _mm256_fmadd_ps(h1, _mm256_loadu_ps(x + 24), part_hi[r]);
      }
    }
    const __m256 dv = _mm256_set1_ps(d);
    for (int r = 0; r < R; ++r) {
      acc_lo[r] = _mm256_fmadd_ps(part_lo[r], dv, acc_lo[r]);
      acc_hi[r] = _mm256_fmadd_ps(part_hi[r], dv, acc_hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r * ys] = tree(acc_lo[r], acc_hi[r]);
}

template <int64_t G>
void dot(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  assert(n >= 0 && n % G == 0);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_fours(n_a, [&]<int R>(int64_t r) { rows_dot<G, R>(wb, ab + r * as, as, n, y + r * ys, ys); });
}

}  // namespace

void qdot_i4_g32_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<32>(w, a, as, n_a, n, y, ys);
}
void qdot_i4_g64_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<64>(w, a, as, n_a, n, y, ys);
}
void qdot_i4_g128_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<128>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
