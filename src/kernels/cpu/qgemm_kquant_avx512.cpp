// AVX-512 VNNI tile kernels for the K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K (interface and the
// bit-identity argument in qgemm.hpp). The 16 weight rows of a group sit in the 16 int32 lanes;
// an activation row's 4 quants are broadcast to all lanes, so one vpdpbusd adds 4 products to each
// row's sub-block dot and no horizontal sum is needed. Weight quants enter unsigned; a type whose
// quants carry an offset (Q3_K: 4, Q6_K: 32) starts each sub-block's integer sum at -offset * B
// (B: the Q8_K bsum of the sub-block's 16 activations). The tiles read everything else from the
// Q8_K rows (no side data). Every type is packed at load (CpuTypeTraits::load_packing), and
// unpack() gives back each row byte for byte.
//
// The float steps per super-block are qdot.hpp's, lane by lane:
//   Q2_K, Q5_K   r = dW * S;  r = fma(-dminW, M, r);  acc = fma(r, dA, acc)
//   Q3_K, Q6_K   acc = fma(dW * S, dA, acc)
//   Q4_K         per 64 elements: acc = fma(S64, dW * dA, acc), accm = fma(M64, dminW * dA, accm);
//                the result acc - accm
// with S = Σ_j sc_j I_j (sub-block scales times integer dots) and M = Σ_j m_j B_j, exact in int32.
#include <cassert>
#include <cstring>

#include "kernels/cpu/qgemm.hpp"
#include "kernels/cpu/qgemm_avx512_util.hpp"

namespace infer {
namespace {

using namespace quant;
using namespace avx512_tiles;
using namespace qgemm_layouts;

inline const BlockQ8_K* q8k_row(const void* a, int64_t as, int64_t r) { return act_row<BlockQ8_K>(a, as, r); }
inline __m512i bcast4(const int8_t* p) { return _mm512_set1_epi32(load_i32(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
// (v >> shift) & mask in every byte (the 16-bit shift's spill across bytes is masked off).
inline __m512i bits(__m512i v, int shift, int mask) {
  return _mm512_and_si512(shift ? _mm512_srli_epi16(v, static_cast<unsigned>(shift)) : v, _mm512_set1_epi8(static_cast<char>(mask)));
}

// ---- Q4_K, Q5_K: 32-element sub-blocks ----
//
// The packed layouts, their pack() and unpack(): qgemm_layouts.hpp.

// The quants of sub-blocks 2p (lo) and 2p + 1 (hi), elements 4k..4k+3 of the 16 rows.
inline void k32_quants(const Q4KPacked& b, int p, int k, __m512i& lo, __m512i& hi) {
  const __m512i q = load512(b.qs[p][k]);
  lo = bits(q, 0, 0x0F), hi = bits(q, 4, 0x0F);
}
inline void k32_quants(const Q5KPacked& b, int p, int k, __m512i& lo, __m512i& hi) {
  const auto v = [&](int x) { return load512(b.q[k][x]); };
  switch (p) {
    case 0: lo = bits(v(0), 0, 31), hi = bits(v(4), 0, 31); return;
    case 1: lo = bits(v(1), 0, 31), hi = _mm512_or_si512(bits(v(0), 5, 0x07), bits(v(1), 2, 0x18)); return;
    case 2: lo = bits(v(2), 0, 31), hi = _mm512_or_si512(bits(v(2), 5, 0x07), bits(v(3), 2, 0x18)); return;
    default:
      lo = bits(v(3), 0, 31);
      hi = _mm512_or_si512(_mm512_or_si512(bits(v(4), 5, 0x07), bits(v(1), 4, 0x08)), bits(v(3), 3, 0x10));
  }
}

// The integer dots of pair p (sub-blocks 2p and 2p + 1) of R activation rows: i0[r], i1[r].
template <int R, class Packed>
inline void k32_pair_dots(const Packed& b, int p, const void* a, int64_t as, int64_t i, __m512i* i0, __m512i* i1) {
  for (int r = 0; r < R; ++r) i0[r] = i1[r] = _mm512_setzero_si512();
  for (int k = 0; k < 8; ++k) {
    __m512i lo, hi;
    k32_quants(b, p, k, lo, hi);
    for (int r = 0; r < R; ++r) {
      const int8_t* aq = q8k_row(a, as, r)[i].qs + 64 * p + 4 * k;
      i0[r] = _mm512_dpbusd_epi32(i0[r], lo, bcast4(aq));
      i1[r] = _mm512_dpbusd_epi32(i1[r], hi, bcast4(aq + 32));
    }
  }
}

// Q4_K: R activation rows against one packed group; lane j of acc[r] / accm[r] are row j's chains.
template <int R>
void q4k_tile(const Q4KPacked* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m512 acc[R], accm[R];
  for (int r = 0; r < R; ++r) acc[r] = accm[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const Q4KPacked& b = pk[i];
    const __m512 dw = load_scales(b.d), dmw = load_scales(b.dmin);
    __m512 dd[R], dm[R];
    for (int r = 0; r < R; ++r) {
      const __m512 da = _mm512_set1_ps(q8k_row(a, as, r)[i].d);
      dd[r] = _mm512_mul_ps(dw, da);
      dm[r] = _mm512_mul_ps(dmw, da);
    }
    for (int p = 0; p < 4; ++p) {
      prefetch_part<R, 4>(&b, p);
      __m512i i0[R], i1[R];
      k32_pair_dots<R>(b, p, a, as, i, i0, i1);
      const __m512i sc0 = bytes_to_i32(b.sc[2 * p]), sc1 = bytes_to_i32(b.sc[2 * p + 1]);
      const __m512i m0 = bytes_to_i32(b.m[2 * p]), m1 = bytes_to_i32(b.m[2 * p + 1]);
      for (int r = 0; r < R; ++r) {
        const int16_t* bs = q8k_row(a, as, r)[i].bsums + 4 * p;
        const __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(sc0, i0[r]), _mm512_mullo_epi32(sc1, i1[r]));
        const __m512i m = _mm512_add_epi32(_mm512_mullo_epi32(m0, _mm512_set1_epi32(bs[0] + bs[1])),
                                           _mm512_mullo_epi32(m1, _mm512_set1_epi32(bs[2] + bs[3])));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd[r], acc[r]);
        accm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm[r], accm[r]);
      }
    }
  }
  const __mmask16 valid = lanes_below(count);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ys, valid, _mm512_sub_ps(acc[r], accm[r]));
}

// Q5_K: one S and one M per super-block.
template <int R>
void q5k_tile(const Q5KPacked* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const Q5KPacked& b = pk[i];
    __m512i s[R], m[R];
    for (int r = 0; r < R; ++r) s[r] = m[r] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      prefetch_part<R, 4>(&b, p);
      __m512i i0[R], i1[R];
      k32_pair_dots<R>(b, p, a, as, i, i0, i1);
      const __m512i sc0 = bytes_to_i32(b.sc[2 * p]), sc1 = bytes_to_i32(b.sc[2 * p + 1]);
      for (int r = 0; r < R; ++r)
        s[r] = _mm512_add_epi32(s[r], _mm512_add_epi32(_mm512_mullo_epi32(sc0, i0[r]), _mm512_mullo_epi32(sc1, i1[r])));
    }
    for (int j = 0; j < 8; ++j) {
      const __m512i mj = bytes_to_i32(b.m[j]);
      for (int r = 0; r < R; ++r) {
        const int16_t* bs = q8k_row(a, as, r)[i].bsums + 2 * j;
        m[r] = _mm512_add_epi32(m[r], _mm512_mullo_epi32(mj, _mm512_set1_epi32(bs[0] + bs[1])));
      }
    }
    const __m512 dw = load_scales(b.d), dmw = load_scales(b.dmin);
    for (int r = 0; r < R; ++r) {
      const __m512 res = _mm512_fnmadd_ps(dmw, _mm512_cvtepi32_ps(m[r]), _mm512_mul_ps(dw, _mm512_cvtepi32_ps(s[r])));
      acc[r] = _mm512_fmadd_ps(res, _mm512_set1_ps(q8k_row(a, as, r)[i].d), acc[r]);
    }
  }
  const __mmask16 valid = lanes_below(count);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ys, valid, acc[r]);
}

// ---- Q2_K, Q3_K, Q6_K: 16-element sub-blocks ----
//
// The layouts (qgemm_layouts.hpp) as the tile reads them: quants() gives the 4 quant vectors
// (k = 0..3) of chunk c of half h, unsigned, the offset not applied. Q2_K's quants are taken in
// place as qs & (3 << 2k), that is 4^k times the quant: the tile shifts each sub-block's dot back
// (exact: every term is a multiple of 4^k), one shift a sub-block and row instead of one a quant
// vector.
struct Q6K : Q6KLayout {
  static constexpr int kOffset = 32;
  static constexpr bool kMin = false;
  static constexpr bool kShortDots = false;  // |Σ (q - 32) a| over 16 elements reaches 65536
  static constexpr bool kScaledQuants = false;
  static void quants(const Packed& p, int h, int c, __m512i* q) {
    const __m512i qa = load512(p.q[h][c].a), qb = load512(p.q[h][c].b), qc = load512(p.q[h][c].c);
    q[0] = bits(qa, 0, 0x3F);
    q[1] = bits(qb, 0, 0x3F);
    q[2] = bits(qc, 0, 0x3F);
    q[3] = _mm512_or_si512(_mm512_or_si512(bits(qa, 6, 0x03), bits(qb, 4, 0x0C)), bits(qc, 2, 0x30));
  }
  static __m512i scale(const Packed& p, int s) { return bytes_to_i32(p.sc[s]); }
};

struct Q3K : Q3KLayout {
  static constexpr int kOffset = 4;
  static constexpr bool kMin = false;
  static constexpr bool kShortDots = false;  // fits (|Σ (q - 4) a| <= 8192), but dpwssd ran prefill 4-6% slower
  static constexpr bool kScaledQuants = false;
  static void quants(const Packed& p, int h, int c, __m512i* q) {
    const __m512i xy = load512(h ? p.q[c].y : p.q[c].x), z = load512(p.q[c].z);
    q[0] = bits(xy, 0, 0x07);
    q[1] = bits(xy, 3, 0x07);
    q[2] = _mm512_or_si512(bits(xy, 6, 0x03), bits(z, 4 + h, 0x04));
    q[3] = bits(z, 3 * h, 0x07);
  }
  static __m512i scale(const Packed& p, int s) { return bytes_to_i32(p.sc[s]); }
};

// Q2_K's scale bytes come in pairs (sub-blocks 2u and 2u + 1 side by side in each lane), so one
// widening gives both as the two 16-bit words of the lane: the mins of a pair then meet their two
// bsums in one dpwssd, and a scale sits in word s % 2 with its dot brought into the same word.
struct Q2K : Q2KLayout {
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kShortDots = true;  // |Σ q a| <= 16 * 3 * 128
  static constexpr bool kScaledQuants = true;
  static void quants(const Packed& p, int h, int c, __m512i* q) {
    const __m512i qs = load512(p.q[c][h]);
    for (int k = 0; k < 4; ++k) q[k] = _mm512_and_si512(qs, _mm512_set1_epi8(static_cast<char>(3 << (2 * k))));
  }
  // Lane j: row j's scale bytes of sub-blocks 2u and 2u + 1 as its low and high words.
  static __m512i pair_words(const Packed& p, int u) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.sc[u])));
  }
  // Sub-block s's scale in word s % 2 of each lane, the other word 0.
  static __m512i scale(const Packed& p, int s) {
    return _mm512_and_si512(pair_words(p, s / 2), _mm512_set1_epi32(s % 2 ? 0x000F0000 : 0x0000000F));
  }
  // The dot d = 4^k I of sub-block s (quants taken in place) as I in word s % 2: I itself (the high
  // word its sign, met by a zero scale word), or I * 2^16. Exact: |I| <= 6144, |I| * 2^16 < 2^31.
  static __m512i align_dot(__m512i d, int k, int s) {
    return s % 2 ? _mm512_slli_epi32(d, 16 - 2 * k) : _mm512_srai_epi32(d, 2 * k);
  }
  // The mins of sub-blocks 2u and 2u + 1 (the high nibbles) as the lane's two words.
  static __m512i min_pair(const Packed& p, int u) { return _mm512_srli_epi16(pair_words(p, u), 4); }
};

// R activation rows against one packed group: lane j of acc[r] is row j's chain. Where a
// sub-block's integer dot fits in 16 bits (kShortDots: Q2_K), one dpwssd multiplies it by
// its scale (dot and scale in the same 16-bit word of the lane, the scale's other word 0) and
// adds it to the sum, and one more each pair of mins by their two bsums; Q3_K and Q6_K multiply
// with mullo. Exact in int32: the same sums. (Q2_K with its scales in pairs, against one scale
// and one min a widening and a dpwssd: BM_MatmulLoaded, 2048 x 512 in cache, 2 threads, median
// of six alternations 40.2 -> 46.3 GB/s; TinyLlama-shape pp128 mean of four 183 -> 216 tokens/s,
// decode level, bound by memory.)
template <class T, int R>
void k16_tile(const typename T::Packed* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const typename T::Packed& p = pk[i];
    // One partial sum per k: four short chains instead of one of 16 dependent adds.
    __m512i part[4][R];
    for (int k = 0; k < 4; ++k)
      for (int r = 0; r < R; ++r) part[k][r] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        // Sub-blocks 8h + 2k + half for k = 0..3, each of chunks c = 4 half .. 4 half + 3.
        __m512i dot[4][R];
        for (int k = 0; k < 4; ++k)
          for (int r = 0; r < R; ++r)
            dot[k][r] = _mm512_set1_epi32(-T::kOffset * q8k_row(a, as, r)[i].bsums[8 * h + 2 * k + half]);
#pragma GCC unroll 4
        for (int c = 4 * half; c < 4 * half + 4; ++c) {
          prefetch_part<R, 16>(&p, 8 * h + c);
          __m512i q[4];
          T::quants(p, h, c, q);
          for (int r = 0; r < R; ++r) {
            const int8_t* aq = q8k_row(a, as, r)[i].qs + 128 * h + 4 * c;
            for (int k = 0; k < 4; ++k) dot[k][r] = _mm512_dpbusd_epi32(dot[k][r], q[k], bcast4(aq + 32 * k));
          }
        }
        for (int k = 0; k < 4; ++k) {
          const __m512i sc = T::scale(p, 8 * h + 2 * k + half);
          for (int r = 0; r < R; ++r) {
            __m512i d = dot[k][r];
            if constexpr (T::kScaledQuants) d = T::align_dot(d, k, 8 * h + 2 * k + half);
            if constexpr (T::kShortDots)
              part[k][r] = _mm512_dpwssd_epi32(part[k][r], d, sc);
            else
              part[k][r] = _mm512_add_epi32(part[k][r], _mm512_mullo_epi32(sc, d));
          }
        }
      }
    }
    __m512i sum[R];
    for (int r = 0; r < R; ++r)
      sum[r] = _mm512_add_epi32(_mm512_add_epi32(part[0][r], part[1][r]), _mm512_add_epi32(part[2][r], part[3][r]));
    const __m512 dw = load_scales(p.d);
    if constexpr (T::kMin) {
      __m512i mp[2][R];
      for (int e = 0; e < 2; ++e)
        for (int r = 0; r < R; ++r) mp[e][r] = _mm512_setzero_si512();
      for (int u = 0; u < 8; ++u) {
        const __m512i ms = T::min_pair(p, u);
        for (int r = 0; r < R; ++r)
          mp[u & 1][r] = _mm512_dpwssd_epi32(mp[u & 1][r], ms, _mm512_set1_epi32(load_i32(q8k_row(a, as, r)[i].bsums + 2 * u)));
      }
      __m512i m[R];
      for (int r = 0; r < R; ++r) m[r] = _mm512_add_epi32(mp[0][r], mp[1][r]);
      const __m512 dmw = load_scales(p.dmin);
      for (int r = 0; r < R; ++r) {
        const __m512 res = _mm512_fnmadd_ps(dmw, _mm512_cvtepi32_ps(m[r]), _mm512_mul_ps(dw, _mm512_cvtepi32_ps(sum[r])));
        acc[r] = _mm512_fmadd_ps(res, _mm512_set1_ps(q8k_row(a, as, r)[i].d), acc[r]);
      }
    } else {
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_cvtepi32_ps(sum[r])), _mm512_set1_ps(q8k_row(a, as, r)[i].d), acc[r]);
    }
  }
  const __mmask16 valid = lanes_below(count);
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ys, valid, acc[r]);
}

// multiply() of every K-quant: the tile over groups of up to 4 activation rows.
template <class Packed, template <int> class TileOf>
void k_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a, int64_t n,
                float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const Packed*>(packed);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    TileOf<decltype(rows)::value>::run(pk, count, ab + r * as, as, n, y + r * ys, ys);
  });
}

template <int R>
struct Q4KTile {
  static void run(const Q4KPacked* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
    q4k_tile<R>(pk, count, a, as, n, y, ys);
  }
};
template <int R>
struct Q5KTile {
  static void run(const Q5KPacked* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
    q5k_tile<R>(pk, count, a, as, n, y, ys);
  }
};
template <class T>
struct K16Tile {
  template <int R>
  struct Of {
    static void run(const typename T::Packed* pk, int64_t count, const void* a, int64_t as, int64_t n, float* y, int64_t ys) {
      k16_tile<T, R>(pk, count, a, as, n, y, ys);
    }
  };
};

template <class T>
constexpr QGemmKernel k16_kernel() {
  return {8,
          kGroup,
          no_side_bytes,
          no_prepare_side,
          k16_packed_bytes<T>,
          k16_pack<T>,
          k_multiply<typename T::Packed, K16Tile<T>::template Of>,
          k16_unpack<T>};
}

}  // namespace

// min_rows (8): the fewest rows for which packing per call would pay; every K-quant is packed at
// load on CPUs with these kernels, so it matters only for weights that were not.
const QGemmKernel qgemm_q4_k_avx512{8,
                                    kGroup,
                                    no_side_bytes,
                                    no_prepare_side,
                                    k32_packed_bytes<Q4KPacked>,
                                    k32_pack<BlockQ4_K, Q4KPacked>,
                                    k_multiply<Q4KPacked, Q4KTile>,
                                    k32_unpack<BlockQ4_K, Q4KPacked>};
const QGemmKernel qgemm_q5_k_avx512{8,
                                    kGroup,
                                    no_side_bytes,
                                    no_prepare_side,
                                    k32_packed_bytes<Q5KPacked>,
                                    k32_pack<BlockQ5_K, Q5KPacked>,
                                    k_multiply<Q5KPacked, Q5KTile>,
                                    k32_unpack<BlockQ5_K, Q5KPacked>};
const QGemmKernel qgemm_q6_k_avx512 = k16_kernel<Q6K>();
const QGemmKernel qgemm_q3_k_avx512 = k16_kernel<Q3K>();
const QGemmKernel qgemm_q2_k_avx512 = k16_kernel<Q2K>();

}  // namespace infer
