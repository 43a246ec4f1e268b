// AVX2 dot products, bit-identical to the scalar ones in qdot.cpp: the integer sums are exact
// however they are grouped (maddubs pairs cannot saturate: |weight quant| <= 128 and activation
// quants lie in [-127, 127], so a pair is at most 2 * 128 * 127 < 2^15), and the float steps are
// the ones qdot.hpp lists, in the same order, fused where the reference calls std::fma.
//
// Each kernel takes up to 4 activation rows at once: a weight block is unpacked once for all of
// them, and where a row's float steps form one scalar chain, the rows' chains run side by side in
// the lanes of one vector (lane r computes exactly what the scalar code computes for row r).
#include <immintrin.h>

#include <cassert>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/qdot.hpp"
#include "kernels/cpu/quants_avx2.hpp"
#include "quant/block_formats.hpp"

namespace infer {
namespace {

using namespace quant;
using namespace avx2_quants;

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// The horizontal sums of v[0..R) in the first R lanes (R <= 4; the other lanes are 0).
template <int R>
inline __m128i hsums(const __m256i* v) {
  if constexpr (R == 1) return _mm_cvtsi32_si128(hsum_i32(v[0]));
  const __m256i z = _mm256_setzero_si256();
  const __m256i t01 = _mm256_hadd_epi32(v[0], R > 1 ? v[1] : z);
  const __m256i t23 = _mm256_hadd_epi32(R > 2 ? v[2] : z, R > 3 ? v[3] : z);
  const __m256i t = _mm256_hadd_epi32(t01, t23);
  return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

// Lanes r < R of v written to y[r * ys].
template <int R>
inline void store_rows(__m128 v, float* y, int64_t ys) {
  y[0] = _mm_cvtss_f32(v);
  if constexpr (R > 1) y[ys] = _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1));
  if constexpr (R > 2) y[2 * ys] = _mm_cvtss_f32(_mm_shuffle_ps(v, v, 2));
  if constexpr (R > 3) y[3 * ys] = _mm_cvtss_f32(_mm_shuffle_ps(v, v, 3));
}

// The values f(r) for r < R in lanes (built in registers: a store to the stack followed by a
// wider load would stall on store forwarding).
template <int R, class F>
inline __m128 float_lanes(F f) {
  return _mm_setr_ps(f(0), R > 1 ? f(1) : 0.0f, R > 2 ? f(2) : 0.0f, R > 3 ? f(3) : 0.0f);
}

// Activation block i of row r.
template <class Act>
inline const Act& act_block(const uint8_t* a, int64_t a_stride, int r, int64_t i) {
  return reinterpret_cast<const Act*>(a + r * a_stride)[i];
}

// Runs a kernel's 4-row tile, then a tile for what is left.
template <class Kernel>
void rows(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  const auto* ab = static_cast<const uint8_t*>(a);
  int64_t r = 0;
  for (; r + 4 <= n_a; r += 4) Kernel::template tile<4>(w, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
  switch (n_a - r) {
    case 3: return Kernel::template tile<3>(w, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
    case 2: return Kernel::template tile<2>(w, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
    case 1: return Kernel::template tile<1>(w, ab + r * a_stride, a_stride, n, y + r * y_stride, y_stride);
    default: return;
  }
}

// ---- legacy blocks (quants(): quants_avx2.hpp) ----

// The 8 lanes of 4-element integer dots (lane p: elements 4p..4p+3). Signed weight quants go in
// as |q| with the sign moved onto the activation; unsigned ones (the _1 types) go in as they are.
inline __m256i lane_dots_signed(__m256i abs_q, __m256i q, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, _mm256_sign_epi8(a, q)), _mm256_set1_epi16(1));
}
inline __m256i lane_dots_unsigned(__m256i q, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1));
}

// Q8_0, Q5_0 (tinyBLAS) and Q4_1, Q5_1 (vec_dot): 8 lanes per row, plus the min chain for the
// _1 types.
// How far ahead of the weights a row's dot prefetches (a hint: the arithmetic is unchanged). The
// hardware prefetcher alone left the Q8_0 decode of an Intel Xeon VM stalled on its loads: 8.4
// tokens/s on the TinyLlama shape (9.3 GB/s, two threads; llama.cpp 14.1); 512 bytes ahead 17.2,
// 1024 19.9, 2048 21.5, 4096 21.1.
constexpr int kPrefetchBytes = 2048;
// And how far ahead into L2 only, as the AVX-512 decode tiles do (kernels/cpu/qgemm_avx512_util.hpp).
constexpr int kL2PrefetchBytes = 8192;

// Prefetches the `bytes` (at most 192) from p, kPrefetchBytes ahead into L1 and kL2PrefetchBytes
// ahead into L2 (hints: the arithmetic is unchanged).
inline void prefetch_block(const void* p, int bytes) {
  const char* c = static_cast<const char*>(p);
  for (int o = 0; o < bytes; o += 64) {
    _mm_prefetch(c + kPrefetchBytes + o, _MM_HINT_T0);
    _mm_prefetch(c + kL2PrefetchBytes + o, _MM_HINT_T1);
  }
}

template <class Block, class Act>
struct Lanes {
  static constexpr bool kMin = std::is_same_v<Act, BlockQ8_1>;
  template <int R>
  static void tile(const void* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
    assert(n >= 0 && n % kQK == 0);
    const auto* wb = static_cast<const Block*>(w);
    __m256 acc[R];
    float mins[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), mins[r] = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(wb + i) + kPrefetchBytes, _MM_HINT_T0);
      const __m256i q = quants(wb[i]);
      const __m256i abs_q = _mm256_sign_epi8(q, q);
      const float dw = half(wb[i].d);
      for (int r = 0; r < R; ++r) {
        const Act& ab = act_block<Act>(a, as, r, i);
        const __m256i aq = load32(ab.qs);
        const __m256i dots = kMin ? lane_dots_unsigned(q, aq) : lane_dots_signed(abs_q, q, aq);
        if constexpr (kMin) mins[r] = std::fma(half(wb[i].m), half(ab.s), mins[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * half(ab.d)), _mm256_cvtepi32_ps(dots), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) y[r * ys] = kMin ? lane_tree(acc[r]) + mins[r] : lane_tree(acc[r]);
  }
};

// For the several-row decode kernels below, whose W rows lie ws bytes apart: the `bytes` at p
// (row 0's position) of each of the W rows one pass (W rows) ahead into L1, and two passes ahead
// into L2 (hints: the arithmetic is unchanged).
template <int W>
inline void prefetch_passes_ahead(const void* p, int64_t ws, int64_t bytes) {
  for (int j = 0; j < W; ++j) {
    const char* next = static_cast<const char*>(p) + (W + j) * ws;
    _mm_prefetch(next, _MM_HINT_T0);
    _mm_prefetch(next + bytes - 1, _MM_HINT_T0);
    _mm_prefetch(next + W * ws, _MM_HINT_T1);
    _mm_prefetch(next + W * ws + bytes - 1, _MM_HINT_T1);
  }
}

// The same, decode: W weight rows against one activation row, each row's chains Lanes::tile's,
// the W rows' side by side (one row's alone waits on its fma every block: 14-24 GB/s of weights
// with two threads on an Intel Xeon VM).
template <class Block, class Act, int W>
void lanes_rows(const uint8_t* w, int64_t ws, const Act* ab, int64_t n, float* y) {
  constexpr bool kMin = Lanes<Block, Act>::kMin;
  const Block* row[W];
  for (int j = 0; j < W; ++j) row[j] = reinterpret_cast<const Block*>(w + j * ws);
  __m256 acc[W];
  float mins[W];
  for (int j = 0; j < W; ++j) acc[j] = _mm256_setzero_ps(), mins[j] = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    if (i % 2 == 0) prefetch_passes_ahead<W>(row[0] + i, ws, 2 * sizeof(Block));
    const __m256i aq = load32(ab[i].qs);
    const float da = half(ab[i].d);
    for (int j = 0; j < W; ++j) {
      const Block& b = row[j][i];
      const __m256i q = quants(b);
      const __m256i dots = kMin ? lane_dots_unsigned(q, aq) : lane_dots_signed(_mm256_sign_epi8(q, q), q, aq);
      if constexpr (kMin) mins[j] = std::fma(half(b.m), half(ab[i].s), mins[j]);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(half(b.d) * da), _mm256_cvtepi32_ps(dots), acc[j]);
    }
  }
  for (int j = 0; j < W; ++j) y[j] = kMin ? lane_tree(acc[j]) + mins[j] : lane_tree(acc[j]);
}

// Runs rows_of<W>(w + j * ws, ws, a, n, y + j) over the n_w weight rows, four at a time, then
// the 1 to 3 left.
template <template <int> class RowsOf>
void by_weight_fours(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  const auto* wb = static_cast<const uint8_t*>(w);
  int64_t j = 0;
  for (; j + 4 <= n_w; j += 4) RowsOf<4>::run(wb + j * ws, ws, a, n, y + j);
  switch (n_w - j) {
    case 3: return RowsOf<3>::run(wb + j * ws, ws, a, n, y + j);
    case 2: return RowsOf<2>::run(wb + j * ws, ws, a, n, y + j);
    case 1: return RowsOf<1>::run(wb + j * ws, ws, a, n, y + j);
    default: return;
  }
}
template <class Block, class Act>
struct LanesRows {
  template <int W>
  struct Of {
    static void run(const uint8_t* w, int64_t ws, const void* a, int64_t n, float* y) {
      lanes_rows<Block, Act, W>(w, ws, static_cast<const Act*>(a), n, y);
    }
  };
};

// Q4_0 (repacked gemm): one chain per row.
struct Q4_0 {
  template <int R>
  static void tile(const void* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
    assert(n >= 0 && n % kQK == 0);
    const auto* wb = static_cast<const BlockQ4_0*>(w);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / kQK; ++i) {
      const __m256i q = quants(wb[i]);
      const __m256i abs_q = _mm256_sign_epi8(q, q);
      __m256i dots[R];
      for (int r = 0; r < R; ++r) dots[r] = lane_dots_signed(abs_q, q, load32(act_block<BlockQ8_0>(a, as, r, i).qs));
      const __m128 da = float_lanes<R>([&](int r) { return half(act_block<BlockQ8_0>(a, as, r, i).d); });
      acc = _mm_fmadd_ps(_mm_cvtepi32_ps(hsums<R>(dots)), _mm_mul_ps(_mm_set1_ps(half(wb[i].d)), da), acc);
    }
    store_rows<R>(acc, y, ys);
  }
};

// Q4_0, decode: W weight rows (W <= 4) against one activation row, the rows' chains side by side
// in the lanes of one vector, each lane the same fma per block as Q4_0::tile's lane (dw * da
// commutes). One row's chain alone is one dependent fma a block: 11.8 GB/s of Q4_0 weights with
// two threads on an Intel Xeon VM, from L3.
template <int W>
void q4_0_rows(const uint8_t* w, int64_t ws, const BlockQ8_0* ab, int64_t n, float* y) {
  const BlockQ4_0* row[W];
  for (int j = 0; j < W; ++j) row[j] = reinterpret_cast<const BlockQ4_0*>(w + j * ws);
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    if (i % 4 == 0) prefetch_passes_ahead<W>(row[0] + i, ws, 4 * sizeof(BlockQ4_0));
    const __m256i aq = load32(ab[i].qs);
    // The nibbles q (0..15) enter unsigned, each lane's Σ(q - 8) a as Σ q a - 8 Σ a (the block's
    // 8 Σ a lanes once for the W rows): no sign moves per row.
    const __m256i ones16 = _mm256_set1_epi16(1);
    const __m256i a8 = _mm256_madd_epi16(_mm256_maddubs_epi16(bytes(8), aq), ones16);
    __m256i dots[W];
    for (int j = 0; j < W; ++j)
      dots[j] = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(nibbles(row[j][i].qs), aq), ones16), a8);
    // The W scales converted together (one at a time, each went through a general register).
    const auto d = [&](int j) { return static_cast<short>(j < W ? row[j][i].d : 0); };
    const __m128 dw = _mm_cvtph_ps(_mm_setr_epi16(d(0), d(1), d(2), d(3), 0, 0, 0, 0));
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(hsums<W>(dots)), _mm_mul_ps(dw, _mm_set1_ps(half(ab[i].d))), acc);
  }
  store_rows<W>(acc, y, 1);
}
template <int W>
struct Q4_0Rows {
  static void run(const uint8_t* w, int64_t ws, const void* a, int64_t n, float* y) {
    q4_0_rows<W>(w, ws, static_cast<const BlockQ8_0*>(a), n, y);
  }
};

// ---- K-quants: a super-block unpacked to 8 vectors of 32 unsigned quants in element order ----

struct KBlock {
  __m256i q[8];       // elements 32v..32v+31, offsets not applied (0..63)
  __m256i scales[8];  // 16-bit sub-block scales for each vector's elements
  __m256i sc16;       // per 16 elements (one bsum each): the sub-block scale (Q3_K, Q6_K)
  __m256i m16;        // per 16 elements: the sub-block min (Q2_K, Q4_K, Q5_K)
};

// The scales of the 16-element sub-blocks, per vector: the low 16 elements of vector v are
// sub-block 2v, the high 16 sub-block 2v + 1. From the 16 scales as 16-bit lanes, one byte
// shuffle a vector (set1s from general registers, two a vector, bounded the Q2_K, Q3_K and Q6_K
// dots).
struct PairScales {
  __m256i low, high;  // scales 0-7 and 8-15, in both 128-bit halves
  explicit PairScales(__m256i s16)
      : low(_mm256_permute2x128_si256(s16, s16, 0x00)), high(_mm256_permute2x128_si256(s16, s16, 0x11)) {}
  __m256i operator()(int v) const {
    const char a = static_cast<char>(4 * v % 16), b = static_cast<char>((4 * v + 2) % 16);
    const __m256i pick = _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,
                                          b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1);
    return _mm256_shuffle_epi8(v < 4 ? low : high, pick);
  }
};

// Σ scale * q * a over vector v, as 8 int32 lanes.
inline __m256i scaled(const KBlock& k, int v, const int8_t* a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(k.q[v], load32(a + 32 * v)), k.scales[v]);
}
inline __m256i scaled_sum(const KBlock& k, const int8_t* a) {
  __m256i s = scaled(k, 0, a);
  for (int v = 1; v < 8; ++v) s = _mm256_add_epi32(s, scaled(k, v, a));
  return s;
}
// Σ coef16 * bsum over the 16 bsums, as 8 int32 lanes.
inline __m256i bsum_lanes(__m256i coef16, const int16_t* bsums) { return _mm256_madd_epi16(load32(bsums), coef16); }

// The 16 bytes at p widened to 16-bit lanes (unsigned, or signed for int8_t).
inline __m256i widen16(const uint8_t* p) { return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i widen16(const int8_t* p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

void unpack(const BlockQ2_K& b, KBlock& k) {
  kquants(b, k.q);
  // Scales and mins, the scale bytes' low and high nibbles, in registers (through the stack, a
  // wide load stalls on store forwarding).
  const __m256i bytes16 = widen16(b.scales);
  const PairScales pairs(_mm256_and_si256(bytes16, _mm256_set1_epi16(0x0F)));
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) k.scales[v] = pairs(v);
  k.m16 = _mm256_srli_epi16(bytes16, 4);
}
// Q3_K's 16 six-bit scales (q3k_scale) as signed 16-bit lanes: four scales a 32-bit word, low
// nibbles from bytes 0-7 (scales 0-7) and their high nibbles (8-15), the top 2 bits from bytes
// 8-11, shifted by 2 for each group of four.
inline __m256i q3k_scales16(const uint8_t* s) {
  uint32_t w[3];
  std::memcpy(w, s, 12);
  const uint32_t low4 = 0x0F0F0F0Fu, low2 = 0x03030303u;
  const __m128i v = _mm_setr_epi32(static_cast<int>((w[0] & low4) | (w[2] & low2) << 4),
                                   static_cast<int>((w[1] & low4) | (w[2] >> 2 & low2) << 4),
                                   static_cast<int>((w[0] >> 4 & low4) | (w[2] >> 4 & low2) << 4),
                                   static_cast<int>((w[1] >> 4 & low4) | (w[2] >> 6 & low2) << 4));
  return _mm256_cvtepi8_epi16(_mm_sub_epi8(v, _mm_set1_epi8(32)));
}
void unpack(const BlockQ3_K& b, KBlock& k) {
  kquants(b, k.q);  // 0..7: the offset 4 comes off through the bsums
  k.sc16 = q3k_scales16(b.scales);
  const PairScales pairs(k.sc16);
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) k.scales[v] = pairs(v);
}
// The 8 six-bit scales and mins of a Q4_K / Q5_K super-block (kquant_scale_min) four at a time,
// as 32-bit words of bytes: scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-3 and 4-7;
// scales 4-7 the low nibbles of bytes 8-11 with the top 2 bits of bytes 0-3 above them, mins 4-7
// the high nibbles with the top 2 bits of bytes 4-7. (A byte at a time, with each row's minima
// repeated through the stack, this unpacking bounded the AVX2 Q4_K decode at 8 GB/s.)
struct ScaleWords {
  uint32_t sc[2], m[2];
};
inline ScaleWords scale_words(const uint8_t* s) {
  uint32_t w[3];
  std::memcpy(w, s, 12);
  return {{w[0] & 0x3F3F3F3Fu, (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 6) & 0x03030303u) << 4},
          {w[1] & 0x3F3F3F3Fu, ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 6) & 0x03030303u) << 4}};
}
template <class Block>
void unpack_q45k(const Block& b, KBlock& k) {
  const ScaleWords sw = scale_words(b.scales);
  // Each scale and min once per 16 elements (two bsums a sub-block of 32).
  const auto per16 = [](uint32_t lo, uint32_t hi) {
    const __m128i x = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(lo | uint64_t{hi} << 32)));
    return _mm256_set_m128i(_mm_unpackhi_epi16(x, x), _mm_unpacklo_epi16(x, x));
  };
  k.m16 = per16(sw.m[0], sw.m[1]);
  kquants(b, k.q);
  const PairScales pairs(per16(sw.sc[0], sw.sc[1]));
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) k.scales[v] = pairs(v);
}
void unpack(const BlockQ4_K& b, KBlock& k) { unpack_q45k(b, k); }
void unpack(const BlockQ5_K& b, KBlock& k) { unpack_q45k(b, k); }
void unpack(const BlockQ6_K& b, KBlock& k) {
  k.sc16 = widen16(b.scales);
  kquants(b, k.q);  // 0..63: the offset 32 comes off through the bsums
  const PairScales pairs(k.sc16);
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) k.scales[v] = pairs(v);
}

// The Q8_K scales of super-block i of rows r < R, in lanes.
template <int R>
inline __m128 act_scales(const uint8_t* a, int64_t as, int64_t i) {
  return float_lanes<R>([&](int r) { return act_block<BlockQ8_K>(a, as, r, i).d; });
}

// ggml's tiled kernel (Q2_K, Q3_K, Q5_K, Q6_K). kMin: the type has mins; kOffset: the quant offset
// taken off through the bsums (4 for Q3_K, 32 for Q6_K).
template <class Block, bool kMin, int kOffset>
struct Tiled {
  template <int R>
  static void tile(const void* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
    assert(n >= 0 && n % kQKK == 0);
    const auto* wb = static_cast<const Block*>(w);
    __m128 acc = _mm_setzero_ps();
    KBlock k;
    for (int64_t i = 0; i < n / kQKK; ++i) {
      prefetch_block(wb + i, sizeof(Block));
      unpack(wb[i], k);
      __m256i sums[R], mins[R];
      for (int r = 0; r < R; ++r) {
        const BlockQ8_K& ab = act_block<BlockQ8_K>(a, as, r, i);
        sums[r] = scaled_sum(k, ab.qs);
        if constexpr (kOffset != 0)
          sums[r] = _mm256_sub_epi32(sums[r], _mm256_mullo_epi32(bsum_lanes(k.sc16, ab.bsums), _mm256_set1_epi32(kOffset)));
        if constexpr (kMin) mins[r] = bsum_lanes(k.m16, ab.bsums);
      }
      __m128 res = _mm_mul_ps(_mm_set1_ps(half(wb[i].d)), _mm_cvtepi32_ps(hsums<R>(sums)));
      if constexpr (kMin) res = _mm_fnmadd_ps(_mm_set1_ps(half(wb[i].dmin)), _mm_cvtepi32_ps(hsums<R>(mins)), res);
      acc = _mm_fmadd_ps(res, act_scales<R>(a, as, i), acc);
    }
    store_rows<R>(acc, y, ys);
  }
};

// Q4_K (repacked gemm): scale and min chains, 64 elements per step.
struct Q4_K {
  template <int R>
  static void tile(const void* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
    assert(n >= 0 && n % kQKK == 0);
    const auto* wb = static_cast<const BlockQ4_K*>(w);
    __m128 acc = _mm_setzero_ps(), accm = _mm_setzero_ps();
    KBlock k;
    for (int64_t i = 0; i < n / kQKK; ++i) {
      prefetch_block(wb + i, sizeof(BlockQ4_K));
      unpack(wb[i], k);
      const __m128 da = act_scales<R>(a, as, i);
      const __m128 dd = _mm_mul_ps(_mm_set1_ps(half(wb[i].d)), da);
      const __m128 dm = _mm_mul_ps(_mm_set1_ps(half(wb[i].dmin)), da);
      // Lane j of mins[r]: m_j B_j, sub-block j's min term; step c takes lanes 2c and 2c + 1.
      __m256i mins[4];
      for (int r = 0; r < 4; ++r) mins[r] = r < R ? bsum_lanes(k.m16, act_block<BlockQ8_K>(a, as, r, i).bsums) : _mm256_setzero_si256();
      const __m256i m01 = _mm256_hadd_epi32(mins[0], mins[1]);  // per half: r0 pairs, r1 pairs
      const __m256i m23 = _mm256_hadd_epi32(mins[2], mins[3]);
      const __m128 pairs[4] = {_mm_castsi128_ps(_mm256_castsi256_si128(m01)), _mm_castsi128_ps(_mm256_castsi256_si128(m23)),
                               _mm_castsi128_ps(_mm256_extracti128_si256(m01, 1)), _mm_castsi128_ps(_mm256_extracti128_si256(m23, 1))};
      if constexpr (R == 1) {
        // One row (decode): the four steps' sums reduced together, lane c step c's (one tree
        // for four, where a horizontal sum each took 7 operations), then the chains one step
        // at a time in lane 0.
        const int8_t* aq = act_block<BlockQ8_K>(a, as, 0, i).qs;
        __m256i sums[4];
        for (int c = 0; c < 4; ++c) sums[c] = _mm256_add_epi32(scaled(k, 2 * c, aq), scaled(k, 2 * c + 1, aq));
        const __m128 s = _mm_cvtepi32_ps(hsums<4>(sums));
        const __m128 m = _mm_cvtepi32_ps(_mm_unpacklo_epi64(_mm256_castsi256_si128(m01), _mm256_extracti128_si256(m01, 1)));
        acc = _mm_fmadd_ss(s, dd, acc);
        accm = _mm_fmadd_ss(m, dm, accm);
        acc = _mm_fmadd_ss(_mm_shuffle_ps(s, s, 1), dd, acc);
        accm = _mm_fmadd_ss(_mm_shuffle_ps(m, m, 1), dm, accm);
        acc = _mm_fmadd_ss(_mm_shuffle_ps(s, s, 2), dd, acc);
        accm = _mm_fmadd_ss(_mm_shuffle_ps(m, m, 2), dm, accm);
        acc = _mm_fmadd_ss(_mm_shuffle_ps(s, s, 3), dd, acc);
        accm = _mm_fmadd_ss(_mm_shuffle_ps(m, m, 3), dm, accm);
        continue;
      }
      for (int c = 0; c < 4; ++c) {
        __m256i sums[R];
        for (int r = 0; r < R; ++r) {
          const int8_t* aq = act_block<BlockQ8_K>(a, as, r, i).qs;
          sums[r] = _mm256_add_epi32(scaled(k, 2 * c, aq), scaled(k, 2 * c + 1, aq));
        }
        // Rows 0-3 of step c: lane c % 2 and c % 2 + 2 of the half holding sub-blocks 2c, 2c + 1.
        const __m128 lo = pairs[c / 2 * 2], hi = pairs[c / 2 * 2 + 1];
        const __m128i m = _mm_castps_si128(c % 2 ? _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)) : _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(hsums<R>(sums)), dd, acc);
        accm = _mm_fmadd_ps(_mm_cvtepi32_ps(m), dm, accm);
      }
    }
    store_rows<R>(_mm_sub_ps(acc, accm), y, ys);
  }
};

// ---- F16 / BF16 ----

template <bool kBf16>
struct Half {
  static __m256 load8(const uint16_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtph_ps(v);
  }
  template <int R>
  static void tile(const void* w, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
    assert(n >= 0);
    const auto* wh = static_cast<const uint16_t*>(w);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    auto row = [&](int r) { return reinterpret_cast<const uint16_t*>(a + r * as); };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = load8(wh + i);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(wv, load8(row(r) + i), acc[r]);
    }
    if (i < n) {
      // Zero padding leaves a lane's sum as it was (it is never -0: it starts at +0).
      uint16_t wt[8] = {};
      std::memcpy(wt, wh + i, static_cast<size_t>(n - i) * 2);
      const __m256 wv = load8(wt);
      for (int r = 0; r < R; ++r) {
        uint16_t at[8] = {};
        std::memcpy(at, row(r) + i, static_cast<size_t>(n - i) * 2);
        acc[r] = _mm256_fmadd_ps(wv, load8(at), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) y[r * ys] = lane_tree(acc[r]);
  }
};

// F16 / BF16, decode: W weight rows against one activation row, each row's chain the one-row
// tile's (lane k: elements k, k + 8, ... in order, then lane_tree), the W chains side by side.
// One row's chain alone waits 4 cycles on its fma every 8 elements: 14 GB/s of F16 weights with
// two threads on an Intel Xeon VM.
template <bool kBf16, int W>
void half_rows(const uint8_t* w, int64_t ws, const uint16_t* a, int64_t n, float* y) {
  using H = Half<kBf16>;
  const uint16_t* row[W];
  for (int j = 0; j < W; ++j) row[j] = reinterpret_cast<const uint16_t*>(w + j * ws);
  __m256 acc[W];
  for (int j = 0; j < W; ++j) acc[j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (i % 32 == 0) prefetch_passes_ahead<W>(row[0] + i, ws, 64);
    const __m256 av = H::load8(a + i);
    for (int j = 0; j < W; ++j) acc[j] = _mm256_fmadd_ps(H::load8(row[j] + i), av, acc[j]);
  }
  if (i < n) {
    uint16_t at[8] = {};
    std::memcpy(at, a + i, static_cast<size_t>(n - i) * 2);
    const __m256 av = H::load8(at);
    for (int j = 0; j < W; ++j) {
      uint16_t wt[8] = {};
      std::memcpy(wt, row[j] + i, static_cast<size_t>(n - i) * 2);
      acc[j] = _mm256_fmadd_ps(H::load8(wt), av, acc[j]);
    }
  }
  for (int j = 0; j < W; ++j) y[j] = lane_tree(acc[j]);
}

template <bool kBf16>
struct HalfRows {
  template <int W>
  struct Of {
    static void run(const uint8_t* w, int64_t ws, const void* a, int64_t n, float* y) {
      half_rows<kBf16, W>(w, ws, static_cast<const uint16_t*>(a), n, y);
    }
  };
};

}  // namespace

void qdot_rows_f16_avx2(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  by_weight_fours<HalfRows<false>::Of>(w, ws, n_w, a, n, y);
}
void qdot_rows_bf16_avx2(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  by_weight_fours<HalfRows<true>::Of>(w, ws, n_w, a, n, y);
}
void qdot_f16_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Half<false>>(w, a, as, n_a, n, y, ys);
}
void qdot_bf16_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Half<true>>(w, a, as, n_a, n, y, ys);
}
void qdot_q8_0_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Lanes<BlockQ8_0, BlockQ8_0>>(w, a, as, n_a, n, y, ys);
}
void qdot_q5_0_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Lanes<BlockQ5_0, BlockQ8_0>>(w, a, as, n_a, n, y, ys);
}
void qdot_q4_0_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Q4_0>(w, a, as, n_a, n, y, ys);
}
void qdot_rows_q8_0_avx2(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  by_weight_fours<LanesRows<BlockQ8_0, BlockQ8_0>::Of>(w, ws, n_w, a, n, y);
}
void qdot_rows_q5_0_avx2(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  by_weight_fours<LanesRows<BlockQ5_0, BlockQ8_0>::Of>(w, ws, n_w, a, n, y);
}
void qdot_rows_q4_1_avx2(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  by_weight_fours<LanesRows<BlockQ4_1, BlockQ8_1>::Of>(w, ws, n_w, a, n, y);
}
void qdot_rows_q5_1_avx2(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  by_weight_fours<LanesRows<BlockQ5_1, BlockQ8_1>::Of>(w, ws, n_w, a, n, y);
}
void qdot_rows_q4_0_avx2(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  by_weight_fours<Q4_0Rows>(w, ws, n_w, a, n, y);
}
void qdot_q4_1_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Lanes<BlockQ4_1, BlockQ8_1>>(w, a, as, n_a, n, y, ys);
}
void qdot_q5_1_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Lanes<BlockQ5_1, BlockQ8_1>>(w, a, as, n_a, n, y, ys);
}
void qdot_q2_k_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Tiled<BlockQ2_K, true, 0>>(w, a, as, n_a, n, y, ys);
}
void qdot_q3_k_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Tiled<BlockQ3_K, false, 4>>(w, a, as, n_a, n, y, ys);
}
void qdot_q4_k_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Q4_K>(w, a, as, n_a, n, y, ys);
}
void qdot_q5_k_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Tiled<BlockQ5_K, true, 0>>(w, a, as, n_a, n, y, ys);
}
void qdot_q6_k_avx2(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<Tiled<BlockQ6_K, false, 32>>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
