#include <cmath>
#include <cstring>

#include "core/thread_pool.hpp"
#include "kernels/cpu/ops.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

void add(const TensorView& x, const TensorView& y) {
  for (int64_t r = 0; r < x.shape[1]; ++r) add_inplace(row_f32(x, r), row_f32(y, r), x.shape[0]);
}

void add_bias(const TensorView& x, const float* bias) {
  for (int64_t r = 0; r < x.shape[1]; ++r) add_inplace(row_f32(x, r), bias, x.shape[0]);
}

void scale(const TensorView& x, float s) {
  for (int64_t r = 0; r < x.shape[1]; ++r) scale_inplace(row_f32(x, r), s, x.shape[0]);
}

void softcap(const TensorView& x, float cap) {
  for (int64_t r = 0; r < x.shape[1]; ++r) {
    float* v = row_f32(x, r);
    for (int64_t i = 0; i < x.shape[0]; ++i) v[i] = std::tanh(v[i] * (1.0f / cap)) * cap;
  }
}

void hadamard(ThreadPool& pool, const TensorView& x, int block) {
  pool.parallel_for(static_cast<size_t>(x.shape[1]), [&](size_t begin, size_t end) {
    for (auto r = static_cast<int64_t>(begin); r < static_cast<int64_t>(end); ++r) hadamard_inplace(row_f32(x, r), x.shape[0], block);
  });
}

void glu(ThreadPool& pool, Activation act, const TensorView& gate, const TensorView& up, const TensorView& out) {
  // Rows are independent: split over the threads (a prompt's rows are n_ff wide each).
  pool.parallel_for(static_cast<size_t>(gate.shape[1]), [&](size_t begin, size_t end) {
    for (auto r = static_cast<int64_t>(begin); r < static_cast<int64_t>(end); ++r) {
      if (act == Activation::silu)
        silu_mul(row_f32(gate, r), row_f32(up, r), row_f32(out, r), gate.shape[0]);
      else
        gelu_mul(row_f32(gate, r), row_f32(up, r), row_f32(out, r), gate.shape[0]);
    }
  });
}

void copy_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(row_f32(out, static_cast<int64_t>(i)), row_f32(x, rows[i]), static_cast<size_t>(x.shape[0]) * sizeof(float));
}

}  // namespace infer::ops::cpu
