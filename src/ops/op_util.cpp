#include "ops/op_util.hpp"

namespace infer::ops {

TensorView rows_view(float* data, int64_t cols, int64_t rows, int64_t row_floats, Device device) {
  TensorView t = TensorView::contiguous(DType::f32, 2, {cols, rows, 1, 1}, data, device);
  t.stride[1] = static_cast<uint64_t>(row_floats) * sizeof(float);
  t.stride[2] = t.stride[1] * static_cast<uint64_t>(rows);
  t.stride[3] = t.stride[2];
  return t;
}

TensorView column_slice(const TensorView& t, int64_t first, int64_t n) {
  TensorView s = t;
  s.shape[0] = n;
  s.data = static_cast<uint8_t*>(t.data) + static_cast<uint64_t>(first) * sizeof(float);
  return s;
}

Status check_f32(const Backend& be, const char* op, const char* what, const TensorView& t) {
  if (t.dtype != DType::f32 || t.device != be.device() || t.data == nullptr || t.shape[2] != 1 || t.shape[3] != 1 ||
      t.stride[1] < static_cast<uint64_t>(t.shape[0]) * sizeof(float))
    return invalid_argument(std::string(op) + ": " + what + " must be a [cols, rows] F32 tensor on " + be.name());
  return Status::ok();
}

Status check_same_shape(const char* op, const TensorView& a, const TensorView& b) {
  if (a.shape[0] != b.shape[0] || a.shape[1] != b.shape[1])
    return invalid_argument(std::string(op) + ": shapes differ: " + shape_string(a) + " and " + shape_string(b));
  return Status::ok();
}

Status no_kernel(const Backend& be, const char* op) {
  return unsupported(std::string(op) + ": no kernel for the " + be.name() + " backend");
}

}  // namespace infer::ops
