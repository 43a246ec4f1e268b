// AVX2 tile kernels for the K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K over the layouts the CPU
// backend packs at load (qgemm_layouts.hpp; interface and the bit-identity argument in
// qgemm.hpp). A 64-byte vector of the layout holds 16 weight rows in its 32-bit lanes; a ymm takes
// half hh of it (rows 8hh..8hh+7). An activation row's 4 quants are broadcast to all lanes;
// without VNNI, vpmaddubsw multiplies them with each lane's 4 unsigned weight quants into two
// 16-bit pair sums, which add up in 16 bits over a sub-block (or part of one) and are widened by
// one vpmaddwd by the sub-block's scale, held in both 16-bit halves of each lane: sc * (p0 + p1).
// The mins and the offsets come in through the Q8_K bsums, by vpmaddwd too. Every integer sum is
// exact (bounds below), and each lane then runs the float steps qdot.hpp gives its type:
//   Q2_K, Q5_K   r = dW * S;  r = fma(-dminW, M, r);  acc = fma(r, dA, acc)
//   Q3_K, Q6_K   acc = fma(dW * (S - offset * C), dA, acc)
//   Q4_K         per 64 elements: acc = fma(S64, dW * dA, acc), accm = fma(M64, dminW * dA, accm);
//                the result acc - accm
// with S = Σ_s sc_s I_s, M = Σ_s m_s B_s and C = Σ_s sc_s B_s (B_s: the bsum of sub-block s).
//
// Up to 2 activation rows (a decode step) take both halves of a group in one pass, so that they
// read one stream, prefetched ahead as the AVX-512 tiles do; more take one half at a time. They unpack
// the quants once per group of up to 4 activation rows. From kKQuantMinRowsLoaded rows on, the
// tiles of the second part of this file take over (KPacked: every quant decoded to a byte once
// per call, packed from the file's rows or from the loaded layout).
//
// Compiled twice (avx2_vnni.hpp): qgemm_kquant_avx2.cpp gets the kernels named *_avx2,
// qgemm_kquant_avxvnni.cpp *_avxvnni. With VNNI a run of products adds up in each lane's int32 by
// vpdpbusd (run_add<true>) instead of 16-bit pair sums, and one vpdpwssd adds the run times the
// scale, which then sits in the low word of each lane only (dup_scale): the run must fit 16 bits,
// so its length is 4 vectors for Q2_K, Q3_K and Q4_K, 2 for Q5_K (4 products a lane each: at most
// 4 * 128 * the largest quant). Q6_K keeps 16-bit pair sums (one vector a run would fit, but
// vpdpbusd and vpdpwssd per vector measured slower than the pair sums: infer-bench-matmul's
// TinyLlama, 128 rows, 11.7-18.0 ms against 8.7-9.6), their scale in both words. vpdpwssd also adds
// the runs times the scales and the mins' and the offsets' products (madd_add).
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
using namespace qgemm_layouts;
using avx2_quants::half;
using avx2_vnni::kVnni;
using avx2_vnni::madd_add;
using avx2_vnni::run_add;
// With VNNI the runs of every K-quant but Q6_K add up in int32 lanes.
constexpr bool kDwordRuns = kVnni;

constexpr int kLanes = 8;  // rows per half of a packed group; the rows of a KPacked group
// The KPacked tiles' min_rows (from the file's rows, against the dots taking 4 activation rows a
// pass) and min_rows_loaded (from the loaded layout, against the loaded tiles).
constexpr int64_t kKQuantMinRows = 8;
constexpr int64_t kKQuantMinRowsLoaded = 24;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m128i load64(const void* p) { return _mm_loadl_epi64(static_cast<const __m128i*>(p)); }
inline __m256i bcast4(const int8_t* p) { return _mm256_set1_epi32(load_i32(p)); }
inline __m256i bcast_pair(const int16_t* p) { return _mm256_set1_epi32(load_i32(p)); }
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
inline const BlockQ8_K* q8k_row(const void* a, int64_t as, int64_t r) { return act_row<BlockQ8_K>(a, as, r); }

// The 8 F16 scales of half hh as floats.
inline __m256 half_scales(const uint16_t* d, int hh) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + kLanes * hh)));
}

// 8 bytes (lane j: row j's) in both 16-bit halves of each lane, unsigned or signed.
// The 8 bytes broadcast to both 128-bit halves (a load, no ALU operation), then one vpshufb puts
// byte j in both words of lane j: as the low byte of each (unsigned), or as the high byte, which
// an arithmetic shift brings down with its sign. With kLowOnly, in the low word only (the high
// word 0).
inline __m256i bytes8(const void* p) { return _mm256_castpd_si256(_mm256_broadcast_sd(static_cast<const double*>(p))); }
template <bool kLowOnly = false>
inline __m256i dup_words(const uint8_t* p) {
  const __m256i both = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                        4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
  const __m256i low = _mm256_setr_epi8(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1,  //
                                       4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1);
  return _mm256_shuffle_epi8(bytes8(p), kLowOnly ? low : both);
}
template <bool kLowOnly = false>
inline __m256i dup_words(const int8_t* p) {
  const __m256i both = _mm256_setr_epi8(-1, 0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3,  //
                                        -1, 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7);
  const __m256i low = _mm256_setr_epi8(-1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1,  //
                                       -1, 4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1);
  return _mm256_srai_epi16(_mm256_shuffle_epi8(bytes8(p), kLowOnly ? low : both), 8);
}
// A sub-block's scales as madd_add multiplies a run by them: both words, or the low word for
// int32 runs.
template <bool kDword = kDwordRuns, class Byte>
inline __m256i dup_scale(const Byte* p) {
  return dup_words<kDword>(p);
}
// Lane j: {p0[j], p1[j]} as two signed 16-bit words (Q2_K's unsigned pairs lie side by side in
// its layout and widen in one step).
inline __m256i pair_words(const int8_t* p0, const int8_t* p1) {
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(load64(p0), load64(p1)));
}

// (v >> shift) & mask in every byte.
inline __m256i bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(shift ? _mm256_srli_epi16(v, shift) : v, bytes(mask));
}

// The first `count` lanes (all 8 when count >= 8) of v to y.
inline void store_lanes(float* y, __m256 v, int64_t count) {
  if (count >= kLanes) return _mm256_storeu_ps(y, v);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(y, mask, v);
}

// ---- Q4_K, Q5_K: 32-element sub-blocks ----
//
// Pair p, vector k: elements 4k..4k+3 of sub-blocks 2p and 2p + 1 (k32_quants: Q4_K's low and
// high nibbles, Q5_K's five-byte positions). A 16-bit pair sum is at most 2 * 15 * 128 = 3840 for
// Q4_K, so a sub-block's 8 add up to 30720; Q5_K's quants reach 31 (7936 a pair sum), so its
// sub-block takes two 16-bit sums of 4.
template <class Packed>
struct K32 {
  static constexpr bool kQ5 = std::is_same_v<Packed, Q5KPacked>;
  // Vectors per run: 16-bit pair sums (Q4_K 8 * 3840, Q5_K 4 * 7936), or with VNNI an int32 lane
  // within 16 bits (Q4_K 4 * 7680, Q5_K 2 * 15872).
  static constexpr int kRun = kDwordRuns ? (kQ5 ? 2 : 4) : (kQ5 ? 4 : 8);
};

// The quants of sub-blocks 2p (lo) and 2p + 1 (hi), elements 4k..4k+3 of rows 8hh..8hh+7.
inline void k32_quants(const Q4KPacked& b, int p, int k, int hh, __m256i& lo, __m256i& hi) {
  const __m256i q = load256(b.qs[p][k] + 32 * hh);
  lo = bits(q, 0, 0x0F), hi = bits(q, 4, 0x0F);
}
inline void k32_quants(const Q5KPacked& b, int p, int k, int hh, __m256i& lo, __m256i& hi) {
  const auto v = [&](int x) { return load256(b.q[k][x] + 32 * hh); };
  switch (p) {
    case 0: lo = bits(v(0), 0, 31), hi = bits(v(4), 0, 31); return;
    case 1: lo = bits(v(1), 0, 31), hi = _mm256_or_si256(bits(v(0), 5, 0x07), bits(v(1), 2, 0x18)); return;
    case 2: lo = bits(v(2), 0, 31), hi = _mm256_or_si256(bits(v(2), 5, 0x07), bits(v(3), 2, 0x18)); return;
    default:
      lo = bits(v(3), 0, 31);
      hi = _mm256_or_si256(_mm256_or_si256(bits(v(4), 5, 0x07), bits(v(1), 4, 0x08)), bits(v(3), 3, 0x10));
  }
}

// R activation rows against halves hh0..hh0+H-1 of one packed group: lane j of acc[h][r] (and
// accm) is row 8(hh0 + h) + j's chain for activation row r.
template <class Packed, int R, int H>
void k32_tile(const Packed* pk, int hh0, const void* a, int64_t as, int64_t n, float* y, int64_t ys, int64_t count) {
  constexpr bool kQ5 = K32<Packed>::kQ5;
  constexpr int kRun = K32<Packed>::kRun;
  __m256 acc[H][R], accm[H][R];
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) acc[h][r] = accm[h][r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const Packed& b = pk[i];
    __m256i s[H][R];  // Q5_K: S over the super-block
    for (int h = 0; h < H; ++h)
      for (int r = 0; r < R; ++r) s[h][r] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      prefetch_part<R, 4>(&b, p);
      for (int h = 0; h < H; ++h) {
        const int hh = hh0 + h;
        __m256i i0[R], i1[R], sum0[R], sum1[R];
        for (int r = 0; r < R; ++r) i0[r] = i1[r] = _mm256_setzero_si256();
        const __m256i sc0 = dup_scale(b.sc[2 * p] + kLanes * hh), sc1 = dup_scale(b.sc[2 * p + 1] + kLanes * hh);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          __m256i lo, hi;
          k32_quants(b, p, k, hh, lo, hi);
          for (int r = 0; r < R; ++r) {
            const int8_t* aq = q8k_row(a, as, r)[i].qs + 64 * p + 4 * k;
            sum0[r] = run_add<kDwordRuns>(sum0[r], lo, bcast4(aq), k % kRun == 0);
            sum1[r] = run_add<kDwordRuns>(sum1[r], hi, bcast4(aq + 32), k % kRun == 0);
          }
          if (k % kRun == kRun - 1)
            for (int r = 0; r < R; ++r) {
              i0[r] = madd_add(i0[r], sum0[r], sc0);
              i1[r] = madd_add(i1[r], sum1[r], sc1);
            }
        }
        if constexpr (kQ5) {
          for (int r = 0; r < R; ++r) s[h][r] = _mm256_add_epi32(s[h][r], _mm256_add_epi32(i0[r], i1[r]));
        } else {
          // M64 = m_2p (B_4p + B_4p+1) + m_2p+1 (B_4p+2 + B_4p+3), each by one vpmaddwd.
          const __m256i m0 = dup_words(b.m[2 * p] + kLanes * hh), m1 = dup_words(b.m[2 * p + 1] + kLanes * hh);
          const __m256 dw = half_scales(b.d, hh), dmw = half_scales(b.dmin, hh);
          for (int r = 0; r < R; ++r) {
            const BlockQ8_K& ab = q8k_row(a, as, r)[i];
            const __m256i m = madd_add(_mm256_madd_epi16(m0, bcast_pair(ab.bsums + 4 * p)), m1, bcast_pair(ab.bsums + 4 * p + 2));
            const __m256 da = _mm256_set1_ps(ab.d);
            acc[h][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0[r], i1[r])), _mm256_mul_ps(dw, da), acc[h][r]);
            accm[h][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmw, da), accm[h][r]);
          }
        }
      }
    }
    if constexpr (kQ5) {
      for (int h = 0; h < H; ++h) {
        const int hh = hh0 + h;
        __m256i m[R];
        for (int r = 0; r < R; ++r) m[r] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
          const __m256i mj = dup_words(b.m[j] + kLanes * hh);
          for (int r = 0; r < R; ++r)
            m[r] = madd_add(m[r], mj, bcast_pair(q8k_row(a, as, r)[i].bsums + 2 * j));
        }
        const __m256 dw = half_scales(b.d, hh), dmw = half_scales(b.dmin, hh);
        for (int r = 0; r < R; ++r) {
          const __m256 res =
              _mm256_fnmadd_ps(dmw, _mm256_cvtepi32_ps(m[r]), _mm256_mul_ps(dw, _mm256_cvtepi32_ps(s[h][r])));
          acc[h][r] = _mm256_fmadd_ps(res, _mm256_set1_ps(q8k_row(a, as, r)[i].d), acc[h][r]);
        }
      }
    }
  }
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r)
      store_lanes(y + r * ys + kLanes * (hh0 + h), kQ5 ? acc[h][r] : _mm256_sub_ps(acc[h][r], accm[h][r]),
                  count - kLanes * (hh0 + h));
}

// ---- Q2_K, Q3_K, Q6_K: 16-element sub-blocks ----
//
// quant(p, h, c, k, hh): the unsigned quants of shift k in chunk c of half h (elements
// 128h + 32k + 4c + t of the 8 rows), the offset not applied. A 16-bit pair sum is at most
// 2 * 7 * 128 = 1792 (Q2_K, Q3_K: a sub-block's 4 add up in 16 bits) or 2 * 63 * 128 = 16128
// (Q6_K: 2 at a time).
struct Q6KAvx2 : Q6KLayout {
  static constexpr int kOffsetShift = 5;  // offset 32
  static constexpr bool kMin = false;
  static constexpr bool kDword = false;
  static constexpr int kRun = 2;
  static __m256i quant(const Packed& p, int h, int c, int k, int hh) {
    const Q6KChunk& ch = p.q[h][c];
    const __m256i a = load256(ch.a + 32 * hh), b = load256(ch.b + 32 * hh), cc = load256(ch.c + 32 * hh);
    if (k < 3) return _mm256_and_si256(k == 0 ? a : k == 1 ? b : cc, bytes(0x3F));
    return _mm256_or_si256(_mm256_or_si256(bits(a, 6, 0x03), bits(b, 4, 0x0C)), bits(cc, 2, 0x30));
  }
  static __m256i scale(const Packed& p, int s, int hh) { return dup_scale<kDword>(p.sc[s] + kLanes * hh); }
  static __m256i coef_pair(const Packed& p, int u, int hh) {
    return pair_words(p.sc[2 * u] + kLanes * hh, p.sc[2 * u + 1] + kLanes * hh);
  }
};

struct Q3KAvx2 : Q3KLayout {
  static constexpr int kOffsetShift = 2;  // offset 4
  static constexpr bool kMin = false;
  static constexpr bool kDword = kDwordRuns;
  static constexpr int kRun = 4;  // int32 runs: 4 * 4 * 7 * 128 = 14336
  static __m256i quant(const Packed& p, int h, int c, int k, int hh) {
    const __m256i xy = load256((h ? p.q[c].y : p.q[c].x) + 32 * hh), z = load256(p.q[c].z + 32 * hh);
    if (k < 2) return bits(xy, 3 * k, 0x07);
    if (k == 3) return bits(z, 3 * h, 0x07);
    return _mm256_or_si256(bits(xy, 6, 0x03), bits(z, 4 + h, 0x04));
  }
  static __m256i scale(const Packed& p, int s, int hh) { return dup_scale<kDword>(p.sc[s] + kLanes * hh); }
  static __m256i coef_pair(const Packed& p, int u, int hh) {
    return pair_words(p.sc[2 * u] + kLanes * hh, p.sc[2 * u + 1] + kLanes * hh);
  }
};

struct Q2KAvx2 : Q2KLayout {
  static constexpr int kOffsetShift = 0;
  static constexpr bool kMin = true;
  static constexpr bool kDword = kDwordRuns;
  static constexpr int kRun = 4;  // int32 runs: 4 * 4 * 3 * 128 = 6144
  static __m256i quant(const Packed& p, int h, int c, int k, int hh) { return bits(load256(p.q[c][h] + 32 * hh), 2 * k, 0x03); }
  // The scale byte's low nibble in both halves of each lane (with VNNI the low one): byte
  // 2j + s % 2 of the pair's 16 bytes of half hh (broadcast to both 128-bit halves by the load) in
  // both words of lane j.
  static __m256i scale(const Packed& p, int s, int hh) {
    const __m256i even = kDword ? _mm256_setr_epi8(0, -1, -1, -1, 2, -1, -1, -1, 4, -1, -1, -1, 6, -1, -1, -1,  //
                                                  8, -1, -1, -1, 10, -1, -1, -1, 12, -1, -1, -1, 14, -1, -1, -1)
                               : _mm256_setr_epi8(0, -1, 0, -1, 2, -1, 2, -1, 4, -1, 4, -1, 6, -1, 6, -1,  //
                                                  8, -1, 8, -1, 10, -1, 10, -1, 12, -1, 12, -1, 14, -1, 14, -1);
    // 1 added to the index bytes moves them to the odd byte.
    const __m256i idx = s % 2 ? _mm256_add_epi8(even, kDword ? _mm256_set1_epi32(1) : _mm256_set1_epi16(1)) : even;
    const __m256i v = _mm256_broadcastsi128_si256(load128(p.sc[s / 2][kLanes * hh]));
    return _mm256_and_si256(_mm256_shuffle_epi8(v, idx), _mm256_set1_epi16(0x0F));
  }
  // The mins (high nibbles) of sub-blocks 2u and 2u + 1: the pair's bytes widened, as they lie.
  static __m256i coef_pair(const Packed& p, int u, int hh) {
    return _mm256_srli_epi16(_mm256_cvtepu8_epi16(load128(p.sc[u][kLanes * hh])), 4);
  }
};

template <class T, int R, int H>
void k16_tile(const typename T::Packed* pk, int hh0, const void* a, int64_t as, int64_t n, float* y, int64_t ys,
              int64_t count) {
  __m256 acc[H][R];
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const typename T::Packed& p = pk[i];
    __m256i s[H][R];
    for (int h = 0; h < H; ++h)
      for (int r = 0; r < R; ++r) s[h][r] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          prefetch_part<R, 16>(&p, 8 * h + 4 * half + k);
          const int sb = 8 * h + 2 * k + half;  // the sub-block: chunks 4 half .. 4 half + 3
          for (int g = 0; g < H; ++g) {
            const int hh = hh0 + g;
            const __m256i sc = T::scale(p, sb, hh);
            __m256i sum[R];
#pragma GCC unroll 4
            for (int c = 4 * half; c < 4 * half + 4; ++c) {
              const __m256i q = T::quant(p, h, c, k, hh);
              for (int r = 0; r < R; ++r) {
                sum[r] = run_add<T::kDword>(sum[r], q, bcast4(q8k_row(a, as, r)[i].qs + 128 * h + 32 * k + 4 * c), c % T::kRun == 0);
              }
              if (c % T::kRun == T::kRun - 1)
                for (int r = 0; r < R; ++r) s[g][r] = madd_add(s[g][r], sum[r], sc);
            }
          }
        }
      }
    }
    for (int g = 0; g < H; ++g) {
      const int hh = hh0 + g;
      // C (offset types) or M (Q2_K) over the 8 pairs of sub-blocks.
      __m256i c[R];
      for (int r = 0; r < R; ++r) c[r] = _mm256_setzero_si256();
      for (int u = 0; u < 8; ++u) {
        const __m256i cp = T::coef_pair(p, u, hh);
        for (int r = 0; r < R; ++r) c[r] = madd_add(c[r], cp, bcast_pair(q8k_row(a, as, r)[i].bsums + 2 * u));
      }
      const __m256 dw = half_scales(p.d, hh);
      for (int r = 0; r < R; ++r) {
        const __m256 da = _mm256_set1_ps(q8k_row(a, as, r)[i].d);
        if constexpr (T::kMin) {
          const __m256 res = _mm256_fnmadd_ps(half_scales(p.dmin, hh), _mm256_cvtepi32_ps(c[r]),
                                              _mm256_mul_ps(dw, _mm256_cvtepi32_ps(s[g][r])));
          acc[g][r] = _mm256_fmadd_ps(res, da, acc[g][r]);
        } else {
          const __m256i st = _mm256_sub_epi32(s[g][r], _mm256_slli_epi32(c[r], T::kOffsetShift));
          acc[g][r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_cvtepi32_ps(st)), da, acc[g][r]);
        }
      }
    }
  }
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) store_lanes(y + r * ys + kLanes * (hh0 + h), acc[h][r], count - kLanes * (hh0 + h));
}

// multiply() of every K-quant: groups of up to 4 activation rows; a group of more than 8 weight
// rows takes both halves in one pass for up to 2 activation rows, one half a pass for more.
template <class Packed, class Tile>
void k_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a, int64_t n,
                float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const Packed*>(packed);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    constexpr int R = decltype(rows)::value;
    const auto* ar = ab + r * as;
    float* yr = y + r * ys;
    if (count <= kLanes) return Tile::template run<R, 1>(pk, 0, ar, as, n, yr, ys, count);
    if constexpr (R <= 2) return Tile::template run<R, 2>(pk, 0, ar, as, n, yr, ys, count);
    for (int hh = 0; hh < 2; ++hh) Tile::template run<R, 1>(pk, hh, ar, as, n, yr, ys, count);
  });
}

template <class Packed>
struct K32Tile {
  template <int R, int H>
  static void run(const Packed* pk, int hh0, const void* a, int64_t as, int64_t n, float* y, int64_t ys, int64_t count) {
    k32_tile<Packed, R, H>(pk, hh0, a, as, n, y, ys, count);
  }
};
template <class T>
struct K16Tile {
  template <int R, int H>
  static void run(const typename T::Packed* pk, int hh0, const void* a, int64_t as, int64_t n, float* y, int64_t ys,
                  int64_t count) {
    k16_tile<T, R, H>(pk, hh0, a, as, n, y, ys, count);
  }
};

// min_rows (8) matters only for a weight packed per call, which the loaded layout never is (its
// kernels read it in place); with INFER_REPACK=0 the file's rows go to the KPacked tiles below.
template <class Block, class Packed>
constexpr QGemmKernel k32_kernel() {
  return {8,       kGroup, no_side_bytes, no_prepare_side, k32_packed_bytes<Packed>, k32_pack<Block, Packed>,
          k_multiply<Packed, K32Tile<Packed>>, k32_unpack<Block, Packed>};
}
template <class T>
constexpr QGemmKernel k16_kernel() {
  return {8,
          kGroup,
          no_side_bytes,
          no_prepare_side,
          k16_packed_bytes<T>,
          k16_pack<T>,
          k_multiply<typename T::Packed, K16Tile<T>>,
          k16_unpack<T>};
}

// ---- K-quants (Q2_K to Q6_K): the super-block's quants decoded per call ----
//
// Packed group, per super-block i (2848 bytes; the weight is packed per call, so room is not
// the file's):
//   d, dmin  f16[8] each     lane j: row j's scales (0 for the rows past count; dmin 0 where the
//                            type has none)
//   sc       i16x2[16][8]    16-element group t, lane j: row j's scale of the sub-block holding
//                            t, in both 16-bit halves (int32 runs: the low one, the high 0)
//   coef     i16x2[8][8]     pair u, lane j: row j's coefficients of bsums 2u and 2u + 1: the
//                            mins (Q2_K, Q4_K, Q5_K) or the offset times the scale (Q3_K 4 sc,
//                            Q6_K 32 sc)
//   q        u8[64][32]      vector v, lane j: row j's quants of elements 4v..4v+3, unsigned
//                            (avx2_quants::kquants)
// Per 16-element group t and activation row, four vpmaddubsw (weight quants times the broadcast
// activation quants) add up in 16 bits and one vpmaddwd by the scales widens them: S = Σ sc_t I_t
// exactly. A 16-bit sum holds 4 pair sums (at most 4 * 2 * 31 * 128 = 31744; Q8_K's quants reach
// -128), Q6_K's 2 (quants to 63: 2 * 2 * 63 * 128 = 32256). With VNNI the runs of all but Q6_K add
// up in int32 lanes kept within 16 bits (Q5_K 2 vectors) and sc holds the scale in the low word
// only.
// C = Σ coef B (B: the Q8_K bsums) by vpmaddwd too: M for the types with mins, and what the offsets
// take off S for the others.
struct KPacked {
  uint16_t d[kLanes];
  uint16_t dmin[kLanes];
  uint32_t sc[16][kLanes];
  uint32_t coef[8][kLanes];
  uint8_t q[64][32];
};
static_assert(sizeof(KPacked) == 2848);

inline uint32_t i16_pair(int lo, int hi) { return static_cast<uint16_t>(lo) | uint32_t{static_cast<uint16_t>(hi)} << 16; }

// How a type's float steps run (qdot.hpp): per super-block r = dW * S, r = fma(-dminW, M, r),
// acc = fma(r, dA, acc) (with_min: Q2_K, Q5_K); acc = fma(dW * (S - C), dA, acc) (offset:
// Q3_K, Q6_K); or per 64 elements acc = fma(S64, dW * dA, acc), accm = fma(M64, dminW * dA,
// accm), the result acc - accm (per64: Q4_K).
enum class KSteps { with_min, offset, per64 };

// kDword: int32 runs (run_add); kSums16: vectors per run, within 16 bits.
struct Q2KType {
  using Block = BlockQ2_K;
  static constexpr KSteps kSteps = KSteps::with_min;
  static constexpr bool kDword = kDwordRuns;
  static constexpr int kSums16 = 4;
  static void scales(const Block& b, int* sc, int* coef) {
    for (int t = 0; t < 16; ++t) sc[t] = b.scales[t] & 0x0F, coef[t] = b.scales[t] >> 4;
  }
  static uint16_t dmin(const Block& b) { return b.dmin; }
};
struct Q3KType {
  using Block = BlockQ3_K;
  static constexpr KSteps kSteps = KSteps::offset;
  static constexpr bool kDword = kDwordRuns;
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
  static constexpr bool kDword = kDwordRuns;
  static constexpr int kSums16 = kDword && std::is_same_v<B, BlockQ5_K> ? 2 : 4;
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
  static constexpr bool kDword = false;
  static constexpr int kSums16 = 2;
  static void scales(const Block& b, int* sc, int* coef) {
    for (int t = 0; t < 16; ++t) sc[t] = b.scales[t], coef[t] = 32 * sc[t];
  }
  static uint16_t dmin(const Block&) { return 0; }
};

int64_t kp_packed_bytes(int64_t n) noexcept { return n / kQKK * static_cast<int64_t>(sizeof(KPacked)); }

template <class T>
void kp_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  using Block = typename T::Block;
  assert(count >= 1 && count <= kLanes && n % kQKK == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* out = static_cast<KPacked*>(packed);
  alignas(32) uint8_t rows[kLanes][kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    KPacked& o = out[i];
    for (int64_t j = 0; j < kLanes; ++j) {
      // Rows past count repeat the last row, with scales 0.
      const Block& b = reinterpret_cast<const Block*>(base + std::min(j, count - 1) * ws)[i];
      __m256i q[8];
      avx2_quants::kquants(b, q);
      for (int v = 0; v < 8; ++v) _mm256_store_si256(reinterpret_cast<__m256i*>(rows[j] + 32 * v), q[v]);
      int sc[16], coef[16];
      T::scales(b, sc, coef);
      for (int t = 0; t < 16; ++t) o.sc[t][j] = i16_pair(sc[t], T::kDword ? 0 : sc[t]);
      for (int u = 0; u < 8; ++u) o.coef[u][j] = i16_pair(coef[2 * u], coef[2 * u + 1]);
      o.d[j] = j < count ? b.d : 0;
      o.dmin[j] = j < count ? T::dmin(b) : 0;
    }
    for (int v = 0; v < 8; ++v) {
      __m256i in[kLanes], t[8];
      for (int j = 0; j < kLanes; ++j) in[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(rows[j] + 32 * v));
      avx2_quants::transpose8(in, t);
      for (int k = 0; k < 8; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q[8 * v + k]), t[k]);
    }
  }
}

// R activation rows against one packed group: lane j of acc[r] (and accm[r]) is row j's chain.
template <class T, int R>
void kp_tile(const KPacked* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
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
        c = madd_add(c, load256(b.coef[u]), _mm256_set1_epi32(load_i32(ab[r]->bsums + 2 * u)));
      return c;
    };
    // S with VNNI in two chains, even and odd runs (a run's vpdpwssd waits on the previous one's:
    // Q6_K's 64 runs a super-block would wait out the latency); without, in one (a run's vpmaddwd
    // does not wait on the chain, whose one-cycle vpaddd does not hold it up), so that R registers
    // go to the runs. Integer sums, exact in any order.
    __m256i s[R], s_odd[R];
    for (int r = 0; r < R; ++r) s[r] = s_odd[r] = _mm256_setzero_si256();
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
            sum[r] = run_add<T::kDword>(sum[r], q, _mm256_set1_epi32(load_i32(ab[r]->qs + 4 * e)), v == 0);
          }
        }
        for (int r = 0; r < R; ++r) {
          __m256i& chain = kVnni && (t * (4 / T::kSums16) + h) % 2 ? s_odd[r] : s[r];
          chain = madd_add(chain, sum[r], sc);
        }
      }
      if constexpr (T::kSteps == KSteps::per64) {
        if (t % 4 == 3) {
          const int p = t / 4;
          for (int r = 0; r < R; ++r) {
            const __m256 da = _mm256_set1_ps(ab[r]->d);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s[r], s_odd[r])), _mm256_mul_ps(dw, da), acc[r]);
            accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(coef_sum(r, 2 * p, 2 * p + 2)), _mm256_mul_ps(dmw, da), accm[r]);
            s[r] = s_odd[r] = _mm256_setzero_si256();
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) s[r] = _mm256_add_epi32(s[r], s_odd[r]);
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
void kp_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a, int64_t n,
                float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const KPacked*>(packed);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    kp_tile<T, decltype(rows)::value>(pk, count, ab + r * as, as, n, y + r * ys, ys);
  });
}



// ---- KPacked groups from the layout packed at load ----
//
// A wide batch of a weight packed at load runs the tiles above, packed per call from the loaded
// layout: the loaded tiles' quant decoders give exactly KPacked's vectors (lane j: 4 consecutive
// elements of row j), so this costs one pass of their unpacking, where each activation row of the
// loaded tiles costs about a quarter of one. Rows first..first+count-1 (first a multiple of 8,
// count <= 8) of the weight packed at `loaded`; lanes past count keep the loaded group's padding
// (scales 0) or the other rows, whose outputs are never stored.
template <class Packed>
inline const Packed& loaded_block(const void* loaded, int64_t first, int64_t n, int64_t i) {
  return reinterpret_cast<const Packed*>(static_cast<const uint8_t*>(loaded))[first / kGroup * (n / kQKK) + i];
}
inline void copy_half_scales(const uint16_t* src, int hh, uint16_t* dst) { std::memcpy(dst, src + kLanes * hh, kLanes * 2); }
inline void store_words(uint32_t* dst, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v); }

template <class Packed>
void k32_pack_loaded(const void* loaded, int64_t first, int64_t, int64_t n, void* packed) noexcept {
  const int hh = static_cast<int>(first % kGroup / kLanes);
  auto* out = static_cast<KPacked*>(packed);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const Packed& b = loaded_block<Packed>(loaded, first, n, i);
    KPacked& o = out[i];
    copy_half_scales(b.d, hh, o.d);
    copy_half_scales(b.dmin, hh, o.dmin);
    for (int t = 0; t < 16; ++t) store_words(o.sc[t], dup_scale(b.sc[t / 2] + kLanes * hh));
    for (int u = 0; u < 8; ++u) store_words(o.coef[u], dup_words(b.m[u] + kLanes * hh));
    for (int p = 0; p < 4; ++p)
      for (int k = 0; k < 8; ++k) {
        __m256i lo, hi;
        k32_quants(b, p, k, hh, lo, hi);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q[16 * p + k]), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q[16 * p + 8 + k]), hi);
      }
  }
}

template <class T>
void k16_pack_loaded(const void* loaded, int64_t first, int64_t, int64_t n, void* packed) noexcept {
  using Packed = typename T::Packed;
  const int hh = static_cast<int>(first % kGroup / kLanes);
  auto* out = static_cast<KPacked*>(packed);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const Packed& p = loaded_block<Packed>(loaded, first, n, i);
    KPacked& o = out[i];
    copy_half_scales(p.d, hh, o.d);
    if constexpr (T::kMin)
      copy_half_scales(p.dmin, hh, o.dmin);
    else
      std::memset(o.dmin, 0, sizeof(o.dmin));
    for (int t = 0; t < 16; ++t) store_words(o.sc[t], T::scale(p, t, hh));
    // KPacked's coefficients: the mins, or the offset times the scales.
    for (int u = 0; u < 8; ++u) store_words(o.coef[u], _mm256_slli_epi16(T::coef_pair(p, u, hh), T::kOffsetShift));
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int c = 0; c < 8; ++c)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q[32 * h + 8 * k + c]), T::quant(p, h, c, k, hh));
  }
}

// The KPacked kernel of type T, which packs from the file's rows (min_rows on) and from the
// loaded layout (pack_loaded, min_rows_loaded on).
template <class T>
constexpr QGemmKernel kp_kernel(void (*pack_loaded)(const void*, int64_t, int64_t, int64_t, void*) noexcept) {
  QGemmKernel k{kKQuantMinRows, kLanes, no_side_bytes, no_prepare_side, kp_packed_bytes, kp_pack<T>, kp_multiply<T>, nullptr};
  k.pack_loaded = pack_loaded;
  k.min_rows_loaded = kKQuantMinRowsLoaded;
  return k;
}

}  // namespace

const QGemmKernel INFER_AVX2_KERNEL(qgemm_q4_k_loaded) = k32_kernel<BlockQ4_K, Q4KPacked>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q5_k_loaded) = k32_kernel<BlockQ5_K, Q5KPacked>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q6_k_loaded) = k16_kernel<Q6KAvx2>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q3_k_loaded) = k16_kernel<Q3KAvx2>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q2_k_loaded) = k16_kernel<Q2KAvx2>();
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q2_k) = kp_kernel<Q2KType>(k16_pack_loaded<Q2KAvx2>);
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q3_k) = kp_kernel<Q3KType>(k16_pack_loaded<Q3KAvx2>);
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q4_k) = kp_kernel<Q4KType>(k32_pack_loaded<Q4KPacked>);
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q5_k) = kp_kernel<Q5KType>(k32_pack_loaded<Q5KPacked>);
const QGemmKernel INFER_AVX2_KERNEL(qgemm_q6_k) = kp_kernel<Q6KType>(k16_pack_loaded<Q6KAvx2>);

}  // namespace infer
