// What every op's entry point shares: the checks on its tensor views (device, dtype, shape) and
// the dispatch to the backend's implementation. Ops compute on F32 activations laid out as
// [cols, rows] views (row r at data + r * stride[1]); a view may be a column slice of a wider
// tensor (fused QKV), so rows need not be contiguous with each other.
#pragma once

#include <string>

#include "backend/backend.hpp"
#include "core/tensor.hpp"
#include "infer/status.hpp"

namespace infer::ops {

// A [cols, rows] F32 view over `data` with a row stride of `row_floats` floats.
TensorView rows_view(float* data, int64_t cols, int64_t rows, int64_t row_floats, Device device = Device::cpu);
// Columns [first, first + n) of every row of `t`.
TensorView column_slice(const TensorView& t, int64_t first, int64_t n);

inline float* row_f32(const TensorView& t, int64_t r) { return t.row<float>(r); }
inline int64_t row_floats(const TensorView& t) { return static_cast<int64_t>(t.stride[1] / sizeof(float)); }

// ok, or invalid_argument naming the op: `t` is an F32 [cols, rows] view on the backend's device.
Status check_f32(const Backend& be, const char* op, const char* what, const TensorView& t);
Status check_same_shape(const char* op, const TensorView& a, const TensorView& b);
// The error of an op that has no implementation on the backend's device.
Status no_kernel(const Backend& be, const char* op);

}  // namespace infer::ops
