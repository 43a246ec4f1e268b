// The scalar twin of the INT4 group dot (quant/int4_groups.hpp states the arithmetic): per group,
// 16 lanes of fused products of (q - z) and F32 activations, each lane folded into its accumulator
// with one fused product by the group's scale; a fixed tree at the end.
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "quant/int4_groups.hpp"

namespace infer {
namespace {

template <int64_t G>
void dot_groups(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  assert(n >= 0 && n % G == 0);
  for (int64_t r = 0; r < n_a; ++r) {
    const auto* x = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a) + r * a_stride);
    float acc[16] = {};
    for (int64_t b = 0; b < n / G; ++b) {
      const auto* blk = static_cast<const uint8_t*>(w) + b * i4_block_bytes(G);
      float d, z;
      std::memcpy(&d, blk, 4);
      std::memcpy(&z, blk + 4, 4);
      const uint8_t* qs = blk + 8;
      float part[16] = {};
      for (int64_t i = 0; i < G; ++i) {
        const uint8_t byte = qs[16 * (i / 32) + (i % 16)];
        const int q = (i % 32) < 16 ? (byte & 15) : (byte >> 4);
        part[i % 16] = std::fma(static_cast<float>(q) - z, x[b * G + i], part[i % 16]);
      }
      for (int l = 0; l < 16; ++l) acc[l] = std::fma(part[l], d, acc[l]);
    }
    float t[8], u[4];
    for (int l = 0; l < 8; ++l) t[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
    y[r * y_stride] = (u[0] + u[2]) + (u[1] + u[3]);
  }
}

}  // namespace

void qdot_i4_g32_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot_groups<32>(w, a, as, n_a, n, y, ys);
}
void qdot_i4_g64_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot_groups<64>(w, a, as, n_a, n, y, ys);
}
void qdot_i4_g128_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot_groups<128>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
