// The CUDA backend's device layer: devices, device memory, and conversion of weight rows to F32
// on the device. Built only with INFER_CUDA=ON. This header carries no CUDA types, so CPU-side
// code can include it; every call reports failure as a Status (no device, no driver, OOM).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.hpp"
#include "infer/status.hpp"

namespace infer::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  uint64_t total_memory = 0;  // bytes
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
};

// Devices visible to this process: 0 (not an error) when there is no GPU or no driver.
int device_count() noexcept;
Result<DeviceInfo> device_info(int index);

// Owned device memory on the current device. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  Status copy_from_host(std::span<const uint8_t> src, size_t offset = 0);
  Status copy_to_host(std::span<uint8_t> dst, size_t offset = 0) const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Converts `rows` rows of `src` (a device tensor of type F32, F16, BF16 or Q8_0, contiguous rows
// of src.shape[0] elements) into `dst` (device memory, rows * shape[0] floats). Synchronous.
Status convert_rows_to_f32(const TensorView& src, int64_t rows, float* dst);

}  // namespace infer::cuda
