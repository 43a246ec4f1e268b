// Which CPU kernel variant runs: detected once, overridable with INFER_CPU_ISA=scalar|avx2|avx512
// (a request above what the CPU supports is lowered to what it does support).
#pragma once

namespace infer {

enum class CpuIsa : int { scalar = 0, avx2 = 1, avx512 = 2 };

// The best ISA this CPU supports (avx2 means AVX2 + FMA + F16C; avx512 means F, BW, VL, DQ, VNNI).
CpuIsa detected_isa() noexcept;
// The ISA kernels dispatch on: detected_isa() lowered by INFER_CPU_ISA; computed once.
CpuIsa active_isa() noexcept;
// Test hook: makes active_isa() return min(isa, detected_isa()) from now on.
void set_active_isa(CpuIsa isa) noexcept;
const char* isa_name(CpuIsa isa) noexcept;

}  // namespace infer
