#include "kernels/cpu/ops.hpp"

#include <cmath>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/half.hpp"
#include "core/isa_variants.hpp"

namespace infer {

#define INFER_DECLARE_OPS(ns) \
  namespace ns { \
  void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) noexcept; \
  void rms_norm_rows(const float* const* x, float* const* y, int count, const float* w, int64_t n, float eps) noexcept; \
  void silu_mul(const float* g, const float* u, float* y, int64_t n) noexcept; \
  void add_inplace(float* x, const float* y, int64_t n) noexcept; \
  void softmax_inplace(float* x, int64_t n) noexcept; \
  void rope_cache(const RopeParams& p, int32_t pos, float* cos_sin) noexcept; \
  void rope_apply_norm(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept; \
  void rope_apply_neox(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept; \
  void scale_inplace(float* x, float s, int64_t n) noexcept; \
  void hadamard_inplace(float* x, int64_t len, int n) noexcept; \
  }
INFER_DECLARE_OPS(isa_ref)
INFER_DECLARE_OPS(isa_avx2)
INFER_DECLARE_OPS(isa_avx512)
#undef INFER_DECLARE_OPS

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) noexcept { INFER_ISA_DISPATCH(rms_norm, x, w, y, n, eps); }
void rms_norm_rows(const float* const* x, float* const* y, int count, const float* w, int64_t n, float eps) noexcept {
  INFER_ISA_DISPATCH(rms_norm_rows, x, y, count, w, n, eps);
}
void silu_mul(const float* g, const float* u, float* y, int64_t n) noexcept { INFER_ISA_DISPATCH(silu_mul, g, u, y, n); }
void add_inplace(float* x, const float* y, int64_t n) noexcept { INFER_ISA_DISPATCH(add_inplace, x, y, n); }
void softmax_inplace(float* x, int64_t n) noexcept { INFER_ISA_DISPATCH(softmax_inplace, x, n); }
void rope_cache(const RopeParams& p, int32_t pos, float* cos_sin) noexcept { INFER_ISA_DISPATCH(rope_cache, p, pos, cos_sin); }
void rope_apply_norm(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept { INFER_ISA_DISPATCH(rope_apply_norm, x, n_heads, head_dim, n_rot, cos_sin); }
void rope_apply_neox(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept { INFER_ISA_DISPATCH(rope_apply_neox, x, n_heads, head_dim, n_rot, cos_sin); }
void scale_inplace(float* x, float s, int64_t n) noexcept { INFER_ISA_DISPATCH(scale_inplace, x, s, n); }
void hadamard_inplace(float* x, int64_t len, int n) noexcept { INFER_ISA_DISPATCH(hadamard_inplace, x, len, n); }

float gelu_tanh(float x) noexcept {
  constexpr float kCoef = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

const uint16_t* gelu_f16_table() noexcept {
  // ggml's table: one f16 result per f16 input, built once; one entry more, so that a 32-bit
  // gather at any index stays inside.
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t((1 << 16) + 1, 0);
    for (uint32_t i = 0; i < (1u << 16); ++i) t[i] = f32_to_f16(gelu_tanh(f16_to_f32(static_cast<uint16_t>(i))));
    return t;
  }();
  return table.data();
}

void gelu_mul_ref(const float* g, const float* u, float* y, int64_t n) noexcept {
  const uint16_t* table = gelu_f16_table();
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    if (x <= -10.0f) {
      y[i] = 0.0f;
    } else if (x >= 10.0f) {
      y[i] = x * u[i];
    } else {
      y[i] = f16_to_f32(table[f32_to_f16(x)]) * u[i];
    }
  }
}

void gelu_mul(const float* g, const float* u, float* y, int64_t n) noexcept {
  if (active_isa() >= CpuIsa::avx2) return gelu_mul_avx2(g, u, y, n);
  gelu_mul_ref(g, u, y, n);
}

}  // namespace infer
