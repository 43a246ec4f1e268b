#include "ops/embedding.hpp"

#include "core/profile.hpp"
#include "core/status_macros.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops {

Status embed(Backend& be, const TensorView& table, std::span<const int32_t> tokens, const TensorView& out, float scale) {
  const OpTimer timer("embed");
  INFER_RETURN_IF_ERROR(check_f32(be, "embed", "out", out));
  if (table.n_dims != 2 || table.shape[0] != out.shape[0] || out.shape[1] != static_cast<int64_t>(tokens.size()))
    return invalid_argument("embed: table " + shape_string(table) + " and output " + shape_string(out) + " do not fit " +
                            std::to_string(tokens.size()) + " tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= table.shape[1])
      return invalid_argument("embed: token id " + std::to_string(t) + " outside the vocabulary (" + std::to_string(table.shape[1]) + ")");
  if (be.device() == Device::cpu && table.device == Device::cpu) {
    if (!can_dequantize(table.dtype))
      return unsupported("embed: no CPU kernel reads weight type " + std::string(dtype_name(table.dtype)));
    cpu::embed(table, tokens, out, scale);
    return Status::ok();
  }
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda && table.device == Device::cuda) {
    if (!gpu::can_read(table.dtype))
      return unsupported("embed: no CUDA kernel reads weight type " + std::string(dtype_name(table.dtype)));
    return gpu::embed(be, table, tokens, out, scale);
  }
#endif
  return no_kernel(be, "embed");
}

}  // namespace infer::ops
