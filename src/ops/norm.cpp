#include "ops/norm.hpp"

#include "core/profile.hpp"
#include "core/status_macros.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops {

Status rms_norm(Backend& be, const TensorView& x, const TensorView& w, const TensorView& y, float eps) {
  const OpTimer timer("rms_norm");
  INFER_RETURN_IF_ERROR(check_f32(be, "rms_norm", "x", x));
  INFER_RETURN_IF_ERROR(check_f32(be, "rms_norm", "y", y));
  INFER_RETURN_IF_ERROR(check_same_shape("rms_norm", x, y));
  const int64_t n = w.shape[0];
  if (w.dtype != DType::f32 || w.numel() != n || n <= 0 || x.shape[0] % n != 0)
    return invalid_argument("rms_norm: weight " + shape_string(w) + " does not divide rows of " + std::to_string(x.shape[0]));
  if (be.device() == Device::cpu) {
    cpu::rms_norm(cpu_pool(be), x, static_cast<const float*>(w.data), n, y, eps);
    return Status::ok();
  }
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::rms_norm(be, x, w, y, eps);
#endif
  return no_kernel(be, "rms_norm");
}

}  // namespace infer::ops
