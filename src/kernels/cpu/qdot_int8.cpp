// The scalar twin of the INT8 row-scaled dot (quant/int8_rows.hpp states the arithmetic):
// y = float(Σ qw qa) * (sw * sa).
#include <cassert>

#include "kernels/cpu/qdot.hpp"
#include "quant/int8_rows.hpp"

namespace infer {

void qdot_i8_row_ref(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y,
                     int64_t y_stride) noexcept {
  assert(n >= 0 && n % kI8RowBlock == 0);
  const auto* qw = static_cast<const int8_t*>(w);
  const float sw = i8_row_scale(w, n);
  for (int64_t r = 0; r < n_a; ++r) {
    const void* row = static_cast<const uint8_t*>(a) + r * a_stride;
    const auto* qa = static_cast<const int8_t*>(row);
    int32_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<int32_t>(qw[i]) * qa[i];
    y[r * y_stride] = static_cast<float>(sum) * (sw * i8_row_scale(row, n));
  }
}

}  // namespace infer
