// The element-wise and normalization kernels' code, compiled once per ISA (core/isa_variants.hpp):
// included by ops_ref.cpp, ops_avx2.cpp and ops_avx512.cpp inside namespace infer::INFER_ISA_NS;
// ops.cpp dispatches. Contract in ops.hpp. No include guard.
#include <cmath>

#include "kernels/cpu/exp_approx.hpp"
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

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) noexcept {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void silu_mul(const float* g, const float* u, float* y, int64_t n) noexcept {
  // As ggml_vec_swiglu_f32 on AVX2: groups of 8 through ggml's vector exp, the tail through expf.
  int64_t i = 0;
  for (; i + 7 < n; i += 8)
    for (int64_t j = i; j < i + 8; ++j) y[j] = g[j] / (1.0f + exp_ggml(0.0f - g[j])) * u[j];
  for (; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
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
