// The INT4 group dot with AVX-512 (arithmetic in quant/int4_groups.hpp; bit-identical to
// qdot_i4_g*_ref): the 16 lanes in one register. A run's 16 bytes widen to one byte per lane; each
// nibble picks its (q - z) from a 16-entry table of the group (vpermps reads only an index's low 4
// bits, so the low nibble needs no mask), 4 activation rows per pass over the weight row.
#include "kernels/cpu/qgemm_avx512_util.hpp"

#include <cassert>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "quant/int4_groups.hpp"

namespace infer {
namespace {

// How far ahead of its blocks a row's dot prefetches (kernels/cpu/qdot_avx2.cpp measured it).
constexpr int kPrefetchBytes = 2048;

inline float tree(__m512 acc) {
  const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return _mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1));
}

template <int64_t G, int R>
void rows_dot(const uint8_t* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
  const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / G; ++b) {
    const uint8_t* blk = w + b * i4_block_bytes(G);
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
    float d, z;
    std::memcpy(&d, blk, 4);
    std::memcpy(&z, blk + 4, 4);
    const __m512 table = _mm512_sub_ps(codes, _mm512_set1_ps(z));  // entry k: float(k) - z, exact
    __m512 part[R];
    for (int r = 0; r < R; ++r) part[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < G / kI4RunElements; ++c) {
      const __m512i bytes = avx512_tiles::bytes_to_i32(blk + 8 + 16 * c);
      const __m512 lo = _mm512_permutexvar_ps(bytes, table);
      const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
      for (int r = 0; r < R; ++r) {
        const float* x = reinterpret_cast<const float*>(a + r * as) + b * G + 32 * c;
        part[r] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x), part[r]);
        part[r] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), part[r]);
      }
    }
    const __m512 dv = _mm512_set1_ps(d);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(part[r], dv, acc[r]);
  }
  for (int r = 0; r < R; ++r) y[r * ys] = tree(acc[r]);
}

template <int64_t G>
void dot(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  assert(n >= 0 && n % G == 0);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_fours(n_a, [&]<int R>(int64_t r) { rows_dot<G, R>(wb, ab + r * as, as, n, y + r * ys, ys); });
}

}  // namespace

void qdot_i4_g32_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<32>(w, a, as, n_a, n, y, ys);
}
void qdot_i4_g64_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<64>(w, a, as, n_a, n, y, ys);
}
void qdot_i4_g128_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<128>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
