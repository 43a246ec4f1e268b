// The AVX2 tiles of the K-quants (qgemm_kquant_avx2_impl.hpp), compiled for AVX2 + FMA + F16C: the
// kernels named *_avx2.
#define INFER_AVX2_VNNI 0
#include "kernels/cpu/qgemm_kquant_avx2_impl.hpp"
