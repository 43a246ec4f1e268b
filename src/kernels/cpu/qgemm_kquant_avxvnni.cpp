// The AVX2 tiles of the K-quants (qgemm_kquant_avx2_impl.hpp), compiled with AVX-VNNI as well
// (avx2_vnni.hpp): the kernels named *_avxvnni.
#define INFER_AVX2_VNNI 1
#include "kernels/cpu/qgemm_kquant_avx2_impl.hpp"
