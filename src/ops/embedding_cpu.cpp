#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/ops.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

void embed(const TensorView& table, std::span<const int32_t> tokens, const TensorView& out, float scale) {
  const int64_t n = out.shape[0];
  const RowToFloat to_float = cpu_type_traits(table.dtype)->to_float(active_isa());
  // A table the backend packed at load (tied embeddings: the output matrix too) gives its rows
  // back one at a time.
  thread_local std::vector<uint8_t> restored;
  if (table.layout == Layout::cpu_packed) restored.resize(table.row_bytes());
  for (size_t r = 0; r < tokens.size(); ++r) {
    float* y = row_f32(out, static_cast<int64_t>(r));
    const void* row = table.row(tokens[r]);
    if (table.layout == Layout::cpu_packed) {
      unpack_row(table, tokens[r], restored.data());
      row = restored.data();
    }
    to_float(row, y, n);
    if (scale != 1.0f) scale_inplace(y, scale, n);
  }
}

}  // namespace infer::ops::cpu
