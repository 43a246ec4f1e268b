// The INT8 per-token activation quantizer for AVX2 (core/isa_variants.hpp).
#define INFER_ISA_NS isa_avx2
#include "quant/int8_rows_impl.hpp"
