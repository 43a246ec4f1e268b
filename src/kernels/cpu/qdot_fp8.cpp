// The scalar twin of the FP8 E4M3 dots (quant/fp8_rows.hpp states the arithmetic): 16 lanes of
// fused products of exactly decoded codes and F32 activations, a fixed tree, one product with the
// row's scale (weight-only), or with the product of the row's and the activation row's (W8A8: the
// activations are decoded e4m3 values). INT8 weight-only rows (W8A16, i8_row's layout: the scale
// at the same place) take the same steps with float(q_i) for the code's value.
#include <cassert>
#include <cmath>

#include "kernels/cpu/qdot.hpp"
#include "quant/fp8_rows.hpp"

namespace infer {
namespace {

enum class Codes { e4m3, i8 };

template <Codes kCodes>
inline float code_value(uint8_t q) noexcept {
  return kCodes == Codes::e4m3 ? e4m3_to_f32(q) : static_cast<float>(static_cast<int8_t>(q));
}

template <bool kW8A8, Codes kCodes = Codes::e4m3>
void dot(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  assert(n >= 0 && n % kF8RowBlock == 0);
  const auto* q = static_cast<const uint8_t*>(w);
  const float sw = f8_row_scale(w, n);  // the f32 after the n codes: i8_row_scale's place too
  for (int64_t r = 0; r < n_a; ++r) {
    const auto* x = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a) + r * a_stride);
    const float s = kW8A8 ? sw * f8_act_scale(x, n) : sw;
    float acc[16] = {};
    for (int64_t i = 0; i < n; ++i) acc[i % 16] = std::fma(code_value<kCodes>(q[i]), x[i], acc[i % 16]);
    float t[8], u[4];
    for (int l = 0; l < 8; ++l) t[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
    const float v0 = u[0] + u[2], v1 = u[1] + u[3];
    y[r * y_stride] = (v0 + v1) * s;
  }
}

}  // namespace

void qdot_f8_row_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<false>(w, a, as, n_a, n, y, ys);
}
void qdot_f8_w8a8_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<true>(w, a, as, n_a, n, y, ys);
}
void qdot_i8_w8a16_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<false, Codes::i8>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
