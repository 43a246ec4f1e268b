// infer-bench-gpu: the two ceilings of the GPU and the matmuls of a model's shapes, as JSON.
//   - HBM bandwidth: a device-to-device copy kernel (16-byte loads and stores) over 2 x 1 GiB,
//     bytes read + written over the median time of 20 runs;
//   - per weight type, shape (n_in x n_out) and batch: ops::matmul on the CUDA backend (the
//     engine's path), median of 20 runs timed with events on the backend's stream, as TFLOP/s and
//     weight bytes streamed per second; for BF16 also cuBLASLt itself (BF16 in, F32 out, its first
//     heuristic with split-K allowed), the library's peak for the same shape.
// Inputs are random (never zeros). usage: infer-bench-gpu [--json FILE] [--shapes NIN:NOUT,...]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cuda/cuda_backend.cuh"
#include "ops/matmul.hpp"
#include "quant_test_util.hpp"

using namespace infer;

namespace {

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__global__ void fill_kernel(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    p[i] = static_cast<float>(h & 0xffff) / 65536.0f - 0.5f;
  }
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    p[i] = __float2bfloat16_rn(static_cast<float>(h & 0xffff) / 65536.0f - 0.5f);
  }
}

template <class F>
double median_ms(cudaStream_t s, int reps, F f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a, s));
    f();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, shapes_arg = "2048:2048,2048:512,2048:8192,8192:2048,2048:128256";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--shapes" && i + 1 < argc) shapes_arg = argv[++i];
    else {
      std::fprintf(stderr, "usage: infer-bench-gpu [--json FILE] [--shapes NIN:NOUT,...]\n");
      return 2;
    }
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (size_t p = 0; p < shapes_arg.size();) {
    const size_t comma = std::min(shapes_arg.find(',', p), shapes_arg.size());
    const std::string s = shapes_arg.substr(p, comma - p);
    shapes.push_back({std::stoll(s.substr(0, s.find(':'))), std::stoll(s.substr(s.find(':') + 1))});
    p = comma + 1;
  }
  auto made = make_cuda_backend(0);
  if (!made.ok()) {
    std::fprintf(stderr, "infer-bench-gpu: %s\n", made.status().message().c_str());
    return 1;
  }
  Backend& be = **made;
  auto* cb = static_cast<cuda::CudaBackend*>(&be);
  cudaStream_t s = cb->stream();
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::string out = "{\n  \"device\": \"" + std::string(prop.name) + "\",\n";

  // The bandwidth ceiling.
  const size_t copy_bytes = size_t{1} << 30;
  float *src = nullptr, *dst = nullptr;
  CK(cudaMalloc(&src, copy_bytes));
  CK(cudaMalloc(&dst, copy_bytes));
  fill_kernel<<<4096, 256, 0, s>>>(src, copy_bytes / 4, 7);
  const size_t n4 = copy_bytes / 16;
  const double copy_ms = median_ms(s, 20, [&] { copy_kernel<<<prop.multiProcessorCount * 8, 512, 0, s>>>(reinterpret_cast<const float4*>(src), reinterpret_cast<float4*>(dst), n4); });
  const double hbm_gbs = 2.0 * static_cast<double>(copy_bytes) / (copy_ms * 1e6);
  CK(cudaFree(src));
  CK(cudaFree(dst));
  std::printf("HBM copy: %.0f GB/s (read + write, %.3f ms for 2 x 1 GiB)\n", hbm_gbs, copy_ms);
  out += "  \"hbm_copy_gb_per_s\": " + std::to_string(hbm_gbs) + ",\n  \"matmul\": [\n";

  bool first = true;
  std::printf("%-6s %7s %7s %5s %10s %10s %10s\n", "type", "n_in", "n_out", "rows", "ms", "TFLOP/s", "weight GB/s");
  for (DType t : {DType::bf16, DType::f16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
    for (auto [n_in, n_out] : shapes) {
      auto bytes = test::random_weights(t, n_out, n_in, 5);
      TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, bytes.data());
      auto wg = be.prepare_weight(w, Backend::WeightSource::released);
      if (!wg.ok()) {
        std::fprintf(stderr, "infer-bench-gpu: %s\n", wg.status().message().c_str());
        return 1;
      }
      for (int64_t rows : {1, 16, 64, 512}) {
        auto x = be.activation(0, n_in, rows);
        auto y = be.activation(1, n_out, rows);
        if (!x.ok() || !y.ok()) return 1;
        fill_kernel<<<1024, 256, 0, s>>>(static_cast<float*>(x->data), static_cast<size_t>(n_in * rows), 11);
        Status st = Status::ok();
        const double ms = median_ms(s, 20, [&] {
          if (st.is_ok()) st = ops::matmul(be, *wg, *x, *y);
        });
        if (!st.is_ok()) {
          std::fprintf(stderr, "infer-bench-gpu: %s\n", st.message().c_str());
          return 1;
        }
        const double flops = 2.0 * static_cast<double>(n_in) * static_cast<double>(n_out) * static_cast<double>(rows);
        const double tflops = flops / (ms * 1e9), wgbs = static_cast<double>(w.nbytes()) / (ms * 1e6);
        std::printf("%-6s %7lld %7lld %5lld %10.4f %10.2f %10.1f\n", std::string(dtype_name(t)).c_str(), static_cast<long long>(n_in),
                    static_cast<long long>(n_out), static_cast<long long>(rows), ms, tflops, wgbs);
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "%s    {\"type\": \"%s\", \"path\": \"libinfer\", \"n_in\": %lld, \"n_out\": %lld, \"rows\": %lld, \"ms\": %.6f, "
                      "\"tflops\": %.4f, \"weight_gb_per_s\": %.2f}",
                      first ? "" : ",\n", std::string(dtype_name(t)).c_str(), static_cast<long long>(n_in), static_cast<long long>(n_out),
                      static_cast<long long>(rows), ms, tflops, wgbs);
        out += buf;
        first = false;
        if (t != DType::bf16) continue;
        // cuBLASLt alone: BF16 activations, its first heuristic.
        void* xb = nullptr;
        CK(cudaMalloc(&xb, static_cast<size_t>(n_in * rows) * 2));
        fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(xb), static_cast<size_t>(n_in * rows), 13);
        cublasLtMatmulDesc_t op;
        cublasLtMatrixLayout_t la, lb, ld;
        cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        const cublasOperation_t tr = CUBLAS_OP_T;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr);
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n_in, n_out, n_in);
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n_in, rows, n_in);
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, n_out, rows, n_out);
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulPreferenceCreate(&pref);
        const size_t ws = cb->workspace_bytes();
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        cublasLtMatmulHeuristicResult_t res{};
        int found = 0;
        cublasLtMatmulAlgoGetHeuristic(cb->lt(), op, la, lb, ld, ld, pref, 1, &res, &found);
        if (found > 0) {
          const float alpha = 1, beta = 0;
          const double lt_ms = median_ms(s, 20, [&] {
            cublasLtMatmul(cb->lt(), op, &alpha, wg->data, la, xb, lb, &beta, y->data, ld, y->data, ld, &res.algo, cb->workspace(), ws, s);
          });
          std::printf("%-6s %7lld %7lld %5lld %10.4f %10.2f %10.1f  (cuBLASLt alone)\n", "bf16", static_cast<long long>(n_in),
                      static_cast<long long>(n_out), static_cast<long long>(rows), lt_ms, flops / (lt_ms * 1e9),
                      static_cast<double>(w.nbytes()) / (lt_ms * 1e6));
          std::snprintf(buf, sizeof buf,
                        ",\n    {\"type\": \"bf16\", \"path\": \"cublaslt\", \"n_in\": %lld, \"n_out\": %lld, \"rows\": %lld, \"ms\": %.6f, "
                        "\"tflops\": %.4f, \"weight_gb_per_s\": %.2f}",
                        static_cast<long long>(n_in), static_cast<long long>(n_out), static_cast<long long>(rows), lt_ms,
                        flops / (lt_ms * 1e9), static_cast<double>(w.nbytes()) / (lt_ms * 1e6));
          out += buf;
        }
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatmulDescDestroy(op);
        CK(cudaFree(xb));
      }
    }
  }
  out += "\n  ]\n}\n";
  CK(cudaGetLastError());
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) return 1;
    std::fputs(out.c_str(), f);
    std::fclose(f);
  }
  return 0;
}
