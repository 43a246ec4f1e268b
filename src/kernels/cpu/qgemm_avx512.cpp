// AVX-512 VNNI tile kernels for the 32-element block types Q4_0, Q8_0, Q5_0, Q4_1 and Q5_1
// (interface and the bit-identity argument in qgemm.hpp; the K-quants are in
// qgemm_kquant_avx512.cpp). vpdpbusd multiplies unsigned bytes by signed bytes, four products per
// int32 lane; each type gets one unsigned operand by an offset that its side data takes off again:
//   Q4_0: the weight nibble q (0..15) is unsigned; Σ(q - 8) a = Σ q a - 8 Σ a.
//   Q8_0: the weight quant w (-128..127) is stored as w + 128 (w ^ 0x80); Σ w a = Σ(w + 128) a - 128 Σ a.
// The correction starts the integer sum, so every block's integer dot is exact before its
// float step.
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/isa_scratch.hpp"
#include "kernels/cpu/qgemm.hpp"
#include "kernels/cpu/qgemm_avx512_util.hpp"

namespace infer {
namespace {

using namespace quant;
using namespace avx512_tiles;

inline const BlockQ8_0* q8_row(const void* a, int64_t as, int64_t r) { return act_row<BlockQ8_0>(a, as, r); }

// ---- Q4_0: the 16 weight rows of a group in the 16 int32 lanes ----
//
// The packed group: qgemm_layouts.hpp (Q4Packed, 16 rows). The tile splits each qs vector into
// its two nibble vectors. An activation row's 4 quants of elements 4k..4k+3 are broadcast to all
// lanes, so one dpbusd adds 4 products to each of the 16 rows' block dots, and no horizontal sum
// is needed.
//
// Side data of an activation row, per block: {int32 -8 Σa, f32 dA} (qgemm_tiles.hpp).
using qgemm_layouts::Q4Packed;
using qgemm_layouts::q4_packed_bytes;

void q4_prepare_side(const void* a, void* side, int64_t n) noexcept {
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  auto* s = static_cast<Q4Side*>(side);
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n / kQK; ++i) {
    // Σ a over the block: dpbusd with unsigned ones, then the 8 lanes summed.
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[i].qs)));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
    s[i] = {-8 * _mm_cvtsi128_si32(t), half(ab[i].d)};
  }
}

// The F16 scales of 16 Q4_0 or Q8_0 blocks (at each block's start) at the given byte offsets from
// base; lanes past `valid` are 0.
inline __m256i block_scales(const uint8_t* base, __m512i offsets, __mmask16 valid) {
  const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, offsets, base, 1);
  return _mm512_cvtepi32_epi16(words);
}
inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

// Packs block i of 16 rows; row(j) is row j's first block. The qs loads of row 4g + m go to
// 128-bit lane g of v[m].
template <class Row>
inline void q4_pack_block(Row row, int64_t i, __m512i offsets, __mmask16 valid, Q4Packed& out) {
  const auto load128 = [&](int64_t j) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(j)[i].qs)); };
  __m512i v[4];
  for (int m = 0; m < 4; ++m) {
    __m512i x = _mm512_castsi128_si512(load128(m));
    x = _mm512_inserti32x4(x, load128(4 + m), 1);
    x = _mm512_inserti32x4(x, load128(8 + m), 2);
    v[m] = _mm512_inserti32x4(x, load128(12 + m), 3);
  }
  // 4x4 transposes of dwords within each 128-bit lane: t[k] lane 4g + m = dword k of row 4g + m.
  const __m512i a01 = _mm512_unpacklo_epi32(v[0], v[1]), b01 = _mm512_unpackhi_epi32(v[0], v[1]);
  const __m512i a23 = _mm512_unpacklo_epi32(v[2], v[3]), b23 = _mm512_unpackhi_epi32(v[2], v[3]);
  const __m512i t[4] = {_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23),
                        _mm512_unpacklo_epi64(b01, b23), _mm512_unpackhi_epi64(b01, b23)};
  for (int k = 0; k < 4; ++k) _mm512_storeu_si512(out.qs[k], t[k]);
  store256(out.d, block_scales(reinterpret_cast<const uint8_t*>(&row(0)[i]), offsets, valid));
}

// Byte offsets j * ws of rows 0..15 (the gather indices; a group spans far less than 2 GiB).
inline __m512i row_offsets(int64_t ws) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int32_t>(ws)));
}

void q4_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<Q4Packed*>(packed);
  const __m512i offsets = row_offsets(ws);
  if (count == kGroup) {
    // Row 4g + m from four base pointers and multiples of 4 ws (few registers: no spills).
    const uint8_t* p[4] = {base, base + ws, base + 2 * ws, base + 3 * ws};
    const int64_t ws4 = 4 * ws;
    const auto row = [&](int64_t j) { return reinterpret_cast<const BlockQ4_0*>(p[j % 4] + (j / 4) * ws4); };
    for (int64_t i = 0; i < n / kQK; ++i) q4_pack_block(row, i, offsets, 0xFFFF, out[i]);
    return;
  }
  // The last group: rows past count repeat the last row (their scales are 0).
  const auto row = [&](int64_t j) { return reinterpret_cast<const BlockQ4_0*>(base + (j < count ? j : count - 1) * ws); };
  for (int64_t i = 0; i < n / kQK; ++i) q4_pack_block(row, i, offsets, lanes_below(count), out[i]);
}

// R activation rows against one packed group: lane j of acc[r] is row j's chain for activation
// row r, acc = fma(I, dW * dA, acc) per block as in the reference.
template <int R>
void q4_tile(const Q4Packed* pk, int64_t count, const void* a, int64_t as, const uint8_t* side, int64_t ss, int64_t n,
             float* y, int64_t ys) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_ahead<R>(pk + i, sizeof(Q4Packed));
    __m512i wq[8];
    for (int k = 0; k < 4; ++k) {
      const __m512i q = _mm512_loadu_si512(pk[i].qs[k]);
      wq[k] = _mm512_and_si512(q, low4);
      wq[k + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    }
    const __m512 dw = load_scales(pk[i].d);
    for (int r = 0; r < R; ++r) {
      const int8_t* aq = q8_row(a, as, r)[i].qs;
      const Q4Side& s = reinterpret_cast<const Q4Side*>(side + r * ss)[i];
      // Two chains of 4 dpbusd (latency, not throughput, bounds one long chain).
      __m512i lo = _mm512_set1_epi32(s.c), hi = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        lo = _mm512_dpbusd_epi32(lo, wq[k], _mm512_set1_epi32(load_i32(aq + 4 * k)));
        hi = _mm512_dpbusd_epi32(hi, wq[k + 4], _mm512_set1_epi32(load_i32(aq + 16 + 4 * k)));
      }
      const __m512i dot = _mm512_add_epi32(lo, hi);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(s.d)), acc[r]);
    }
  }
  const __mmask16 valid = lanes_below(count);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ys, valid, acc[r]);
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


// ---- Q8_0: two weight rows per vector, 8 lanes each ----
//
// The tinyBLAS order keeps 8 float chains per (weight row, activation row), lane p summing
// elements 4p..4p+3 (one dpbusd lane), so a vector holds two weight rows' 8 lanes: the low half
// row 2j, the high half row 2j + 1, against one activation row's block broadcast to both halves.
//
// Packed group, per block i (1024 bytes):
//   d    f32[8][16]  pair j: lanes 0-7 row 2j's scale, lanes 8-15 row 2j + 1's (0 past count),
//                    as the pair's vector of products dW * dA needs them
//   q    u8[8][64]   pair j: bytes 0-31 row 2j's quants + 128, bytes 32-63 row 2j + 1's
// Per block, a tile of P pairs by R activation rows then takes R x P (dpbusd, conversion,
// product of scales, fma) and no shuffle; P = 4 (8 weight rows) and R = 4 share each activation
// block's broadcasts over four pairs (P = 2 was 11% slower on the Xeon, Q8_0 pp512). Q8_0 and Q5_0 weights are packed per call only (no
// unpack), into scratch, so the scales may take more room than in the file: Q8_0 read from memory
// once per decode step, this single stream ran at 10-13 GB/s on one Zen 5 core against 16 GB/s
// for the row-by-row AVX2 dots.
// Side data of an activation row: per block, int32[8] -128 Σ a over each lane's 4 elements;
// then per block f32 dA.
constexpr int64_t kPairs = kGroup / 2;
struct Q8Packed {
  float d[kPairs][16];
  uint8_t q[kPairs][64];
};

// The integer dot I of a lane (|I| <= 4 * 128 * 127 < 2^22) reaches the float chain as the bits
// kMagicBits + I, the float 1.5 * 2^23 + I exactly, minus 1.5 * 2^23: float(I) exactly, as
// cvtdq2ps gives it, by a subtraction that (unlike the conversion) may run on either vector port
// beside the dpbusd. The side data's correction starts the dpbusd at kMagicBits - 128 Σa.
constexpr int32_t kMagicBits = 0x4B400000;
constexpr float kMagic = 0x1.8p23f;

int64_t q8_side_bytes(int64_t n) noexcept { return round64(n / kQK * 36); }
inline const int32_t* q8_corrections(const uint8_t* side, int64_t i) { return reinterpret_cast<const int32_t*>(side) + 8 * i; }
inline const float* q8_scales(const uint8_t* side, int64_t n) { return reinterpret_cast<const float*>(side + n / kQK * 32); }

// The side data for weight quants fed as q + kOffset (Q8_0: w + 128; Q5_0 packed at load: q - 16 +
// 16): per block the 8 lanes' kMagicBits - kOffset Σa, then the blocks' dA.
template <int32_t kOffset>
void offset_side(const void* a, void* side, int64_t n) noexcept {
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  auto* c = static_cast<int32_t*>(side);
  auto* d = reinterpret_cast<float*>(static_cast<uint8_t*>(side) + n / kQK * 32);
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[i].qs)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8 * i),
                        _mm256_add_epi32(_mm256_mullo_epi32(sums, _mm256_set1_epi32(-kOffset)), _mm256_set1_epi32(kMagicBits)));
    d[i] = half(ab[i].d);
  }
}
void q8_prepare_side(const void* a, void* side, int64_t n) noexcept { offset_side<128>(a, side, n); }

int64_t q8_packed_bytes(int64_t n) noexcept { return n / kQK * static_cast<int64_t>(sizeof(Q8Packed)); }

// Permutation indices putting lane 2j in lanes 0-7 and lane 2j + 1 in lanes 8-15.
inline __m512i pair_lanes(int64_t j) {
  return _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(2 * j)), _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
}

// out.d from the 16 rows' scales (lane j: row j's).
inline void store_pair_scales(__m512 d16, Q8Packed& out) {
  for (int64_t j = 0; j < kPairs; ++j) _mm512_storeu_ps(out.d[j], _mm512_permutexvar_ps(pair_lanes(j), d16));
}

void q8_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  // Rows past count repeat the last row (their outputs are not stored).
  const auto row = [&](int64_t j) { return reinterpret_cast<const BlockQ8_0*>(base + (j < count ? j : count - 1) * ws); };
  auto* out = static_cast<Q8Packed*>(packed);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i offsets = row_offsets(ws);
  const __mmask16 valid = lanes_below(count);
  const int64_t pairs = (count + 1) / 2;
  for (int64_t i = 0; i < n / kQK; ++i) {
    store_pair_scales(_mm512_cvtph_ps(block_scales(reinterpret_cast<const uint8_t*>(&row(0)[i]), offsets, valid)), out[i]);
    for (int64_t j = 0; j < pairs; ++j) {
      const auto load256 = [&](int64_t r) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row(r)[i].qs)); };
      const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(load256(2 * j)), load256(2 * j + 1), 1);
      _mm512_storeu_si512(out[i].q[j], _mm512_xor_si512(q, offset));
    }
  }
}

// The 16 qs bytes of a Q4_0/Q4_1/Q5_0 block as 32 nibbles in element order (low nibbles are
// elements 0..15, high nibbles 16..31).
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low4), _mm_and_si128(b, low4));
}

// Q5_0 weights take the Q8_0 tiles: llama.cpp runs both through the same tinyBLAS order
// (qdot.hpp), and a Q5_0 quant (q - 16, in -16..15) is an int8 like a Q8_0 one. Packed per
// call only: as int8 the rows take 55% more bytes than in the file.
void q5_0_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  auto* out = static_cast<Q8Packed*>(packed);
  for (int64_t i = 0; i < n / kQK; ++i) {
    alignas(32) uint16_t d[kGroup];
    for (int64_t j = 0; j < kGroup; ++j) {
      const auto& b = group_block<BlockQ5_0>(w, ws, count, j, i);
      d[j] = j < count ? b.d : 0;
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      // Element t: nibble | bit t of qh << 4, minus 16, plus 128.
      const __m256i v = _mm256_or_si256(nibbles(b.qs), _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(0x10)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].q[j / 2] + 32 * (j % 2)), _mm256_add_epi8(v, _mm256_set1_epi8(112)));
    }
    store_pair_scales(load_scales(d), out[i]);
  }
}

// P pairs (from pair j0) against R activation rows: lane p of acc[q][r]'s half h is the chain
// s_p of weight row 2(j0 + q) + h with activation row r; s_p = fma(dW * dA, I_p, s_p) per block.
template <int P, int R>
void q8_tile(const Q8Packed* pk, int64_t j0, int64_t count, const void* a, int64_t as, const uint8_t* side, int64_t ss,
             int64_t n, float* y, int64_t ys) {
  const __m512 magic = _mm512_set1_ps(kMagic);
  __m512 acc[P][R];
  for (int q = 0; q < P; ++q)
    for (int r = 0; r < R; ++r) acc[q][r] = _mm512_setzero_ps();
  const float* da[R];
  for (int r = 0; r < R; ++r) da[r] = q8_scales(side + r * ss, n);
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m512i aq[R];
    for (int r = 0; r < R; ++r) aq[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8_row(a, as, r)[i].qs)));
    __m512 da16[R];
    __m512i c[R];
    for (int r = 0; r < R; ++r) {
      da16[r] = _mm512_set1_ps(da[r][i]);
      c[r] = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(q8_corrections(side + r * ss, i))));
    }
    for (int q = 0; q < P; ++q) {
      const __m512i wq = _mm512_loadu_si512(pk[i].q[j0 + q]);
      const __m512 dw = _mm512_loadu_ps(pk[i].d[j0 + q]);
      for (int r = 0; r < R; ++r) {
        // The products dW * dA of the pair's two rows (the same float product the reference takes).
        const __m512i dot = _mm512_dpbusd_epi32(c[r], wq, aq[r]);
        acc[q][r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da16[r]), _mm512_sub_ps(_mm512_castsi512_ps(dot), magic), acc[q][r]);
      }
    }
  }
  for (int q = 0; q < P; ++q) {
    const int64_t o = 2 * (j0 + q);
    for (int r = 0; r < R; ++r) {
      y[r * ys + o] = lane_tree(_mm512_castps512_ps256(acc[q][r]));
      if (o + 1 < count) y[r * ys + o + 1] = lane_tree(_mm512_extractf32x8_ps(acc[q][r], 1));
    }
  }
}

template <int R>
void q8_rows(const Q8Packed* pk, int64_t count, const uint8_t* a, int64_t as, const uint8_t* side, int64_t ss, int64_t n,
             float* y, int64_t ys) {
  const int64_t pairs = (count + 1) / 2;
  int64_t j = 0;
  for (; j + 4 <= pairs; j += 4) q8_tile<4, R>(pk, j, count, a, as, side, ss, n, y, ys);
  for (; j + 2 <= pairs; j += 2) q8_tile<2, R>(pk, j, count, a, as, side, ss, n, y, ys);
  if (j < pairs) q8_tile<1, R>(pk, j, count, a, as, side, ss, n, y, ys);
}

void q8_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
                 int64_t n, float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const Q8Packed*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    q8_rows<decltype(rows)::value>(pk, count, ab + r * as, as, sb + r * ss, ss, n, y + r * ys, ys);
  });
}

// ---- Q8_0 packed at load: the 16 weight rows of a group in the 16 int32 lanes ----
//
// Packed group (Q8LanesPacked, qgemm_layouts.hpp), per block i (544 bytes, as many as the 16 rows'
// blocks in the file):
//   d    f16[16]      lane j: row j's scale (0 for the rows past count)
//   qs   u8[8][64]    vector p, lane j: row j's quants 4p..4p+3, each + 128 (w ^ 0x80)
// The tinyBLAS order keeps 8 chains per (weight row, activation row), chain p summing elements
// 4p..4p+3: here vector p of a tile's accumulators holds chain p of the 16 rows, so one dpbusd of
// vector p with the activation's 4 quants 4p..4p+3 broadcast forms I_p of every row, and
// s_p = fma(dW * dA, I_p, s_p) runs in the lanes; the rows' trees ((s0 + s4) + (s2 + s6)) +
// ((s1 + s5) + (s3 + s7)) are vector additions at the end. Per block and activation row: 8 dpbusd,
// 8 subtractions (the float of I_p by Q8_0's magic bits: the side data is Q8_0's tiles'), 8 fma
// and one product, for 16 weight rows; no shuffle, no horizontal sum. What this buys is the decode:
// the pairs above read the rows in place per call, and a decode step's per-row kernels
// (qdot_rows_avx512.cpp) spend about 6 instructions a row and block on 34-byte blocks that straddle
// cache lines.
using qgemm_layouts::Q8LanesPacked;

// The gather offsets of a lanes group's 16 rows, ws bytes apart; rows past count repeat the last
// one (their scales are packed as 0, their outputs not stored).
inline __m512i lanes_row_offsets(int64_t ws, int64_t count) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i rows = _mm512_min_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(count - 1)));
  return _mm512_mullo_epi32(rows, _mm512_set1_epi32(static_cast<int32_t>(ws)));
}

int64_t q8l_packed_bytes(int64_t n) noexcept { return n / kQK * static_cast<int64_t>(sizeof(Q8LanesPacked)); }

void q8l_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<Q8LanesPacked*>(packed);
  const __m512i offsets = lanes_row_offsets(ws, count);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint8_t* block0 = base + i * static_cast<int64_t>(sizeof(BlockQ8_0));
    store256(out[i].d, block_scales(block0, offsets, lanes_below(count)));
    for (int p = 0; p < 8; ++p) {
      const __m512i q = _mm512_i32gather_epi32(offsets, block0 + 2 + 4 * p, 1);
      _mm512_storeu_si512(out[i].qs[p], _mm512_xor_si512(q, flip));
    }
  }
}

// The quants of a Q8_0 lanes block: vector p as packed.
struct Q8Lanes {
  using Packed = Q8LanesPacked;
  using State = int;
  static constexpr bool kMins = false;
  static State prepare(const Packed&) { return 0; }
  static __m512i quants(const Packed& b, State, int p) { return _mm512_loadu_si512(b.qs[p]); }
};

// R activation rows against one packed group of the lanes layouts (Q8_0 and Q5_0 against Q8_0
// rows, Q4_1 and Q5_1 against Q8_1 rows, below): lane j of acc[r][p] is chain p of weight row j
// with activation row r. L gives vector p of the block's unsigned quants (lane j: row j's elements
// 4p..4p+3). Q8_0 rows: the side data starts each dpbusd at the magic bits less the offset's share.
// Q8_1 rows (L::kMins: quants without offset, a min per block): each dpbusd starts at the magic
// bits, and mins = fma(mW, sA, mins) per block joins each row's tree at the end (qdot.hpp).
template <class L, int R>
void lanes_tile(const typename L::Packed* pk, int64_t count, const void* a, int64_t as, const uint8_t* side, int64_t ss,
                int64_t n, float* y, int64_t ys) {
  const __m512 magic = _mm512_set1_ps(kMagic);
  __m512 acc[R][8], mins[R];
  for (int r = 0; r < R; ++r) {
    mins[r] = _mm512_setzero_ps();
    for (int p = 0; p < 8; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_ahead<R>(pk + i, sizeof(typename L::Packed));
    const __m512 dw = load_scales(pk[i].d);
    __m512 dd[R];
    const int8_t* aq[R];
    for (int r = 0; r < R; ++r) {
      if constexpr (L::kMins) {
        const BlockQ8_1& ab = act_row<BlockQ8_1>(a, as, r)[i];
        aq[r] = ab.qs;
        dd[r] = _mm512_mul_ps(dw, _mm512_set1_ps(half(ab.d)));
        mins[r] = _mm512_fmadd_ps(load_scales(pk[i].m), _mm512_set1_ps(half(ab.s)), mins[r]);
      } else {
        aq[r] = q8_row(a, as, r)[i].qs;
        dd[r] = _mm512_mul_ps(dw, _mm512_set1_ps(q8_scales(side + r * ss, n)[i]));
      }
    }
    const typename L::State st = L::prepare(pk[i]);
    for (int p = 0; p < 8; ++p) {
      const __m512i wq = L::quants(pk[i], st, p);
      for (int r = 0; r < R; ++r) {
        const __m512i start = L::kMins ? _mm512_set1_epi32(kMagicBits) : _mm512_set1_epi32(q8_corrections(side + r * ss, i)[p]);
        const __m512i dot = _mm512_dpbusd_epi32(start, wq, _mm512_set1_epi32(load_i32(aq[r] + 4 * p)));
        acc[r][p] = _mm512_fmadd_ps(dd[r], _mm512_sub_ps(_mm512_castsi512_ps(dot), magic), acc[r][p]);
      }
    }
  }
  const __mmask16 valid = lanes_below(count);
  for (int r = 0; r < R; ++r) {
    const __m512 t = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][4]), _mm512_add_ps(acc[r][2], acc[r][6]));
    const __m512 u = _mm512_add_ps(_mm512_add_ps(acc[r][1], acc[r][5]), _mm512_add_ps(acc[r][3], acc[r][7]));
    const __m512 tree = _mm512_add_ps(t, u);
    _mm512_mask_storeu_ps(y + r * ys, valid, L::kMins ? _mm512_add_ps(tree, mins[r]) : tree);
  }
}

template <class L>
void lanes_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
                    int64_t n, float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const typename L::Packed*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  const auto* ab = static_cast<const uint8_t*>(a);
  // Three activation rows at a time (two with the mins chains): 24 accumulators, one weight
  // vector at a time.
  constexpr int64_t kRows = L::kMins ? 2 : 3;
  int64_t r = 0;
  for (; r + kRows <= n_a; r += kRows) lanes_tile<L, kRows>(pk, count, ab + r * as, as, sb + r * ss, ss, n, y + r * ys, ys);
  if (n_a - r == 2) lanes_tile<L, 2>(pk, count, ab + r * as, as, sb + r * ss, ss, n, y + r * ys, ys);
  if (n_a - r == 1) lanes_tile<L, 1>(pk, count, ab + r * as, as, sb + r * ss, ss, n, y + r * ys, ys);
}

// ---- Q5_0 packed at load: the same lanes ----
//
// Packed group: qgemm_layouts::Q50LanesPacked, per block i the 16 rows' scales, fifth bits (a u32
// per lane) and qs bytes, as Q4_0's. Vector p of the unsigned quants q (0..31) is the nibbles of
// qs vector p mod 4 (low for p < 4, high for p >= 4) or'ed with the fifth bits 4p..4p+3 of qh,
// spread to bit 4 of each byte by one permutation of a 16-entry table (vpermd reads the index's
// low 4 bits: qh >> 4p needs no mask). The side data starts each dpbusd at the magic bits less
// 16 Σa (Q5_0 quants are q - 16); the float steps are Q8_0's tinyBLAS ones, as qdot.hpp lists them
// for both.
using qgemm_layouts::Q50LanesPacked;
using qgemm_layouts::Q51LanesPacked;

void q50l_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<Q50LanesPacked*>(packed);
  const __m512i offsets = lanes_row_offsets(ws, count);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint8_t* block0 = base + i * static_cast<int64_t>(sizeof(BlockQ5_0));
    store256(out[i].d, block_scales(block0, offsets, lanes_below(count)));
    _mm512_storeu_si512(out[i].qh, _mm512_i32gather_epi32(offsets, block0 + 2, 1));
    for (int k = 0; k < 4; ++k) _mm512_storeu_si512(out[i].qs[k], _mm512_i32gather_epi32(offsets, block0 + 6 + 4 * k, 1));
  }
}

// Bits 4p..4p+3 of each lane's qh word as bit 4 of its bytes 0..3 (0x10 or 0): one vpermd of a
// 16-entry table (entry k: byte t holds 0x10 where bit t of k is set), which reads only the index's
// low 4 bits, so qh >> 4p needs no mask.
inline __m512i fifth_bits(__m512i qh, int p) {
  const __m512i spread = _mm512_setr_epi32(0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010,
                                           0x00101000, 0x00101010, 0x10000000, 0x10000010, 0x10001000, 0x10001010,
                                           0x10100000, 0x10100010, 0x10101000, 0x10101010);
  return _mm512_permutexvar_epi32(_mm512_srl_epi32(qh, _mm_cvtsi32_si128(4 * p)), spread);
}

struct Q50Lanes {
  using Packed = Q50LanesPacked;
  using State = __m512i;  // the block's fifth bits
  static constexpr bool kMins = false;
  static State prepare(const Packed& b) { return _mm512_loadu_si512(b.qh); }
  static __m512i quants(const Packed& b, State qh, int p) {
    const __m512i fifth = fifth_bits(qh, p);
    const __m512i qs = _mm512_loadu_si512(b.qs[p % 4]);
    const __m512i nibbles = p < 4 ? qs : _mm512_srli_epi16(qs, 4);
    return _mm512_ternarylogic_epi32(nibbles, _mm512_set1_epi8(0x0F), fifth, 0xEA);  // (nibbles & 0x0F) | fifth
  }
};

// Decode (1-3 activation rows) unpacks each block in the tile. More rows pass over the group once
// per 3 of them: the group's quants are unpacked once per call into Q8_0's lanes layout (the unsigned
// q, 0..31; the side data's -16 Σa matches them), which the Q8_0 tile then reads, the same
// operations on the same values: prefill ran 15-28% slower unpacking in every pass.
void q50l_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
                   int64_t n, float* y, int64_t ys) {
  if (n_a <= 3) return lanes_multiply<Q50Lanes>(packed, count, a, as, side, ss, n_a, n, y, ys);
  const auto* pk = static_cast<const Q50LanesPacked*>(packed);
  const int64_t blocks = n / kQK;
  thread_local isa_scratch::Buffer<Q8LanesPacked> buffer;
  Q8LanesPacked* expanded = buffer.at_least(static_cast<size_t>(blocks));
  for (int64_t i = 0; i < blocks; ++i) {
    std::memcpy(expanded[i].d, pk[i].d, sizeof pk[i].d);
    const Q50Lanes::State st = Q50Lanes::prepare(pk[i]);
    for (int p = 0; p < 8; ++p) _mm512_storeu_si512(expanded[i].qs[p], Q50Lanes::quants(pk[i], st, p));
  }
  lanes_multiply<Q8Lanes>(expanded, count, a, as, side, ss, n_a, n, y, ys);
}

// ---- Q4_1, Q5_1 packed at load: the same lanes, against Q8_1 rows, with the mins in the lanes ----
//
// Packed group (Q41LanesPacked, Q51LanesPacked: qgemm_layouts.hpp), per block i (320 / 384 bytes,
// as many as the 16 rows' blocks in the file): the 16 rows' scales and mins, Q5_1's fifth bits,
// and the qs bytes as Q5_0's.
// The quants are unsigned as stored (Q4_1 the nibbles, Q5_1 with the fifth bit: 0..31), so each
// dpbusd starts at the bare magic bits. From 4 activation rows the group is unpacked once per call
// (MinLanesExpanded), as Q5_0's.
using qgemm_layouts::Q41LanesPacked;
struct MinLanesExpanded {
  uint16_t d[kGroup], m[kGroup];
  uint8_t qs[8][64];
};

// Vector p of a block's nibbles (low for p < 4, high for p >= 4) of qs vector p mod 4.
inline __m512i lane_nibbles(const uint8_t (&qs)[4][64], int p) {
  const __m512i v = _mm512_loadu_si512(qs[p % 4]);
  return _mm512_and_si512(p < 4 ? v : _mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
}

struct Q41Lanes {
  using Packed = Q41LanesPacked;
  using State = int;
  static constexpr bool kMins = true;
  static State prepare(const Packed&) { return 0; }
  static __m512i quants(const Packed& b, State, int p) { return lane_nibbles(b.qs, p); }
};
struct Q51Lanes {
  using Packed = Q51LanesPacked;
  using State = __m512i;
  static constexpr bool kMins = true;
  static State prepare(const Packed& b) { return _mm512_loadu_si512(b.qh); }
  static __m512i quants(const Packed& b, State qh, int p) {
    const __m512i fifth = fifth_bits(qh, p);
    return _mm512_or_si512(lane_nibbles(b.qs, p), fifth);
  }
};
struct MinExpandedLanes {
  using Packed = MinLanesExpanded;
  using State = int;
  static constexpr bool kMins = true;
  static State prepare(const Packed&) { return 0; }
  static __m512i quants(const Packed& b, State, int p) { return _mm512_loadu_si512(b.qs[p]); }
};

template <class Block>
void min_lanes_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  constexpr bool kFifth = std::is_same_v<Block, BlockQ5_1>;
  using Packed = qgemm_layouts::NibbleLanesPacked<Block>;
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<Packed*>(packed);
  const __m512i offsets = lanes_row_offsets(ws, count);
  const __mmask16 valid = lanes_below(count);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint8_t* block0 = base + i * static_cast<int64_t>(sizeof(Block));
    store256(out[i].d, block_scales(block0, offsets, valid));
    store256(out[i].m, block_scales(block0 + 2, offsets, valid));
    if constexpr (kFifth) _mm512_storeu_si512(out[i].qh, _mm512_i32gather_epi32(offsets, block0 + 4, 1));
    const uint8_t* qs0 = block0 + offsetof(Block, qs);
    for (int k = 0; k < 4; ++k) _mm512_storeu_si512(out[i].qs[k], _mm512_i32gather_epi32(offsets, qs0 + 4 * k, 1));
  }
}

template <class Block>
void min_lanes_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
                        int64_t n, float* y, int64_t ys) {
  using L = std::conditional_t<std::is_same_v<Block, BlockQ5_1>, Q51Lanes, Q41Lanes>;
  if (n_a <= 3) return lanes_multiply<L>(packed, count, a, as, side, ss, n_a, n, y, ys);
  const auto* pk = static_cast<const typename L::Packed*>(packed);
  const int64_t blocks = n / kQK;
  thread_local isa_scratch::Buffer<MinLanesExpanded> buffer;
  MinLanesExpanded* expanded = buffer.at_least(static_cast<size_t>(blocks));
  for (int64_t i = 0; i < blocks; ++i) {
    MinLanesExpanded& e = expanded[i];
    std::memcpy(e.d, pk[i].d, sizeof e.d);
    std::memcpy(e.m, pk[i].m, sizeof e.m);
    const typename L::State st = L::prepare(pk[i]);
    for (int p = 0; p < 8; ++p) _mm512_storeu_si512(e.qs[p], L::quants(pk[i], st, p));
  }
  lanes_multiply<MinExpandedLanes>(expanded, count, a, as, side, ss, n_a, n, y, ys);
}

// ---- Q4_1, Q5_1: as Q8_0's pairs, against Q8_1 activations, with a chain for the mins ----
//
// llama.cpp's vec_dot order (qdot.hpp): the 8 lanes s_p = fma(dW * dA, I_p, s_p) of Q8_0, and
// mins = fma(mW, sA, mins) per block; the result is the lane tree plus mins. The nibbles are
// unsigned (Q5_1's with the fifth bit: 0..31), so dpbusd needs no correction. Packed per call
// only (one byte per quant).
// Packed group, per block i (1056 bytes):
//   d      f32[8][16]     pair j: lanes 0-7 row 2j's scale, lanes 8-15 row 2j + 1's (as Q8_0's)
//   m      f16[16]        lane j: row j's min (0 past count)
//   q      u8[8][64]      pair j: bytes 0-31 row 2j's nibbles in element order, 32-63 row 2j + 1's
struct Q41Packed {
  float d[kPairs][16];
  uint16_t m[kGroup];
  uint8_t q[kPairs][64];
};


int64_t q41_packed_bytes(int64_t n) noexcept { return n / kQK * static_cast<int64_t>(sizeof(Q41Packed)); }

// The 32 unsigned quants of a Q4_1 (nibbles) or Q5_1 block (nibble | fifth bit << 4).
inline __m256i unsigned_quants(const BlockQ4_1& b) { return nibbles(b.qs); }
inline __m256i unsigned_quants(const BlockQ5_1& b) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  return _mm256_or_si256(nibbles(b.qs), _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(0x10)));
}

template <class Block>
void q41_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  auto* out = static_cast<Q41Packed*>(packed);
  for (int64_t i = 0; i < n / kQK; ++i) {
    alignas(32) uint16_t d[kGroup];
    for (int64_t j = 0; j < kGroup; ++j) {
      const auto& b = group_block<Block>(w, ws, count, j, i);
      d[j] = j < count ? b.d : 0;
      out[i].m[j] = j < count ? b.m : 0;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].q[j / 2] + 32 * (j % 2)), unsigned_quants(b));
    }
    for (int64_t j = 0; j < kPairs; ++j) _mm512_storeu_ps(out[i].d[j], _mm512_permutexvar_ps(pair_lanes(j), load_scales(d)));
  }
}

template <int P, int R>
void q41_tile(const Q41Packed* pk, int64_t j0, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m512 acc[P][R], mins[R];
  for (int r = 0; r < R; ++r) {
    mins[r] = _mm512_setzero_ps();
    for (int q = 0; q < P; ++q) acc[q][r] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m512 mw16 = load_scales(pk[i].m);
    __m512i aq[R];
    __m512 da16[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ8_1& ab = act_row<BlockQ8_1>(a, as, r)[i];
      aq[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs)));
      da16[r] = _mm512_set1_ps(half(ab.d));
      mins[r] = _mm512_fmadd_ps(mw16, _mm512_set1_ps(half(ab.s)), mins[r]);
    }
    for (int q = 0; q < P; ++q) {
      const __m512i wq = _mm512_loadu_si512(pk[i].q[j0 + q]);
      const __m512 dw = _mm512_loadu_ps(pk[i].d[j0 + q]);
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, aq[r]);
        acc[q][r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da16[r]), _mm512_cvtepi32_ps(dot), acc[q][r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(64) float m[kGroup];
    _mm512_store_ps(m, mins[r]);
    for (int q = 0; q < P; ++q) {
      const int64_t o = 2 * (j0 + q);
      y[r * ys + o] = lane_tree(_mm512_castps512_ps256(acc[q][r])) + m[o];
      if (o + 1 < count) y[r * ys + o + 1] = lane_tree(_mm512_extractf32x8_ps(acc[q][r], 1)) + m[o + 1];
    }
  }
}

template <int R>
void q41_rows(const Q41Packed* pk, int64_t count, const uint8_t* a, int64_t as, int64_t n, float* y, int64_t ys) {
  const int64_t pairs = (count + 1) / 2;
  int64_t j = 0;
  for (; j + 4 <= pairs; j += 4) q41_tile<4, R>(pk, j, count, a, as, n, y, ys);
  for (; j + 2 <= pairs; j += 2) q41_tile<2, R>(pk, j, count, a, as, n, y, ys);
  if (j < pairs) q41_tile<1, R>(pk, j, count, a, as, n, y, ys);
}

void q41_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a,
                  int64_t n, float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const Q41Packed*>(packed);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    q41_rows<decltype(rows)::value>(pk, count, ab + r * as, as, n, y + r * ys, ys);
  });
}

}  // namespace

// min_rows, from infer-bench-matmul (BM_MatmulTinyLlama, 2048 x 5632, one thread): with one row
// the tiled Q4_0 path takes 0.69 ms against 1.64 ms for the AVX2 dots; Q8_0's packing alone
// costs about what the AVX2 dots do, so its tiles lose at 2 rows (1.51 vs 1.24 ms) and win
// from 4 (1.90 vs 2.34 ms).
const QGemmKernel qgemm_q4_0_avx512{1, kGroup, q4_side_bytes, q4_prepare_side, q4_packed_bytes, q4_pack, q4_multiply,
                                       q4_0_unpack<Q4Packed>};
const QGemmKernel qgemm_q5_0_avx512{8, kGroup, q8_side_bytes, q8_prepare_side, q8_packed_bytes, q5_0_pack, q8_multiply,
                                    nullptr};
const QGemmKernel qgemm_q4_1_avx512{8, kGroup, no_side_bytes, no_prepare_side, q41_packed_bytes, q41_pack<BlockQ4_1>,
                                    q41_multiply, nullptr};
const QGemmKernel qgemm_q5_1_avx512{8, kGroup, no_side_bytes, no_prepare_side, q41_packed_bytes, q41_pack<BlockQ5_1>,
                                    q41_multiply, nullptr};
const QGemmKernel qgemm_q8_0_avx512{4, kGroup, q8_side_bytes, q8_prepare_side, q8_packed_bytes, q8_pack, q8_multiply,
                                       nullptr};
const QGemmKernel qgemm_q8_0_lanes_avx512{1, kGroup, q8_side_bytes, q8_prepare_side, q8l_packed_bytes, q8l_pack,
                                         lanes_multiply<Q8Lanes>, qgemm_layouts::q8_lanes_unpack};
const QGemmKernel qgemm_q5_0_lanes_avx512{1, kGroup, q8_side_bytes, offset_side<16>, qgemm_layouts::nibble_lanes_packed_bytes<BlockQ5_0>, q50l_pack,
                                         q50l_multiply, qgemm_layouts::nibble_lanes_unpack<BlockQ5_0>};
const QGemmKernel qgemm_q4_1_lanes_avx512{1, kGroup, no_side_bytes, no_prepare_side, qgemm_layouts::nibble_lanes_packed_bytes<BlockQ4_1>,
                                         min_lanes_pack<BlockQ4_1>, min_lanes_multiply<BlockQ4_1>,
                                         qgemm_layouts::nibble_lanes_unpack<BlockQ4_1>};
const QGemmKernel qgemm_q5_1_lanes_avx512{1, kGroup, no_side_bytes, no_prepare_side, qgemm_layouts::nibble_lanes_packed_bytes<BlockQ5_1>,
                                         min_lanes_pack<BlockQ5_1>, min_lanes_multiply<BlockQ5_1>, qgemm_layouts::nibble_lanes_unpack<BlockQ5_1>};

}  // namespace infer
