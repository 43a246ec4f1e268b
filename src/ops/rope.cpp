#include "ops/rope.hpp"

#include "core/profile.hpp"
#include "core/status_macros.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops {

Status rope_table(Backend& be, const RopeSpec& spec, std::span<const int32_t> positions, const TensorView& table) {
  const OpTimer timer("rope_table");
  INFER_RETURN_IF_ERROR(check_f32(be, "rope_table", "table", table));
  if (spec.n_rot <= 0 || spec.n_rot % 2 != 0 || table.shape[0] < spec.n_rot ||
      table.shape[1] != static_cast<int64_t>(positions.size()))
    return invalid_argument("rope_table: table " + shape_string(table) + " does not fit " + std::to_string(positions.size()) +
                            " positions of " + std::to_string(spec.n_rot) + " rotated dimensions");
  if (be.device() == Device::cpu) {
    cpu::rope_table(spec, positions, table);
    return Status::ok();
  }
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::rope_table(be, spec, positions, table);
#endif
  return no_kernel(be, "rope_table");
}

Status rope(Backend& be, const TensorView& x, int n_heads, int head_dim, int n_rot, RopeStyle style, const TensorView& table) {
  const OpTimer timer("rope");
  INFER_RETURN_IF_ERROR(check_f32(be, "rope", "x", x));
  INFER_RETURN_IF_ERROR(check_f32(be, "rope", "table", table));
  if (n_heads <= 0 || head_dim <= 0 || n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0 ||
      x.shape[0] != static_cast<int64_t>(n_heads) * head_dim || table.shape[0] < n_rot || table.shape[1] != x.shape[1])
    return invalid_argument("rope: " + shape_string(x) + " is not " + std::to_string(n_heads) + " heads of " +
                            std::to_string(head_dim) + " with a table row per row");
  if (be.device() == Device::cpu) {
    cpu::rope(x, n_heads, head_dim, n_rot, style, table);
    return Status::ok();
  }
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::rope(be, x, n_heads, head_dim, n_rot, style, table);
#endif
  return no_kernel(be, "rope");
}

}  // namespace infer::ops
