// The AVX2 tiles of Q4_0, Q8_0, Q5_0, Q4_1 and Q5_1 (qgemm_avx2_impl.hpp), compiled for AVX2 + FMA
// + F16C: the kernels named *_avx2.
#define INFER_AVX2_VNNI 0
#include "kernels/cpu/qgemm_avx2_impl.hpp"
