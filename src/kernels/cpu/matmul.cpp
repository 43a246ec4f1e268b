#include "kernels/cpu/matmul.hpp"

#include <algorithm>
#include <cassert>
#include <new>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/dtype_traits.hpp"

namespace infer {
namespace {

// The parallel_for grain over n weight groups or panels: for fewer than 4 activation rows (a
// decode step, bound by reading the weights) one contiguous run per thread, so that each thread's
// stream starts once per call, not four times (each start is prefetched by no one); otherwise
// parallel_for's default (about four chunks per thread, which balance uneven work). Intel Xeon VM,
// 2 threads, tokens/s with four chunks per thread -> one: TinyLlama-shape Q4_0 43.6 -> 45.3, Q4_K_M
// 36.7 -> 37.1, SmolLM2 Q4_1 157-168 -> 176-179, Gemma 3 82-83 -> 85-89; Q8_0 and F16 level.
size_t decode_grain(size_t n, int64_t n_rows, const ThreadPool& pool) {
  if (n_rows >= 4) return 0;
  const auto threads = static_cast<size_t>(pool.size());
  return (n + threads - 1) / threads;
}

struct F32Kernels {
  float (*dot)(const float*, const float*, int64_t) noexcept;
  void (*dot4)(const float*, const float* const*, int64_t, float*) noexcept;
  void (*dot4x2)(const float*, const float*, const float* const*, int64_t, float*, float*) noexcept;
};

F32Kernels f32_kernels_for(CpuIsa isa) {
  if (isa >= CpuIsa::avx2) return {dot_f32_avx2, dot4_f32_avx2, dot4x2_f32_avx2};
  return {dot_f32_ref, dot4_f32_ref, dot4x2_f32_ref};
}

// y[r][j] = dot(x row r, rows[j]) for j < count: tiles of 4 weight rows x 2 x rows, then what is
// left one x row or one weight row at a time. Every tile computes each dot exactly as the
// single dot does, so the tiling never shows in the results.
void f32_panel_times_rows(const F32Kernels& k, const float* const* rows, int64_t count, int64_t n_in, const float* x,
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

// A panel of weight rows is reused by every x row, so it should stay in L2 (512 KiB on Zen 3,
// shared with the x rows streaming through): about 128 KiB, 4 to 16 F32 rows, up to 64 others.
constexpr int64_t kPanelBytes = 128 * 1024;

int64_t panel_rows(int64_t row_bytes, int64_t max_rows) {
  const int64_t fit = kPanelBytes / std::max<int64_t>(row_bytes, 1);
  return std::clamp<int64_t>(fit / 4 * 4, 4, max_rows);
}

constexpr int64_t kMaxF32PanelRows = 16;
constexpr int64_t kMaxQuantPanelRows = 64;
// Converted activation rows a panel meets at a time: 16 rows of 4096 Q8 elements are 70 KiB.
constexpr int64_t kActChunkRows = 16;
// Activations of 4 bytes an element (the F32 rows of the INT4 and FP8 weight types) come in
// chunks of about this many bytes, at least 4 rows: every weight row of the panel then finds its
// chunk in L1 (48 KiB on Sapphire Rapids and Zen 5, 32 KiB on Zen 4) rather than in L2.
constexpr int64_t kWideActChunkBytes = 32 * 1024;

int64_t act_chunk_rows(int64_t a_row, int64_t n_in) {
  if (a_row < 4 * n_in) return kActChunkRows;
  return std::clamp<int64_t>(kWideActChunkBytes / std::max<int64_t>(a_row, 1) / 4 * 4, 4, kActChunkRows);
}

void matmul_f32(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride,
                ThreadPool& pool, CpuIsa isa) {
  const int64_t n_in = w.shape[0], n_out = w.shape[1];
  const F32Kernels k = f32_kernels_for(isa);
  const int64_t panel = panel_rows(n_in * static_cast<int64_t>(sizeof(float)), kMaxF32PanelRows);
  pool.parallel_for(static_cast<size_t>((n_out + panel - 1) / panel), [&](size_t begin, size_t end) {
    const float* rows[kMaxF32PanelRows];
    for (auto p = static_cast<int64_t>(begin); p < static_cast<int64_t>(end); ++p) {
      const int64_t o0 = p * panel;
      const int64_t count = std::min(panel, n_out - o0);
      for (int64_t j = 0; j < count; ++j) rows[j] = w.row<const float>(o0 + j);
      f32_panel_times_rows(k, rows, count, n_in, x, n_rows, x_stride, y + o0, y_stride);
    }
  });
}

// A thread's buffer of at least `bytes` (grown on first use, then reused).
uint8_t* grow(AlignedBuffer& buffer, size_t bytes) {
  if (buffer.size() < bytes) {
    auto grown = AlignedBuffer::allocate(bytes);
    if (!grown.ok()) throw std::bad_alloc();
    buffer = std::move(grown).value();
  }
  return buffer.as<uint8_t>();
}

// The calling thread's buffer for the converted activation rows. Pool threads only read it,
// inside the call that filled it.
uint8_t* activation_scratch(size_t bytes) {
  thread_local AlignedBuffer buffer;
  return grow(buffer, bytes);
}

// Each thread's buffer for the packed weight group it is working on.
uint8_t* packed_scratch(size_t bytes) {
  thread_local AlignedBuffer buffer;
  return grow(buffer, bytes);
}

// The tiled path's blocking: the activation rows (with their side data) one pass over a batch of
// weight groups meets, and the packed groups of that batch, each about this many bytes, so that
// both stay in the core's L2 (1 MiB on Zen 4, 2 MiB on Sapphire Rapids) rather than the whole
// batch of activations (2.3 MiB for 512 rows of 2048 Q8_0 elements) streaming from L3 once
// per group.
constexpr int64_t kGemmActBytes = 256 * 1024;
constexpr int64_t kGemmPackedBytes = 256 * 1024;
constexpr int64_t kMaxGemmBatch = 8;

// The tiled path (kernels/cpu/qgemm.hpp): activation rows converted once, with their side data;
// then per batch of weight groups (as the CPU backend packed them at load, Layout::cpu_packed, or
// as packed here into scratch), per chunk of activation rows, one tile pass of each group over
// the chunk. A result does not depend on the blocking: each (weight row, activation row) pair
// runs its own chain.
void matmul_gemm(const QGemmKernel& k, const TensorView& w, const CpuTypeTraits& at, const float* x, int64_t n_rows,
                 int64_t x_stride, float* y, int64_t y_stride, ThreadPool& pool) {
  const int64_t n_in = w.shape[0], n_out = w.shape[1];
  const auto a_row = static_cast<int64_t>(*dtype_row_bytes(at.type, static_cast<uint64_t>(n_in)));
  const int64_t side_row = k.side_bytes(n_in);
  const int64_t act_bytes = (n_rows * a_row + 63) / 64 * 64;
  uint8_t* act = activation_scratch(static_cast<size_t>(act_bytes + n_rows * side_row));
  uint8_t* side = act + act_bytes;
  pool.parallel_for(static_cast<size_t>(n_rows), [&](size_t begin, size_t end) {
    for (auto r = static_cast<int64_t>(begin); r < static_cast<int64_t>(end); ++r) {
      at.from_float_activation(x + r * x_stride, act + r * a_row, n_in);
      k.prepare_side(act + r * a_row, side + r * side_row, n_in);
    }
  });
  const int64_t group = k.group_rows, group_bytes = k.packed_bytes(n_in);
  // Packed at load: read in place, or (k.pack_loaded) packed again per call from the loaded layout.
  const bool repack = w.layout == Layout::cpu_packed && k.pack_loaded;
  const bool prepacked = w.layout == Layout::cpu_packed && !repack;
  const auto w_row = static_cast<int64_t>(w.row_bytes());
  const int64_t batch = std::clamp<int64_t>(kGemmPackedBytes / std::max<int64_t>(group_bytes, 1), 1, kMaxGemmBatch);
  const int64_t chunk = k.whole_batch ? std::max<int64_t>(n_rows, 1)
                                      : std::max<int64_t>(4, kGemmActBytes / std::max<int64_t>(a_row + side_row, 1) / 4 * 4);
  const size_t n_groups = static_cast<size_t>((n_out + group - 1) / group);
  pool.parallel_for(n_groups, [&](size_t begin, size_t end) {
    uint8_t* scratch = prepacked ? nullptr : packed_scratch(static_cast<size_t>(batch * group_bytes));
    for (auto g0 = static_cast<int64_t>(begin); g0 < static_cast<int64_t>(end); g0 += batch) {
      const int64_t g1 = std::min<int64_t>(static_cast<int64_t>(end), g0 + batch);
      const auto packed = [&](int64_t g) -> const uint8_t* {
        return prepacked ? static_cast<const uint8_t*>(w.data) + g * group_bytes : scratch + (g - g0) * group_bytes;
      };
      const auto rows_of = [&](int64_t g) { return std::min(group, n_out - g * group); };
      for (int64_t g = g0; g < g1 && !prepacked; ++g) {
        uint8_t* dst = scratch + (g - g0) * group_bytes;
        if (repack)
          k.pack_loaded(w.data, g * group, rows_of(g), n_in, dst);
        else
          k.pack(w.row(g * group), w_row, rows_of(g), n_in, dst);
      }
      for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
        const int64_t rows = std::min(chunk, n_rows - r0);
        for (int64_t g = g0; g < g1; ++g)
          k.multiply(packed(g), rows_of(g), act + r0 * a_row, a_row, side + r0 * side_row, side_row, rows, n_in,
                     y + r0 * y_stride + g * group, y_stride);
      }
    }
  }, decode_grain(n_groups, n_rows, pool));
}

// Calls fn(o, row) for the weight rows o0 <= o < o1 in order, `row` in the weight type's block
// layout: in place, or restored from the groups of a weight packed at load into `buffer`.
template <class Fn>
void for_each_row(const TensorView& w, int64_t o0, int64_t o1, uint8_t* buffer, Fn&& fn) {
  for (int64_t o = o0; o < o1; ++o) {
    if (w.layout != Layout::cpu_packed) {
      fn(o, w.row(o));
    } else {
      unpack_row(w, o, buffer);
      fn(o, static_cast<const void*>(buffer));
    }
  }
}

// Each thread's buffer for one restored weight row.
uint8_t* row_scratch(size_t bytes) {
  thread_local AlignedBuffer buffer;
  return grow(buffer, bytes);
}

void check_arguments(const TensorView& w, int64_t n_rows, int64_t x_stride, int64_t y_stride) {
  assert(w.device == Device::cpu && can_dequantize(w.dtype));
  assert(w.shape[2] == 1 && w.shape[3] == 1);
  assert(w.layout == Layout::rows || (w.dtype != DType::f32 && cpu_type_traits(w.dtype)->load_packing));
  assert(n_rows >= 0 && x_stride >= w.shape[0] && y_stride >= w.shape[1]);
  (void)w, (void)n_rows, (void)x_stride, (void)y_stride;
}

}  // namespace

void matmul(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride,
            ThreadPool& pool) {
  check_arguments(w, n_rows, x_stride, y_stride);
  const int64_t n_in = w.shape[0], n_out = w.shape[1];
  if (n_rows == 0 || n_out == 0) return;
  const CpuIsa isa = active_isa();
  if (w.dtype == DType::f32) return matmul_f32(w, x, n_rows, x_stride, y, y_stride, pool, isa);
  const CpuTypeTraits& wt = *cpu_type_traits(w.dtype);
  const CpuTypeTraits& at = *cpu_type_traits(wt.vec_dot_type);
  if (w.layout == Layout::cpu_packed) {
    // A wide batch for a kernel that packs per call from the loaded layout; else the layout's
    // kernel for this ISA; below it (a test's lower ISA), rows unpacked.
    assert(wt.load_packing);
    if (const QGemmKernel* k = wt.gemm(isa); k && k->pack_loaded && n_rows >= k->min_rows_loaded)
      return matmul_gemm(*k, w, at, x, n_rows, x_stride, y, y_stride, pool);
    if (const QGemmKernel* k = wt.load_packing_for(isa)) return matmul_gemm(*k, w, at, x, n_rows, x_stride, y, y_stride, pool);
  } else if (const QGemmKernel* k = wt.gemm(isa); k && n_rows >= k->min_rows) {
    return matmul_gemm(*k, w, at, x, n_rows, x_stride, y, y_stride, pool);
  }

  // Each x row is converted once; every weight row's dot then reads it.
  const auto a_row = static_cast<int64_t>(*dtype_row_bytes(at.type, static_cast<uint64_t>(n_in)));
  uint8_t* act = activation_scratch(static_cast<size_t>(n_rows * a_row));
  pool.parallel_for(static_cast<size_t>(n_rows), [&](size_t begin, size_t end) {
    for (auto r = static_cast<int64_t>(begin); r < static_cast<int64_t>(end); ++r)
      at.from_float_activation(x + r * x_stride, act + r * a_row, n_in);
  });

  const QDotFn dot = wt.dot(isa);
  // Fewer than 4 activation rows (a decode step): the kernels that take several weight rows at
  // once, where the type has them.
  const QDotRowsFn dot_rows = w.layout == Layout::rows && n_rows < 4 ? wt.dot_rows(isa) : nullptr;
  const int64_t panel = panel_rows(static_cast<int64_t>(w.row_bytes()), kMaxQuantPanelRows);
  const int64_t chunk = act_chunk_rows(a_row, n_in);
  const size_t w_row = w.row_bytes();
  const size_t n_panels = static_cast<size_t>((n_out + panel - 1) / panel);
  pool.parallel_for(n_panels, [&](size_t begin, size_t end) {
    uint8_t* buffer = w.layout == Layout::cpu_packed ? row_scratch(w_row) : nullptr;
    for (auto p = static_cast<int64_t>(begin); p < static_cast<int64_t>(end); ++p) {
      const int64_t o0 = p * panel, o1 = std::min(n_out, o0 + panel);
      if (dot_rows) {
        for (int64_t r = 0; r < n_rows; ++r)
          dot_rows(w.row(o0), static_cast<int64_t>(w_row), o1 - o0, act + r * a_row, n_in, y + r * y_stride + o0);
        continue;
      }
      for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
        const int64_t count = std::min(chunk, n_rows - r0);
        for_each_row(w, o0, o1, buffer, [&](int64_t o, const void* row) {
          dot(row, act + r0 * a_row, a_row, count, n_in, y + r0 * y_stride + o, y_stride);
        });
      }
    }
  }, decode_grain(n_panels, n_rows, pool));
}

void matmul_ref(const TensorView& w, const float* x, int64_t n_rows, int64_t x_stride, float* y, int64_t y_stride) {
  check_arguments(w, n_rows, x_stride, y_stride);
  const int64_t n_in = w.shape[0], n_out = w.shape[1];
  if (w.dtype == DType::f32) {
    for (int64_t o = 0; o < n_out; ++o)
      for (int64_t r = 0; r < n_rows; ++r)
        y[r * y_stride + o] = dot_f32_ref(x + r * x_stride, w.row<const float>(o), n_in);
    return;
  }
  const CpuTypeTraits& wt = *cpu_type_traits(w.dtype);
  const CpuTypeTraits& at = *cpu_type_traits(wt.vec_dot_type);
  const auto a_row = static_cast<int64_t>(*dtype_row_bytes(at.type, static_cast<uint64_t>(n_in)));
  std::vector<uint8_t> act(static_cast<size_t>(n_rows * a_row));
  for (int64_t r = 0; r < n_rows; ++r) at.from_float_activation(x + r * x_stride, act.data() + r * a_row, n_in);
  const QDotFn dot = wt.dot_ref;
  std::vector<uint8_t> buffer(w.row_bytes());
  for_each_row(w, 0, n_out, buffer.data(), [&](int64_t o, const void* row) {
    for (int64_t r = 0; r < n_rows; ++r) y[r * y_stride + o] = qdot(dot, row, act.data() + r * a_row, n_in);
  });
}

}  // namespace infer
