#include "kernels/cpu/ops.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

void rms_norm(const TensorView& x, const float* w, int64_t n, const TensorView& y, float eps) {
  for (int64_t r = 0; r < x.shape[1]; ++r) {
    const float* xr = row_f32(x, r);
    float* yr = row_f32(y, r);
    for (int64_t i = 0; i < x.shape[0]; i += n) infer::rms_norm(xr + i, w, yr + i, n, eps);
  }
}

}  // namespace infer::ops::cpu
