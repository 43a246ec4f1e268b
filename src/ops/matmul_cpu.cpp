#include "kernels/cpu/matmul.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

void matmul(ThreadPool& pool, const TensorView& w, const TensorView& x, const TensorView& y) {
  infer::matmul(w, row_f32(x, 0), x.shape[1], row_floats(x), row_f32(y, 0), row_floats(y), pool);
}

}  // namespace infer::ops::cpu
