// y = x · Wᵀ for every linear layer: W is a weight [n_in, n_out] (n_out rows of n_in elements, any
// type can_dequantize() accepts), x is n_rows rows of n_in floats:
//
//   y[r * y_stride + o] = Σ_i x[r * x_stride + i] * W[o][i]
//
// computed as llama.cpp's CPU backend computes it (docs/quantization.md):
//   - F32 weights: an F32 dot of the x row and the weight row, read in place (kernels/cpu/dot.hpp);
//   - any other type: each x row is converted once per call to the weight's activation type
//     (Q8_0, Q8_1, Q8_K, F16 or BF16; quant/quantize_activations.hpp), then every output is the
//     block dot product of a weight row and a converted row (kernels/cpu/qdot.hpp); the types
//     with tiled kernels (kernels/cpu/qgemm.hpp: F16, BF16 from AVX2; Q4_0, Q8_0, Q5_0, Q4_1,
//     Q4_K, Q6_K on AVX-512) take them where they pay, with the same results.
// w may be in its file's row layout or packed at load by the CPU backend (Layout::cpu_packed:
// the tiles read it in place; lower ISAs restore its rows one at a time).
// Every choice by weight type is one lookup in kernels/cpu/dtype_traits.hpp per call.
// Weights stream from memory once per call whatever the batch size: work is split over panels of
// weight rows, and each panel meets every x row while it is in cache.
//
// Batch invariance: y[r][o] depends only on x row r and weight row o (and the active ISA for F32
// weights): never on n_rows, the other rows, the thread count or the panel split.
//
// Preconditions, asserted: w on the CPU, 2-D, can_dequantize(w.dtype), packed only by its type's
// load_packing kernel; n_rows >= 0;
// x_stride >= n_in; y_stride >= n_out; y does not overlap x or w.
// The calling thread keeps one buffer for converted activations, grown on first use and then
// reused: steady-state calls allocate nothing. Growing it can throw std::bad_alloc (out of memory).
#pragma once

#include <cstdint>

#include "core/tensor.hpp"

namespace infer {

class ThreadPool;

void matmul(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride,
            ThreadPool& pool);

// The scalar twin, single-threaded: dot_f32_ref for F32 weights, otherwise the same activation
// conversion and the scalar dot kernels. Equal bit for bit to matmul() while the scalar ISA is
// active, and under AVX2 too for every type but F32 (the AVX2 F32 dot fuses, the scalar one not).
void matmul_ref(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride);

}  // namespace infer
