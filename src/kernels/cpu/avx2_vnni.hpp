// What differs between the two compilations of the AVX2 tile files (qgemm_avx2_impl.hpp,
// qgemm_kquant_avx2_impl.hpp): X_avx2.cpp defines INFER_AVX2_VNNI 0 before including them and gets
// the kernels named *_avx2; X_avxvnni.cpp, compiled with -mavxvnni as well (src/CMakeLists.txt),
// defines it 1 and gets *_avxvnni, for CpuIsa::avxvnni. With VNNI one vpdpbusd adds each int32
// lane's 4 products of unsigned and signed bytes, without saturating, and one vpdpwssd its 2
// products of signed words: the integer sums are the same exact values, so both give the same bits.
#pragma once

#if !defined(INFER_AVX2_VNNI)
#error "define INFER_AVX2_VNNI (0 or 1) before including an AVX2 tile file"
#endif
#if INFER_AVX2_VNNI
#define INFER_AVX2_KERNEL(name) name##_avxvnni
#else
#define INFER_AVX2_KERNEL(name) name##_avx2
#endif

#include <immintrin.h>

namespace infer::avx2_vnni {
// Everything here has internal linkage (the anonymous namespace): each ISA's file keeps its own
// copy, compiled with its flags, which the linker cannot swap for another file's
// (tests/integration/isa_symbols.py).
namespace {

constexpr bool kVnni = INFER_AVX2_VNNI;

#if INFER_AVX2_VNNI
// acc + Σ over each 4-byte lane of u * s (u unsigned bytes, s signed ones), exactly.
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#else
// Called only in the kVnni branches, which are discarded here.
inline __m256i dpbusd(__m256i, __m256i, __m256i) { __builtin_unreachable(); }
#endif

// v as it stands, opaque to the optimizer: a chain of integer additions stays a chain. Integer
// addition is associative, so GCC 12 turns the unrolled runs and chains of a tile into trees,
// which hold every product of a super-block live at once and spill them (kp_tile<Q2_K, 4 rows>:
// 190 stack moves a super-block, 28 with the chains kept; Zen 3, infer-bench-matmul TinyLlama 128
// rows: Q4_K 25.3 -> 17.0 ms, Q6_K 21.6 -> 14.0). No instruction is emitted.
inline void keep_chain(__m256i& v) { asm("" : "+x"(v)); }

// acc + Σ over each lane's 2 words of a * b (signed): vpmaddwd and an add, or one vpdpwssd.
inline __m256i madd_add(__m256i acc, __m256i a, __m256i b) {
#if INFER_AVX2_VNNI
  return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
  __m256i r = _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  keep_chain(r);
  return r;
#endif
}

// A run's sum of products of unsigned weight bytes u and signed activation bytes s, the next
// product added (or the first, when `first`): 16-bit pair sums (vpmaddubsw; the caller keeps them
// within 16 bits), or with kDword (VNNI only) each lane's int32 (vpdpbusd). Either way
// madd_add(acc, sum, scale) then adds the run times the scale, which holds it in both words of a
// lane for pair sums, in the low word only for an int32 run (the high word 0; the caller keeps
// the run within 16 bits).
template <bool kDword>
inline __m256i run_add(__m256i sum, __m256i u, __m256i s, bool first) {
  static_assert(!kDword || kVnni);
  if constexpr (kDword) return dpbusd(first ? _mm256_setzero_si256() : sum, u, s);
  const __m256i p = _mm256_maddubs_epi16(u, s);
  if (first) return p;
  __m256i r = _mm256_add_epi16(sum, p);
  keep_chain(r);
  return r;
}

}  // namespace
}  // namespace infer::avx2_vnni
