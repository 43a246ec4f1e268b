// The activation converters for the baseline ISA (core/isa_variants.hpp).
#define INFER_ISA_NS isa_ref
#include "quant/quantize_activations_impl.hpp"
