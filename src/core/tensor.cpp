#include "core/tensor.hpp"

namespace infer {

TensorView TensorView::contiguous(DType dtype, int n_dims, std::array<int64_t, kMaxDims> shape, void* data,
                                  Device device) {
  TensorView t;
  t.dtype = dtype;
  t.n_dims = n_dims;
  t.shape = shape;
  t.data = data;
  t.device = device;
  const auto* tr = dtype_traits(dtype);
  t.stride[0] = tr->block_size == 1 ? tr->block_bytes : 0;
  t.stride[1] = static_cast<uint64_t>(shape[0]) / tr->block_size * tr->block_bytes + tr->row_extra_bytes;
  for (int d = 2; d < kMaxDims; ++d) t.stride[d] = t.stride[d - 1] * static_cast<uint64_t>(shape[d - 1]);
  return t;
}

bool TensorView::is_contiguous() const {
  const auto* tr = dtype_traits(dtype);
  if (!tr) return false;
  if (tr->block_size == 1 && stride[0] != tr->block_bytes) return false;
  if (stride[1] != static_cast<uint64_t>(shape[0]) / tr->block_size * tr->block_bytes + tr->row_extra_bytes) return false;
  for (int d = 2; d < kMaxDims; ++d)
    if (shape[d] > 1 && stride[d] != stride[d - 1] * static_cast<uint64_t>(shape[d - 1])) return false;
  return true;
}

std::string shape_string(int n_dims, const std::array<int64_t, kMaxDims>& shape) {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) {
    if (d) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

std::string shape_string(const TensorView& t) { return shape_string(t.n_dims, t.shape); }

}  // namespace infer
