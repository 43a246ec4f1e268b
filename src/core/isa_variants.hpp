// Kernel code compiled once per ISA. A kernel file X_impl.hpp holds its code in namespace
// infer::INFER_ISA_NS; X_ref.cpp, X_avx2.cpp and X_avx512.cpp each define INFER_ISA_NS (isa_ref,
// isa_avx2, isa_avx512) and include it, and the build compiles them with that ISA's flags only
// (src/CMakeLists.txt: files named *_avx2.cpp / *_avx512.cpp), the rest of the library with the
// baseline's. X.cpp calls the variant for active_isa() (core/cpu_features.hpp), so one portable
// binary runs vectorized, FMA-inlined code on the CPUs that have it, and INFER_CPU_ISA can force
// any variant. The build never fuses a*b+c on its own (-ffp-contract=off) and the code calls
// std::fma where it fuses, so every variant computes the same bits: only the speed differs
// (tests run each variant against the reference).
#pragma once

#include "core/cpu_features.hpp"

// Calls ns::fn(args...) for the variant of the active ISA (avxvnni runs the AVX2 one).
#define INFER_ISA_DISPATCH(fn, ...)                                    \
  do {                                                                 \
    switch (::infer::active_isa()) {                                   \
      case ::infer::CpuIsa::avx512: return isa_avx512::fn(__VA_ARGS__); \
      case ::infer::CpuIsa::avxvnni:                                    \
      case ::infer::CpuIsa::avx2: return isa_avx2::fn(__VA_ARGS__);     \
      default: return isa_ref::fn(__VA_ARGS__);                         \
    }                                                                  \
  } while (0)
