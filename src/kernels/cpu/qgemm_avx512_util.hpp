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

#include "kernels/cpu/isa_scratch.hpp"
#include "kernels/cpu/qgemm_layouts.hpp"
#include "kernels/cpu/qgemm_tiles.hpp"
#include "quant/block_formats.hpp"

namespace infer::avx512_tiles {
// Everything here has internal linkage (the anonymous namespace): each file keeps its own copy
// (tests/integration/isa_symbols.py).
namespace {

using namespace qgemm_tiles;

using qgemm_layouts::group_block;
using qgemm_layouts::kGroup;  // weight rows per packed group: one per int32 lane

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
  thread_local isa_scratch::Buffer<float> scratch;
  return scratch.at_least(floats);
}

}  // namespace
}  // namespace infer::avx512_tiles
