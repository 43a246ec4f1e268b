// The element-wise kernels for AVX-512 (core/isa_variants.hpp).
// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*(), which its
// -Wuninitialized flags at every inlined use; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define INFER_ISA_NS isa_avx512
#include "kernels/cpu/ops_impl.hpp"
