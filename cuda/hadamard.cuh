// The orthonormal Walsh-Hadamard transform on the device (kernels/cpu/hadamard.hpp's butterflies,
// stage by stage, the same bits): the rotated KV cache (ops_attention.cu) and the online input
// rotation of linear layers (ops_elementwise.cu).
#pragma once

namespace infer::cuda {

// x[0, len) <- H_n x per block of n in shared memory, by the block's threads together: the
// butterflies of kernels/cpu/hadamard.hpp, stage by stage, then the product by `scale`. Every
// thread of the block calls it (it synchronizes), after x is written.
__device__ inline void hadamard_shared(float* x, int len, int n, float scale) {
  __syncthreads();
  for (int s = 1; s < n; s *= 2) {
    for (int e = threadIdx.x; e < len / 2; e += blockDim.x) {
      const int i = e / s * 2 * s + e % s;
      const float a = x[i], b = x[i + s];
      x[i] = a + b;
      x[i + s] = a - b;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < len; i += blockDim.x) x[i] *= scale;
  __syncthreads();
}

}  // namespace infer::cuda
