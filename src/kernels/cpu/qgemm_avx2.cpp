// AVX2 tile kernels for every llama.cpp quantized type (interface and the bit-identity argument
// in qgemm.hpp), for CPUs without AVX-512. Q4_0 and the K-quants put the 8 weight rows of a group
// in the 8 int32 lanes of a ymm, as the AVX-512 tiles put 16 (qgemm_avx512.cpp): an activation
// row's 4 quants are broadcast to all lanes; without VNNI, vpmaddubsw multiplies them with the 4
// unsigned weight quants of each lane into two 16-bit pair sums, which add up in 16 bits and are
// widened once by vpmaddwd. The order of Q8_0, Q5_0, Q4_1 and Q5_1 needs 8 lanes per pair:
// register tiles (below).
// Weights are packed per call (matmul.cpp's scratch), never at load: the decode kernels below
// AVX-512 read the file's rows.
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/qgemm.hpp"
#include "kernels/cpu/qgemm_tiles.hpp"
#include "kernels/cpu/quants_avx2.hpp"
#include "quant/block_formats.hpp"

namespace infer {
namespace {

using namespace quant;
using namespace qgemm_tiles;
using avx2_quants::half;
using avx2_quants::lane_tree;

constexpr int64_t kRows = 8;  // weight rows per packed group: one per int32 lane
constexpr int64_t kKQuantMinRows = 8;  // the K-quant tiles' min_rows (k_kernel)

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// The first `count` lanes of v to y (count <= 8).
inline void store_lanes(float* y, __m256 v, int64_t count) {
  if (count == kRows) return _mm256_storeu_ps(y, v);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(y, mask, v);
}

// ---- Q4_0 ----
//
// Packed group, per block i (144 bytes, as many as the 8 rows' blocks in the file):
//   d    f16[8]       lane j: row j's scale (0 for the rows past count)
//   qs   u8[4][32]    vector k, lane j: row j's qs bytes 4k..4k+3, whose low nibbles are
//                     elements 4k..4k+3 and high nibbles elements 16+4k..16+4k+3
// The weight nibble q (0..15) is the unsigned operand of vpmaddubsw: Σ(q - 8) a = Σ q a - 8 Σ a,
// the correction from the side data. A 16-bit pair sum is at most 2 * 15 * 127 = 3810 in size,
// so the 8 of a block add up to at most 30480: no 16-bit sum saturates or wraps.
//
// Side data of an activation row, per block: {int32 -8 Σa, f32 dA} (qgemm_tiles.hpp).
struct Q4Packed {
  uint16_t d[kRows];
  uint8_t qs[4][32];
};
static_assert(sizeof(Q4Packed) == kRows * sizeof(BlockQ4_0));

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

int64_t q4_packed_bytes(int64_t n) noexcept { return n / kQK * static_cast<int64_t>(sizeof(Q4Packed)); }

// Packs block i of 8 rows; row(j) is row j's first block. Rows m and 4 + m share v[m] (128-bit
// lanes 0 and 1), and 4x4 transposes of dwords within each 128-bit lane give t[k], lane j =
// dword k of row j.
template <class Row>
inline void q4_pack_block(Row row, int64_t i, Q4Packed& out) {
  __m256i v[4];
  for (int m = 0; m < 4; ++m) v[m] = _mm256_set_m128i(load128(row(4 + m)[i].qs), load128(row(m)[i].qs));
  const __m256i a01 = _mm256_unpacklo_epi32(v[0], v[1]), b01 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i a23 = _mm256_unpacklo_epi32(v[2], v[3]), b23 = _mm256_unpackhi_epi32(v[2], v[3]);
  const __m256i t[4] = {_mm256_unpacklo_epi64(a01, a23), _mm256_unpackhi_epi64(a01, a23), _mm256_unpacklo_epi64(b01, b23),
                        _mm256_unpackhi_epi64(b01, b23)};
  for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs[k]), t[k]);
}

void q4_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kRows && n % kQK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<Q4Packed*>(packed);
  // Rows past count repeat the last row, with scale 0.
  const auto row = [&](int64_t j) { return reinterpret_cast<const BlockQ4_0*>(base + (j < count ? j : count - 1) * ws); };
  for (int64_t i = 0; i < n / kQK; ++i) {
    q4_pack_block(row, i, out[i]);
    for (int64_t j = 0; j < kRows; ++j) out[i].d[j] = j < count ? row(j)[i].d : 0;
  }
}

// R activation rows against one packed group: lane j of acc[r] is row j's chain for activation
// row r, acc = fma(I, dW * dA, acc) per block as in the reference.
template <int R>
void q4_tile(const Q4Packed* pk, int64_t count, const void* a, int64_t as, const uint8_t* side, int64_t ss, int64_t n,
             float* y, int64_t ys) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m256i pairs[R];
    for (int r = 0; r < R; ++r) pairs[r] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i q = load256(pk[i].qs[k]);
      const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      for (int r = 0; r < R; ++r) {
        const int8_t* aq = act_row<BlockQ8_0>(a, as, r)[i].qs;
        pairs[r] = _mm256_add_epi16(pairs[r], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(load_i32(aq + 4 * k))));
        pairs[r] = _mm256_add_epi16(pairs[r], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(load_i32(aq + 16 + 4 * k))));
      }
    }
    const __m256 dw = _mm256_cvtph_ps(load128(pk[i].d));
    for (int r = 0; r < R; ++r) {
      const Q4Side& s = reinterpret_cast<const Q4Side*>(side + r * ss)[i];
      const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(pairs[r], ones16), _mm256_set1_epi32(s.c));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(s.d)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_lanes(y + r * ys, acc[r], count);
}

void q4_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
                 int64_t n, float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const Q4Packed*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    q4_tile<decltype(rows)::value>(pk, count, ab + r * as, as, sb + r * ss, ss, n, y + r * ys, ys);
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
// convert and multiply). The order still costs a conversion, a multiply and an fma per pair and
// block: Q8_0 against the dots taking 4 activation rows a pass, one thread, 2048 x 2048, ms: 16
// rows level (2.90 / 2.88), 32 rows 5.81 -> 5.30; from 16 rows (the packing loses below: 8 rows
// 1.48 -> 1.69). (The float's magic bits instead of vcvtdq2ps measured slower.) The mins chains
// (mins = fma(mW, sA, mins) per block) of the tile's 8 pairs run in the lanes of one vector, lane
// 4k + r for weight row k and activation row r.
//
// Packed group, per block i (768 bytes, 1024 with mins): per row j, lo and hi (i16[16] each); dW
// as 8 equal floats (the products dW * dA in one multiply from memory); mW likewise.
// Side data of an activation row: per block lo and hi (64 bytes); then dA per block (f32), and
// sA (Q8_1's d times its quants' sum) per block.
template <class Block>
struct LaneType {
  static constexpr bool kMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  using Act = std::conditional_t<kMin, BlockQ8_1, BlockQ8_0>;
};

template <bool kMin>
struct LanesPacked {
  int16_t q[kRows][2][16];
  float d[kRows][8];
};
template <>
struct LanesPacked<true> {
  int16_t q[kRows][2][16];
  float d[kRows][8];
  float m[kRows][8];
};
static_assert(sizeof(LanesPacked<false>) == 768 && sizeof(LanesPacked<true>) == 1024);

inline void widen_halves(__m256i x, int16_t* lo, int16_t* hi) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), _mm256_srai_epi16(_mm256_slli_epi16(x, 8), 8));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), _mm256_srai_epi16(x, 8));
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
  auto* q = static_cast<int16_t*>(side);
  auto* d = reinterpret_cast<float*>(static_cast<uint8_t*>(side) + nb * 64);
  for (int64_t i = 0; i < nb; ++i) {
    widen_halves(load256(ab[i].qs), q + 32 * i, q + 32 * i + 16);
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
      widen_halves(avx2_quants::quants(row[i]), out[i].q[j][0], out[i].q[j][1]);
      _mm256_storeu_ps(out[i].d[j], _mm256_set1_ps(j < count ? half(row[i].d) : 0.0f));
      if constexpr (kMin) _mm256_storeu_ps(out[i].m[j], _mm256_set1_ps(j < count ? half(row[i].m) : 0.0f));
    }
  }
}

// Weight rows j0, j0 + 1 of a packed group against R activation rows: lane p of s[k][r] is the
// pair's chain, s = fma(dW * dA, I_p, s) per block; then the reference's tree (plus the mins).
template <bool kMin, int R>
void lanes_tile(const LanesPacked<kMin>* pk, int64_t j0, const uint8_t* side, int64_t ss, int64_t n, float* y) {
  const int64_t nb = n / kQK;
  const auto scales = [&](int r) { return reinterpret_cast<const float*>(side + r * ss + nb * 64); };
  __m256 s[2][R];
  for (int k = 0; k < 2; ++k)
    for (int r = 0; r < R; ++r) s[k][r] = _mm256_setzero_ps();
  __m256 mins = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    for (int r = 0; r < R; ++r) {
      const auto* q = reinterpret_cast<const int16_t*>(side + r * ss) + 32 * i;
      const __m256 da = _mm256_broadcast_ss(scales(r) + i);
      const __m256i alo = load256(q), ahi = load256(q + 16);
      for (int k = 0; k < 2; ++k) {
        const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(alo, load256(pk[i].q[j0 + k][0])),
                                             _mm256_madd_epi16(ahi, load256(pk[i].q[j0 + k][1])));
        const __m256 dd = _mm256_mul_ps(_mm256_loadu_ps(pk[i].d[j0 + k]), da);
        s[k][r] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(dot), s[k][r]);
      }
    }
    if constexpr (kMin) {
      const __m256 mw = _mm256_blend_ps(_mm256_loadu_ps(pk[i].m[j0]), _mm256_loadu_ps(pk[i].m[j0 + 1]), 0xF0);
      const __m128 sa = _mm_setr_ps(scales(0)[nb + i], R > 1 ? scales(1)[nb + i] : 0.0f, R > 2 ? scales(2)[nb + i] : 0.0f,
                                    R > 3 ? scales(3)[nb + i] : 0.0f);
      mins = _mm256_fmadd_ps(mw, _mm256_set_m128(sa, sa), mins);
    }
  }
  alignas(32) float m[8];
  _mm256_store_ps(m, mins);
  for (int k = 0; k < 2; ++k)
    for (int r = 0; r < R; ++r) y[2 * r + k] = kMin ? lane_tree(s[k][r]) + m[4 * k + r] : lane_tree(s[k][r]);
}

template <class Block>
void lanes_multiply(const void* packed, int64_t count, const void*, int64_t, const void* side, int64_t ss, int64_t n_a,
                    int64_t n, float* y, int64_t ys) noexcept {
  constexpr bool kMin = LaneType<Block>::kMin;
  const auto* pk = static_cast<const LanesPacked<kMin>*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    constexpr int R = decltype(rows)::value;
    for (int64_t j = 0; j < count; j += 2) {
      float out[R * 2];
      lanes_tile<kMin, R>(pk, j, sb + r * ss, ss, n, out);
      for (int64_t k = 0; k < std::min<int64_t>(2, count - j); ++k)
        for (int rr = 0; rr < R; ++rr) y[(r + rr) * ys + j + k] = out[2 * rr + k];
    }
  });
}

template <class Block>
constexpr QGemmKernel lanes_kernel() {
  return {16, kRows, lanes_side_bytes<Block>, lanes_prepare_side<Block>, lanes_packed_bytes<Block>, lanes_pack<Block>,
          lanes_multiply<Block>, nullptr};
}

// ---- K-quants (Q2_K to Q6_K): the super-block's quants decoded per call ----
//
// Packed group, per super-block i (2848 bytes; the weight is packed per call, so room is not
// the file's):
//   d, dmin  f16[8] each     lane j: row j's scales (0 for the rows past count; dmin 0 where the
//                            type has none)
//   sc       i16x2[16][8]    16-element group t, lane j: row j's scale of the sub-block holding
//                            t, in both 16-bit halves
//   coef     i16x2[8][8]     pair u, lane j: row j's coefficients of bsums 2u and 2u + 1: the
//                            mins (Q2_K, Q4_K, Q5_K) or the offset times the scale (Q3_K 4 sc,
//                            Q6_K 32 sc)
//   q        u8[64][32]      vector v, lane j: row j's quants of elements 4v..4v+3, unsigned
//                            (avx2_quants::kquants)
// Per 16-element group t and activation row, four vpmaddubsw (weight quants times the broadcast
// activation quants) add up in 16 bits and one vpmaddwd by the scales widens them: S = Σ sc_t I_t
// exactly. A 16-bit sum holds 4 pair sums (at most 4 * 2 * 31 * 127 = 31496), Q6_K's 2 (quants to
// 63: 2 * 2 * 63 * 127 = 32004). C = Σ coef B (B: the Q8_K bsums) by vpmaddwd too: M for the types
// with mins, and what the offsets take off S for the others.
struct KPacked {
  uint16_t d[kRows];
  uint16_t dmin[kRows];
  uint32_t sc[16][kRows];
  uint32_t coef[8][kRows];
  uint8_t q[64][32];
};
static_assert(sizeof(KPacked) == 2848);

inline uint32_t i16_pair(int lo, int hi) { return static_cast<uint16_t>(lo) | uint32_t{static_cast<uint16_t>(hi)} << 16; }

// How a type's float steps run (qdot.hpp): per super-block r = dW * S, r = fma(-dminW, M, r),
// acc = fma(r, dA, acc) (with_min: Q2_K, Q5_K); acc = fma(dW * (S - C), dA, acc) (offset:
// Q3_K, Q6_K); or per 64 elements acc = fma(S64, dW * dA, acc), accm = fma(M64, dminW * dA,
// accm), the result acc - accm (per64: Q4_K).
enum class KSteps { with_min, offset, per64 };

struct Q2KType {
  using Block = BlockQ2_K;
  static constexpr KSteps kSteps = KSteps::with_min;
  static constexpr int kSums16 = 4;
  static void scales(const Block& b, int* sc, int* coef) {
    for (int t = 0; t < 16; ++t) sc[t] = b.scales[t] & 0x0F, coef[t] = b.scales[t] >> 4;
  }
  static uint16_t dmin(const Block& b) { return b.dmin; }
};
struct Q3KType {
  using Block = BlockQ3_K;
  static constexpr KSteps kSteps = KSteps::offset;
  static constexpr int kSums16 = 4;
  static void scales(const Block& b, int* sc, int* coef) {
    for (int t = 0; t < 16; ++t) sc[t] = q3k_scale(b.scales, t), coef[t] = 4 * sc[t];
  }
  static uint16_t dmin(const Block&) { return 0; }
};
template <class B, KSteps kS>
struct Q45KType {
  using Block = B;
  static constexpr KSteps kSteps = kS;
  static constexpr int kSums16 = 4;
  static void scales(const Block& b, int* sc, int* coef) {
    for (int t = 0; t < 16; ++t) {
      const ScaleMin sm = kquant_scale_min(b.scales, t / 2);
      sc[t] = sm.sc, coef[t] = sm.m;
    }
  }
  static uint16_t dmin(const Block& b) { return b.dmin; }
};
using Q4KType = Q45KType<BlockQ4_K, KSteps::per64>;
using Q5KType = Q45KType<BlockQ5_K, KSteps::with_min>;
struct Q6KType {
  using Block = BlockQ6_K;
  static constexpr KSteps kSteps = KSteps::offset;
  static constexpr int kSums16 = 2;
  static void scales(const Block& b, int* sc, int* coef) {
    for (int t = 0; t < 16; ++t) sc[t] = b.scales[t], coef[t] = 32 * sc[t];
  }
  static uint16_t dmin(const Block&) { return 0; }
};

int64_t k_packed_bytes(int64_t n) noexcept { return n / kQKK * static_cast<int64_t>(sizeof(KPacked)); }

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

template <class T>
void k_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  using Block = typename T::Block;
  assert(count >= 1 && count <= kRows && n % kQKK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<KPacked*>(packed);
  alignas(32) uint8_t rows[kRows][kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    KPacked& o = out[i];
    for (int64_t j = 0; j < kRows; ++j) {
      // Rows past count repeat the last row, with scales 0.
      const Block& b = reinterpret_cast<const Block*>(base + std::min(j, count - 1) * ws)[i];
      __m256i q[8];
      avx2_quants::kquants(b, q);
      for (int v = 0; v < 8; ++v) _mm256_store_si256(reinterpret_cast<__m256i*>(rows[j] + 32 * v), q[v]);
      int sc[16], coef[16];
      T::scales(b, sc, coef);
      for (int t = 0; t < 16; ++t) o.sc[t][j] = i16_pair(sc[t], sc[t]);
      for (int u = 0; u < 8; ++u) o.coef[u][j] = i16_pair(coef[2 * u], coef[2 * u + 1]);
      o.d[j] = j < count ? b.d : 0;
      o.dmin[j] = j < count ? T::dmin(b) : 0;
    }
    for (int v = 0; v < 8; ++v) {
      __m256i in[kRows], t[8];
      for (int j = 0; j < kRows; ++j) in[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(rows[j] + 32 * v));
      transpose8(in, t);
      for (int k = 0; k < 8; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q[8 * v + k]), t[k]);
    }
  }
}

// R activation rows against one packed group: lane j of acc[r] (and accm[r]) is row j's chain.
template <class T, int R>
void k_tile(const KPacked* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m256 acc[R], accm[R];
  for (int r = 0; r < R; ++r) acc[r] = accm[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const KPacked& b = pk[i];
    const BlockQ8_K* ab[R];
    for (int r = 0; r < R; ++r) ab[r] = act_row<BlockQ8_K>(a, as, r) + i;
    const __m256 dw = _mm256_cvtph_ps(load128(b.d)), dmw = _mm256_cvtph_ps(load128(b.dmin));
    // C over pairs u0 <= u < u1 of 16-element groups.
    const auto coef_sum = [&](int r, int u0, int u1) {
      __m256i c = _mm256_setzero_si256();
      for (int u = u0; u < u1; ++u)
        c = _mm256_add_epi32(c, _mm256_madd_epi16(load256(b.coef[u]), _mm256_set1_epi32(load_i32(ab[r]->bsums + 2 * u))));
      return c;
    };
    __m256i s[R];
    for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) {
      const __m256i sc = load256(b.sc[t]);
#pragma GCC unroll 2
      for (int h = 0; h < 4 / T::kSums16; ++h) {
        __m256i sum[R];
#pragma GCC unroll 4
        for (int v = 0; v < T::kSums16; ++v) {
          const int e = 4 * t + h * T::kSums16 + v;  // the vector: elements 4e..4e+3
          const __m256i q = load256(b.q[e]);
          for (int r = 0; r < R; ++r) {
            const __m256i p = _mm256_maddubs_epi16(q, _mm256_set1_epi32(load_i32(ab[r]->qs + 4 * e)));
            sum[r] = v == 0 ? p : _mm256_add_epi16(sum[r], p);
          }
        }
        for (int r = 0; r < R; ++r) s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(sum[r], sc));
      }
      if constexpr (T::kSteps == KSteps::per64) {
        if (t % 4 == 3) {
          const int p = t / 4;
          for (int r = 0; r < R; ++r) {
            const __m256 da = _mm256_set1_ps(ab[r]->d);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_mul_ps(dw, da), acc[r]);
            accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(coef_sum(r, 2 * p, 2 * p + 2)), _mm256_mul_ps(dmw, da), accm[r]);
            s[r] = _mm256_setzero_si256();
          }
        }
      }
    }
    if constexpr (T::kSteps == KSteps::with_min) {
      for (int r = 0; r < R; ++r) {
        const __m256 res = _mm256_fnmadd_ps(dmw, _mm256_cvtepi32_ps(coef_sum(r, 0, 8)), _mm256_mul_ps(dw, _mm256_cvtepi32_ps(s[r])));
        acc[r] = _mm256_fmadd_ps(res, _mm256_set1_ps(ab[r]->d), acc[r]);
      }
    } else if constexpr (T::kSteps == KSteps::offset) {
      for (int r = 0; r < R; ++r) {
        const __m256i st = _mm256_sub_epi32(s[r], coef_sum(r, 0, 8));
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_cvtepi32_ps(st)), _mm256_set1_ps(ab[r]->d), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    store_lanes(y + r * ys, T::kSteps == KSteps::per64 ? _mm256_sub_ps(acc[r], accm[r]) : acc[r], count);
}

template <class T>
void k_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a, int64_t n,
                float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const KPacked*>(packed);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    k_tile<T, decltype(rows)::value>(pk, count, ab + r * as, as, n, y + r * ys, ys);
  });
}

// min_rows: the tiles pay from this many activation rows on (packing included), against the
// dots taking 4 activation rows a pass.
template <class T>
constexpr QGemmKernel k_kernel() {
  return {kKQuantMinRows, kRows, no_side_bytes, no_prepare_side, k_packed_bytes, k_pack<T>, k_multiply<T>, nullptr};
}

}  // namespace

const QGemmKernel qgemm_q4_0_avx2{2, kRows, q4_side_bytes, q4_prepare_side, q4_packed_bytes, q4_pack, q4_multiply,
                                  q4_0_unpack<Q4Packed>};
const QGemmKernel qgemm_q8_0_avx2 = lanes_kernel<BlockQ8_0>();
const QGemmKernel qgemm_q5_0_avx2 = lanes_kernel<BlockQ5_0>();
const QGemmKernel qgemm_q4_1_avx2 = lanes_kernel<BlockQ4_1>();
const QGemmKernel qgemm_q5_1_avx2 = lanes_kernel<BlockQ5_1>();
const QGemmKernel qgemm_q2_k_avx2 = k_kernel<Q2KType>();
const QGemmKernel qgemm_q3_k_avx2 = k_kernel<Q3KType>();
const QGemmKernel qgemm_q4_k_avx2 = k_kernel<Q4KType>();
const QGemmKernel qgemm_q5_k_avx2 = k_kernel<Q5KType>();
const QGemmKernel qgemm_q6_k_avx2 = k_kernel<Q6KType>();

}  // namespace infer
