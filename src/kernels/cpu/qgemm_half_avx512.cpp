// AVX-512 tile kernels for F16 and BF16 weights (interface and the bit-identity argument in
// qgemm.hpp; conversion, packing, k blocking and the walk over tiles in qgemm_half_impl.hpp).
//
// A zmm holds the 8 chains of two pairs side by side: weight row 2p in the low half and row
// 2p + 1 in the high half, against one activation row's chunk broadcast to both halves. A tile
// is 4 such pairs (8 weight rows) by 6 activation rows: 24 accumulators, and per chunk 4 weight
// loads and 6 broadcasts feed 24 fmas. (Where 512-bit fmas run at half the rate of 256-bit ones,
// as on Zen 4, this is no faster than the AVX2 tile per flop, but it needs fewer loads and
// instructions.)

// GCC 12's AVX-512 headers start some intrinsics from _mm256_undefined_*(), which its
// -Wuninitialized flags at every inlined use; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define INFER_ISA_NS isa_avx512
#include "kernels/cpu/qgemm_half_impl.hpp"
#include "kernels/cpu/qgemm.hpp"
#include "kernels/cpu/qgemm_avx512_util.hpp"

namespace infer::INFER_ISA_NS {
namespace {

using avx512_tiles::lane_tree;

struct Avx512 {
  static constexpr int64_t kTileRows = 8;
  static constexpr int kTileActs = 6;
  static constexpr int64_t kPassTiles = 1;    // one tile's 16 KiB block of weights in L1
  static constexpr int64_t kBlockChunks = 64;
  static constexpr int kPairs = kTileRows / 2;
  static constexpr int64_t kMinTileActs = 4;  // packed at load, the tiles' min_rows below

  template <int R, bool kFirst, bool kLast>
  [[gnu::noinline]] static void tile(const float* w, const float* a, int64_t a_step, int64_t kc, float* chains,
                                     float* y, int64_t ys, int64_t rows) {
    __m512 s[kPairs][R];
    for (int p = 0; p < kPairs; ++p)
      for (int r = 0; r < R; ++r)
        s[p][r] = kFirst ? _mm512_setzero_ps() : _mm512_load_ps(chains + r * kGroup * 8 + p * 16);
    // A loop that may run zero times would make GCC keep s in a stack array (kc >= 1).
    int64_t c = 0;
    do {
      __m512 av[R];
      for (int r = 0; r < R; ++r) av[r] = _mm512_broadcast_f32x8(_mm256_load_ps(a + r * a_step));
      for (int p = 0; p < kPairs; ++p) {
        const __m512 wv = _mm512_loadu_ps(w + p * 16);
        for (int r = 0; r < R; ++r) s[p][r] = _mm512_fmadd_ps(wv, av[r], s[p][r]);
      }
      a += 8, w += kTileRows * 8;
    } while (++c < kc);
    if constexpr (!kLast) {
      for (int p = 0; p < kPairs; ++p)
        for (int r = 0; r < R; ++r) _mm512_store_ps(chains + r * kGroup * 8 + p * 16, s[p][r]);
    } else {
      const __mmask8 real = static_cast<__mmask8>((1u << std::min<int64_t>(rows, kTileRows)) - 1);
      for (int r = 0; r < R; r += 2) {
        const int r1 = r + 1 < R ? r + 1 : r;
        const __m512 sums = lane_trees(s[0][r], s[1][r], s[2][r], s[3][r], s[0][r1], s[1][r1], s[2][r1], s[3][r1]);
        _mm256_mask_storeu_ps(y + r * ys, real, _mm512_castps512_ps256(sums));
        if (r + 1 < R) _mm256_mask_storeu_ps(y + (r + 1) * ys, real, _mm512_extractf32x8_ps(sums, 1));
      }
    }
  }

  // The lane trees of weight rows 0..7 (a: row 2p in p's low half, 2p + 1 in its high half) with
  // one activation row, then of rows 0..7 (b) with another: the results in that order. The
  // reference's tree, ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), for 16 chains at once,
  // each addition with the same operands in the same order.
  static __m512 lane_trees(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 b0, __m512 b1, __m512 b2, __m512 b3) {
    // 128-bit block k of a pair's vector: lanes 4(k%2)..4(k%2)+3 of row 2p + k/2.
    // Blocks (l0..l3) + (l4..l7): block k = row k of the four (rows 0-3 from x0, 4-7 from x1).
    const auto halves = [](__m512 p, __m512 q) {
      return _mm512_add_ps(_mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(p, q, _MM_SHUFFLE(3, 1, 3, 1)));
    };
    const __m512 xa0 = halves(a0, a1), xa1 = halves(a2, a3), xb0 = halves(b0, b1), xb1 = halves(b2, b3);
    // (l0 + l4) + (l2 + l6) and (l1 + l5) + (l3 + l7): block k = {L, R} of row k, then of row k + 4.
    const auto quarters = [](__m512 p, __m512 q) {
      return _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
    };
    const __m512 za = quarters(xa0, xa1), zb = quarters(xb0, xb1);
    // L + R: block k = rows k, k + 4 of a, then rows k, k + 4 of b; put back in row order.
    const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(za, zb, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(za, zb, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, t);
  }

  // The pairs layout packed at load (qgemm_half_impl.hpp): one 32-byte load gives a zmm two rows'
  // chunk, and the kWays / 2 pairs of an interleaved set advance together (independent chains),
  // their chunks one stream.
  template <bool kBf16, int R>
  static void pairs_gemv(const uint16_t* pk, int64_t count, const uint8_t* side, int64_t ss, int64_t n, float* y,
                         int64_t ys) {
    constexpr int kSetPairs = kWays / 2;
    const int64_t n_chunks = chunks(n);
    for (int64_t o = 0; o < count; o += kWays, pk += n_chunks * 8 * kWays) {
      __m512 acc[kSetPairs][R];
      for (int q = 0; q < kSetPairs; ++q)
        for (int r = 0; r < R; ++r) acc[q][r] = _mm512_setzero_ps();
      for (int64_t c = 0; c < n_chunks; ++c) {
        avx512_tiles::prefetch_ahead<R>(pk + 8 * kWays * c, 8 * kWays * 2);
        __m512 x[R];
        for (int r = 0; r < R; ++r)
          x[r] = _mm512_broadcast_f32x8(_mm256_load_ps(reinterpret_cast<const float*>(side + r * ss) + 8 * c));
        for (int q = 0; q < kSetPairs; ++q) {
          const __m512 wv = pair_chunk<kBf16>(pk + 8 * kWays * c + 16 * q);
          for (int r = 0; r < R; ++r) acc[q][r] = _mm512_fmadd_ps(wv, x[r], acc[q][r]);
        }
      }
      for (int q = 0; q < kSetPairs; ++q)
        for (int r = 0; r < R; ++r) {
          const int64_t j = o + 2 * q;
          if (j < count) y[r * ys + j] = lane_tree(_mm512_castps512_ps256(acc[q][r]));
          if (j + 1 < count) y[r * ys + j + 1] = lane_tree(_mm512_extractf32x8_ps(acc[q][r], 1));
        }
    }
  }

  // Two rows' chunks: row 2p's 8 values in the low half, 2p + 1's in the high half.
  template <bool kBf16>
  static __m512 pair_chunk(const uint16_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
    else return _mm512_cvtph_ps(v);
  }
};

}  // namespace
}  // namespace infer::INFER_ISA_NS

namespace infer {

namespace N = INFER_ISA_NS;

// min_rows, from infer-bench-matmul (BM_MatmulTinyLlama, one thread, ms per call, per-row dots
// -> tiles): at 2 rows packing costs more than the tiles save (F16 2048 x 5632: 1.9 -> 2.4); at
// 4 they win (3.76 -> 2.91; BF16 3.41 -> 2.76) but where the weight stays in L3 (F16 2048 x 2048:
// 0.64 -> 0.70); at 8 everywhere (6.01 -> 3.56, 1.49 -> 1.08).
const QGemmKernel qgemm_f16_avx512{4, N::kGroup, N::side_bytes, N::prepare_side<false>, N::packed_bytes,
                                   N::pack<N::Avx512::kTileRows, false>, N::multiply<N::Avx512>, nullptr, true};
const QGemmKernel qgemm_bf16_avx512{4, N::kGroup, N::side_bytes, N::prepare_side<true>, N::packed_bytes,
                                    N::pack<N::Avx512::kTileRows, true>, N::multiply<N::Avx512>, nullptr, true};
// Packed at load (CpuTypeTraits::load_packing): every batch size reads the pairs layout.
const QGemmKernel qgemm_f16_pairs_avx512{1, N::kGroup, N::side_bytes, N::prepare_side<false>, N::pairs_packed_bytes,
                                         N::pairs_pack, N::pairs_multiply<N::Avx512, false>, N::pairs_unpack, true};
const QGemmKernel qgemm_bf16_pairs_avx512{1, N::kGroup, N::side_bytes, N::prepare_side<true>, N::pairs_packed_bytes,
                                          N::pairs_pack, N::pairs_multiply<N::Avx512, true>, N::pairs_unpack, true};

}  // namespace infer
