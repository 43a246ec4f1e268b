// y = x · Wᵀ for every linear layer: W is a weight [n_in, n_out] (n_out rows of n_in elements, any
// type can_dequantize() accepts), x is n_rows rows of n_in floats:
//
//   y[r * y_stride + o] = Σ_i x[r * x_stride + i] * W[o][i]
//
// Each weight row is dequantized once per call (F32 rows are read in place) and reused for every
// x row, so weights stream from memory once per engine step whatever the batch size. Work is split
// over output features in panels of weight rows.
//
// Batch invariance: y[r][o] is dot_f32(x row r, W row o) of the active ISA (scalar reference or
// AVX2, see kernels/cpu/dot.hpp): its bits depend only on those two rows, never on n_rows, the
// other rows, the thread count or the panel split.
//
// Preconditions, asserted: w on the CPU, 2-D, can_dequantize(w.dtype); n_rows >= 0;
// x_stride >= n_in; y_stride >= n_out; y does not overlap x or w.
// Each thread keeps one scratch buffer for dequantized rows, grown on first use and then reused:
// steady-state calls allocate nothing. Growing it can throw std::bad_alloc (out of memory).
#pragma once

#include <cstdint>

#include "core/tensor.hpp"

namespace infer {

class ThreadPool;

void matmul(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride,
            ThreadPool& pool);

// The scalar twin: dequantize_row_ref + dot_f32_ref, single-threaded. Equal bit for bit to
// matmul() while the scalar ISA is active.
void matmul_ref(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride);

}  // namespace infer
