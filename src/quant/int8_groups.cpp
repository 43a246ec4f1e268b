#include "quant/int8_groups.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "core/half.hpp"

namespace infer {
namespace {

float rounded(float d, ScalePrecision p) {
  if (p == ScalePrecision::f16) return f16_to_f32(f32_to_f16(d));
  if (p == ScalePrecision::bf16) return bf16_to_f32(f32_to_bf16(d));
  return d;
}

template <int64_t G>
void dequantize_groups(const void* src, float* dst, int64_t n) noexcept {
  assert(n % G == 0);
  const auto* blk = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / G; ++b, blk += i8_block_bytes(G), dst += G) {
    float d;
    std::memcpy(&d, blk, 4);
    for (int64_t i = 0; i < G; ++i) dst[i] = d * static_cast<float>(static_cast<int8_t>(blk[4 + i]));
  }
}

}  // namespace

float i8_group_scale(const float* x, int64_t group, ScalePrecision p) noexcept {
  float amax = 0.0f;
  for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(x[i]));
  return rounded(amax / 127.0f, p);
}

int8_t i8_code(float x, float d) noexcept {
  return d > 0.0f ? static_cast<int8_t>(std::clamp(std::nearbyint(x / d), -127.0f, 127.0f)) : int8_t{0};
}

void quantize_row_i8_groups(const float* x, void* dst, int64_t n, int64_t group, ScalePrecision p) noexcept {
  assert(group > 0 && n % group == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / group; ++b, x += group, out += i8_block_bytes(group)) {
    const float d = i8_group_scale(x, group, p);
    std::memcpy(out, &d, 4);
    for (int64_t i = 0; i < group; ++i) out[4 + i] = static_cast<uint8_t>(i8_code(x[i], d));
  }
}

std::optional<DType> i8_type_of_group(int64_t group) noexcept {
  if (group == 32) return DType::i8_g32;
  if (group == 64) return DType::i8_g64;
  if (group == 128) return DType::i8_g128;
  return std::nullopt;
}

void quantize_row_i8_g32(const float* x, void* dst, int64_t n) noexcept { quantize_row_i8_groups(x, dst, n, 32, ScalePrecision::f32); }
void quantize_row_i8_g64(const float* x, void* dst, int64_t n) noexcept { quantize_row_i8_groups(x, dst, n, 64, ScalePrecision::f32); }
void quantize_row_i8_g128(const float* x, void* dst, int64_t n) noexcept { quantize_row_i8_groups(x, dst, n, 128, ScalePrecision::f32); }
void dequantize_i8_g32(const void* src, float* dst, int64_t n) noexcept { dequantize_groups<32>(src, dst, n); }
void dequantize_i8_g64(const void* src, float* dst, int64_t n) noexcept { dequantize_groups<64>(src, dst, n); }
void dequantize_i8_g128(const void* src, float* dst, int64_t n) noexcept { dequantize_groups<128>(src, dst, n); }

Status i8_groups_from_compressed(const Int8GroupWeight& w, DType type, void* dst) {
  const int64_t G = i8_group_size(type);
  if (G == 0) return invalid_argument("int8 group weight: " + std::string(dtype_name(type)) + " is no INT8 group type");
  if (w.rows < 0 || w.n <= 0 || w.group <= 0 || w.n % w.group != 0 || w.group % G != 0)
    return invalid_argument("int8 group weight: rows of " + std::to_string(w.n) + " in groups of " + std::to_string(w.group) +
                            " do not make whole groups of " + std::to_string(G));
  const int64_t groups = w.n / w.group;
  const auto count = static_cast<size_t>(w.rows) * static_cast<size_t>(w.n);
  const auto n_scales = static_cast<size_t>(w.rows) * static_cast<size_t>(groups);
  if (w.values.size() != count || w.scale.size() != n_scales)
    return invalid_argument("int8 group weight: " + std::to_string(w.values.size()) + " values and " +
                            std::to_string(w.scale.size()) + " scales for " + std::to_string(w.rows) + " rows of " +
                            std::to_string(w.n) + " in groups of " + std::to_string(w.group));
  for (float s : w.scale)
    if (!std::isfinite(s) || s < 0.0f) return invalid_argument("int8 group weight: a scale is negative or not finite");
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t b = 0; b < w.n / G; ++b, out += i8_block_bytes(G)) {
      const float d = w.scale[static_cast<size_t>(r * groups + b * G / w.group)];
      std::memcpy(out, &d, 4);
      std::memcpy(out + 4, w.values.data() + r * w.n + b * G, static_cast<size_t>(G));
    }
  return Status::ok();
}

}  // namespace infer
