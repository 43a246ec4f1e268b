// The scalar twin of the FP8 E4M3 weight-only dot (quant/fp8_rows.hpp states the arithmetic):
// 16 lanes of fused products of exactly decoded codes and F32 activations, a fixed tree, one
// product with the row's scale.
#include <cassert>
#include <cmath>

#include "kernels/cpu/qdot.hpp"
#include "quant/fp8_rows.hpp"

namespace infer {

void qdot_f8_row_ref(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y,
                     int64_t y_stride) noexcept {
  assert(n >= 0 && n % kF8RowBlock == 0);
  const auto* q = static_cast<const uint8_t*>(w);
  const float s = f8_row_scale(w, n);
  for (int64_t r = 0; r < n_a; ++r) {
    const auto* x = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a) + r * a_stride);
    float acc[16] = {};
    for (int64_t i = 0; i < n; ++i) acc[i % 16] = std::fma(e4m3_to_f32(q[i]), x[i], acc[i % 16]);
    float t[8], u[4];
    for (int l = 0; l < 8; ++l) t[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
    const float v0 = u[0] + u[2], v1 = u[1] + u[3];
    y[r * y_stride] = (v0 + v1) * s;
  }
}

}  // namespace infer
