#include "quant/quantize.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/half.hpp"
#include "quant/block_formats.hpp"

namespace infer {

using namespace quant;

void quantize_row_q8_0_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    // The quants use the exact inverse of the F32 scale, not of its F16 rounding, as ggml does.
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b->d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) b->qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_row_q4_0_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    float amax = 0.0f;
    float extreme = 0.0f;  // signed value of the first element of largest magnitude
    for (int j = 0; j < kQK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    }
    // A negative step makes the extreme land exactly on q = 0 (value -8 d), the end of the range
    // with one more level.
    const float d = extreme / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b->d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      // x * id lies in [-8, 8]; + 8.5 then truncation is round-half-up onto 0..16, clipped at 15.
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      b->qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

}  // namespace infer
