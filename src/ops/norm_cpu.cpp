#include "core/thread_pool.hpp"
#include "kernels/cpu/ops.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

void rms_norm(ThreadPool& pool, const TensorView& x, const float* w, int64_t n, const TensorView& y, float eps) {
  // Rows are independent (each one's sum runs in ggml's sequential order): split over the threads.
  pool.parallel_for(static_cast<size_t>(x.shape[1]), [&](size_t begin, size_t end) {
    for (auto r = static_cast<int64_t>(begin); r < static_cast<int64_t>(end); ++r) {
      const float* xr = row_f32(x, r);
      float* yr = row_f32(y, r);
      for (int64_t i = 0; i < x.shape[0]; i += n) infer::rms_norm(xr + i, w, yr + i, n, eps);
    }
  });
}

}  // namespace infer::ops::cpu
