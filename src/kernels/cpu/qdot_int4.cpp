// The scalar twin of the INT4 and INT8 group dots (quant/int4_groups.hpp and quant/int8_groups.hpp
// state the arithmetic): per group, 16 lanes of fused products of the codes' values (q - z for
// INT4, q for INT8) and F32 activations, each lane folded into its accumulator with one fused
// product by the group's scale; a fixed tree at the end.
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "quant/int4_groups.hpp"
#include "quant/int8_groups.hpp"

namespace infer {
namespace {

// A block's scale and element i's value (exact in f32).
struct I4Codes {
  static constexpr int64_t block_bytes(int64_t g) { return i4_block_bytes(g); }
  static float value(const uint8_t* blk, int64_t i) {
    float z;
    std::memcpy(&z, blk + 4, 4);
    const uint8_t byte = blk[8 + 16 * (i / 32) + (i % 16)];
    return static_cast<float>((i % 32) < 16 ? (byte & 15) : (byte >> 4)) - z;
  }
};
struct I8Codes {
  static constexpr int64_t block_bytes(int64_t g) { return i8_block_bytes(g); }
  static float value(const uint8_t* blk, int64_t i) { return static_cast<float>(static_cast<int8_t>(blk[4 + i])); }
};

template <class C, int64_t G>
void dot_groups(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  assert(n >= 0 && n % G == 0);
  for (int64_t r = 0; r < n_a; ++r) {
    const auto* x = reinterpret_cast<const float*>(static_cast<const uint8_t*>(a) + r * a_stride);
    float acc[16] = {};
    for (int64_t b = 0; b < n / G; ++b) {
      const auto* blk = static_cast<const uint8_t*>(w) + b * C::block_bytes(G);
      float d;
      std::memcpy(&d, blk, 4);
      float part[16] = {};
      for (int64_t i = 0; i < G; ++i) part[i % 16] = std::fma(C::value(blk, i), x[b * G + i], part[i % 16]);
      for (int l = 0; l < 16; ++l) acc[l] = std::fma(part[l], d, acc[l]);
    }
    float t[8], u[4];
    for (int l = 0; l < 8; ++l) t[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
    y[r * y_stride] = (u[0] + u[2]) + (u[1] + u[3]);
  }
}

}  // namespace

#define INFER_GROUP_DOT(name, codes, g)                                                                         \
  void name(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept { \
    dot_groups<codes, g>(w, a, as, n_a, n, y, ys);                                                             \
  }
INFER_GROUP_DOT(qdot_i4_g32_ref, I4Codes, 32)
INFER_GROUP_DOT(qdot_i4_g64_ref, I4Codes, 64)
INFER_GROUP_DOT(qdot_i4_g128_ref, I4Codes, 128)
INFER_GROUP_DOT(qdot_i8_g32_ref, I8Codes, 32)
INFER_GROUP_DOT(qdot_i8_g64_ref, I8Codes, 64)
INFER_GROUP_DOT(qdot_i8_g128_ref, I8Codes, 128)
#undef INFER_GROUP_DOT

}  // namespace infer
