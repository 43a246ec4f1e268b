#include "quant/int8_rows.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "core/isa_variants.hpp"

namespace infer {

namespace isa_avx2 {
void quantize_activations_i8_row(const float* x, void* dst, int64_t n) noexcept;
}
namespace isa_avx512 {
void quantize_activations_i8_row(const float* x, void* dst, int64_t n) noexcept;
}
namespace isa_ref {
void quantize_activations_i8_row(const float* x, void* dst, int64_t n) noexcept { quantize_activations_i8_row_ref(x, dst, n); }
}  // namespace isa_ref

void i8_row_store_trailer(void* row, int64_t n, float s, int32_t sum) noexcept {
  auto* p = static_cast<uint8_t*>(row) + n;
  std::memcpy(p, &s, 4);
  std::memcpy(p + 4, &sum, 4);
}

void quantize_row_i8_row(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kI8RowBlock == 0);
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float s = amax / 127.0f;
  auto* q = static_cast<int8_t*>(dst);
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = s != 0.0f ? std::nearbyint(x[i] / s) : 0.0f;
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    sum += q[i];
  }
  i8_row_store_trailer(dst, n, s, sum);
}

void quantize_activations_i8_row_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kI8RowBlock == 0);
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  auto* q = static_cast<int8_t*>(dst);
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f));
    sum += q[i];
  }
  i8_row_store_trailer(dst, n, amax / 127.0f, sum);
}

void quantize_activations_i8_row(const float* x, void* dst, int64_t n) noexcept {
  INFER_ISA_DISPATCH(quantize_activations_i8_row, x, dst, n);
}

void dequantize_i8_row(const void* src, float* dst, int64_t n) noexcept {
  const auto* q = static_cast<const int8_t*>(src);
  const float s = i8_row_scale(src, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = s * static_cast<float>(q[i]);
}

Status i8_rows_from_compressed(const Int8ChannelWeight& w, void* dst) {
  if (w.rows < 0 || w.n <= 0 || w.n % kI8RowBlock != 0 || w.n > kI8RowMaxElements)
    return invalid_argument("int8 weight: row length " + std::to_string(w.n) + " must be a positive multiple of 32 up to " +
                            std::to_string(kI8RowMaxElements));
  if (w.weight.size() != static_cast<size_t>(w.rows) * static_cast<size_t>(w.n))
    return invalid_argument("int8 weight: " + std::to_string(w.weight.size()) + " quants for " + std::to_string(w.rows) +
                            " rows of " + std::to_string(w.n));
  const bool per_tensor = w.scale.size() == 1;
  if (!per_tensor && w.scale.size() != static_cast<size_t>(w.rows))
    return invalid_argument("int8 weight: " + std::to_string(w.scale.size()) + " scales for " + std::to_string(w.rows) +
                            " rows (want one per row or one per tensor)");
  for (float s : w.scale)
    if (!std::isfinite(s) || s < 0.0f) return invalid_argument("int8 weight: a scale is negative or not finite");
  auto* out = static_cast<uint8_t*>(dst);
  const auto row_bytes = static_cast<size_t>(i8_row_bytes(w.n));
  for (int64_t r = 0; r < w.rows; ++r) {
    const int8_t* q = w.weight.data() + r * w.n;
    uint8_t* row = out + static_cast<size_t>(r) * row_bytes;
    std::memcpy(row, q, static_cast<size_t>(w.n));
    int32_t sum = 0;
    for (int64_t i = 0; i < w.n; ++i) sum += q[i];
    i8_row_store_trailer(row, w.n, w.scale[per_tensor ? 0 : static_cast<size_t>(r)], sum);
  }
  return Status::ok();
}

void i8_rows_to_compressed(const void* src, int64_t rows, int64_t n, int8_t* weight, float* scale) noexcept {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = in + r * i8_row_bytes(n);
    std::memcpy(weight + r * n, row, static_cast<size_t>(n));
    scale[r] = i8_row_scale(row, n);
  }
}

}  // namespace infer
