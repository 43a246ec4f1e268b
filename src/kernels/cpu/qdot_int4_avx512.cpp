// The INT4 and INT8 group dots with AVX-512 (arithmetic in quant/int4_groups.hpp and
// quant/int8_groups.hpp; bit-identical to qdot_i*_g*_ref): the 16 lanes in one register. INT4: a
// run's 16 bytes widen to one byte per lane; each nibble picks its (q - z) from a 16-entry table of
// the group (vpermps reads only an index's low 4 bits, so the low nibble needs no mask). INT8: each
// 16 bytes of a run sign-extend and convert. Decode: 4 activation rows per pass over the weight row;
// prefill: the tiled kernel below, 8 rows per pass over blocks of K.
#include "kernels/cpu/qgemm_avx512_util.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "kernels/cpu/qgemm.hpp"
#include "quant/int4_groups.hpp"
#include "quant/int8_groups.hpp"

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

// ---- The blocked chains: the per-row dot (decode) and the tiled kernel (prefill) ----
//
// The per-row dot re-reads its activation rows for every weight row, from L2 once they outgrow L1
// (4 rows of 5632 floats are 88 KiB). The tiled kernel (QGemmKernel) takes a group of 16 weight
// rows and walks K in blocks of kKBlock elements: per block, 8 activation rows at a time meet each
// of the 16 rows, whose decoded runs feed 16 fmas each; between blocks a pair's 16-lane chain
// waits in scratch as floats, which changes no bit of it. Both run block_tile, so every (weight
// row, activation row) pair takes the same operations in the same order whatever the batch.
// Packed group: the rows' blocks as in the file, row after row (multiply has no row stride).
constexpr int64_t kGroupRows = 16;
constexpr int64_t kKBlock = 512;

// A block's codes: per group, what its runs need (INT4: the (q - z) table), and run c's values
// as lo (elements 32c .. 32c + 15) and hi (32c + 16 .. 32c + 31).
struct I4Codes {
  static constexpr int64_t block_bytes(int64_t g) { return i4_block_bytes(g); }
  static __m512 group(const uint8_t* blk) {
    float z;
    std::memcpy(&z, blk + 4, 4);
    const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_sub_ps(codes, _mm512_set1_ps(z));  // entry k: float(k) - z, exact
  }
  static void run(const uint8_t* blk, int64_t c, __m512 table, __m512& lo, __m512& hi) {
    const __m512i bytes = avx512_tiles::bytes_to_i32(blk + 8 + 16 * c);
    lo = _mm512_permutexvar_ps(bytes, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
  }
};
struct I8Codes {
  static constexpr int64_t block_bytes(int64_t g) { return i8_block_bytes(g); }
  static __m512 group(const uint8_t*) { return _mm512_setzero_ps(); }
  static void run(const uint8_t* blk, int64_t c, __m512, __m512& lo, __m512& hi) {
    const auto* q = reinterpret_cast<const int8_t*>(blk + 4 + 32 * c);
    lo = _mm512_cvtepi32_ps(avx512_tiles::bytes_to_i32(q));
    hi = _mm512_cvtepi32_ps(avx512_tiles::bytes_to_i32(q + 16));
  }
};

// `groups` groups of one weight row (w: the first) against R activation rows (a: row 0's first
// element, rows as floats apart); chains from and to state (R x 16 floats) unless first / last,
// when they start at zero / end in y[r * ys].
template <class C, int64_t G, int R>
void block_tile(const uint8_t* w, int64_t groups, const float* a, int64_t as, float* state, bool first, bool last, float* y,
                int64_t ys) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(state + 16 * r);
  for (int64_t b = 0; b < groups; ++b) {
    const uint8_t* blk = w + b * C::block_bytes(G);
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
    float d;
    std::memcpy(&d, blk, 4);
    const __m512 table = C::group(blk);
    __m512 part[R];
    for (int r = 0; r < R; ++r) part[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < G / 32; ++c) {
      __m512 lo, hi;
      C::run(blk, c, table, lo, hi);
      for (int r = 0; r < R; ++r) {
        const float* x = a + r * as + b * G + 32 * c;
        part[r] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x), part[r]);
        part[r] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), part[r]);
      }
    }
    const __m512 dv = _mm512_set1_ps(d);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(part[r], dv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    if (last)
      y[r * ys] = tree(acc[r]);
    else
      _mm512_storeu_ps(state + 16 * r, acc[r]);
  }
}

// One weight row against n_a activation rows (decode, and batches below the tiled kernel's
// min_rows): all groups in one block, 4 activation rows per pass.
template <class C, int64_t G>
void dot(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  assert(n >= 0 && n % G == 0);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  const int64_t af = as / static_cast<int64_t>(sizeof(float));
  by_fours(n_a, [&]<int R>(int64_t r) {
    block_tile<C, G, R>(wb, n / G, reinterpret_cast<const float*>(ab + r * as), af, nullptr, true, true, y + r * ys, ys);
  });
}

template <class C, int64_t G>
int64_t row_bytes(int64_t n) {
  return n / G * C::block_bytes(G);
}

template <class C, int64_t G>
int64_t packed_bytes(int64_t n) noexcept {
  return kGroupRows * row_bytes<C, G>(n);
}

template <class C, int64_t G>
void pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroupRows && n % G == 0);
  const int64_t rb = row_bytes<C, G>(n);
  for (int64_t j = 0; j < count; ++j)
    std::memcpy(static_cast<uint8_t*>(packed) + j * rb, static_cast<const uint8_t*>(w) + j * ws, static_cast<size_t>(rb));
}

template <class C, int64_t G>
void multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a, int64_t n,
              float* y, int64_t ys) {
  const auto* pk = static_cast<const uint8_t*>(packed);
  const auto* act = static_cast<const float*>(a);
  const int64_t af = as / static_cast<int64_t>(sizeof(float)), rb = row_bytes<C, G>(n), n_groups = n / G;
  float* state = avx512_tiles::chain_scratch(static_cast<size_t>(count * n_a * 16));
  const int64_t block_groups = std::max<int64_t>(1, kKBlock / G);
  for (int64_t g0 = 0; g0 < n_groups; g0 += block_groups) {
    const int64_t groups = std::min(block_groups, n_groups - g0);
    const bool first = g0 == 0, last = g0 + groups == n_groups;
    avx512_tiles::by_eights(n_a, [&]<int R>(int64_t r0) {
      for (int64_t j = 0; j < count; ++j)
        block_tile<C, G, R>(pk + j * rb + g0 * C::block_bytes(G), groups, act + r0 * af + g0 * G, af,
                         state + (j * n_a + r0) * 16, first, last, y + r0 * ys + j, ys);
    });
  }
}

}  // namespace

#define INFER_GROUP_KERNELS(type, codes, g)                                                                          \
  const QGemmKernel qgemm_##type##_avx512{8,                                                                         \
                                         kGroupRows,                                                                 \
                                         avx512_tiles::no_side_bytes,                                                \
                                         avx512_tiles::no_prepare_side,                                              \
                                         packed_bytes<codes, g>,                                                     \
                                         pack<codes, g>,                                                             \
                                         multiply<codes, g>,                                                         \
                                         nullptr};                                                                   \
  void qdot_##type##_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept { \
    dot<codes, g>(w, a, as, n_a, n, y, ys);                                                                          \
  }
INFER_GROUP_KERNELS(i4_g32, I4Codes, 32)
INFER_GROUP_KERNELS(i4_g64, I4Codes, 64)
INFER_GROUP_KERNELS(i4_g128, I4Codes, 128)
INFER_GROUP_KERNELS(i8_g32, I8Codes, 32)
INFER_GROUP_KERNELS(i8_g64, I8Codes, 64)
INFER_GROUP_KERNELS(i8_g128, I8Codes, 128)
#undef INFER_GROUP_KERNELS

}  // namespace infer
