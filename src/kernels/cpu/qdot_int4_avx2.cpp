// The INT4 and INT8 group dots with AVX2 (arithmetic in quant/int4_groups.hpp and
// quant/int8_groups.hpp; bit-identical to qdot_i*_g*_ref): lanes 0-7 in one register, 8-15 in
// another. INT4: a run's bytes 0-7 widen to lanes 0-7 and bytes 8-15 to lanes 8-15; each lane's low
// nibble is its element 32c + l, the high nibble element 32c + 16 + l, taken in that order. INT8: a
// run's 32 bytes widen 8 at a time, in element order. 4 activation rows per pass over the weight row.
#include <immintrin.h>

#include <cassert>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "quant/int4_groups.hpp"
#include "quant/int8_groups.hpp"

namespace infer {
namespace {

// How far ahead of its blocks a row's dot prefetches (kernels/cpu/qdot_avx2.cpp measured it).
constexpr int kPrefetchBytes = 2048;

inline __m256i widen8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline float tree(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_add_ps(lo, hi);
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return _mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1));
}

// The values of run c (elements 32c .. 32c + 31) of a block: v[k] holds elements 32c + 8k .. + 7.
struct I4Codes {
  static constexpr int64_t block_bytes(int64_t g) { return i4_block_bytes(g); }
  static void run(const uint8_t* blk, int64_t c, __m256 v[4]) {
    float z;
    std::memcpy(&z, blk + 4, 4);
    const __m256 zv = _mm256_set1_ps(z);
    const __m256i b0 = widen8(blk + 8 + 16 * c), b1 = widen8(blk + 16 + 16 * c);
    const __m256i low = _mm256_set1_epi32(15);
    v[0] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b0, low)), zv);
    v[1] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b1, low)), zv);
    v[2] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4)), zv);
    v[3] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4)), zv);
  }
};
struct I8Codes {
  static constexpr int64_t block_bytes(int64_t g) { return i8_block_bytes(g); }
  static void run(const uint8_t* blk, int64_t c, __m256 v[4]) {
    for (int k = 0; k < 4; ++k)
      v[k] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 4 + 32 * c + 8 * k))));
  }
};

template <class C, int64_t G, int R>
void rows_dot(const uint8_t* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m256 acc_lo[R], acc_hi[R];
  for (int r = 0; r < R; ++r) acc_lo[r] = acc_hi[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / G; ++b) {
    const uint8_t* blk = w + b * C::block_bytes(G);
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
    float d;
    std::memcpy(&d, blk, 4);
    __m256 part_lo[R], part_hi[R];
    for (int r = 0; r < R; ++r) part_lo[r] = part_hi[r] = _mm256_setzero_ps();
    for (int64_t c = 0; c < G / 32; ++c) {
      __m256 v[4];
      C::run(blk, c, v);
      for (int r = 0; r < R; ++r) {
        const float* x = reinterpret_cast<const float*>(a + r * as) + b * G + 32 * c;
        part_lo[r] = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(x), part_lo[r]);
        part_hi[r] = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(x + 8), part_hi[r]);
        part_lo[r] = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(x + 16), part_lo[r]);
        part_hi[r] = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(x + 24), part_hi[r]);
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

template <class C, int64_t G>
void dot(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  assert(n >= 0 && n % G == 0);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_fours(n_a, [&]<int R>(int64_t r) { rows_dot<C, G, R>(wb, ab + r * as, as, n, y + r * ys, ys); });
}

}  // namespace

#define INFER_GROUP_DOT(name, codes, g)                                                                         \
  void name(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept { \
    dot<codes, g>(w, a, as, n_a, n, y, ys);                                                                    \
  }
INFER_GROUP_DOT(qdot_i4_g32_avx2, I4Codes, 32)
INFER_GROUP_DOT(qdot_i4_g64_avx2, I4Codes, 64)
INFER_GROUP_DOT(qdot_i4_g128_avx2, I4Codes, 128)
INFER_GROUP_DOT(qdot_i8_g32_avx2, I8Codes, 32)
INFER_GROUP_DOT(qdot_i8_g64_avx2, I8Codes, 64)
INFER_GROUP_DOT(qdot_i8_g128_avx2, I8Codes, 128)
#undef INFER_GROUP_DOT

}  // namespace infer
