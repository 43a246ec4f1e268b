// What the AVX-512 VNNI tile files (qgemm_avx512.cpp: the 32-element block types;
// qgemm_kquant_avx512.cpp: the K-quants; also qgemm_half_avx512.cpp and qdot_rows_avx512.cpp)
// share: the group size, loads of scales and unaligned quants, the 8-lane tree, the decode
// prefetches, and the loop over activation rows. Include only from *_avx512.cpp files (compiled
// for CpuIsa::avx512).
#pragma once

// GCC 12's AVX-512 headers start some intrinsics from _mm256_undefined_*(), which its
// -Wuninitialized flags at every inlined use; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/qgemm_tiles.hpp"
#include "quant/block_formats.hpp"

namespace infer::avx512_tiles {

using namespace qgemm_tiles;

constexpr int64_t kGroup = 16;  // weight rows per packed group: one per int32 lane

inline float half(uint16_t h) { return _cvtsh_ss(h); }
inline __mmask16 lanes_below(int64_t count) { return static_cast<__mmask16>((1u << count) - 1); }

// 16 F16 scales (lane j: row j's) as floats.
inline __m512 load_scales(const uint16_t* d) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d))); }
// 16 bytes (lane j: row j's) widened to int32, unsigned or signed.
inline __m512i bytes_to_i32(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m512i bytes_to_i32(const int8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the reference's tree over the 8 lanes of a
// chain (qdot.hpp), as the AVX2 kernels sum theirs.
inline float lane_tree(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// How far ahead a tile of fewer than 4 activation rows (a decode step, where each weight byte
// is read once, from memory) prefetches its weights. The hardware prefetcher alone left such
// tiles stalled on an Intel Xeon VM (TinyLlama shape, 2 threads, weights on huge pages, tokens/s:
// Q4_0 37.5-40.2 without, 42.1-42.5 at 1024 bytes ahead, 41.5-43.2 at 2048, 39.7 at 4096, 36.7
// at 6144; F16 12.0-12.6 without, 13.0 at 1024, 14.0 at 2048; Q4_K_M 35 either way).
constexpr int64_t kDecodePrefetchBytes = 2048;

// And how far ahead it also prefetches them into L2 only (prefetcht1): a tile spends many
// instructions on each cache line, so the L1 prefetches alone keep too few lines on their way.
// Intel Xeon VM (family 6 model 207), TinyLlama shape, 2 threads, tokens/s, two rounds each,
// without -> 8 KiB ahead: Q4_0 41.1-42.0 -> 51.6-52.1, Q8_0 25.4-25.9 -> 29.4-29.6, Q4_K_M
// 40.0-41.3 -> 48.8-51.3, F16 13.3-13.7 -> 14.8-15.6, Q2_K 52.8-53.4 -> 65.5-66.8; 4 KiB ahead
// 3-9% below 8 KiB, 16 KiB level with it or below. (A loop of 12 vector operations a cache line
// read 24.5-24.9 GB/s with the L1 prefetch, 30.6-31.2 with both.)
constexpr int64_t kDecodeL2PrefetchBytes = 8192;

// Prefetches the `bytes` bytes that lie kDecodePrefetchBytes past p into L1, and those
// kDecodeL2PrefetchBytes past it into L2 (hints: no result changes).
template <int R>
inline void prefetch_ahead(const void* p, int64_t bytes) {
  if constexpr (R < 4) {
    const char* c = static_cast<const char*>(p) + kDecodePrefetchBytes;
    for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
    const char* c2 = static_cast<const char*>(p) + kDecodeL2PrefetchBytes;
    for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(c2 + o, _MM_HINT_T1);
  }
}

// Part `part` of kParts of prefetch_ahead over a packed block of the K-quant tiles (2-3 KiB),
// issued as the block's work goes: the whole block's 36-45 prefetches at once stalled the decode.
// TinyLlama shape, 2 threads, tokens/s, all at once -> in quarters: Q4_K_M 37.1-37.4 -> 41.9-42.3,
// Q5_K_M 31.6-31.7 -> 35.5, Q6_K 25.7 -> 30.3-30.6, Q2_K 52.0-52.4 -> 54.2-54.9; Q6_K in
// sixteenths 31.0-31.9 against 30.0-30.4 in quarters. (Whole cache lines per part, each line
// once, measured 4-9% slower than these byte ranges, whose edges some lines share.)
template <int R, int kParts, class Packed>
inline void prefetch_part(const Packed* block, int part) {
  constexpr int64_t kPart = (int64_t{sizeof(Packed)} + kParts - 1) / kParts;
  prefetch_ahead<R>(reinterpret_cast<const char*>(block) + part * kPart, kPart);
}


// Calls rows.template operator()<R>(r) for groups of R = 8 activation rows starting at r, then
// of 4, then single rows.
template <class Rows>
inline void by_eights(int64_t n_a, Rows&& rows) {
  int64_t r = 0;
  for (; r + 8 <= n_a; r += 8) rows.template operator()<8>(r);
  for (; r + 4 <= n_a; r += 4) rows.template operator()<4>(r);
  for (; r < n_a; ++r) rows.template operator()<1>(r);
}

// The calling thread's scratch of at least `floats` floats, for the 16-lane chains of the
// K-blocked kernels (INT4, FP8) waiting between blocks.
inline float* chain_scratch(size_t floats) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < floats) scratch.resize(floats);
  return scratch.data();
}

// Block i of weight row j of a group whose rows are ws bytes apart; rows past count repeat the
// last one (packers give them zero scales, and their outputs are never stored).
template <class Block>
inline const Block& group_block(const void* w, int64_t ws, int64_t count, int64_t j, int64_t i) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + (j < count ? j : count - 1) * ws)[i];
}

}  // namespace infer::avx512_tiles
