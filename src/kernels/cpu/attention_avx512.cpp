// The attention kernels for AVX512 (core/isa_variants.hpp).
#define INFER_ISA_NS isa_avx512
#include "kernels/cpu/attention_impl.hpp"
