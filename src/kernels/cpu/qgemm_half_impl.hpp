// The F16 / BF16 tile kernels' parts that do not depend on the vector width, compiled once per
// ISA (core/isa_variants.hpp): conversion, packing, the k blocking and the walk over tiles, and
// the layout the CPU backend packs at load (the pairs, at the end), which both ISAs read.
// Included by qgemm_half_avx2.cpp and qgemm_half_avx512.cpp inside namespace infer::INFER_ISA_NS,
// each of which adds its register tile (a Shape, below) and defines its QGemmKernels. No include
// guard.
//
// The float order (qdot.hpp) gives each (weight row, activation row) pair 8 chains, lane l summing
// the exact products of elements l, l + 8, l + 16, ... in order with fma, then a fixed tree. A
// chunk is 8 consecutive elements: one step of each of a pair's 8 chains.
//
// Weights (pack) and activations (prepare_side) are converted to F32 once per call, exactly, and
// zero-padded to whole chunks: a padded step is fma(0, 0, s) == s, since a chain that starts at
// +0 is never -0. The chunks run in blocks of kBlockChunks so that a tile's block of weights stays
// in L1 while up to kSuperRows activation rows meet it; between blocks the chains wait on the
// stack as floats, which changes no bit of them, so neither the blocking nor the tiling shows in
// any result.
//
// Packed group (group of kGroup weight rows; Shape::kTileRows rows per tile, rows past count 0):
//   float[tile][chunk][row in tile][8], at any alignment (qgemm.hpp allows it; matmul.cpp gives 64)
// Side data of an activation row: float[chunk][8], padded to an odd number of cache lines.
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/isa_scratch.hpp"

namespace infer::INFER_ISA_NS {
namespace {

constexpr int64_t kGroup = 16;      // weight rows per packed group
constexpr int64_t kSuperRows = 48;  // activation rows whose chains wait between blocks

inline int64_t chunks(int64_t n) { return (n + 7) / 8; }

// 8 F16 or BF16 values to floats (exact); with `count` < 8, that many padded with zeros.
template <bool kBf16>
inline __m256 to_floats(const uint16_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  else return _mm256_cvtph_ps(v);
}
template <bool kBf16>
inline __m256 to_floats(const uint16_t* p, int64_t count) {
  uint16_t padded[8] = {};
  std::memcpy(padded, p, static_cast<size_t>(count) * 2);
  return to_floats<kBf16>(padded);
}

// The stride of the side rows is an odd number of cache lines, so that a tile's activation rows
// do not all fall into the same L1 sets (a power-of-two stride put them there).
int64_t side_bytes(int64_t n) noexcept { return ((chunks(n) * 32 + 63) / 64 | 1) * 64; }

template <bool kBf16>
void prepare_side(const void* a, void* side, int64_t n) noexcept {
  const auto* src = static_cast<const uint16_t*>(a);
  auto* dst = static_cast<float*>(side);
  const int64_t full = n / 8;
  for (int64_t c = 0; c < full; ++c) _mm256_store_ps(dst + 8 * c, to_floats<kBf16>(src + 8 * c));
  if (full * 8 < n) _mm256_store_ps(dst + 8 * full, to_floats<kBf16>(src + 8 * full, n - 8 * full));
}

int64_t packed_bytes(int64_t n) noexcept { return kGroup * chunks(n) * 32; }

// The F32 tiles of rows 0..count-1, whose chunk c of row j is chunk(j, c): 8 values, the last
// chunk n - 8c of them (kPadded: followed by zeros up to 8, so read whole).
template <int64_t kTileRows, bool kBf16, bool kPadded, class Chunk>
void pack_chunks(Chunk chunk, int64_t count, int64_t n, float* out) {
  const int64_t full = n / 8;
  // Tile by tile, chunk by chunk: the output is written in order, whole cache lines at a time.
  for (int64_t t0 = 0; t0 < count; t0 += kTileRows) {
    const int64_t rows = std::min(kTileRows, count - t0);
    const auto src = [&](int64_t j, int64_t c) { return chunk(t0 + std::min(j, rows - 1), c); };
    for (int64_t c = 0; c < full; ++c, out += kTileRows * 8)
      for (int64_t j = 0; j < kTileRows; ++j)
        _mm256_storeu_ps(out + j * 8, j < rows ? to_floats<kBf16>(src(j, c)) : _mm256_setzero_ps());
    if (full * 8 < n) {
      const int64_t left = n - 8 * full;
      for (int64_t j = 0; j < kTileRows; ++j) {
        const __m256 v = kPadded ? to_floats<kBf16>(src(j, full)) : to_floats<kBf16>(src(j, full), left);
        _mm256_storeu_ps(out + j * 8, j < rows ? v : _mm256_setzero_ps());
      }
      out += kTileRows * 8;
    }
  }
}

template <int64_t kTileRows, bool kBf16>
void pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup);
  const auto chunk = [&](int64_t j, int64_t c) {
    return reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(w) + j * ws) + 8 * c;
  };
  pack_chunks<kTileRows, kBf16, false>(chunk, count, n, static_cast<float*>(packed));
}

// Calls f(std::integral_constant<int, left>{}) for 1 <= left < kLimit (a tile for the rows left).
template <int kLimit, class F>
inline void with_rows(int64_t left, F&& f) {
  if constexpr (kLimit > 1) {
    if (left == kLimit - 1) return f(std::integral_constant<int, kLimit - 1>{});
    with_rows<kLimit - 1>(left, f);
  }
}

// The walk over one packed group. Shape (the ISA's file) has
//   kTileRows, kTileActs   weight rows x activation rows of its register tile
//   kPassTiles             weight tiles that take turns on each activation tile's block (in L1)
//   kBlockChunks           chunks per block
//   tile<R, kFirst, kLast>(w, a, a_step, kc, chains, y, ys, rows)
//       chunks [c0, c0 + kc) of one weight tile (w: its chunk c0) against R <= kTileActs
//       activation rows (a: row 0's chunk c0, row r at a + r * a_step); the chains of activation
//       row r at chains + r * kGroup * 8, 8 floats per weight row; they start from zero in the
//       first block (kFirst) and are summed into y in the last (kLast: row r at y + r * ys, the
//       first `rows` of the tile's weight rows are real) instead of stored. kc >= 1.
template <class Shape>
void multiply(const void* packed, int64_t count, const void*, int64_t, const void* side, int64_t ss, int64_t n_a,
              int64_t n, float* y, int64_t ys) noexcept {
  constexpr int64_t kTileRows = Shape::kTileRows;
  constexpr int kTileActs = Shape::kTileActs;
  static_assert(kSuperRows % kTileActs == 0 && kGroup % kTileRows == 0);
  const int64_t n_chunks = chunks(n);
  const int64_t tiles = (count + kTileRows - 1) / kTileRows;
  const auto* pk = static_cast<const float*>(packed);
  const auto* act = static_cast<const float*>(side);
  const int64_t a_step = ss / static_cast<int64_t>(sizeof(float));
  if (n_chunks == 0) {  // empty dots: the tree of eight +0 chains
    for (int64_t r = 0; r < n_a; ++r)
      for (int64_t j = 0; j < count; ++j) y[r * ys + j] = 0.0f;
    return;
  }
  alignas(64) float chains[kSuperRows * kGroup * 8];
  for (int64_t r0 = 0; r0 < n_a; r0 += kSuperRows) {
    const int64_t rows = std::min(kSuperRows, n_a - r0);
    for (int64_t t0 = 0; t0 < tiles; t0 += Shape::kPassTiles) {
      const int64_t t1 = std::min(tiles, t0 + Shape::kPassTiles);
      for (int64_t c0 = 0; c0 < n_chunks; c0 += Shape::kBlockChunks) {
        const int64_t kc = std::min(Shape::kBlockChunks, n_chunks - c0);
        const bool first = c0 == 0, last = c0 + kc == n_chunks;
        // Activation rows r.. of the super-block (R of them) against weight tiles t0..t1-1.
        const auto run = [&](auto acts, int64_t r) {
          constexpr int R = decltype(acts)::value;
          for (int64_t t = t0; t < t1; ++t) {
            const float* w = pk + (t * n_chunks + c0) * kTileRows * 8;
            const float* a = act + (r0 + r) * a_step + c0 * 8;
            float* ch = chains + (r * kGroup + t * kTileRows) * 8;
            float* yt = y + (r0 + r) * ys + t * kTileRows;
            const int64_t real = count - t * kTileRows;
            if (first && last) Shape::template tile<R, true, true>(w, a, a_step, kc, ch, yt, ys, real);
            else if (first) Shape::template tile<R, true, false>(w, a, a_step, kc, ch, yt, ys, real);
            else if (last) Shape::template tile<R, false, true>(w, a, a_step, kc, ch, yt, ys, real);
            else Shape::template tile<R, false, false>(w, a, a_step, kc, ch, yt, ys, real);
          }
        };
        int64_t r = 0;
        for (; r + kTileActs <= rows; r += kTileActs) run(std::integral_constant<int, kTileActs>{}, r);
        if (r < rows) with_rows<kTileActs>(rows - r, [&](auto acts) { run(acts, r); });
      }
    }
  }
}

// ---- Packed at load: rows interleaved chunk by chunk, kWays at a time ----
//
// A decode step (one to three activation rows) is bound by one 8-lane fma chain per (weight row,
// activation row): row by row, a core waits on that chain (about 15 GB/s of F16 on Zen 4), and
// several rows read at once are several streams 4 KiB apart, which streamed worse. Packed at load,
// kWays = 4 rows of a group alternate every chunk, so that the set's rows are independent chains
// read as one sequential stream: AVX-512 takes two rows' chunks in a zmm (the tiles' pair layout:
// row 2p in the low half, 2p + 1 in the high half), AVX2 one row's in a ymm. The bytes are the
// file's, permuted (the last chunk zero-padded); both ISAs pack and read the same layout.
//   uint16[set of kWays rows][chunk][kWays][8]
// From Shape::kMinTileActs activation rows (AVX-512 4, AVX2 8) the tiles above take over: the
// group is converted to their F32 layout per call, straight from the interleaved chunks.
int64_t pairs_packed_bytes(int64_t n) noexcept { return kGroup * chunks(n) * 16; }

// Rows interleaved chunk by chunk: kWays / 2 pairs, one stream. (2: 16.6-19.1 tokens/s on the
// TinyLlama-shaped F16/BF16 files; 4: 20.6-21.2; 8: 16.2-21.1, 2 threads on the Zen 4 VM.)
constexpr int64_t kWays = 4;

void pairs_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup);
  auto* out = static_cast<uint16_t*>(packed);
  const int64_t n_chunks = chunks(n);
  for (int64_t p = 0; p < kGroup / kWays; ++p) {
    const uint16_t* rows[kWays];
    for (int64_t h = 0; h < kWays; ++h)
      rows[h] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(w) + std::min(kWays * p + h, count - 1) * ws);
    for (int64_t c = 0; c < n_chunks; ++c)
      for (int64_t h = 0; h < kWays; ++h, out += 8) {
        const int64_t take = std::min<int64_t>(8, n - 8 * c);
        std::memcpy(out, rows[h] + 8 * c, static_cast<size_t>(take) * 2);
        std::fill(out + take, out + 8, uint16_t{0});
      }
  }
}

void pairs_unpack(const void* packed, int64_t j, int64_t n, void* row) noexcept {
  const auto* in = static_cast<const uint16_t*>(packed) + (j / kWays) * chunks(n) * 8 * kWays + (j % kWays) * 8;
  auto* out = static_cast<uint16_t*>(row);
  for (int64_t c = 0; c < chunks(n); ++c)
    std::memcpy(out + 8 * c, in + 8 * kWays * c, static_cast<size_t>(std::min<int64_t>(8, n - 8 * c)) * 2);
}

// Shape (the ISA's file) adds
//   pairs_gemv<kBf16, R>(pk, count, side, ss, n, y, ys)   R <= 3 activation rows (their F32 side
//       rows) against the group's rows in the pairs layout, as one stream
//   kMinTileActs   the fewest activation rows the tiles take; fewer run the gemv 3 rows a pass
template <class Shape, bool kBf16>
void pairs_multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
                    int64_t n, float* y, int64_t ys) {
  const auto* pk = static_cast<const uint16_t*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  if (n_a >= Shape::kMinTileActs) {
    // Converted straight from the interleaved chunks (restoring the rows first, one short memcpy
    // a chunk, made this path 1.3 to 3 times slower than packing the file's rows).
    // Each thread's buffer: the group's F32 layout (isa_scratch.hpp: never a std:: container here).
    thread_local isa_scratch::Buffer<float> tiles;
    float* f = tiles.at_least(static_cast<size_t>(packed_bytes(n) / 4 + 16));
    float* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(f) + 63) / 64 * 64);
    const int64_t set_step = chunks(n) * 8 * kWays;
    const auto chunk = [&](int64_t j, int64_t c) { return pk + j / kWays * set_step + 8 * kWays * c + j % kWays * 8; };
    pack_chunks<Shape::kTileRows, kBf16, true>(chunk, count, n, aligned);
    return multiply<Shape>(aligned, count, a, as, side, ss, n_a, n, y, ys);
  }
  for (int64_t r = 0; r < n_a; r += 3) {
    const uint8_t* sr = sb + r * ss;
    float* yr = y + r * ys;
    switch (std::min<int64_t>(3, n_a - r)) {
      case 3: Shape::template pairs_gemv<kBf16, 3>(pk, count, sr, ss, n, yr, ys); break;
      case 2: Shape::template pairs_gemv<kBf16, 2>(pk, count, sr, ss, n, yr, ys); break;
      default: Shape::template pairs_gemv<kBf16, 1>(pk, count, sr, ss, n, yr, ys); break;
    }
  }
}

}  // namespace
}  // namespace infer::INFER_ISA_NS
