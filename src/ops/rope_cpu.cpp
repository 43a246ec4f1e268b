#include "kernels/cpu/ops.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

void rope_table(const RopeSpec& spec, std::span<const int32_t> positions, const TensorView& table) {
  const RopeParams p{spec.n_rot, spec.base, spec.freq_scale, spec.freq_factors};
  for (size_t r = 0; r < positions.size(); ++r) rope_cache(p, positions[r], row_f32(table, static_cast<int64_t>(r)));
}

void rope(const TensorView& x, int n_heads, int head_dim, int n_rot, RopeStyle style, const TensorView& table) {
  for (int64_t r = 0; r < x.shape[1]; ++r) {
    if (style == RopeStyle::norm)
      rope_apply_norm(row_f32(x, r), n_heads, head_dim, n_rot, row_f32(table, r));
    else
      rope_apply_neox(row_f32(x, r), n_heads, head_dim, n_rot, row_f32(table, r));
  }
}

}  // namespace infer::ops::cpu
