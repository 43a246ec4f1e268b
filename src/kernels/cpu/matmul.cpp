#include "kernels/cpu/matmul.hpp"

#include <algorithm>
#include <cassert>
#include <new>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/dot.hpp"
#include "quant/dequantize.hpp"

namespace infer {
namespace {

struct RowKernels {
  void (*dequantize)(DType, const void*, float*, int64_t) noexcept;
  float (*dot)(const float*, const float*, int64_t) noexcept;
  void (*dot4)(const float*, const float* const*, int64_t, float*) noexcept;
  void (*dot4x2)(const float*, const float*, const float* const*, int64_t, float*, float*) noexcept;
};

RowKernels kernels_for(CpuIsa isa) {
  if (isa >= CpuIsa::avx2) return {dequantize_row_avx2, dot_f32_avx2, dot4_f32_avx2, dot4x2_f32_avx2};
  return {dequantize_row_ref, dot_f32_ref, dot4_f32_ref, dot4x2_f32_ref};
}

// y[r][j] = dot(x row r, rows[j]) for j < count: tiles of 4 weight rows x 2 x rows, then what is
// left one x row or one weight row at a time. Every tile computes each dot exactly as the
// single dot does, so the tiling never shows in the results.
void panel_times_rows(const RowKernels& k, const float* const* rows, int64_t count, int64_t n_in, const float* x,
                      int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride) {
  const int64_t full = count / 4 * 4;
  int64_t r = 0;
  for (; r + 2 <= n_rows; r += 2) {
    const float* x0 = x + r * x_stride;
    float* y0 = y + r * y_stride;
    for (int64_t j = 0; j < full; j += 4) k.dot4x2(x0, x0 + x_stride, rows + j, n_in, y0 + j, y0 + y_stride + j);
  }
  for (; r < n_rows; ++r)
    for (int64_t j = 0; j < full; j += 4) k.dot4(x + r * x_stride, rows + j, n_in, y + r * y_stride + j);
  for (int64_t j = full; j < count; ++j)
    for (r = 0; r < n_rows; ++r) y[r * y_stride + j] = k.dot(x + r * x_stride, rows[j], n_in);
}

// A panel of dequantized weight rows is reused by every x row, so it should stay in L2 (512 KiB
// on Zen 3, shared with the x rows streaming through): 4 to 16 rows, about 128 KiB.
constexpr int64_t kPanelBytes = 128 * 1024;
constexpr int64_t kMaxPanelRows = 16;

int64_t panel_rows(int64_t n_in) {
  const int64_t fit = kPanelBytes / std::max<int64_t>(n_in * static_cast<int64_t>(sizeof(float)), 1);
  return std::clamp<int64_t>(fit / 4 * 4, 4, kMaxPanelRows);
}

// This thread's dequantization scratch, at least `floats` long.
float* thread_scratch(int64_t floats) {
  thread_local AlignedBuffer buffer;
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  if (buffer.size() < bytes) {
    auto grown = AlignedBuffer::allocate(bytes);
    if (!grown.ok()) throw std::bad_alloc();
    buffer = std::move(grown).value();
  }
  return buffer.as<float>();
}

void check_arguments(const TensorView& w, int64_t n_rows, int64_t x_stride, int64_t y_stride) {
  assert(w.device == Device::cpu && can_dequantize(w.dtype));
  assert(w.shape[2] == 1 && w.shape[3] == 1);
  assert(n_rows >= 0 && x_stride >= w.shape[0] && y_stride >= w.shape[1]);
  (void)w, (void)n_rows, (void)x_stride, (void)y_stride;
}

}  // namespace

void matmul(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride,
            ThreadPool& pool) {
  check_arguments(w, n_rows, x_stride, y_stride);
  const int64_t n_in = w.shape[0];
  const int64_t n_out = w.shape[1];
  if (n_rows == 0 || n_out == 0) return;
  const RowKernels k = kernels_for(active_isa());
  const bool in_place = w.dtype == DType::f32;
  const int64_t panel = panel_rows(n_in);
  const int64_t n_panels = (n_out + panel - 1) / panel;

  pool.parallel_for(static_cast<size_t>(n_panels), [&](size_t begin, size_t end) {
    float* scratch = in_place ? nullptr : thread_scratch(panel * n_in);
    const float* rows[kMaxPanelRows];
    for (auto p = static_cast<int64_t>(begin); p < static_cast<int64_t>(end); ++p) {
      const int64_t o0 = p * panel;
      const int64_t count = std::min(panel, n_out - o0);
      for (int64_t j = 0; j < count; ++j) {
        if (in_place) {
          rows[j] = w.row<const float>(o0 + j);
        } else {
          k.dequantize(w.dtype, w.row(o0 + j), scratch + j * n_in, n_in);
          rows[j] = scratch + j * n_in;
        }
      }
      panel_times_rows(k, rows, count, n_in, x, n_rows, x_stride, y + o0, y_stride);
    }
  });
}

void matmul_ref(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride) {
  check_arguments(w, n_rows, x_stride, y_stride);
  const int64_t n_in = w.shape[0];
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < w.shape[1]; ++o) {
    dequantize_row_ref(w.dtype, w.row(o), row.data(), n_in);
    for (int64_t r = 0; r < n_rows; ++r) y[r * y_stride + o] = dot_f32_ref(x + r * x_stride, row.data(), n_in);
  }
}

}  // namespace infer
