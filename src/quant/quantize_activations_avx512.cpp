// The activation converters for AVX512 (core/isa_variants.hpp).
#define INFER_ISA_NS isa_avx512
#include "quant/quantize_activations_impl.hpp"
