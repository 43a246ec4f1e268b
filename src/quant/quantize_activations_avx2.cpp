// The activation converters for AVX2 (core/isa_variants.hpp).
#define INFER_ISA_NS isa_avx2
#include "quant/quantize_activations_impl.hpp"
