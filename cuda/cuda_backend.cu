#include "cuda/cuda_backend.cuh"

#include <cstring>
#include <utility>

#include "core/status_macros.hpp"
#include "cuda/device.hpp"
#include "kernels/cpu/ops.hpp"

namespace infer {

int cuda_devices() noexcept { return cuda::device_count(); }

Result<std::unique_ptr<Backend>> make_cuda_backend(int index) {
  auto be = cuda::CudaBackend::create(index);
  if (!be.ok()) return be.status();
  return std::unique_ptr<Backend>(std::move(be).value());
}

}  // namespace infer

namespace infer::cuda {
namespace {

void free_device(void* p) noexcept { cudaFree(p); }
void free_pinned(void* p) noexcept { cudaFreeHost(p); }

Result<AlignedBuffer> device_alloc(size_t bytes) {
  void* p = nullptr;
  if (Status s = check(cudaMalloc(&p, bytes), "cudaMalloc"); !s.is_ok())
    return s.with_context("allocating " + std::to_string(bytes) + " bytes of device memory");
  return AlignedBuffer::adopt(p, bytes, free_device);
}

// The bytes of w's rows when they lie one after another (a weight of the file, a vector).
bool contiguous_rows(const TensorView& w) {
  return w.stride[2] == w.stride[1] * static_cast<uint64_t>(w.shape[1]) && w.layout == Layout::rows;
}

}  // namespace

Status check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  (void)cudaGetLastError();
  const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::out_of_memory : StatusCode::internal;
  return Status(code, std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

Status check_launch(const char* kernel) { return check(cudaGetLastError(), kernel); }

Status check_lt(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  const StatusCode code = st == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::out_of_memory
                          : st == CUBLAS_STATUS_NOT_SUPPORTED ? StatusCode::unsupported
                                                              : StatusCode::internal;
  return Status(code, std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(st)));
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int index) {
  const int n = device_count();
  if (index < 0 || index >= n)
    return unsupported("no CUDA device " + std::to_string(index) + " (" + std::to_string(n) + " visible to this process)");
  std::unique_ptr<CudaBackend> be(new CudaBackend());
  be->index_ = index;
  INFER_RETURN_IF_ERROR(be->activate());
  cudaDeviceProp prop{};
  INFER_RETURN_IF_ERROR(check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties"));
  be->sms_ = prop.multiProcessorCount;
  if (!prop.unifiedAddressing || !prop.canMapHostMemory)
    return unsupported("CUDA device " + std::to_string(index) + " (" + prop.name + ") lacks unified addressing or mapped host memory");
  INFER_RETURN_IF_ERROR(check(cudaStreamCreateWithFlags(&be->stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  INFER_RETURN_IF_ERROR(check_lt(cublasLtCreate(&be->lt_), "cublasLtCreate"));
  INFER_ASSIGN_OR_RETURN(be->workspace_, device_alloc(32u << 20));
  // GeGLU reads ggml's F16 table of GELU values, as the CPU does (kernels/cpu/ops.hpp).
  const size_t table_bytes = ((1u << 16) + 1) * sizeof(uint16_t);
  INFER_ASSIGN_OR_RETURN(be->gelu_, device_alloc(table_bytes));
  // The stream does not synchronize with the legacy default stream: copies go on it, then wait.
  INFER_RETURN_IF_ERROR(check(cudaMemcpyAsync(be->gelu_.data(), gelu_f16_table(), table_bytes, cudaMemcpyHostToDevice, be->stream_),
                              "uploading the GELU table"));
  INFER_RETURN_IF_ERROR(check(cudaStreamSynchronize(be->stream_), "uploading the GELU table"));
  return Result<std::unique_ptr<CudaBackend>>(std::move(be));
}

CudaBackend::~CudaBackend() {
  if (activate().is_ok() && stream_) cudaStreamSynchronize(stream_);
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) cudaStreamDestroy(stream_);
}

Status CudaBackend::activate() const { return check(cudaSetDevice(index_), "cudaSetDevice"); }

Status CudaBackend::synchronize() {
  INFER_RETURN_IF_ERROR(activate());
  return check(cudaStreamSynchronize(stream_), "the forward step on the GPU");
}

Result<AlignedBuffer> CudaBackend::allocate(size_t bytes) {
  INFER_RETURN_IF_ERROR(activate());
  // A slot about to be replaced may still be read by queued work.
  INFER_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  return device_alloc(bytes);
}

Result<AlignedBuffer> CudaBackend::allocate_kv(size_t bytes) {
  INFER_RETURN_IF_ERROR(activate());
  INFER_ASSIGN_OR_RETURN(AlignedBuffer b, device_alloc(bytes));
  INFER_RETURN_IF_ERROR(check(cudaMemsetAsync(b.data(), 0, bytes, stream_), "zeroing the KV pool"));
  INFER_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream_), "zeroing the KV pool"));
  return Result<AlignedBuffer>(std::move(b));
}

Result<AlignedBuffer> CudaBackend::allocate_host(size_t bytes) {
  INFER_RETURN_IF_ERROR(activate());
  INFER_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  void* p = nullptr;
  // Mapped: with unified addressing the kernels write the host pointer itself.
  if (Status s = check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped), "cudaHostAlloc"); !s.is_ok()) return s;
  return AlignedBuffer::adopt(p, bytes, free_pinned);
}

Result<TensorView> CudaBackend::prepare_weight(const TensorView& w, WeightSource) {
  switch (w.dtype) {
    case DType::f32: case DType::f16: case DType::bf16:
    case DType::q4_0: case DType::q8_0: case DType::q4_k: case DType::q6_k: break;
    default:
      return unsupported(std::string("the CUDA backend has no kernel for weight type ") + std::string(dtype_name(w.dtype)));
  }
  if (w.device != Device::cpu || !contiguous_rows(w) || w.shape[2] != 1 || w.shape[3] != 1)
    return invalid_argument("prepare_weight: a " + shape_string(w) + " weight that is not contiguous host rows");
  INFER_RETURN_IF_ERROR(activate());
  const size_t bytes = static_cast<size_t>(w.nbytes());
  INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, device_alloc(bytes ? bytes : 1));
  // From pageable memory cudaMemcpy may return before the data lands: copy on the stream, wait.
  INFER_RETURN_IF_ERROR(check(cudaMemcpyAsync(buf.data(), w.data, bytes, cudaMemcpyHostToDevice, stream_), "uploading a weight"));
  INFER_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream_), "uploading a weight"));
  TensorView d = w;
  d.data = buf.data();
  d.device = Device::cuda;
  weights_.push_back(std::move(buf));
  return d;
}

Result<void*> CudaBackend::scratch(int slot, size_t bytes) {
  AlignedBuffer& b = scratch_[slot];
  if (b.size() < bytes || b.empty()) {
    INFER_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    INFER_ASSIGN_OR_RETURN(b, device_alloc(std::max<size_t>(bytes, 256)));
  }
  return static_cast<void*>(b.data());
}

Result<void*> CudaBackend::upload(int slot, const void* host, size_t bytes) {
  INFER_ASSIGN_OR_RETURN(void* dst, scratch(slot, bytes));
  AlignedBuffer& st = staging_[slot];
  // The staging buffer is reused by the next upload: the copy queued from it must be done.
  INFER_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  if (st.size() < bytes || st.empty()) {
    void* p = nullptr;
    INFER_RETURN_IF_ERROR(check(cudaHostAlloc(&p, std::max<size_t>(bytes, 256), cudaHostAllocDefault), "cudaHostAlloc"));
    st = AlignedBuffer::adopt(p, std::max<size_t>(bytes, 256), free_pinned);
  }
  std::memcpy(st.data(), host, bytes);
  INFER_RETURN_IF_ERROR(check(cudaMemcpyAsync(dst, st.data(), bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync"));
  return dst;
}

Result<CudaBackend*> backend_of(Backend& be) {
  auto* c = static_cast<CudaBackend*>(&be);
  INFER_RETURN_IF_ERROR(c->activate());
  return c;
}

}  // namespace infer::cuda
