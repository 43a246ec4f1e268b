#include "ops/matmul.hpp"

#include "core/profile.hpp"
#include "core/status_macros.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops {

Status matmul(Backend& be, const TensorView& w, const TensorView& x, const TensorView& y) {
  const OpTimer timer("matmul", w.dtype);
  INFER_RETURN_IF_ERROR(check_f32(be, "matmul", "x", x));
  INFER_RETURN_IF_ERROR(check_f32(be, "matmul", "y", y));
  if (w.n_dims != 2 || w.device != be.device() || w.shape[0] != x.shape[0] || w.shape[1] != y.shape[0] || x.shape[1] != y.shape[1])
    return invalid_argument("matmul: weight " + shape_string(w) + ", input " + shape_string(x) + " and output " +
                            shape_string(y) + " do not fit");
  if (be.device() == Device::cpu) {
    if (!can_dequantize(w.dtype))
      return unsupported("matmul: no CPU kernel reads weight type " + std::string(dtype_name(w.dtype)));
    cpu::matmul(cpu_pool(be), w, x, y);
    return Status::ok();
  }
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) {
    if (!gpu::can_read(w.dtype))
      return unsupported("matmul: no CUDA kernel reads weight type " + std::string(dtype_name(w.dtype)));
    return gpu::matmul(be, w, x, y);
  }
#endif
  return no_kernel(be, "matmul");
}

}  // namespace infer::ops
