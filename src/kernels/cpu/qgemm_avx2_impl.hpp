// AVX2 tile kernels for the 32-element block types Q4_0, Q8_0, Q5_0, Q4_1 and Q5_1 (interface and
// the bit-identity argument in qgemm.hpp; the K-quants are in qgemm_kquant_avx2_impl.hpp), for CPUs
// without AVX-512. Q4_0 reads the layout the CPU backend packs it into at load
// (qgemm_layouts.hpp), the AVX-512 tile's, as two halves of 8 int32 lanes: an activation row's 4
// quants are broadcast to all lanes; without VNNI, vpmaddubsw multiplies them with the 4 unsigned
// weight quants of each lane into two 16-bit pair sums, which add up in 16 bits and are widened
// once by vpmaddwd. The order of Q8_0, Q5_0, Q4_1 and Q5_1 needs 8 lanes per pair: register tiles
// (below), packed per call (matmul.cpp's scratch), and over the layouts packed at load.
//
// Compiled twice (avx2_vnni.hpp): qgemm_avx2.cpp gets the kernels named *_avx2, qgemm_avxvnni.cpp
// *_avxvnni, where one vpdpbusd adds each lane's 4 products of unsigned weight bytes and signed
// activation bytes to an int32. Signed weights then enter as unsigned ones, w + O (Q8_0: O = 128,
// the loaded layout's bytes as they are; Q5_0: O = 16, the quant itself), and the lane's sum
// starts from -O times the sum of its 4 activation quants.
#include "kernels/cpu/avx2_vnni.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/qgemm.hpp"
#include "kernels/cpu/qgemm_layouts.hpp"
#include "kernels/cpu/qgemm_tiles.hpp"
#include "kernels/cpu/quants_avx2.hpp"
#include "quant/block_formats.hpp"

namespace infer {
namespace {

using namespace quant;
using namespace qgemm_tiles;
using avx2_quants::half;
using avx2_quants::lane_tree;

using avx2_vnni::dpbusd;
using avx2_vnni::kVnni;

constexpr int64_t kRows = 8;  // weight rows per packed group: one per int32 lane

// Lane k of the result: -(1 << shift) times the sum of bytes 4k..4k+3 of a (signed).
inline __m256i offset_correction(__m256i a, int shift) {
  const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), a), _mm256_set1_epi16(1));
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, shift));
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// The first `count` lanes of v to y (all 8 when count >= 8).
inline void store_lanes(float* y, __m256 v, int64_t count) {
  if (count >= kRows) return _mm256_storeu_ps(y, v);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(y, mask, v);
}

// ---- Q4_0: the layout packed at load (qgemm_layouts.hpp), as two halves of 8 lanes ----
//
// Half hh of a 64-byte vector (bytes 32hh..32hh+31) holds rows 8hh..8hh+7, so one ymm load gives
// 8 rows' 4 qs bytes. The weight nibble q (0..15) is the unsigned operand of vpmaddubsw:
// Σ(q - 8) a = Σ q a - 8 Σ a, the correction from the side data. A 16-bit pair sum is at most
// 2 * 15 * 128 = 3840 in size, so the 8 of a block add up to at most 30720: no 16-bit sum
// saturates or wraps.
//
// Side data of an activation row, per block: {int32 -8 Σa, f32 dA} (qgemm_tiles.hpp).
using qgemm_layouts::Q4Packed;
using qgemm_layouts::q4_packed_bytes;

void q4_prepare_side(const void* a, void* side, int64_t n) noexcept {
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  auto* s = static_cast<Q4Side*>(side);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load256(ab[i].qs)), ones16);
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    s[i] = {-8 * _mm_cvtsi128_si32(t), half(ab[i].d)};
  }
}

// Packs half hh (rows 8hh..8hh+7) of block i; row(j) is row j's first block. Rows m and 4 + m
// of the half share v[m] (128-bit lanes 0 and 1), and 4x4 transposes of dwords within each
// 128-bit lane give t[k], lane j = dword k of row 8hh + j.
template <class Row>
inline void q4_pack_half(Row row, int64_t i, int hh, Q4Packed& out) {
  __m256i v[4];
  for (int m = 0; m < 4; ++m)
    v[m] = _mm256_set_m128i(load128(row(8 * hh + 4 + m)[i].qs), load128(row(8 * hh + m)[i].qs));
  const __m256i a01 = _mm256_unpacklo_epi32(v[0], v[1]), b01 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i a23 = _mm256_unpacklo_epi32(v[2], v[3]), b23 = _mm256_unpackhi_epi32(v[2], v[3]);
  const __m256i t[4] = {_mm256_unpacklo_epi64(a01, a23), _mm256_unpackhi_epi64(a01, a23), _mm256_unpacklo_epi64(b01, b23),
                        _mm256_unpackhi_epi64(b01, b23)};
  for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs[k] + 32 * hh), t[k]);
}

void q4_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= qgemm_layouts::kGroup && n % kQK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<Q4Packed*>(packed);
  // Rows past count repeat the last row, with scale 0.
  const auto row = [&](int64_t j) { return reinterpret_cast<const BlockQ4_0*>(base + (j < count ? j : count - 1) * ws); };
  for (int64_t i = 0; i < n / kQK; ++i) {
    q4_pack_half(row, i, 0, out[i]);
    q4_pack_half(row, i, 1, out[i]);
    for (int64_t j = 0; j < qgemm_layouts::kGroup; ++j) out[i].d[j] = j < count ? row(j)[i].d : 0;
  }
}

// R activation rows against halves hh0..hh0+H-1 of one packed group: lane j of acc[h][r] is row
// 8(hh0 + h) + j's chain for activation row r, acc = fma(I, dW * dA, acc) per block as in the
// reference. Up to 2 activation rows (a decode step) take both halves in one pass, so that they
// read one stream.
template <int R, int H>
void q4_tile(const Q4Packed* pk, int hh0, const void* a, int64_t as, const uint8_t* side, int64_t ss, int64_t n,
             float* y, int64_t ys, int64_t count) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
  __m256 acc[H][R];
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_ahead<R>(pk + i, sizeof(Q4Packed));
    for (int h = 0; h < H; ++h) {
      const int hh = hh0 + h;
      // Without VNNI, pair sums in 16 bits, widened once; with it, the int32 sums from the
      // correction -8 Σa on.
      __m256i sums[R];
      for (int r = 0; r < R; ++r)
        sums[r] = kVnni ? _mm256_set1_epi32(reinterpret_cast<const Q4Side*>(side + r * ss)[i].c) : _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        const __m256i q = load256(pk[i].qs[k] + 32 * hh);
        const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        for (int r = 0; r < R; ++r) {
          const int8_t* aq = act_row<BlockQ8_0>(a, as, r)[i].qs;
          const __m256i a_lo = _mm256_set1_epi32(load_i32(aq + 4 * k)), a_hi = _mm256_set1_epi32(load_i32(aq + 16 + 4 * k));
          if constexpr (kVnni) {
            sums[r] = dpbusd(dpbusd(sums[r], lo, a_lo), hi, a_hi);
          } else {
            sums[r] = _mm256_add_epi16(sums[r], _mm256_maddubs_epi16(lo, a_lo));
            avx2_vnni::keep_chain(sums[r]);
            sums[r] = _mm256_add_epi16(sums[r], _mm256_maddubs_epi16(hi, a_hi));
            avx2_vnni::keep_chain(sums[r]);
          }
        }
      }
      const __m256 dw = _mm256_cvtph_ps(load128(pk[i].d + 8 * hh));
      for (int r = 0; r < R; ++r) {
        const Q4Side& s = reinterpret_cast<const Q4Side*>(side + r * ss)[i];
        const __m256i dot = kVnni ? sums[r] : _mm256_add_epi32(_mm256_madd_epi16(sums[r], ones16), _mm256_set1_epi32(s.c));
        acc[h][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(s.d)), acc[h][r]);
      }
    }
  }
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) store_lanes(y + r * ys + 8 * (hh0 + h), acc[h][r], count - 8 * (hh0 + h));
}

void q4_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
                 int64_t n, float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const Q4Packed*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    constexpr int R = decltype(rows)::value;
    const auto* ar = ab + r * as;
    const auto* sr = sb + r * ss;
    if (count <= kRows) return q4_tile<R, 1>(pk, 0, ar, as, sr, ss, n, y + r * ys, ys, count);
    if constexpr (R <= 2) return q4_tile<R, 2>(pk, 0, ar, as, sr, ss, n, y + r * ys, ys, count);
    for (int hh = 0; hh < 2; ++hh) q4_tile<R, 1>(pk, hh, ar, as, sr, ss, n, y + r * ys, ys, count);
  });
}

// ---- Q8_0, Q5_0, Q4_1, Q5_1: 8 float lanes per (weight row, activation row) ----
//
// Lane p of a pair's chain sums elements 4p..4p+3 of each block (qdot.hpp: tinyBLAS's order for
// Q8_0 and Q5_0, vec_dot's for Q4_1 and Q5_1, which add a min chain), so the rows cannot share a
// vector: a tile holds 2 weight rows by up to 4 activation rows, one ymm chain each. The quants
// are widened to 16 bits once (weights when packed, with Q5_0's offset and fifth bits applied;
// activations with the side data), in two halves: lo holds bytes 0 and 2 of each 4-byte lane, hi
// bytes 1 and 3, so two vpmaddwd and one add give each lane its 4 products' sum exactly (where
// the sign trick's vpsignb, vpmaddubsw and vpmaddwd take three operations on the ports that also
// convert and multiply). The products dW * dA of a pair, one per block, are computed ahead for
// the whole group of 8 weight rows (one multiply per 8 rows and activation row, into a table in
// L1 that the tiles read as broadcasts), so that a pair and block cost two vpmaddwd, an add, a
// conversion and an fma: Q8_0, infer-bench-matmul's TinyLlama (2048 x 5632, AVX2, 2 threads, 128
// rows, ms over six alternations) 18.6-24.4 with the product in the tile, 14.8-18.9 with the
// table; Q5_0 18.1-22.7 -> 15.4-19.8. From 16 rows (the packing
// loses below: 8 rows 1.48 -> 1.69 ms against the dots, one thread, 2048 x 2048). (The float's
// magic bits instead of vcvtdq2ps measured slower.) The mins chains (mins = fma(mW, sA, mins) per
// block) of a tile's 8 pairs run in the lanes of one vector, lane 4k + r for weight row k and
// activation row r.
//
// With VNNI a pair and block take one vpdpbusd instead of the two vpmaddwd and the add: the
// weight quants stay bytes, w + O (Q8_0 O = 128, Q5_0 16, Q4_1 and Q5_1 0), and the activation
// row's side data gives each lane's start, -O times the sum of its 4 quants.
//
// Packed group, per block i (544 bytes, 576 with mins; with VNNI 288 and 320): per row j, lo and
// hi (i16[16] each; VNNI: the 32 bytes w + O); dW of the 8 rows as floats; mW likewise.
// Side data of an activation row: per block lo and hi (64 bytes; VNNI: the 32 quants, then the 8
// lanes' starts as int32); then dA per block (f32), and sA (Q8_1's d times its quants' sum) per
// block.
template <class Block>
struct LaneType {
  static constexpr bool kMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  using Act = std::conditional_t<kMin, BlockQ8_1, BlockQ8_0>;
  // log2 O, the offset that makes the quants unsigned for vpdpbusd; -1: unsigned already.
  static constexpr int kOffsetShift = std::is_same_v<Block, BlockQ8_0> ? 7 : std::is_same_v<Block, BlockQ5_0> ? 4 : -1;
};

// A row's quants of one block, as the tile multiplies them.
using LaneQuants = std::conditional_t<kVnni, uint8_t[32], int16_t[2][16]>;

template <bool kMin>
struct LanesPacked {
  LaneQuants q[kRows];
  float d[kRows];
};
template <>
struct LanesPacked<true> {
  LaneQuants q[kRows];
  float d[kRows];
  float m[kRows];
};
static_assert(sizeof(LanesPacked<false>) == (kVnni ? 288 : 544) && sizeof(LanesPacked<true>) == (kVnni ? 320 : 576));

inline void widen_halves(__m256i x, int16_t* lo, int16_t* hi) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), _mm256_srai_epi16(_mm256_slli_epi16(x, 8), 8));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), _mm256_srai_epi16(x, 8));
}

// x: the 32 quants as the tile multiplies them (signed; with VNNI, w + O).
template <class Quants>
inline void store_lane_quants(__m256i x, Quants& out) {
  if constexpr (kVnni)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), x);
  else
    widen_halves(x, out[0], out[1]);
}

template <class Block>
int64_t lanes_side_bytes(int64_t n) noexcept {
  return round64(n / kQK * (LaneType<Block>::kMin ? 72 : 68));
}

template <class Block>
void lanes_prepare_side(const void* a, void* side, int64_t n) noexcept {
  using Act = typename LaneType<Block>::Act;
  const int64_t nb = n / kQK;
  const auto* ab = static_cast<const Act*>(a);
  auto* q = static_cast<uint8_t*>(side);
  auto* d = reinterpret_cast<float*>(q + nb * 64);
  constexpr int kShift = LaneType<Block>::kOffsetShift;
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i x = load256(ab[i].qs);
    if constexpr (kVnni) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 64 * i), x);
      const __m256i start = kShift >= 0 ? offset_correction(x, kShift) : _mm256_setzero_si256();
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 64 * i + 32), start);
    } else {
      auto* w = reinterpret_cast<int16_t*>(q + 64 * i);
      widen_halves(x, w, w + 16);
    }
    d[i] = half(ab[i].d);
    if constexpr (LaneType<Block>::kMin) d[nb + i] = half(ab[i].s);
  }
}

template <class Block>
int64_t lanes_packed_bytes(int64_t n) noexcept {
  return n / kQK * static_cast<int64_t>(sizeof(LanesPacked<LaneType<Block>::kMin>));
}

template <class Block>
void lanes_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  constexpr bool kMin = LaneType<Block>::kMin;
  assert(count >= 1 && count <= kRows && n % kQK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<LanesPacked<kMin>*>(packed);
  for (int64_t j = 0; j < kRows; ++j) {
    // Rows past count repeat the last row, with scale (and min) 0.
    const auto* row = reinterpret_cast<const Block*>(base + std::min(j, count - 1) * ws);
    for (int64_t i = 0; i < n / kQK; ++i) {
      __m256i x = avx2_quants::quants(row[i]);
      if constexpr (kVnni && LaneType<Block>::kOffsetShift >= 0)
        x = _mm256_add_epi8(x, _mm256_set1_epi8(static_cast<char>(1 << LaneType<Block>::kOffsetShift)));
      store_lane_quants(x, out[i].q[j]);
      out[i].d[j] = j < count ? half(row[i].d) : 0.0f;
      if constexpr (kMin) out[i].m[j] = j < count ? half(row[i].m) : 0.0f;
    }
  }
}

// Blocks whose products dW * dA lanes_multiply computes ahead at a time: with 4 activation rows,
// a 4 KiB table that stays in L1 beside the blocks' weights and activations.
constexpr int64_t kLaneScaleBlocks = 32;

// A tile's chains: lane p of s[k][r] is the pair (weight row j0 + k, activation row r)'s chain p;
// mins its mins chains.
template <int R>
struct LaneChains {
  __m256 s[2][R];
  __m256 mins;
};

// Blocks i0..i1-1 of weight rows j0, j0 + 1 against R activation rows: s = fma(dW * dA, I_p, s)
// per block, the products from dd (dd[((i - i0) * R + r) * 8 + j]: row j, activation row r).
template <bool kMin, int R>
[[gnu::always_inline]] inline void lanes_tile(const LanesPacked<kMin>* pk, int64_t j0, const uint8_t* side, int64_t ss,
                                              int64_t nb, int64_t i0, int64_t i1, const float* dd, LaneChains<R>& c) {
  __m256 s[2][R];
  for (int k = 0; k < 2; ++k)
    for (int r = 0; r < R; ++r) s[k][r] = c.s[k][r];
  __m256 mins = c.mins;
  [[maybe_unused]] const __m256i pick = _mm256_setr_epi32(static_cast<int>(j0), static_cast<int>(j0), static_cast<int>(j0),
                                                          static_cast<int>(j0), static_cast<int>(j0 + 1), static_cast<int>(j0 + 1),
                                                          static_cast<int>(j0 + 1), static_cast<int>(j0 + 1));
  for (int64_t i = i0; i < i1; ++i) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* q = side + r * ss + 64 * i;
      const __m256i a0 = load256(q), a1 = load256(q + 32);  // lo and hi, or the quants and the starts
      const float* ddr = dd + ((i - i0) * R + r) * kRows + j0;
      for (int k = 0; k < 2; ++k) {
        __m256i dot;
        if constexpr (kVnni)
          dot = dpbusd(kMin ? _mm256_setzero_si256() : a1, load256(pk[i].q[j0 + k]), a0);
        else
          dot = _mm256_add_epi32(_mm256_madd_epi16(a0, load256(pk[i].q[j0 + k][0])),
                                 _mm256_madd_epi16(a1, load256(pk[i].q[j0 + k][1])));
        s[k][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(ddr + k), _mm256_cvtepi32_ps(dot), s[k][r]);
      }
    }
    if constexpr (kMin) {
      const auto sa = [&](int r) { return reinterpret_cast<const float*>(side + r * ss + nb * 64)[nb + i]; };
      const __m256 mw = _mm256_permutevar8x32_ps(_mm256_loadu_ps(pk[i].m), pick);
      const __m128 sa4 = _mm_setr_ps(sa(0), R > 1 ? sa(1) : 0.0f, R > 2 ? sa(2) : 0.0f, R > 3 ? sa(3) : 0.0f);
      mins = _mm256_fmadd_ps(mw, _mm256_set_m128(sa4, sa4), mins);
    }
  }
  for (int k = 0; k < 2; ++k)
    for (int r = 0; r < R; ++r) c.s[k][r] = s[k][r];
  c.mins = mins;
}

// Per group of R activation rows: the group's chains, advanced kLaneScaleBlocks blocks at a time
// (the products for those blocks first, then each tile); then the reference's tree (plus the mins).
template <class Block>
void lanes_multiply(const void* packed, int64_t count, const void*, int64_t, const void* side, int64_t ss, int64_t n_a,
                    int64_t n, float* y, int64_t ys) noexcept {
  constexpr bool kMin = LaneType<Block>::kMin;
  const auto* pk = static_cast<const LanesPacked<kMin>*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  const int64_t nb = n / kQK;
  by_row_groups(n_a, [&](auto rows, int64_t r0) {
    constexpr int R = decltype(rows)::value;
    const uint8_t* sr = sb + r0 * ss;
    LaneChains<R> chains[kRows / 2];
    for (auto& c : chains) {
      for (int k = 0; k < 2; ++k)
        for (int r = 0; r < R; ++r) c.s[k][r] = _mm256_setzero_ps();
      c.mins = _mm256_setzero_ps();
    }
    alignas(32) float dd[kLaneScaleBlocks * R * kRows];
    for (int64_t i0 = 0; i0 < nb; i0 += kLaneScaleBlocks) {
      const int64_t i1 = std::min(nb, i0 + kLaneScaleBlocks);
      for (int64_t i = i0; i < i1; ++i) {
        const __m256 dw = _mm256_loadu_ps(pk[i].d);
        for (int r = 0; r < R; ++r) {
          const float da = reinterpret_cast<const float*>(sr + r * ss + nb * 64)[i];
          _mm256_store_ps(dd + ((i - i0) * R + r) * kRows, _mm256_mul_ps(dw, _mm256_set1_ps(da)));
        }
      }
      for (int64_t j = 0; j < count; j += 2) lanes_tile<kMin, R>(pk, j, sr, ss, nb, i0, i1, dd, chains[j / 2]);
    }
    for (int64_t j = 0; j < count; j += 2) {
      alignas(32) float m[8];
      _mm256_store_ps(m, chains[j / 2].mins);
      for (int64_t k = 0; k < std::min<int64_t>(2, count - j); ++k)
        for (int r = 0; r < R; ++r) {
          const float tree = lane_tree(chains[j / 2].s[k][r]);
          y[(r0 + r) * ys + j + k] = kMin ? tree + m[4 * k + r] : tree;
        }
    }
  });
}

// ---- Q8_0, Q4_1 packed at load: the chains in the lanes (qgemm_layouts.hpp) ----
//
// Half hh of vector p holds elements 4p..4p+3 of rows 8hh..8hh+7, so lane j of accumulator p is
// chain p of row 8hh + j (s_p = fma(dW * dA, I_p, s_p) per block), and the rows' trees
// ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) are vector additions at the end; Q4_1 adds
// its mins chain, mins = fma(mW, sA, mins), in the lanes too. No horizontal sum, and each quant
// vector serves 8 rows: per block and 8 rows, 8 x (vpmaddubsw, vpmaddwd, conversion, fma) and
// the unpacking (Q8_0: the sign trick on w = q ^ 0x80, exact as Q8_0 activations stay within
// ±127; Q4_1: the nibbles, unsigned). 16 accumulators a pass: one activation row against both
// halves of the group, or two against one half. This tile takes every batch (infer-bench-matmul's
// TinyLlama, 2048 x 5632, AVX2, 2 threads, ms, against the file's rows: the dots, from 16 rows the
// per-call tiles above; a noisy host): Q4_1 1 row 0.41-0.59 -> 0.19-0.25, 8 rows 3.3-4.0 ->
// 1.3-1.8, 128 rows 31-39 -> 22-28; Q8_0 1 row 0.30-0.55 -> 0.31-0.34, 2 rows 0.72-1.10 ->
// 0.40-0.55, 8 rows 1.9-4.1 -> 1.6-1.9, 128 rows 24-40 -> 24-31. The per-call tiles packed from
// this layout ran 128 rows in 27-33 ms.
//
// Q5_0 and Q5_1 add the fifth bits (qgemm_layouts.hpp: a u32 per lane), 4 more operations a
// vector: one vpshufb puts the byte holding bits 4p..4p+3 in each byte of its lane, and an and
// with a compare make each byte's bit a mask. Q5_0's quants are then q - 16 as signed bytes
// (llama.cpp's: the nibble or'ed with 0xF0 where the fifth bit is clear), through Q8_0's sign
// trick; Q5_1's are unsigned (0..31), as Q4_1's.
//
// With VNNI every type's quants are unsigned, w + O (Q8_0: the layout's bytes as they are; Q5_0:
// q, 0..31, as Q5_1's), and a vector p and activation row take one vpdpbusd from the row's start
// -O Σ (its quants 4p..4p+3), broadcast; the starts of a block's 8 vectors cost 4 operations per
// activation row.
//
// values(): vector p's quants as the bytes the dot multiplies (pack_loaded widens them or, with
// VNNI, stores them).
template <class Block>
struct LoadedLanes;

// Vector p's nibbles (low for p < 4, high for p >= 4 of qs vector p mod 4), half hh.
inline __m256i lane_nibbles(const uint8_t (&qs)[4][64], int hh, int p) {
  const __m256i v = load256(qs[p % 4] + 32 * hh);
  return _mm256_and_si256(p < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}

// Byte t of each lane of half hh: 0xFF where bit 4p + t of the lane's qh word is set.
inline __m256i fifth_mask(const uint32_t* qh, int hh, int p) {
  const __m256i byte_of_lane = _mm256_setr_epi32(0x00000000, 0x04040404, 0x08080808, 0x0C0C0C0C, 0x00000000, 0x04040404,
                                                 0x08080808, 0x0C0C0C0C);
  const __m256i b = _mm256_shuffle_epi8(load256(qh + kRows * hh), _mm256_add_epi8(byte_of_lane, _mm256_set1_epi8(static_cast<char>(p / 2))));
  const __m256i bit = _mm256_set1_epi32(p % 2 ? static_cast<int>(0x80402010) : 0x08040201);
  return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

// Signed quants w and |w|, through the sign trick.
struct SignedWeights {
  __m256i w, abs;
  explicit SignedWeights(__m256i v) : w(v), abs(_mm256_sign_epi8(v, v)) {}
  __m256i values() const { return w; }
  __m256i dot(__m256i a4) const {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs, _mm256_sign_epi8(a4, w)), _mm256_set1_epi16(1));
  }
};
// Unsigned quants (0..31).
struct UnsignedWeights {
  __m256i q;
  explicit UnsignedWeights(__m256i v) : q(v) {}
  __m256i values() const { return q; }
  __m256i dot(__m256i a4) const { return _mm256_madd_epi16(_mm256_maddubs_epi16(q, a4), _mm256_set1_epi16(1)); }
};

// Q8_0's and Q5_0's quants: signed, or with VNNI unsigned (w + O).
using OffsetWeights = std::conditional_t<kVnni, UnsignedWeights, SignedWeights>;

template <>
struct LoadedLanes<BlockQ8_0> {
  using Packed = qgemm_layouts::Q8LanesPacked;
  using Act = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffsetShift = 7;
  static OffsetWeights weights(const Packed& b, int hh, int p) {
    const __m256i u = load256(b.qs[p] + 32 * hh);  // q ^ 0x80 = q + 128
    return OffsetWeights(kVnni ? u : _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80))));
  }
};
template <>
struct LoadedLanes<BlockQ5_0> {
  using Packed = qgemm_layouts::Q50LanesPacked;
  using Act = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr int kOffsetShift = 4;
  static OffsetWeights weights(const Packed& b, int hh, int p) {
    if constexpr (kVnni) {
      const __m256i high = _mm256_and_si256(fifth_mask(b.qh, hh, p), _mm256_set1_epi8(0x10));
      return OffsetWeights(_mm256_or_si256(lane_nibbles(b.qs, hh, p), high));
    } else {
      const __m256i high = _mm256_andnot_si256(fifth_mask(b.qh, hh, p), _mm256_set1_epi8(static_cast<char>(0xF0)));
      return OffsetWeights(_mm256_or_si256(lane_nibbles(b.qs, hh, p), high));
    }
  }
};
template <>
struct LoadedLanes<BlockQ4_1> {
  using Packed = qgemm_layouts::Q41LanesPacked;
  using Act = BlockQ8_1;
  static constexpr bool kMin = true;
  static constexpr int kOffsetShift = -1;
  static UnsignedWeights weights(const Packed& b, int hh, int p) { return UnsignedWeights(lane_nibbles(b.qs, hh, p)); }
};
template <>
struct LoadedLanes<BlockQ5_1> {
  using Packed = qgemm_layouts::Q51LanesPacked;
  using Act = BlockQ8_1;
  static constexpr bool kMin = true;
  static constexpr int kOffsetShift = -1;
  static UnsignedWeights weights(const Packed& b, int hh, int p) {
    const __m256i high = _mm256_and_si256(fifth_mask(b.qh, hh, p), _mm256_set1_epi8(0x10));
    return UnsignedWeights(_mm256_or_si256(lane_nibbles(b.qs, hh, p), high));
  }
};

// With VNNI, each vector's start per activation row of a block, for the types with an offset.
template <int R>
struct VectorStarts {
  alignas(32) int32_t v[R][8];
};
struct NoStarts {};
template <class L, int R>
using StartsOf = std::conditional_t<kVnni && L::kOffsetShift >= 0, VectorStarts<R>, NoStarts>;

template <class L, int R>
inline void block_starts(const void* a, int64_t as, int64_t i, StartsOf<L, R>& start) {
  if constexpr (!std::is_same_v<StartsOf<L, R>, NoStarts>)
    for (int r = 0; r < R; ++r)
      _mm256_store_si256(reinterpret_cast<__m256i*>(start.v[r]),
                         offset_correction(load256(act_row<typename L::Act>(a, as, r)[i].qs), L::kOffsetShift));
}

// Vector p's dot with activation row r's 4 quants a4.
template <class L, int R, class Weights>
inline __m256i lane_dot(const Weights& w, __m256i a4, const StartsOf<L, R>& start, int r, int p) {
  if constexpr (!std::is_same_v<StartsOf<L, R>, NoStarts>)
    return dpbusd(_mm256_set1_epi32(start.v[r][p]), w.values(), a4);
  else if constexpr (kVnni)
    return dpbusd(_mm256_setzero_si256(), w.values(), a4);
  else
    return w.dot(a4);
}

// R activation rows against halves hh0..hh0+H-1 of one packed group (R * H <= 2: 16 accumulators).
template <class Block, int R, int H, bool kPrefetch>
void loaded_lanes_tile(const typename LoadedLanes<Block>::Packed* pk, int hh0, const void* a, int64_t as, int64_t n, float* y,
                       int64_t ys, int64_t count) {
  using L = LoadedLanes<Block>;
  using Act = typename L::Act;
  __m256 acc[H][R][8], mins[H][R];
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) {
      mins[h][r] = _mm256_setzero_ps();
      for (int p = 0; p < 8; ++p) acc[h][r][p] = _mm256_setzero_ps();
    }
  // Declared out of the loop: an (empty) object made per block let GCC hold some of the
  // broadcasts below in general registers, two more operations each (the one-row AVX2 Q5_0 tile
  // ran 8% slower).
  [[maybe_unused]] StartsOf<L, R> start;
  for (int64_t i = 0; i < n / kQK; ++i) {
    if constexpr (kPrefetch) prefetch_ahead<R>(pk + i, sizeof(typename L::Packed));
    block_starts<L, R>(a, as, i, start);
    for (int h = 0; h < H; ++h) {
      const int hh = hh0 + h;
      const __m256 dw = _mm256_cvtph_ps(load128(pk[i].d + kRows * hh));
      __m256 dd[R];
      for (int r = 0; r < R; ++r) {
        const Act& ab = act_row<Act>(a, as, r)[i];
        dd[r] = _mm256_mul_ps(dw, _mm256_set1_ps(half(ab.d)));
        if constexpr (L::kMin)
          mins[h][r] = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(pk[i].m + kRows * hh)), _mm256_set1_ps(half(ab.s)), mins[h][r]);
      }
      for (int p = 0; p < 8; ++p) {
        const auto w = L::weights(pk[i], hh, p);
        for (int r = 0; r < R; ++r) {
          const __m256i dot = lane_dot<L, R>(w, _mm256_set1_epi32(load_i32(act_row<Act>(a, as, r)[i].qs + 4 * p)), start, r, p);
          acc[h][r][p] = _mm256_fmadd_ps(dd[r], _mm256_cvtepi32_ps(dot), acc[h][r][p]);
        }
      }
    }
  }
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) {
      const __m256* s = acc[h][r];
      const __m256 t = _mm256_add_ps(_mm256_add_ps(s[0], s[4]), _mm256_add_ps(s[2], s[6]));
      const __m256 u = _mm256_add_ps(_mm256_add_ps(s[1], s[5]), _mm256_add_ps(s[3], s[7]));
      const __m256 tree = _mm256_add_ps(t, u);
      store_lanes(y + r * ys + kRows * (hh0 + h), L::kMin ? _mm256_add_ps(tree, mins[h][r]) : tree, count - kRows * (hh0 + h));
    }
}

// One activation row (a decode step) takes both halves in one pass, reading one stream; pairs of
// rows one half a pass, the second from cache.
template <class Block>
void loaded_lanes_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a,
                           int64_t n, float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const typename LoadedLanes<Block>::Packed*>(packed);
  const auto* ab = static_cast<const uint8_t*>(a);
  int64_t r = 0;
  for (; r + 2 <= n_a; r += 2) {
    loaded_lanes_tile<Block, 2, 1, true>(pk, 0, ab + r * as, as, n, y + r * ys, ys, count);
    if (count > kRows) loaded_lanes_tile<Block, 2, 1, false>(pk, 1, ab + r * as, as, n, y + r * ys, ys, count);
  }
  if (r == n_a) return;
  if (count > kRows)
    loaded_lanes_tile<Block, 1, 2, true>(pk, 0, ab + r * as, as, n, y + r * ys, ys, count);
  else
    loaded_lanes_tile<Block, 1, 1, true>(pk, 0, ab + r * as, as, n, y + r * ys, ys, count);
}

// The per-call tile's groups from the loaded layout: rows first..first+count-1 (first a multiple
// of 8, count <= 8; lanes past count keep the loaded group's padding, scale 0). Wide batches run
// that tile: TinyLlama-shape pp512 alternating, Q8_0's loaded tile 55.6-61.4 tokens/s against
// 57.0-67.0 for this tile on the file's rows; packed from the loaded layout, level with them
// (50.9-54.3 against 50.2-53.8, a slower hour).
template <class Block>
void lanes_pack_loaded(const void* loaded, int64_t first, int64_t, int64_t n, void* packed) noexcept {
  using L = LoadedLanes<Block>;
  const int hh = static_cast<int>(first % qgemm_layouts::kGroup / kRows);
  const auto* pk = static_cast<const typename L::Packed*>(loaded) + first / qgemm_layouts::kGroup * (n / kQK);
  auto* out = static_cast<LanesPacked<L::kMin>*>(packed);
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m256i in[8], q[kRows];
    for (int p = 0; p < 8; ++p) in[p] = L::weights(pk[i], hh, p).values();
    avx2_quants::transpose8(in, q);  // q[j]: row 8hh + j's 32 quants in element order
    for (int64_t j = 0; j < kRows; ++j) store_lane_quants(q[j], out[i].q[j]);
    _mm256_storeu_ps(out[i].d, _mm256_cvtph_ps(load128(pk[i].d + kRows * hh)));
    if constexpr (L::kMin) _mm256_storeu_ps(out[i].m, _mm256_cvtph_ps(load128(pk[i].m + kRows * hh)));
  }
}

template <class Block>
constexpr QGemmKernel lanes_kernel() {
  QGemmKernel k{16, kRows, lanes_side_bytes<Block>, lanes_prepare_side<Block>, lanes_packed_bytes<Block>, lanes_pack<Block>,
                lanes_multiply<Block>, nullptr};
  // Q4_1's and Q5_1's loaded tiles take every batch (Q5_1, infer-bench-matmul's TinyLlama on AVX2,
  // ms: 32 rows 5.0 against this tile's 6.7, 128 rows 21.1 against 24.4); Q8_0's and Q5_0's hand
  // wider batches to this tile (Q5_0, 16 rows: its loaded tile 2.98, this tile packed from it 2.55).
  // With VNNI this tile takes over earlier: Q8_0 from 16 rows (16 rows 1.91-2.03 ms loaded, 1.67
  // packed from it; 8 rows level), Q5_0 from 4 (4 rows 0.615 against 0.562, 8 rows 1.23 against
  // 0.92). (Figures on AVX2, then with VNNI: Intel Xeon family 6 model 207, 2 threads, as loaded.)
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    k.pack_loaded = lanes_pack_loaded<Block>;
    k.min_rows_loaded = kVnni ? 16 : 32;
  } else if constexpr (std::is_same_v<Block, BlockQ5_0>) {
    k.pack_loaded = lanes_pack_loaded<Block>;
    k.min_rows_loaded = kVnni ? 4 : 16;
  } else if constexpr (kVnni && std::is_same_v<Block, BlockQ5_1>) {
    // With VNNI, Q5_1's loaded tile unpacks its fifth bits per activation row pair, where this
    // tile's pair and block cost one vpdpbusd: 8 rows 1.00 ms against 0.94 packed from it (4 rows
    // 0.50 against 0.58), 16 rows 1.99 against 1.66-1.81, 128 rows 15.9-16.4 against 11.7-11.8.
    // Q4_1's loaded tile stays level with this one (128 rows 11.9-12.4 against 11.8-11.9; 16 rows
    // 1.49 against 1.62) and keeps every batch.
    k.pack_loaded = lanes_pack_loaded<Block>;
    k.min_rows_loaded = 8;
  }
  return k;
}

}  // namespace

const QGemmKernel INFER_AVX2_KERNEL(qgemm_q4_0){2, qgemm_layouts::kGroup, q4_side_bytes, q4_prepare_side, q4_packed_bytes, q4_pack,
                                  q4_multiply, q4_0_unpack<Q4Packed>};
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q8_0) = lanes_kernel<BlockQ8_0>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q5_0) = lanes_kernel<BlockQ5_0>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q4_1) = lanes_kernel<BlockQ4_1>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q5_1) = lanes_kernel<BlockQ5_1>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q8_0_loaded){1,
                                         qgemm_layouts::kGroup,
                                         no_side_bytes,
                                         no_prepare_side,
                                         qgemm_layouts::q8_lanes_packed_bytes,
                                         qgemm_layouts::q8_lanes_pack,
                                         loaded_lanes_multiply<BlockQ8_0>,
                                         qgemm_layouts::q8_lanes_unpack};
template <class Block>
constexpr QGemmKernel nibble_loaded_kernel() {
  return {1,
          qgemm_layouts::kGroup,
          no_side_bytes,
          no_prepare_side,
          qgemm_layouts::nibble_lanes_packed_bytes<Block>,
          qgemm_layouts::nibble_lanes_pack<Block>,
          loaded_lanes_multiply<Block>,
          qgemm_layouts::nibble_lanes_unpack<Block>};
}
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q4_1_loaded) = nibble_loaded_kernel<BlockQ4_1>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q5_0_loaded) = nibble_loaded_kernel<BlockQ5_0>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q5_1_loaded) = nibble_loaded_kernel<BlockQ5_1>();

}  // namespace infer
