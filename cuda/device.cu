#include <cuda_runtime.h>

#include <utility>

#include "cuda/device.hpp"

namespace infer::cuda {
namespace {

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::out_of_memory : StatusCode::internal;
  return Status(code, std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

Result<DeviceInfo> device_info(int index) {
  if (index < 0 || index >= device_count()) return invalid_argument("no CUDA device " + std::to_string(index));
  cudaDeviceProp prop{};
  if (Status s = cuda_status(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties"); !s.is_ok()) return s;
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.total_memory = prop.totalGlobalMem;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  return info;
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return Result<DeviceBuffer>(std::move(b));
  if (device_count() == 0) return unsupported("no CUDA device");
  if (Status s = cuda_status(cudaMalloc(&b.data_, bytes), "cudaMalloc"); !s.is_ok()) return s;
  b.size_ = bytes;
  return Result<DeviceBuffer>(std::move(b));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

Status DeviceBuffer::copy_from_host(std::span<const uint8_t> src, size_t offset) {
  if (offset > size_ || src.size() > size_ - offset) return out_of_range("copy past the end of a device buffer");
  return cuda_status(cudaMemcpy(static_cast<uint8_t*>(data_) + offset, src.data(), src.size(), cudaMemcpyHostToDevice),
                     "cudaMemcpy to device");
}

Status DeviceBuffer::copy_to_host(std::span<uint8_t> dst, size_t offset) const {
  if (offset > size_ || dst.size() > size_ - offset) return out_of_range("copy past the end of a device buffer");
  return cuda_status(
      cudaMemcpy(dst.data(), static_cast<const uint8_t*>(data_) + offset, dst.size(), cudaMemcpyDeviceToHost),
      "cudaMemcpy to host");
}

}  // namespace infer::cuda
