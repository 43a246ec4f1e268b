// y = x · Wᵀ on the device. Two paths:
//   - F32, F16, BF16 weights: cuBLASLt (the activations rounded to the weight's type first, as
//     the CPU's F16/BF16 kernels round them; F32 in F32 without TF32), one algorithm per
//     (type, n_out, n_in) chosen once by the heuristic and kept for every row count, with split-K
//     refused: each output element's reduction over n_in then runs the same way whatever the
//     batch, which is what keeps a row's result independent of its batch;
//   - Q4_0, Q8_0, Q4_K, Q6_K weights: a weight-only GEMV, one warp per output row, weights
//     dequantized in registers, f32 accumulation in a fixed order (each lane its 32-element
//     slices in order, then a fixed shuffle tree), up to 16 rows of x per pass over the weights.
#include <type_traits>
#include <vector>

#include "core/status_macros.hpp"
#include "cuda/cuda_backend.cuh"
#include "cuda/quant_blocks.cuh"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::gpu {
namespace {

using cuda::backend_of;
using cuda::check_launch;
using cuda::check_lt;
using cuda::grid_for;

constexpr int kGemvRows = 16;  // rows of x per pass over the weights
constexpr int kWarpsPerBlock = 4;

template <class Block, int NB>
__global__ void qgemv_kernel(const uint8_t* w, int64_t row_bytes, int64_t n_in, int64_t n_out, const float* x, int64_t xs,
                             float* y, int64_t ys, int nb) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (o >= n_out) return;
  const uint8_t* wr = w + o * row_bytes;
  float acc[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) acc[b] = 0.0f;
  const int64_t slices = n_in / 32;  // 32 elements: whole blocks, or a slice of a K-quant block
  for (int64_t u = lane; u < slices; u += 32) {
    const int64_t e0 = u * 32;
    const uint8_t* blk = wr + (e0 / Block::kElems) * Block::kBytes;
    const int j0 = static_cast<int>(e0 % Block::kElems);
    for (int j = 0; j < 32; ++j) {
      const int je = Block::kElems == 1 ? 0 : j0 + j;
      const float wv = Block::elem(Block::kElems == 1 ? blk + j * Block::kBytes : blk, je);
#pragma unroll
      for (int b = 0; b < NB; ++b)
        if (b < nb) acc[b] = fmaf(wv, x[b * xs + e0 + j], acc[b]);
    }
  }
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    float v = acc[b];
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && b < nb) y[b * ys + o] = v;
  }
}

template <class Block>
void launch_qgemv(const TensorView& w, const float* x, int64_t xs, float* y, int64_t ys, int nb, cudaStream_t s) {
  const int64_t n_out = w.shape[1];
  const auto grid = static_cast<unsigned>((n_out + kWarpsPerBlock - 1) / kWarpsPerBlock);
  qgemv_kernel<Block, kGemvRows><<<grid, 32 * kWarpsPerBlock, 0, s>>>(static_cast<const uint8_t*>(w.data),
                                                                      static_cast<int64_t>(w.row_bytes()), w.shape[0],
                                                                      n_out, x, xs, y, ys, nb);
}

Status qgemv(cuda::CudaBackend& c, const TensorView& w, const TensorView& x, const TensorView& y) {
  const int64_t xs = row_floats(x), ys = row_floats(y);
  for (int64_t r0 = 0; r0 < x.shape[1]; r0 += kGemvRows) {
    const int nb = static_cast<int>(std::min<int64_t>(kGemvRows, x.shape[1] - r0));
    const float* xp = row_f32(x, r0);
    float* yp = row_f32(y, r0);
    switch (w.dtype) {
      case DType::q4_0: launch_qgemv<cuda::BlockQ4_0>(w, xp, xs, yp, ys, nb, c.stream()); break;
      case DType::q8_0: launch_qgemv<cuda::BlockQ8_0>(w, xp, xs, yp, ys, nb, c.stream()); break;
      case DType::q4_k: launch_qgemv<cuda::BlockQ4_K>(w, xp, xs, yp, ys, nb, c.stream()); break;
      case DType::q6_k: launch_qgemv<cuda::BlockQ6_K>(w, xp, xs, yp, ys, nb, c.stream()); break;
      default: return unsupported("matmul: no CUDA GEMV for " + std::string(dtype_name(w.dtype)));
    }
    INFER_RETURN_IF_ERROR(check_launch("matmul (GEMV)"));
  }
  return Status::ok();
}

// x rows (f32, stride xs) -> a contiguous [n_in, rows] matrix of T, rounded to nearest even.
template <class T>
__global__ void round_rows_kernel(const float* x, int64_t xs, int64_t n_in, int64_t rows, T* out) {
  const int64_t n = n_in * rows;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n_in, k = i % n_in;
    if constexpr (std::is_same_v<T, __half>)
      out[i] = __float2half_rn(x[r * xs + k]);
    else
      out[i] = __float2bfloat16_rn(x[r * xs + k]);
  }
}

struct LtLayouts {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  ~LtLayouts() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// D[n_out, m] (column-major, ld ldd) = Wᵀ · B: W stored as n_in x n_out (ld n_in), B n_in x m (ld ldb).
Status make_layouts(LtLayouts& l, cudaDataType_t t, int64_t n_in, int64_t n_out, int64_t m, int64_t ldb, int64_t ldd) {
  INFER_RETURN_IF_ERROR(check_lt(cublasLtMatmulDescCreate(&l.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  const cublasOperation_t trans = CUBLAS_OP_T;
  INFER_RETURN_IF_ERROR(check_lt(cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans), "TRANSA"));
  INFER_RETURN_IF_ERROR(check_lt(cublasLtMatrixLayoutCreate(&l.a, t, static_cast<uint64_t>(n_in), static_cast<uint64_t>(n_out), n_in), "layout A"));
  INFER_RETURN_IF_ERROR(check_lt(cublasLtMatrixLayoutCreate(&l.b, t, static_cast<uint64_t>(n_in), static_cast<uint64_t>(m), ldb), "layout B"));
  INFER_RETURN_IF_ERROR(check_lt(cublasLtMatrixLayoutCreate(&l.d, CUDA_R_32F, static_cast<uint64_t>(n_out), static_cast<uint64_t>(m), ldd), "layout D"));
  return Status::ok();
}

Status heuristic(cuda::CudaBackend& c, const LtLayouts& l, cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulPreference_t pref = nullptr;
  INFER_RETURN_IF_ERROR(check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
  const size_t ws = c.workspace_bytes();
  const uint32_t no_split = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_split, sizeof no_split);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulAlgoGetHeuristic(c.lt(), l.op, l.a, l.b, l.d, l.d, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  INFER_RETURN_IF_ERROR(check_lt(st, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) return unsupported("matmul: cuBLASLt has no algorithm for this shape");
  algo = res.algo;
  return Status::ok();
}

Status lt_matmul(cuda::CudaBackend& c, const TensorView& w, const TensorView& x, const TensorView& y) {
  const int64_t n_in = w.shape[0], n_out = w.shape[1], m = x.shape[1];
  if (m == 0) return Status::ok();
  const cudaDataType_t t = w.dtype == DType::f32 ? CUDA_R_32F : w.dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  const void* b = x.data;
  int64_t ldb = row_floats(x);
  if (w.dtype != DType::f32) {
    INFER_ASSIGN_OR_RETURN(void* conv, c.scratch(0, static_cast<size_t>(n_in * m) * 2));
    const unsigned g = grid_for(n_in * m, 256);
    if (w.dtype == DType::f16)
      round_rows_kernel<__half><<<g, 256, 0, c.stream()>>>(static_cast<const float*>(x.data), ldb, n_in, m, static_cast<__half*>(conv));
    else
      round_rows_kernel<__nv_bfloat16><<<g, 256, 0, c.stream()>>>(static_cast<const float*>(x.data), ldb, n_in, m,
                                                                   static_cast<__nv_bfloat16*>(conv));
    INFER_RETURN_IF_ERROR(check_launch("matmul (rounding the activations)"));
    b = conv;
    ldb = n_in;
  }
  // One algorithm per (type, n_out, n_in), chosen for a 64-row batch and used for every batch.
  auto& algo = c.algos()[{static_cast<int>(w.dtype), n_out, n_in}];
  if (!algo.ok) {
    LtLayouts rep;
    INFER_RETURN_IF_ERROR(make_layouts(rep, t, n_in, n_out, 64, n_in, n_out));
    INFER_RETURN_IF_ERROR(heuristic(c, rep, algo.algo));
    algo.ok = true;
  }
  LtLayouts l;
  INFER_RETURN_IF_ERROR(make_layouts(l, t, n_in, n_out, m, ldb, row_floats(y)));
  cublasLtMatmulHeuristicResult_t checked{};
  cublasLtMatmulAlgo_t use = algo.algo;
  if (cublasLtMatmulAlgoCheck(c.lt(), l.op, l.a, l.b, l.d, l.d, &use, &checked) != CUBLAS_STATUS_SUCCESS) {
    // The cached algorithm does not take this shape (ld, alignment): this call's own choice.
    INFER_RETURN_IF_ERROR(heuristic(c, l, use));
  }
  const float alpha = 1.0f, beta = 0.0f;
  return check_lt(cublasLtMatmul(c.lt(), l.op, &alpha, w.data, l.a, b, l.b, &beta, y.data, l.d, y.data, l.d, &use,
                                 c.workspace(), c.workspace_bytes(), c.stream()),
                  "cublasLtMatmul");
}

}  // namespace

Status matmul(Backend& be, const TensorView& w, const TensorView& x, const TensorView& y) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  if (w.dtype == DType::f32 || w.dtype == DType::f16 || w.dtype == DType::bf16) return lt_matmul(*c, w, x, y);
  if (w.shape[0] % 32 != 0) return unsupported("matmul: the CUDA GEMV needs rows of a multiple of 32 elements");
  return qgemv(*c, w, x, y);
}

}  // namespace infer::ops::gpu
