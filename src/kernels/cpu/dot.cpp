#include "kernels/cpu/dot.hpp"

#include "core/cpu_features.hpp"

namespace infer {

float dot_f32_ref(const float* a, const float* b, int64_t n) noexcept {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) s[i % 8] += a[i] * b[i];
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

void dot4_f32_ref(const float* x, const float* const* w, int64_t n, float* y) noexcept {
  for (int k = 0; k < 4; ++k) y[k] = dot_f32_ref(x, w[k], n);
}

void dot4x2_f32_ref(const float* x0, const float* x1, const float* const* w, int64_t n, float* y0,
                    float* y1) noexcept {
  dot4_f32_ref(x0, w, n, y0);
  dot4_f32_ref(x1, w, n, y1);
}

float dot_f32(const float* a, const float* b, int64_t n) noexcept {
  if (active_isa() >= CpuIsa::avx2) return dot_f32_avx2(a, b, n);
  return dot_f32_ref(a, b, n);
}

}  // namespace infer
