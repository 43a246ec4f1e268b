// AVX-512 decode kernels for the legacy block types the CPU backend reads in place (Q8_0, Q5_0,
// Q4_1, Q5_1): several weight rows against one activation row, bit-identical to the one-row
// kernels (kernels/cpu/qdot.hpp lists the float steps). Q8_0's are at the end of the file.
//
// The AVX2 one-row kernels spend about 20 instructions on each 32-element block (unpacking,
// maddubs + madd, two F16 conversions, the fma), which held a decode step's Q4_1 / Q5_0 / Q5_1
// matrices to about 14 GB/s on two Xeon cores, whether the weights came from memory or from L2.
// Here a zmm holds two weight rows' blocks, one per 256-bit half: one dpbusd forms both rows'
// eight 4-element dots, one fma advances both rows' lane chains, and the rows' mins chains run
// in the lanes of one vector. The scales of 4 blocks of 4 rows come in one gather, and nothing
// per block goes through a shuffle, which on Intel runs on port 5 alone: the first version of
// this file, which built each block's scale vector with inserts and broadcasts, was no faster
// than the AVX2 kernels. (Q8_0 takes a kernel of its own: two of its rows per vector made its
// decode slower.)
//
// Why the same bits: the integer dots are exact either way (dpbusd of an unsigned and a signed
// byte sums four products without saturation; the AVX2 maddubs pairs cannot saturate either, see
// qdot_avx2.cpp). Q5_0's quants (q - 16, signed) go in as the stored unsigned q, each lane's dot
// starting from -16 times its four activation quants' sum, the same integer. Each half's chain
// takes dd = dW * dA and fma(dd, I, s) per block in block order, each row's mins
// fma(mW, sA, mins), and each row's result is the lane tree of its half plus its mins: the one-row
// steps, per row.
#include "kernels/cpu/qgemm_avx512_util.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/isa_scratch.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant/block_formats.hpp"

namespace infer {
namespace {

using namespace quant;
using avx512_tiles::half;
using avx512_tiles::lane_tree;

// The 16 qs bytes of blocks a (low half) and b (high half) as 32 quants each, in element order:
// low nibbles are elements 0-15, high nibbles 16-31. (Broadcast loads, not shuffles: port 5 is
// what these kernels would otherwise wait on.)
inline __m512i nibbles2(const uint8_t* a, const uint8_t* b) {
  // 128-bit lanes a, a, b, b; then the second and fourth shifted down a nibble.
  const __m512i twice = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                                    0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  return _mm512_and_si512(_mm512_srlv_epi64(twice, shifts), _mm512_set1_epi8(0x0F));
}

// Bit j of qh (4 bytes) of block a, then of block b, as a byte mask.
inline __mmask64 high_bits2(const uint8_t* a, const uint8_t* b) {
  uint32_t ha, hb;
  std::memcpy(&ha, a, 4);
  std::memcpy(&hb, b, 4);
  return _cvtu64_mask64(static_cast<uint64_t>(hb) << 32 | ha);
}

// Two blocks' quants as unsigned bytes: for Q5_0 the stored 5 bits, q + 16 (its offset is taken
// off with the activation sums, see Rows); for Q4_1 / Q5_1 the quants themselves.
inline __m512i quants2(const BlockQ5_0& a, const BlockQ5_0& b) {
  return _mm512_or_si512(nibbles2(a.qs, b.qs), _mm512_maskz_mov_epi8(high_bits2(a.qh, b.qh), _mm512_set1_epi8(0x10)));
}
inline __m512i quants2(const BlockQ4_1& a, const BlockQ4_1& b) { return nibbles2(a.qs, b.qs); }
inline __m512i quants2(const BlockQ5_1& a, const BlockQ5_1& b) {
  return _mm512_or_si512(nibbles2(a.qs, b.qs), _mm512_maskz_mov_epi8(high_bits2(a.qh, b.qh), _mm512_set1_epi8(0x10)));
}

// The gather of the scale words of 4 blocks of `rows` weight rows (at most 4), ws bytes apart:
// lane 4 i' + j reads block i0 + i' of row j at offsets[lane] bytes from row 0's block i0; i_of
// holds i' per lane, of_rows the lanes of rows that exist.
struct ScaleGather {
  __m512i offsets, i_of;
  __mmask16 of_rows;
};
inline ScaleGather scale_gather(int64_t ws, int64_t block_bytes, int rows) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i j_of = _mm512_and_si512(lane, _mm512_set1_epi32(3)), i_of = _mm512_srli_epi32(lane, 2);
  return {_mm512_add_epi32(_mm512_mullo_epi32(j_of, _mm512_set1_epi32(static_cast<int32_t>(ws))),
                           _mm512_mullo_epi32(i_of, _mm512_set1_epi32(static_cast<int32_t>(block_bytes)))),
          i_of, _mm512_cmplt_epi32_mask(j_of, _mm512_set1_epi32(rows))};
}

// What the kernels read of the activation row, prepared once per call: the block scales (and,
// for Q8_1, sums) as floats, 4 blocks past the last readable; for Q5_0, -16 times the sum of
// each 4 activation quants (8 lanes a block), the offset of its weight quants.
struct ActRow {
  const float* da;
  const float* sa;
  const int32_t* offsets;
};

template <class Block, class Act>
struct Rows {
  static constexpr bool kMin = std::is_same_v<Act, BlockQ8_1>;
  static constexpr bool kOffset = std::is_same_v<Block, BlockQ5_0>;

  // Weight rows 2P (P zmm, two rows each) at w, ws bytes apart, against activation row a (and
  // what `act` holds of it).
  //
  // Per 4 blocks, one gather fetches the scale (and min) words of the 4 blocks of every row:
  // lane 4 i' + j holds block i0 + i' of row j. Converted and multiplied once, they wait on the
  // stack, and each block's two-row scale vector is a masked broadcast from there.
  template <int P>
  static void run(const uint8_t* w, int64_t ws, const Act* a, const ActRow& act, int64_t n, float* y) {
    constexpr int W = 2 * P;
    constexpr int64_t kBlock = sizeof(Block);
    const int64_t nb = n / kQK;
    __m512 acc[P];
    __m128 mins = _mm_setzero_ps();  // lane j: row j's
    for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
    const Block* row[W];
    for (int j = 0; j < W; ++j) row[j] = reinterpret_cast<const Block*>(w + j * ws);
    const auto [offsets, i_of, of_rows] = scale_gather(ws, kBlock, W);
    alignas(64) float dd[16], mw[16];
    for (int64_t i0 = 0; i0 < nb; i0 += 4) {
      const int64_t count = std::min<int64_t>(4, nb - i0);
      // The same blocks of the next W rows: the rows of a pass lie side by side, so each of their
      // streams runs one pass (W rows' bytes) ahead of itself.
      for (int j = 0; j < W; ++j) {
        const char* ahead = reinterpret_cast<const char*>(row[j] + i0) + W * ws;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 4 * kBlock - 1, _MM_HINT_T0);
      }
      const __mmask16 valid = of_rows & static_cast<__mmask16>((1u << (4 * count)) - 1);
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets, row[0] + i0, 1);
      const __m512 da4 = _mm512_permutexvar_ps(i_of, _mm512_castps128_ps512(_mm_loadu_ps(act.da + i0)));
      _mm512_store_ps(dd, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)), da4));
      if constexpr (kMin) _mm512_store_ps(mw, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(words, 16))));
      for (int64_t k = 0; k < count; ++k) {
        const int64_t i = i0 + k;
        const __m512i aq = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs)));
        // The lanes' integer dots start from the offset's share (exact: Σ (q - 16) a is
        // Σ q a - 16 Σ a), then one dpbusd adds both rows' unsigned quants times the activation's.
        const __m512i start = kOffset ? _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(act.offsets + 8 * i)))
                                      : _mm512_setzero_si512();
        for (int p = 0; p < P; ++p) {
          const __m512i dots = _mm512_dpbusd_epi32(start, quants2(row[2 * p][i], row[2 * p + 1][i]), aq);
          const __m512 scale = _mm512_mask_broadcastss_ps(_mm512_set1_ps(dd[4 * k + 2 * p]), 0xFF00, _mm_set_ss(dd[4 * k + 2 * p + 1]));
          acc[p] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(dots), acc[p]);
        }
        if constexpr (kMin) mins = _mm_fmadd_ps(_mm_load_ps(mw + 4 * k), _mm_set1_ps(act.sa[i]), mins);
      }
    }
    alignas(16) float m[4];
    _mm_store_ps(m, mins);
    for (int p = 0; p < P; ++p) {
      const float t0 = lane_tree(_mm512_castps512_ps256(acc[p])), t1 = lane_tree(_mm512_extractf32x8_ps(acc[p], 1));
      y[2 * p] = kMin ? t0 + m[2 * p] : t0;
      y[2 * p + 1] = kMin ? t1 + m[2 * p + 1] : t1;
    }
  }
};

// A thread's buffer of at least n T (isa_scratch.hpp: never a std:: container in an ISA's file).
template <class T>
T* thread_buffer(size_t n) {
  thread_local isa_scratch::Buffer<T> buffer;
  return buffer.at_least(n);
}

// Rows four at a time, then two, then the last one by the one-row kernel.
template <class Block, class Act>
void weight_rows(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y, QDotFn one) {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const Act*>(a);
  const int64_t nb = n / kQK;
  float* da = thread_buffer<float>(static_cast<size_t>(2 * (nb + 4)));
  float* sa = da + nb + 4;
  for (int64_t i = 0; i < nb; ++i) {
    da[i] = half(ab[i].d);
    if constexpr (std::is_same_v<Act, BlockQ8_1>) sa[i] = half(ab[i].s);
  }
  for (int64_t i = nb; i < nb + 4; ++i) da[i] = sa[i] = 0.0f;
  int32_t* offsets = nullptr;
  if constexpr (Rows<Block, Act>::kOffset) {
    offsets = thread_buffer<int32_t>(static_cast<size_t>(8 * nb));
    for (int64_t i = 0; i < nb; ++i) {
      const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[i].qs)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(offsets + 8 * i), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 4)));
    }
  }
  const ActRow act{da, sa, offsets};
  int64_t j = 0;
  for (; j + 4 <= n_w; j += 4) Rows<Block, Act>::template run<2>(wb + j * ws, ws, ab, act, n, y + j);
  for (; j + 2 <= n_w; j += 2) Rows<Block, Act>::template run<1>(wb + j * ws, ws, ab, act, n, y + j);
  if (j < n_w) one(wb + j * ws, a, 0, 1, n, y + j, 1);
}

// ---- Q8_0: W weight rows, one ymm chain each, against one activation row ----
//
// The AVX2 one-row kernel spends about 15 instructions on each block (two sign operations, maddubs
// and madd, a conversion, a scalar F16 conversion and product, a broadcast, the fma), which ran
// the Intel Xeon's Q8_0 decode at 73-78% of the read bandwidth where Q4_0's tiles reach 90%. Here
// W rows share each block's activation loads: per row and block, one load of the quants with their
// top bit flipped (unsigned w + 128), one dpbusd starting from kMagicBits - 128 Σa (so that its
// lanes hold the bits of the float 1.5 * 2^23 + I, I the lane's integer dot, exactly: |I| <= 4 *
// 128 * 127 < 2^22), one subtraction giving float(I) exactly, a broadcast load of the block's
// dW * dA (4 blocks of the W rows converted and multiplied together, from one gather), the fma.
// The steps of the one-row kernel, per row: the same lanes, the same products, the same chain.
constexpr int32_t kMagicBits = 0x4B400000;
constexpr float kMagic = 0x1.8p23f;

template <int W>
void q8_0_rows(const uint8_t* w, int64_t ws, const BlockQ8_0* a, const int32_t* start, const float* da, int64_t n, float* y) {
  constexpr int64_t kBlock = sizeof(BlockQ8_0);
  const int64_t nb = n / kQK;
  __m256 acc[W];
  for (int j = 0; j < W; ++j) acc[j] = _mm256_setzero_ps();
  const BlockQ8_0* row[W];
  for (int j = 0; j < W; ++j) row[j] = reinterpret_cast<const BlockQ8_0*>(w + j * ws);
  const auto [offsets, i_of, of_rows] = scale_gather(ws, kBlock, W);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256 magic = _mm256_set1_ps(kMagic);
  alignas(64) float dd[16];
  for (int64_t i0 = 0; i0 < nb; i0 += 4) {
    const int64_t count = std::min<int64_t>(4, nb - i0);
    // The same 4 blocks of the next W rows (136 bytes: every cache line they touch).
    for (int j = 0; j < W; ++j) {
      const char* ahead = reinterpret_cast<const char*>(row[j] + i0) + W * ws;
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      _mm_prefetch(ahead + 4 * kBlock - 1, _MM_HINT_T0);
    }
    const __mmask16 valid = of_rows & static_cast<__mmask16>((1u << (4 * count)) - 1);
    const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets, row[0] + i0, 1);
    const __m512 da4 = _mm512_permutexvar_ps(i_of, _mm512_castps128_ps512(_mm_loadu_ps(da + i0)));
    _mm512_store_ps(dd, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)), da4));
    for (int64_t k = 0; k < count; ++k) {
      const int64_t i = i0 + k;
      const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
      const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(start + 8 * i));
      for (int j = 0; j < W; ++j) {
        const __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[j][i].qs)), flip);
        const __m256 dots = _mm256_sub_ps(_mm256_castsi256_ps(_mm256_dpbusd_epi32(s, u, aq)), magic);
        acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(dd + 4 * k + j), dots, acc[j]);
      }
    }
  }
  for (int j = 0; j < W; ++j) y[j] = lane_tree(acc[j]);
}

}  // namespace

void qdot_rows_q8_0_avx512(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  const int64_t nb = n / kQK;
  // Per block: the lanes' starts kMagicBits - 128 Σa (8 int32), and dA, 4 blocks past the last 0.
  float* da = thread_buffer<float>(static_cast<size_t>(nb + 4));
  int32_t* start = thread_buffer<int32_t>(static_cast<size_t>(8 * nb));
  for (int64_t i = 0; i < nb; ++i) {
    da[i] = half(ab[i].d);
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[i].qs)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(start + 8 * i),
                        _mm256_sub_epi32(_mm256_set1_epi32(kMagicBits), _mm256_slli_epi32(sums, 7)));
  }
  for (int64_t i = nb; i < nb + 4; ++i) da[i] = 0.0f;
  int64_t j = 0;
  for (; j + 4 <= n_w; j += 4) q8_0_rows<4>(wb + j * ws, ws, ab, start, da, n, y + j);
  switch (n_w - j) {
    case 3: return q8_0_rows<3>(wb + j * ws, ws, ab, start, da, n, y + j);
    case 2: return q8_0_rows<2>(wb + j * ws, ws, ab, start, da, n, y + j);
    case 1: return q8_0_rows<1>(wb + j * ws, ws, ab, start, da, n, y + j);
    default: return;
  }
}

void qdot_rows_q5_0_avx512(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  weight_rows<BlockQ5_0, BlockQ8_0>(w, ws, n_w, a, n, y, qdot_q5_0_avx2);
}
void qdot_rows_q4_1_avx512(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  weight_rows<BlockQ4_1, BlockQ8_1>(w, ws, n_w, a, n, y, qdot_q4_1_avx2);
}
void qdot_rows_q5_1_avx512(const void* w, int64_t ws, int64_t n_w, const void* a, int64_t n, float* y) {
  weight_rows<BlockQ5_1, BlockQ8_1>(w, ws, n_w, a, n, y, qdot_q5_1_avx2);
}

}  // namespace infer
