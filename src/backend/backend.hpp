// Where ops run. A Backend provides what a forward step needs besides the weights: the
// activation buffers (grown on demand, then reused, so steady-state steps allocate nothing), the
// memory of the KV cache (allocate_kv: the engine's KV pool lives where the kernels read it) and
// the compute resources (the CPU backend: a thread pool; a CUDA backend: its stream). At load it
// prepares each weight matrix for its kernels (prepare_weight: the hook where a backend repacks a
// layout or uploads to device memory).
//
// The ops (src/ops/) take a Backend and device-tagged tensor views; each op dispatches on
// device() to its implementation (op_cpu.cpp beside it, op_cuda.cu in cuda/). Model code calls
// ops, never kernels, so a second backend needs no change above the ops.
//
// Not thread-safe: one forward step at a time (the engine's worker owns it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/tensor.hpp"
#include "core/weight_arena.hpp"
#include "infer/status.hpp"

namespace infer {

class ThreadPool;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const noexcept = 0;
  // "cpu", "cuda:0".
  virtual std::string name() const = 0;

  // What becomes of a weight's memory once the backend holds its own copy of it.
  enum class WeightSource {
    released,  // freed or paged out by the caller (a mapped file's pages, a matrix converted at
               // load): a copy costs no memory, so a backend may copy only to place it better
    kept,      // stays resident (a file read into memory): copy only where the layout changes
  };

  // The weight `w` in the form this backend's kernels read, for the model to keep (valid while
  // the backend lives). When the result's data differs from w's, the backend keeps its own copy
  // and never reads w again (the caller may release it).
  virtual Result<TensorView> prepare_weight(const TensorView& w, WeightSource source) = 0;

  // A [cols, rows] F32 activation tensor in this backend's memory. `slot` names a buffer of the
  // caller's (0 .. kMaxSlots-1): the same slot is the same memory, grown when a step needs more
  // and otherwise reused; its contents are unspecified. Different slots never overlap.
  static constexpr int kMaxSlots = 32;
  Result<TensorView> activation(int slot, int64_t cols, int64_t rows);

  // Zero-filled memory for the KV cache's pools (`bytes` bytes, 64-byte aligned) in this
  // backend's memory; the KV cache (kv/kv_cache.hpp) takes it through a KvAllocator.
  virtual Result<AlignedBuffer> allocate_kv(size_t bytes) = 0;

  // Host memory for at least `floats` floats that a forward step's logits go into: the backend's
  // kernels write it (CUDA: pinned memory mapped into the device), the host reads it after
  // synchronize(). Grown on demand, then reused; the pointer stays valid until the next call.
  Result<float*> host_output(size_t floats);
  // Waits until the work queued so far is done (CPU: it already is).
  virtual Status synchronize() { return Status::ok(); }
  // Sees the input of each weight matrix multiplication of a forward step, before the product:
  // the weight's tensor name in the model file and x [cols, rows] (F32, in this backend's memory,
  // rows possibly strided). The model calls it, since it knows the names (importance matrices,
  // src/quant/imatrix.hpp); unset, it costs one test per matmul. Called on the stepping thread.
  using MatmulObserver = std::function<void(std::string_view weight, const TensorView& x)>;
  void set_matmul_observer(MatmulObserver observer) { matmul_observer_ = std::move(observer); }
  const MatmulObserver& matmul_observer() const noexcept { return matmul_observer_; }

 protected:
  // Device memory for activation(): `bytes` bytes, 64-byte aligned, owned by the buffer.
  virtual Result<AlignedBuffer> allocate(size_t bytes) = 0;
  // Host memory for host_output() (the CPU's: ordinary memory).
  virtual Result<AlignedBuffer> allocate_host(size_t bytes) { return AlignedBuffer::allocate(bytes); }

 private:
  std::vector<AlignedBuffer> slots_;
  AlignedBuffer output_;
  MatmulObserver matmul_observer_;
};

// The CPU backend: host memory and a thread pool (borrowed; the pool outlives the backend).
// prepare_weight() repacks the matrices of the types with a load-packing kernel for the ISA
// (kernels/cpu/dtype_traits.hpp: every GGUF type but F32, on AVX-512 CPUs and, into the same
// layouts, on AVX2 CPUs) into that kernel's interleaved layout, which takes as many
// bytes as the file's rows (2.3-3.6% more for Q3_K, Q4_K, Q5_K), and copies every
// other matrix whose source is released; both go to a WeightArena on huge pages, where a decode
// step streams them faster than from the file's 4 KiB pages. Vectors, and matrices whose source
// is kept, are read in place. INFER_REPACK=0 in the environment reads every weight in place (for
// comparisons; the results are the same bits).
class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool& pool);

  Device device() const noexcept override { return Device::cpu; }
  std::string name() const override { return "cpu"; }
  Result<TensorView> prepare_weight(const TensorView& w, WeightSource source) override;
  Result<AlignedBuffer> allocate_kv(size_t bytes) override { return AlignedBuffer::zeros(bytes); }
  ThreadPool& pool() noexcept { return pool_; }

 protected:
  Result<AlignedBuffer> allocate(size_t bytes) override { return AlignedBuffer::allocate(bytes); }

 private:
  ThreadPool& pool_;
  bool repack_;
  WeightArena weights_;  // the repacked and copied weights
};

// The pool of a CPU backend (precondition: be.device() == Device::cpu).
ThreadPool& cpu_pool(Backend& be) noexcept;

// The CUDA backend (cuda/, INFER_CUDA=ON builds): CUDA devices visible (0 in a build without
// CUDA), and a backend on device `index` (unsupported when this build has no CUDA or the machine
// no such device; the message says which).
int cuda_devices() noexcept;
Result<std::unique_ptr<Backend>> make_cuda_backend(int index);

}  // namespace infer
