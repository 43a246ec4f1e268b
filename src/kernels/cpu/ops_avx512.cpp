// The element-wise kernels for AVX-512 (core/isa_variants.hpp).
#define INFER_ISA_NS isa_avx512
#include "kernels/cpu/ops_impl.hpp"
