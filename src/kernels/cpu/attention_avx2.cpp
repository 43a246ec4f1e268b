// The attention kernels for AVX2 (core/isa_variants.hpp).
#define INFER_ISA_NS isa_avx2
#include "kernels/cpu/attention_impl.hpp"
