#include "core/thread_pool.hpp"
#include "kernels/cpu/ops.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

void rms_norm(ThreadPool& pool, const TensorView& x, const float* w, int64_t n, const TensorView& y, float eps) {
  // Rows are independent (each one's sum runs in ggml's sequential order): split over the threads,
  // each thread's segments of n elements (several per row for a per-head norm) handed to the
  // kernel 32 at a time, whose sums it runs side by side.
  const int64_t per_row = x.shape[0] / n;
  pool.parallel_for(static_cast<size_t>(x.shape[1]), [&](size_t begin, size_t end) {
    constexpr int kBatch = 32;
    const float* xs[kBatch];
    float* ys[kBatch];
    int count = 0;
    for (auto r = static_cast<int64_t>(begin); r < static_cast<int64_t>(end); ++r)
      for (int64_t s = 0; s < per_row; ++s) {
        xs[count] = row_f32(x, r) + s * n;
        ys[count] = row_f32(y, r) + s * n;
        if (++count == kBatch) {
          infer::rms_norm_rows(xs, ys, count, w, n, eps);
          count = 0;
        }
      }
    if (count > 0) infer::rms_norm_rows(xs, ys, count, w, n, eps);
  });
}

}  // namespace infer::ops::cpu
