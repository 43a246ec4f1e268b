#include "ops/elementwise.hpp"

#include "core/profile.hpp"
#include "core/status_macros.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops {

Status add(Backend& be, const TensorView& x, const TensorView& y) {
  const OpTimer timer("add");
  INFER_RETURN_IF_ERROR(check_f32(be, "add", "x", x));
  INFER_RETURN_IF_ERROR(check_f32(be, "add", "y", y));
  INFER_RETURN_IF_ERROR(check_same_shape("add", x, y));
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::add(be, x, y);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "add");
  cpu::add(x, y);
  return Status::ok();
}

Status add_bias(Backend& be, const TensorView& x, const TensorView& bias) {
  const OpTimer timer("add_bias");
  INFER_RETURN_IF_ERROR(check_f32(be, "add_bias", "x", x));
  if (bias.dtype != DType::f32 || bias.numel() != x.shape[0] || bias.device != be.device())
    return invalid_argument("add_bias: bias " + shape_string(bias) + " does not match rows of " + std::to_string(x.shape[0]));
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::add_bias(be, x, bias);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "add_bias");
  cpu::add_bias(x, static_cast<const float*>(bias.data));
  return Status::ok();
}

Status scale(Backend& be, const TensorView& x, float s) {
  const OpTimer timer("scale");
  INFER_RETURN_IF_ERROR(check_f32(be, "scale", "x", x));
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::scale(be, x, s);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "scale");
  cpu::scale(x, s);
  return Status::ok();
}

Status softcap(Backend& be, const TensorView& x, float cap) {
  const OpTimer timer("softcap");
  INFER_RETURN_IF_ERROR(check_f32(be, "softcap", "x", x));
  if (!(cap > 0)) return invalid_argument("softcap: the cap must be positive");
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::softcap(be, x, cap);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "softcap");
  cpu::softcap(x, cap);
  return Status::ok();
}

Status hadamard(Backend& be, const TensorView& x, int block) {
  const OpTimer timer("hadamard");
  INFER_RETURN_IF_ERROR(check_f32(be, "hadamard", "x", x));
  if (block < 2 || block > kMaxInputRotation || (block & (block - 1)) != 0 || x.shape[0] % block != 0)
    return invalid_argument("hadamard: a rotation of " + std::to_string(block) + " columns does not fit rows of " +
                            std::to_string(x.shape[0]) + " (a power of two from 2 to " + std::to_string(kMaxInputRotation) +
                            " dividing them)");
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::hadamard(be, x, block);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "hadamard");
  cpu::hadamard(cpu_pool(be), x, block);
  return Status::ok();
}

Status glu(Backend& be, Activation act, const TensorView& gate, const TensorView& up, const TensorView& out) {
  const OpTimer timer("glu");
  INFER_RETURN_IF_ERROR(check_f32(be, "glu", "gate", gate));
  INFER_RETURN_IF_ERROR(check_f32(be, "glu", "up", up));
  INFER_RETURN_IF_ERROR(check_f32(be, "glu", "out", out));
  INFER_RETURN_IF_ERROR(check_same_shape("glu", gate, up));
  INFER_RETURN_IF_ERROR(check_same_shape("glu", gate, out));
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::glu(be, act, gate, up, out);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "glu");
  cpu::glu(cpu_pool(be), act, gate, up, out);
  return Status::ok();
}

Status copy_rows(Backend& be, const TensorView& x, std::span<const int32_t> rows, const TensorView& out) {
  const OpTimer timer("copy_rows");
  INFER_RETURN_IF_ERROR(check_f32(be, "copy_rows", "x", x));
  INFER_RETURN_IF_ERROR(check_f32(be, "copy_rows", "out", out));
  if (out.shape[0] != x.shape[0] || out.shape[1] != static_cast<int64_t>(rows.size()))
    return invalid_argument("copy_rows: output " + shape_string(out) + " does not fit " + std::to_string(rows.size()) + " rows");
  for (int32_t r : rows)
    if (r < 0 || r >= x.shape[1]) return invalid_argument("copy_rows: row " + std::to_string(r) + " out of range");
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::copy_rows(be, x, rows, out);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "copy_rows");
  cpu::copy_rows(x, rows, out);
  return Status::ok();
}

}  // namespace infer::ops
