// AVX2 tile kernels for F16 and BF16 weights (interface and the bit-identity argument in
// qgemm.hpp; conversion, packing, k blocking and the walk over tiles in qgemm_half_tiles.hpp).
//
// One ymm per (weight row, activation row) pair holds its 8 chains. A tile is 4 weight rows by
// 3 activation rows, as llamafile's tinyBLAS has it: 12 accumulators, and per chunk 4 weight
// loads and 3 activation loads feed 12 fmas (16 registers in all).
#include "kernels/cpu/qgemm_half_tiles.hpp"
#include "kernels/cpu/qgemm.hpp"

namespace infer {
namespace {

struct Avx2 {
  static constexpr int64_t kTileRows = 4;
  static constexpr int kTileActs = 3;
  static constexpr int64_t kPassTiles = 2;    // two tiles' 8 KiB blocks of weights in L1
  static constexpr int64_t kBlockChunks = 64;

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
        __m256 wv = _mm256_load_ps(w + j * 8);
        asm("" : "+x"(wv));
        for (int r = 0; r < R; ++r) s[j][r] = _mm256_fmadd_ps(wv, av[r], s[j][r]);
      }
      a += 8, w += kTileRows * 8;
    } while (++c < kc);
    if constexpr (!kLast) {
      for (int j = 0; j < kTileRows; ++j)
        for (int r = 0; r < R; ++r) _mm256_store_ps(chains + (r * kGroup + j) * 8, s[j][r]);
    } else {
      for (int j = 0; j < kTileRows; ++j)
        for (int r = 0; r < R; ++r)
          if (j < rows) y[r * ys + j] = lane_tree(s[j][r]);
    }
  }
};

}  // namespace

// min_rows, from infer-bench-matmul (BM_MatmulTinyLlama, F16 2048 x 5632, one thread): the
// tiles lose to the per-row dots at 2 rows (2.7 vs 1.9 ms: packing a group costs about what
// the dots do) and win from 4 (3.2 vs 3.5 ms).
const QGemmKernel qgemm_f16_avx2{4, kGroup, side_bytes, prepare_side<false>, packed_bytes, pack<Avx2::kTileRows, false>,
                                 multiply<Avx2>};
const QGemmKernel qgemm_bf16_avx2{4, kGroup, side_bytes, prepare_side<true>, packed_bytes, pack<Avx2::kTileRows, true>,
                                  multiply<Avx2>};

}  // namespace infer
