// AVX2 tile kernels for F16 and BF16 weights (interface and the bit-identity argument in
// qgemm.hpp; conversion, packing, k blocking and the walk over tiles in qgemm_half_impl.hpp).
//
// One ymm per (weight row, activation row) pair holds its 8 chains. A tile is 4 weight rows by
// 3 activation rows, as llamafile's tinyBLAS has it: 12 accumulators, and per chunk 4 weight
// loads and 3 activation loads feed 12 fmas (16 registers in all).
#define INFER_ISA_NS isa_avx2
#include "kernels/cpu/qgemm_half_impl.hpp"
#include "kernels/cpu/qgemm.hpp"
#include "kernels/cpu/qgemm_tiles.hpp"
#include "kernels/cpu/quants_avx2.hpp"

namespace infer::INFER_ISA_NS {
namespace {

struct Avx2 {
  static constexpr int64_t kTileRows = 4;
  static constexpr int kTileActs = 3;
  static constexpr int64_t kPassTiles = 2;    // two tiles' 8 KiB blocks of weights in L1
  static constexpr int64_t kBlockChunks = 64;
  // Packed at load, the tiles from 8 activation rows, as from the file's rows (below). Fewer run
  // the gemv 3 rows a pass, the group's later passes from L2 (infer-bench-matmul's TinyLlama F16,
  // 2048 x 5632, 2 threads, 4 rows: the tiles 1.77 ms, the gemv 0.84-0.88, the dots over the
  // file's rows 1.30-1.53).
  static constexpr int64_t kMinTileActs = 8;

  template <int R, bool kFirst, bool kLast>
  [[gnu::noinline]] static void tile(const float* w, const float* a, int64_t a_step, int64_t kc, float* chains,
                                     float* y, int64_t ys, int64_t rows) {
    __m256 s[kTileRows][R];
    for (int j = 0; j < kTileRows; ++j)
      for (int r = 0; r < R; ++r)
        s[j][r] = kFirst ? _mm256_setzero_ps() : _mm256_load_ps(chains + (r * kGroup + j) * 8);
    // A loop that may run zero times would make GCC keep s in a stack array (kc >= 1).
    int64_t c = 0;
    do {
      // Each load is kept in a register (the empty asm): GCC would otherwise fold the activations
      // or the weights into every fma as memory operands, and loads rather than fmas would bound
      // the loop.
      __m256 av[R];
      for (int r = 0; r < R; ++r) {
        av[r] = _mm256_load_ps(a + r * a_step);
        asm("" : "+x"(av[r]));
      }
      for (int j = 0; j < kTileRows; ++j) {
        __m256 wv = _mm256_loadu_ps(w + j * 8);
        asm("" : "+x"(wv));
        for (int r = 0; r < R; ++r) s[j][r] = _mm256_fmadd_ps(wv, av[r], s[j][r]);
      }
      a += 8, w += kTileRows * 8;
    } while (++c < kc);
    if constexpr (!kLast) {
      for (int j = 0; j < kTileRows; ++j)
        for (int r = 0; r < R; ++r) _mm256_store_ps(chains + (r * kGroup + j) * 8, s[j][r]);
    } else {
      const __m128i real = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(std::min<int64_t>(rows, kTileRows))),
                                           _mm_setr_epi32(0, 1, 2, 3));
      for (int r = 0; r < R; r += 2) {
        const int r1 = r + 1 < R ? r + 1 : r;
        const __m256 sums = lane_trees(s[0][r], s[1][r], s[2][r], s[3][r], s[0][r1], s[1][r1], s[2][r1], s[3][r1]);
        _mm_maskstore_ps(y + r * ys, real, _mm256_castps256_ps128(sums));
        if (r + 1 < R) _mm_maskstore_ps(y + (r + 1) * ys, real, _mm256_extractf128_ps(sums, 1));
      }
    }
  }

  // The lane trees of weight rows 0..3 (a) with one activation row, then of rows 0..3 (b) with
  // another: the results in that order. The reference's tree,
  // ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), for 8 chains at once, each addition with
  // the same operands in the same order.
  static __m256 lane_trees(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 b0, __m256 b1, __m256 b2, __m256 b3) {
    // (l0..l3) + (l4..l7): 128-bit lane k = row k of the two.
    const auto halves = [](__m256 p, __m256 q) {
      return _mm256_add_ps(_mm256_permute2f128_ps(p, q, 0x20), _mm256_permute2f128_ps(p, q, 0x31));
    };
    const __m256 xa0 = halves(a0, a1), xa1 = halves(a2, a3), xb0 = halves(b0, b1), xb1 = halves(b2, b3);
    // (l0 + l4) + (l2 + l6) and (l1 + l5) + (l3 + l7): lane k = {L, R} of row k, then of row k + 2.
    const auto quarters = [](__m256 p, __m256 q) {
      return _mm256_add_ps(_mm256_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
    };
    const __m256 za = quarters(xa0, xa1), zb = quarters(xb0, xb1);
    // L + R: lane k = rows k, k + 2 of a, then rows k, k + 2 of b; put back in row order.
    const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(za, zb, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(za, zb, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }

  // The pairs layout packed at load (qgemm_half_impl.hpp): each of an interleaved set's kWays rows
  // converts its chunk into one ymm, its own chain per activation row (12 accumulators with 3
  // rows), and the set's chunks are one stream, prefetched ahead as the quantized decodes are.
  template <bool kBf16, int R>
  static void pairs_gemv(const uint16_t* pk, int64_t count, const uint8_t* side, int64_t ss, int64_t n, float* y,
                         int64_t ys) {
    const int64_t n_chunks = chunks(n);
    for (int64_t o = 0; o < count; o += kWays, pk += n_chunks * 8 * kWays) {
      __m256 acc[kWays][R];
      for (int q = 0; q < kWays; ++q)
        for (int r = 0; r < R; ++r) acc[q][r] = _mm256_setzero_ps();
      for (int64_t c = 0; c < n_chunks; ++c) {
        qgemm_tiles::prefetch_ahead<R>(pk + 8 * kWays * c, 8 * kWays * 2);
        __m256 x[R];
        for (int r = 0; r < R; ++r) x[r] = _mm256_load_ps(reinterpret_cast<const float*>(side + r * ss) + 8 * c);
        for (int q = 0; q < kWays; ++q) {
          const __m256 wv = to_floats<kBf16>(pk + 8 * kWays * c + 8 * q);
          for (int r = 0; r < R; ++r) acc[q][r] = _mm256_fmadd_ps(wv, x[r], acc[q][r]);
        }
      }
      for (int q = 0; q < kWays; ++q)
        for (int r = 0; r < R; ++r)
          if (o + q < count) y[r * ys + o + q] = avx2_quants::lane_tree(acc[q][r]);
    }
  }
};

}  // namespace
}  // namespace infer::INFER_ISA_NS

namespace infer {

namespace N = INFER_ISA_NS;

// min_rows, from infer-bench-matmul (BM_MatmulTinyLlama, one thread, ms per call, per-row dots
// -> tiles): at 4 rows the 3-row tiles leave a 1-row one and only tie with the dots (F16
// 2048 x 5632: 3.25 -> 3.35, 2048 x 2048: 0.63 -> 0.74); at 8 rows they win (5.53 -> 4.31,
// 1.35 -> 1.02; BF16 6.35 -> 4.45, 1.67 -> 1.04).
const QGemmKernel qgemm_f16_avx2{8, N::kGroup, N::side_bytes, N::prepare_side<false>, N::packed_bytes,
                                 N::pack<N::Avx2::kTileRows, false>, N::multiply<N::Avx2>, nullptr, true};
const QGemmKernel qgemm_bf16_avx2{8, N::kGroup, N::side_bytes, N::prepare_side<true>, N::packed_bytes,
                                  N::pack<N::Avx2::kTileRows, true>, N::multiply<N::Avx2>, nullptr, true};
// Packed at load (CpuTypeTraits::load_packing_avx2), into the AVX-512 kernels' pairs layout:
// every batch size reads it.
const QGemmKernel qgemm_f16_pairs_avx2{1, N::kGroup, N::side_bytes, N::prepare_side<false>, N::pairs_packed_bytes,
                                       N::pairs_pack, N::pairs_multiply<N::Avx2, false>, N::pairs_unpack, true};
const QGemmKernel qgemm_bf16_pairs_avx2{1, N::kGroup, N::side_bytes, N::prepare_side<true>, N::pairs_packed_bytes,
                                        N::pairs_pack, N::pairs_multiply<N::Avx2, true>, N::pairs_unpack, true};

}  // namespace infer
