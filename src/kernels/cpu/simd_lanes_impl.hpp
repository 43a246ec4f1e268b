// Float lanes of this ISA's vectors for the kernels' element-wise steps, exp_lanes, ggml's exp
// (kernels/cpu/exp_approx.hpp) W lanes at a time with exactly exp_ggml's operations, so that every
// variant gives the scalar code's bits, and an 8 x 8 transpose in AVX registers. Compiled once
// per ISA (core/isa_variants.hpp): included by the *_impl.hpp kernel files, whose including file
// defines INFER_ISA_NS; defines nothing without AVX2 (and FMA, for the lanes): the reference
// variant runs the scalar code. No include guard: each variant's file includes it once.
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/cpu/exp_approx.hpp"

namespace infer::INFER_ISA_NS {
namespace {

#if defined(__AVX2__)
// 8 rows of 8 floats to 8 columns, in registers: v[e] lane k <- v[k] lane e.
inline void transpose8x8(__m256 (&v)[8]) noexcept {
  __m256 t[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(v[2 * k], v[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(v[2 * k], v[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {  // v[4k + j], half H: element 4H + j of rows 4k..4k+3
    v[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    v[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    v[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    v[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm256_permute2f128_ps(v[j], v[4 + j], 0x20);
    t[4 + j] = _mm256_permute2f128_ps(v[j], v[4 + j], 0x31);
  }
  for (int e = 0; e < 8; ++e) v[e] = t[e];
}
#endif

#if defined(__AVX512F__)
struct SimdLanes {
  static constexpr int W = 16;
  using F = __m512;
  using Mask = __mmask16;
  static F load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) noexcept { _mm512_storeu_ps(p, v); }
  static F set(float x) noexcept { return _mm512_set1_ps(x); }
  static F add(F a, F b) noexcept { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) noexcept { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) noexcept { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) noexcept { return _mm512_div_ps(a, b); }
  static F fma(F a, F b, F c) noexcept { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) noexcept { return _mm512_fnmadd_ps(a, b, c); }  // c - a b, fused
  // The float with bits (bits(z) << 23) + bits(1.0f): 2^n for the n in z's low mantissa bits.
  static F pow2(F z) noexcept {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(_mm512_castps_si512(z), 23), _mm512_set1_epi32(0x3f800000)));
  }
  static Mask lanes(uint64_t bits) noexcept { return static_cast<Mask>(bits); }
  static Mask all() noexcept { return 0xFFFF; }
  static unsigned over(F n, Mask valid, float limit) noexcept {
    return _mm512_mask_cmp_ps_mask(valid, _mm512_abs_ps(n), _mm512_set1_ps(limit), _CMP_GT_OQ);
  }
  // max(v, acc) in the lanes of m (acc kept where v is NaN, as std::max(acc, v)), else acc.
  static F max_in(F acc, Mask m, F v) noexcept { return _mm512_mask_max_ps(acc, m, v, acc); }
  static float max_of(F v) noexcept { return _mm512_reduce_max_ps(v); }
  static F only(Mask m, F v) noexcept { return _mm512_maskz_mov_ps(m, v); }
  // Adds the lane trees of v's two 8-lane halves to sum, the low half first.
  static void add_trees(F v, double& sum) noexcept {
    const F a = _mm512_add_ps(v, _mm512_permutexvar_ps(_mm512_setr_epi32(4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11), v));
    const F b = _mm512_add_ps(a, _mm512_permutexvar_ps(_mm512_setr_epi32(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13), a));
    const F c = _mm512_add_ps(b, _mm512_permutexvar_ps(_mm512_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14), b));
    sum += static_cast<double>(_mm512_cvtss_f32(c));
    sum += static_cast<double>(_mm512_cvtss_f32(_mm512_castps256_ps512(_mm512_extractf32x8_ps(c, 1))));
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct SimdLanes {
  static constexpr int W = 8;
  using F = __m256;
  using Mask = __m256;  // all-ones lanes
  static F load(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) noexcept { _mm256_storeu_ps(p, v); }
  static F set(float x) noexcept { return _mm256_set1_ps(x); }
  static F add(F a, F b) noexcept { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) noexcept { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) noexcept { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) noexcept { return _mm256_div_ps(a, b); }
  static F fma(F a, F b, F c) noexcept { return _mm256_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) noexcept { return _mm256_fnmadd_ps(a, b, c); }
  static F pow2(F z) noexcept {
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(z), 23), _mm256_set1_epi32(0x3f800000)));
  }
  static Mask lanes(uint64_t bits) noexcept {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits & 0xFF)), bit), bit));
  }
  static Mask all() noexcept { return _mm256_castsi256_ps(_mm256_set1_epi32(-1)); }
  static unsigned over(F n, Mask valid, float limit) noexcept {
    const F abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_and_ps(valid, _mm256_cmp_ps(abs, _mm256_set1_ps(limit), _CMP_GT_OQ))));
  }
  // maxps returns its second operand when either is NaN: max(v, acc) keeps acc.
  static F max_in(F acc, Mask m, F v) noexcept { return _mm256_blendv_ps(acc, _mm256_max_ps(v, acc), m); }
  static float max_of(F v) noexcept {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
  }
  static F only(Mask m, F v) noexcept { return _mm256_and_ps(m, v); }
  static void add_trees(F v, double& sum) noexcept {
    const F a = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 1));
    const F b = _mm256_add_ps(a, _mm256_permute_ps(a, _MM_SHUFFLE(1, 0, 3, 2)));
    const F c = _mm256_add_ps(b, _mm256_permute_ps(b, _MM_SHUFFLE(2, 3, 0, 1)));
    sum += static_cast<double>(_mm256_cvtss_f32(c));
  }
};
#endif

#if defined(__AVX2__) && defined(__FMA__)
// exp_ggml of each lane of x; the lanes in `valid` where 2^n does not fit a float's exponent
// (exp_ggml's rare slow path) are recomputed one at a time.
inline SimdLanes::F exp_lanes(SimdLanes::F x, SimdLanes::Mask valid) noexcept {
  using S = SimdLanes;
  const S::F shift = S::set(0x1.8p23f);
  const S::F z = S::fma(x, S::set(0x1.715476p+0f), shift);
  const S::F n = S::sub(z, shift);
  const S::F b = S::fnma(n, S::set(0x1.7f7d1cp-20f), S::fnma(n, S::set(0x1.62e4p-1f), x));
  const S::F u = S::mul(b, b);
  const S::F j = S::fma(S::fma(S::fma(S::set(0x1.0e4020p-7f), b, S::set(0x1.573e2ep-5f)), u,
                               S::fma(S::set(0x1.555e66p-3f), b, S::set(0x1.fffdb6p-2f))),
                        u, S::mul(S::set(0x1.ffffecp-1f), b));
  const S::F k = S::pow2(z);
  S::F r = S::fma(j, k, k);
  if (const unsigned slow = S::over(n, valid, 126.0f); slow != 0) {
    alignas(64) float xs[S::W], rs[S::W];
    S::store(xs, x);
    S::store(rs, r);
    for (int l = 0; l < S::W; ++l)
      if (slow >> l & 1) rs[l] = exp_ggml(xs[l]);
    r = S::load(rs);
  }
  return r;
}
#endif

}  // namespace
}  // namespace infer::INFER_ISA_NS
