// Weight blocks decoded on the device, element by element, as the CPU's scalar dequantizers
// (kernels/cpu/dtype_traits.cpp, quant/) read them: GGUF's F32, F16, BF16, Q4_0, Q8_0, Q4_K and
// Q6_K layouts. elem(block, j) is element j of the block, in float, computed as the reference
// computes it (the products in the reference's order, so the values are bit-identical). Host and
// device functions: tests/cuda/test_cuda_host.cpp checks them on the CPU, without a GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace infer::cuda {

__host__ __device__ __forceinline__ float half_at(const uint8_t* p) {
  __half h;
  memcpy(&h, p, 2);
  return __half2float(h);
}

struct BlockF32 {
  static constexpr int kElems = 1, kBytes = 4;
  __host__ __device__ static float elem(const uint8_t* b, int) { float f; memcpy(&f, b, 4); return f; }
};
struct BlockF16 {
  static constexpr int kElems = 1, kBytes = 2;
  __host__ __device__ static float elem(const uint8_t* b, int) { return half_at(b); }
};
struct BlockBF16 {
  static constexpr int kElems = 1, kBytes = 2;
  __host__ __device__ static float elem(const uint8_t* b, int) {
    const uint32_t bits = static_cast<uint32_t>(b[0] | (b[1] << 8)) << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
};
// Q8_0: F16 d, 32 int8: x = d * q.
struct BlockQ8_0 {
  static constexpr int kElems = 32, kBytes = 34;
  __host__ __device__ static float elem(const uint8_t* b, int j) { return half_at(b) * static_cast<float>(static_cast<int8_t>(b[2 + j])); }
};
// The Q8_0 quantizer of the KV cache, as the CPU's quantize_activations_q8_0: amax over the 32
// values, q = round-half-even(x * (127 / amax)), d = f16(amax / 127).
__host__ __device__ inline void quantize_q8_0(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(rintf(x[j] * id))));
  const __half d = __float2half_rn(amax / 127.0f);
  memcpy(block, &d, 2);
}

// Q4_0: F16 d, 16 bytes of nibbles (low nibbles: elements 0-15, high: 16-31): x = d * (q - 8).
struct BlockQ4_0 {
  static constexpr int kElems = 32, kBytes = 18;
  __host__ __device__ static float elem(const uint8_t* b, int j) {
    const uint8_t q = b[2 + (j & 15)];
    const int v = (j < 16 ? (q & 0x0F) : (q >> 4)) - 8;
    return static_cast<float>(v) * half_at(b);
  }
};
// Q4_K: F16 d, F16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles; 256 elements
// in 4 groups of 64 (32 low nibbles with scale 2g, 32 high ones with scale 2g+1):
// x = d * sc * q - dmin * m.
struct BlockQ4_K {
  static constexpr int kElems = 256, kBytes = 144;
  __host__ __device__ static void scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
      sc = q[j] & 63;
      m = q[j + 4] & 63;
    } else {
      sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
      m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
  }
  __host__ __device__ static float elem(const uint8_t* b, int j) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const int g = j / 64, l = j % 64;
    const int is = 2 * g + (l >= 32 ? 1 : 0);
    uint8_t sc, m;
    scale_min(is, b + 4, sc, m);
    const uint8_t q = b[16 + 32 * g + (l & 31)];
    const int v = l < 32 ? (q & 0xF) : (q >> 4);
    return d * static_cast<float>(sc) * static_cast<float>(v) - dmin * static_cast<float>(m);
  }
};
// Q6_K: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales, F16 d; 256 elements in
// two halves of 128: x = d * scale * (q - 32).
struct BlockQ6_K {
  static constexpr int kElems = 256, kBytes = 210;
  __host__ __device__ static float elem(const uint8_t* b, int j) {
    const int half = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
    const uint8_t* ql = b + 64 * half;
    const uint8_t* qh = b + 128 + 32 * half;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * half;
    const float d = half_at(b + 208);
    const uint8_t lo = quarter & 1 ? ql[l + 32] : ql[l];
    const int low = quarter < 2 ? (lo & 0xF) : (lo >> 4);
    const int high = (qh[l] >> (2 * quarter)) & 3;
    const int q = (low | (high << 4)) - 32;
    const int is = l / 16 + 2 * quarter;
    return d * static_cast<float>(sc[is]) * static_cast<float>(q);
  }
};

}  // namespace infer::cuda
