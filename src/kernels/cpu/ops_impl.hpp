// The element-wise and normalization kernels' code, compiled once per ISA (core/isa_variants.hpp):
// included by ops_ref.cpp, ops_avx2.cpp and ops_avx512.cpp inside namespace infer::INFER_ISA_NS;
// ops.cpp dispatches. Contract in ops.hpp. No include guard.
#include <algorithm>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/cpu/exp_approx.hpp"
#include "kernels/cpu/hadamard.hpp"
#include "kernels/cpu/simd_lanes_impl.hpp"
#include "kernels/cpu/ops.hpp"

namespace infer::INFER_ISA_NS {
namespace {

// x, opaque to the optimizer: a product passed through here is rounded before any later use.
inline float rounded(float x) noexcept {
#if defined(__GNUC__)
  __asm__("" : "+x"(x));
#endif
  return x;
}

// y = (x * scale) * w with scale = 1 / sqrt(float(sum / n) + eps): rms_norm after its sum.
inline void rms_norm_scale(const float* x, const float* w, float* y, int64_t n, float eps, double sum) noexcept {
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

#if defined(__AVX2__)
// Eight float64 chains, one per lane.
struct Sums8 {
#if defined(__AVX512F__)
  __m512d v = _mm512_setzero_pd();
  void add(__m256 f) noexcept { v = _mm512_add_pd(v, _mm512_cvtps_pd(f)); }
  void store(double* p) const noexcept { _mm512_storeu_pd(p, v); }
#else
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  void add(__m256 f) noexcept {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  }
  void store(double* p) const noexcept { _mm256_storeu_pd(p, lo), _mm256_storeu_pd(p + 4, hi); }
#endif
};

// rms_norm of count <= 8 G rows, their float64 sums side by side: lane k of chain g is row
// 8g + k's sum, which still adds x_i * x_i (rounded to float) in index order, one element at a
// time; G chains hide the add's latency, and an 8 x 8 transpose turns 8 elements of 8 rows into
// 8 adds. Rows past count repeat the last one (their sums are dropped).
template <int G>
void sum_squares_rows(const float* const* x, float* const* y, int count, const float* w, int64_t n, float eps) noexcept {
  const float* r[8 * G];
  for (int k = 0; k < 8 * G; ++k) r[k] = x[k < count ? k : count - 1];
  Sums8 acc[G];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int g = 0; g < G; ++g) {
      __m256 v[8];
      for (int k = 0; k < 8; ++k) {
        const __m256 a = _mm256_loadu_ps(r[8 * g + k] + i);
        v[k] = _mm256_mul_ps(a, a);
      }
      transpose8x8(v);
      for (int e = 0; e < 8; ++e) acc[g].add(v[e]);
    }
  for (; i < n; ++i)
    for (int g = 0; g < G; ++g) {
      alignas(32) float sq[8];
      for (int k = 0; k < 8; ++k) sq[k] = r[8 * g + k][i] * r[8 * g + k][i];
      acc[g].add(_mm256_load_ps(sq));
    }
  alignas(64) double sums[8 * G];
  for (int g = 0; g < G; ++g) acc[g].store(sums + 8 * g);
  for (int k = 0; k < count; ++k) rms_norm_scale(x[k], w, y[k], n, eps, sums[k]);
}
#endif

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) noexcept {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  rms_norm_scale(x, w, y, n, eps, sum);
}

void rms_norm_rows(const float* const* x, float* const* y, int count, const float* w, int64_t n, float eps) noexcept {
#if defined(__AVX2__)
  for (int k = 0; k < count;) {
    const int rest = std::min(32, count - k);
    switch ((rest + 7) / 8) {
      case 1: sum_squares_rows<1>(x + k, y + k, rest, w, n, eps); break;
      case 2: sum_squares_rows<2>(x + k, y + k, rest, w, n, eps); break;
      case 3: sum_squares_rows<3>(x + k, y + k, rest, w, n, eps); break;
      default: sum_squares_rows<4>(x + k, y + k, rest, w, n, eps); break;
    }
    k += rest;
  }
#else
  for (int k = 0; k < count; ++k) rms_norm(x[k], w, y[k], n, eps);
#endif
}

void silu_mul(const float* g, const float* u, float* y, int64_t n) noexcept {
  // As ggml_vec_swiglu_f32 on AVX2: groups of 8 through ggml's vector exp, the tail through expf.
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  // The groups W at a time here, with the same operations (exp_lanes is exp_ggml lane by lane).
  using S = SimdLanes;
  for (; i + S::W <= n / 8 * 8; i += S::W) {
    const S::F x = S::load(g + i);
    const S::F e = exp_lanes(S::sub(S::set(0.0f), x), S::all());
    S::store(y + i, S::mul(S::div(x, S::add(S::set(1.0f), e)), S::load(u + i)));
  }
#endif
  for (; i + 7 < n; i += 8)
    for (int64_t j = i; j < i + 8; ++j) y[j] = g[j] / (1.0f + exp_ggml(0.0f - g[j])) * u[j];
  for (; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

#if defined(__AVX2__) && defined(__FMA__)
// Stage s < W of the Walsh-Hadamard butterflies within one vector: lane j pairs with lane j ^ s;
// the low lane of a pair takes a + c (v + p, the same sum), the high one a - c (p - v).
inline SimdLanes::F hadamard_stage(SimdLanes::F v, int s) noexcept {
#if defined(__AVX512F__)
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 p = _mm512_permutexvar_ps(_mm512_xor_si512(lanes, _mm512_set1_epi32(s)), v);
  return _mm512_mask_sub_ps(_mm512_add_ps(v, p), _mm512_test_epi32_mask(lanes, _mm512_set1_epi32(s)), p, v);
#else
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 p = _mm256_permutevar8x32_ps(v, _mm256_xor_si256(lanes, _mm256_set1_epi32(s)));
  const __m256 high = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(lanes, _mm256_set1_epi32(s)), _mm256_set1_epi32(s)));
  return _mm256_blendv_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), high);
#endif
}
#endif

void hadamard_inplace(float* x, int64_t len, int n) noexcept {
#if defined(__AVX2__) && defined(__FMA__)
  using S = SimdLanes;
  if (n >= S::W) {
    const S::F scale = S::set(1.0f / std::sqrt(static_cast<float>(n)));  // hadamard_blocks' float
    for (int64_t b = 0; b < len; b += n) {
      float* y = x + b;
      for (int i = 0; i < n; i += S::W) {  // the stages s < W, each vector on its own
        S::F v = S::load(y + i);
        for (int s = 1; s < S::W; s *= 2) v = hadamard_stage(v, s);
        S::store(y + i, v);
      }
      for (int s = S::W; s < n; s *= 2)
        for (int i = 0; i < n; i += 2 * s)
          for (int j = i; j < i + s; j += S::W) {
            const S::F a = S::load(y + j), c = S::load(y + j + s);
            S::store(y + j, S::add(a, c));
            S::store(y + j + s, S::sub(a, c));
          }
      for (int i = 0; i < n; i += S::W) S::store(y + i, S::mul(S::load(y + i), scale));
    }
    return;
  }
#endif
  hadamard_blocks(x, len, n);
}

void add_inplace(float* x, const float* y, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void softmax_inplace(float* x, int64_t n) noexcept {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void rope_cache(const RopeParams& p, int32_t pos, float* cos_sin) noexcept {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < p.n_rot / 2; ++i) {
    const float factor = p.freq_factors ? p.freq_factors[i] : 1.0f;
    const float t = p.freq_scale * (theta / factor);
    cos_sin[2 * i] = std::cos(t);
    cos_sin[2 * i + 1] = std::sin(t);
    theta *= theta_scale;
  }
}

void rope_apply_norm(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept {
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < n_rot; i += 2) {
      const float c = cos_sin[i], s = cos_sin[i + 1];
      const float a = v[i], b = v[i + 1];
      // x0's products fused, x1's rounded, as llama.cpp's AVX2 build computes this pair: GCC
      // vectorizes ggml's x0*cos - x1*sin, x0*sin + x1*cos into vfmaddsub (it does so even under
      // -ffp-contract=off, which is why the rounding is spelled out here; rounded() keeps the
      // compiler from fusing the other product too). Exact agreement on the peaked reference
      // models depends on it.
      v[i] = std::fma(a, c, -rounded(b * s));
      v[i + 1] = std::fma(a, s, rounded(b * c));
    }
  }
}

void rope_apply_neox(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float a = v[i], b = v[i + half];
      // One product rounded, the other fused, as ggml's CPU rope computes the NeoX pair
      // (x0*cos - x1*sin and x0*sin + x1*cos contracted by the compiler in llama.cpp's builds,
      // as the adjacent pairs above).
      v[i] = std::fma(a, c, -(b * s));
      v[i + half] = std::fma(a, s, b * c);
    }
  }
}

void scale_inplace(float* x, float s, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace infer::INFER_ISA_NS
