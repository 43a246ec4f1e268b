// The orthonormal Walsh-Hadamard transform of a rotated KV cache (core/kv_view.hpp) and of the
// online input rotation of linear layers (ops::hadamard; in double, the quantizer's second moments).
//
// H_n (n a power of two) is Sylvester's matrix scaled by 1/sqrt(n): H_n[i][j] = (-1)^popcount(i & j)
// / sqrt(n). It is symmetric and orthogonal, so H_n H_n = I and (H q) . (H k) = q . k. It is
// applied here as log2(n) stages of butterflies (a, b) -> (a + b, a - b), then one product by
// the float nearest 1/sqrt(n) (exact for n = 4^m): every element's operations are fixed, so each
// ISA's build of this header computes the same bits.
#pragma once

#include <cmath>
#include <cstdint>

namespace infer {

// x[b*n .. b*n + n) <- H_n x[b*n .. b*n + n) for each block b of the `len` elements (len a
// multiple of n; n a power of two). T: float or double.
template <class T>
inline void hadamard_blocks(T* x, int64_t len, int n) noexcept {
  const T scale = T(1) / std::sqrt(static_cast<T>(n));
  for (int64_t b = 0; b < len; b += n) {
    T* y = x + b;
    for (int s = 1; s < n; s *= 2)
      for (int i = 0; i < n; i += 2 * s)
        for (int j = i; j < i + s; ++j) {
          const T a = y[j], c = y[j + s];
          y[j] = a + c;
          y[j + s] = a - c;
        }
    for (int i = 0; i < n; ++i) y[i] *= scale;
  }
}

}  // namespace infer
