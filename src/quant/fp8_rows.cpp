#include "quant/fp8_rows.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace infer {
namespace {

std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const int e = (c >> 3) & 15, m = c & 7;
    float v;
    if (e == 15 && m == 7) v = std::numeric_limits<float>::quiet_NaN();
    else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);
    else v = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
    t[static_cast<size_t>(c)] = c & 0x80 ? -v : v;
  }
  return t;
}
const std::array<float, 256> kTable = make_table();


}  // namespace

float e4m3_to_f32(uint8_t code) noexcept { return kTable[code]; }

uint8_t f32_to_e4m3(float v) noexcept {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const float a = std::fabs(v);
  if (a >= 448.0f) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 steps give 0x08 = 2^-6, the next code)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int e;
  const float f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): exponent e - 1
  const auto m = static_cast<int>(std::nearbyint((f * 2.0f - 1.0f) * 8.0f));  // 0..8, exact operands
  // m == 8 carries into the exponent; the codes are monotonic, so adding works.
  const int code = ((e - 1 + 7) << 3) + m;
  return sign | static_cast<uint8_t>(std::min(code, 0x7E));
}

void quantize_row_f8_scaled(const float* x, void* dst, int64_t n, float scale) noexcept {
  assert(n >= 0 && n % kF8RowBlock == 0);
  auto* q = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) q[i] = scale != 0.0f ? f32_to_e4m3(x[i] / scale) : 0;
  f8_row_store_trailer(dst, n, scale);
}

void quantize_row_f8_row(const float* x, void* dst, int64_t n) noexcept {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  quantize_row_f8_scaled(x, dst, n, amax / 448.0f);
}

void quantize_activations_f8(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kF8RowBlock == 0);
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float s = amax / 448.0f;
  auto* v = static_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) v[i] = s != 0.0f ? kTable[f32_to_e4m3(x[i] / s)] : 0.0f;
  f8_row_store_trailer(v + n, 0, s);
}

void dequantize_f8_row(const void* src, float* dst, int64_t n) noexcept {
  const auto* q = static_cast<const uint8_t*>(src);
  const float s = f8_row_scale(src, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = s * kTable[q[i]];
}

void f8_row_store_trailer(void* row, int64_t n, float s) noexcept {
  auto* p = static_cast<uint8_t*>(row) + n;
  const uint32_t zero = 0;
  std::memcpy(p, &s, 4);
  std::memcpy(p + 4, &zero, 4);
}

Status f8_rows_from_compressed(const Fp8Weight& w, void* dst) {
  if (w.rows < 0 || w.n <= 0 || w.n % kF8RowBlock != 0)
    return invalid_argument("fp8 weight: row length " + std::to_string(w.n) + " must be a positive multiple of 32");
  if (w.weight.size() != static_cast<size_t>(w.rows) * static_cast<size_t>(w.n))
    return invalid_argument("fp8 weight: " + std::to_string(w.weight.size()) + " codes for " + std::to_string(w.rows) +
                            " rows of " + std::to_string(w.n));
  const bool per_tensor = w.scale.size() == 1;
  if (!per_tensor && w.scale.size() != static_cast<size_t>(w.rows))
    return invalid_argument("fp8 weight: " + std::to_string(w.scale.size()) + " scales for " + std::to_string(w.rows) +
                            " rows (want one per row or one per tensor)");
  for (float s : w.scale)
    if (!std::isfinite(s) || s < 0.0f) return invalid_argument("fp8 weight: a scale is negative or not finite");
  for (uint8_t c : w.weight)
    if ((c & 0x7F) == 0x7F) return invalid_argument("fp8 weight: a NaN code (0x7F / 0xFF)");
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* row = out + static_cast<size_t>(r) * static_cast<size_t>(w.n + 8);
    std::memcpy(row, w.weight.data() + r * w.n, static_cast<size_t>(w.n));
    f8_row_store_trailer(row, w.n, w.scale[per_tensor ? 0 : static_cast<size_t>(r)]);
  }
  return Status::ok();
}

void f8_rows_to_compressed(const void* src, int64_t rows, int64_t n, uint8_t* weight, float* scale) noexcept {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = in + r * (n + 8);
    std::memcpy(weight + r * n, row, static_cast<size_t>(n));
    scale[r] = f8_row_scale(row, n);
  }
}

}  // namespace infer
