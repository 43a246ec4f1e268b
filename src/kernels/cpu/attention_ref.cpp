// The attention kernels for the baseline ISA (the scalar reference) (core/isa_variants.hpp).
#define INFER_ISA_NS isa_ref
#include "kernels/cpu/attention_impl.hpp"
