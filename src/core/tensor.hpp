// A tensor view: dtype, shape, byte strides, a pointer and the device it lives on. It never
// owns memory (weights live in the mapped file, activations in aligned buffers).
//
// Dimension order follows GGUF/ggml: shape[0] is the innermost (contiguous) dimension, so a
// weight matrix [n_in, n_out] has n_out rows of n_in elements. Strides are in bytes; for a
// quantized type stride[0] is not meaningful (elements are packed in blocks) and rows are
// addressed with stride[1].
//
//   shape  = { ne0, ne1, ne2, ne3 }       unused trailing dims are 1
//   stride = { elem, row_bytes, row_bytes*ne1, ... }   for a contiguous tensor
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/dtype.hpp"

namespace infer {

enum class Device : uint8_t { cpu = 0, cuda = 1 };

// How a matrix's rows lie in memory. `rows`: row i at data + i * stride[1] (every tensor of a
// file). `cpu_packed`: a weight the CPU backend repacked at load for its tiled kernels
// (kernels/cpu/qgemm.hpp): groups of rows interleaved block by block; row() does not address it,
// only the matmul and the embedding (which restore a row) read it.
enum class Layout : uint8_t { rows = 0, cpu_packed = 1 };

inline constexpr int kMaxDims = 4;

struct TensorView {
  DType dtype = DType::f32;
  int n_dims = 0;                            // dimensions that matter (1..4); 0 for empty
  std::array<int64_t, kMaxDims> shape{1, 1, 1, 1};
  std::array<uint64_t, kMaxDims> stride{0, 0, 0, 0};  // bytes
  void* data = nullptr;
  Device device = Device::cpu;
  Layout layout = Layout::rows;

  int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  int64_t rows() const { return shape[1] * shape[2] * shape[3]; }
  uint64_t row_bytes() const { return stride[1]; }
  // Bytes spanned by a contiguous tensor.
  uint64_t nbytes() const { return stride[1] * static_cast<uint64_t>(rows()); }
  bool is_contiguous() const;

  template <class T = void>
  T* row(int64_t i) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(data) + static_cast<uint64_t>(i) * stride[1]);
  }

  // A contiguous view over `data`; the caller guarantees the shape is valid for the dtype
  // (shape[0] a multiple of the block size, sizes not overflowing).
  static TensorView contiguous(DType dtype, int n_dims, std::array<int64_t, kMaxDims> shape, void* data,
                               Device device = Device::cpu);
};

// "[4096, 1024]" (only the first n_dims dimensions).
std::string shape_string(const TensorView& t);
std::string shape_string(int n_dims, const std::array<int64_t, kMaxDims>& shape);

}  // namespace infer
