// The CUDA backend: device memory for activations, the KV pool and the weights (uploaded once at
// load), one stream per backend (every op of a forward step is queued on it; synchronize() waits),
// pinned host memory for the logits (mapped into the device: the output projection writes it
// directly), a cuBLASLt handle with its workspace and per-shape algorithm cache (ops_matmul.cu).
// Only .cu files include this header (it carries CUDA types); src/ sees the Backend interface and
// make_cuda_backend() (backend/backend.hpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"

namespace infer::cuda {

// ok, or an error naming `what` and the CUDA error (out_of_memory for allocation failures).
Status check(cudaError_t err, const char* what);
Status check_launch(const char* kernel);
Status check_lt(cublasStatus_t st, const char* what);

class CudaBackend final : public Backend {
 public:
  static Result<std::unique_ptr<CudaBackend>> create(int index);
  ~CudaBackend() override;

  Device device() const noexcept override { return Device::cuda; }
  std::string name() const override { return "cuda:" + std::to_string(index_); }
  Result<TensorView> prepare_weight(const TensorView& w, WeightSource source) override;
  Result<AlignedBuffer> allocate_kv(size_t bytes) override;
  Status synchronize() override;

  // Makes this backend's device the calling thread's (the engine's worker is not the thread that
  // created the backend); every op calls it first.
  Status activate() const;
  cudaStream_t stream() const noexcept { return stream_; }
  cublasLtHandle_t lt() const noexcept { return lt_; }
  void* workspace() const noexcept { return const_cast<uint8_t*>(workspace_.data()); }
  size_t workspace_bytes() const noexcept { return workspace_.size(); }
  const uint16_t* gelu_table() const noexcept { return reinterpret_cast<const uint16_t*>(gelu_.data()); }
  int multiprocessors() const noexcept { return sms_; }

  // Device scratch of at least `bytes`, grown on demand; contents unspecified. Slots: 0 matmul's
  // converted activations, 1 positions, 2 token ids, 3 row indices, 4 the attention plan.
  Result<void*> scratch(int slot, size_t bytes);
  // Copies `bytes` from host memory into scratch `slot` on the stream, through pinned staging
  // (the host memory may be reused as soon as this returns).
  Result<void*> upload(int slot, const void* host, size_t bytes);

  // cuBLASLt algorithms chosen per (type, n_out, n_in) (ops_matmul.cu).
  struct Algo {
    cublasLtMatmulAlgo_t algo;
    bool ok = false;
  };
  std::map<std::tuple<int, int64_t, int64_t>, Algo>& algos() noexcept { return algos_; }

 protected:
  Result<AlignedBuffer> allocate(size_t bytes) override;
  Result<AlignedBuffer> allocate_host(size_t bytes) override;

 private:
  CudaBackend() = default;

  int index_ = 0;
  int sms_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  AlignedBuffer workspace_, gelu_;
  std::vector<AlignedBuffer> weights_;
  static constexpr int kScratchSlots = 5;
  AlignedBuffer scratch_[kScratchSlots], staging_[kScratchSlots];
  std::map<std::tuple<int, int64_t, int64_t>, Algo> algos_;
};

// The CUDA backend behind `be` (precondition: be.device() == Device::cuda), activated.
Result<CudaBackend*> backend_of(Backend& be);

// Blocks for `n` items of `threads` each, capped at the grid's limit (kernels stride over the rest).
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

}  // namespace infer::cuda
