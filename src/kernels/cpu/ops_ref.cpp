// The element-wise kernels for the baseline ISA (core/isa_variants.hpp).
#define INFER_ISA_NS isa_ref
#include "kernels/cpu/ops_impl.hpp"
