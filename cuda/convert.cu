// Weight rows to F32 on the device: the scalar-reference twins are core/half.hpp (F16, BF16) and
// the Q8_0 layout (an F16 scale d, then 32 int8 quants: x = d * q).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/device.hpp"

namespace infer::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void f16_to_f32_kernel(const __half* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = __half2float(src[i]);
}

__global__ void bf16_to_f32_kernel(const __nv_bfloat16* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = __bfloat162float(src[i]);
}

// One thread per element; block b of 32 elements starts at byte 34 * b.
__global__ void q8_0_to_f32_kernel(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint8_t* block = src + (i / 32) * 34;
    __half d;
    memcpy(&d, block, 2);
    dst[i] = __half2float(d) * static_cast<float>(static_cast<int8_t>(block[2 + i % 32]));
  }
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

}  // namespace

Status convert_rows_to_f32(const TensorView& src, int64_t rows, float* dst) {
  if (src.device != Device::cuda) return invalid_argument("convert_rows_to_f32: source is not on a CUDA device");
  if (rows < 0 || rows > src.rows()) return invalid_argument("convert_rows_to_f32: row count out of range");
  const int64_t n = rows * src.shape[0];
  if (n == 0) return Status::ok();
  switch (src.dtype) {
    case DType::f32:
      if (cudaMemcpy(dst, src.data, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToDevice) != cudaSuccess)
        return internal_error("cudaMemcpy failed");
      break;
    case DType::f16:
      f16_to_f32_kernel<<<grid_for(n), kThreads>>>(static_cast<const __half*>(src.data), dst, n);
      break;
    case DType::bf16:
      bf16_to_f32_kernel<<<grid_for(n), kThreads>>>(static_cast<const __nv_bfloat16*>(src.data), dst, n);
      break;
    case DType::q8_0:
      q8_0_to_f32_kernel<<<grid_for(n), kThreads>>>(static_cast<const uint8_t*>(src.data), dst, n);
      break;
    default:
      return unsupported(std::string("convert_rows_to_f32: type ") + std::string(dtype_name(src.dtype)));
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return internal_error(std::string("conversion kernel failed: ") + cudaGetErrorString(err));
  return Status::ok();
}

}  // namespace infer::cuda
