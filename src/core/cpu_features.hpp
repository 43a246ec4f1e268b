// Which CPU kernel variant runs: detected once, overridable with
// INFER_CPU_ISA=scalar|avx2|avxvnni|avx512 (a request above what the CPU supports is lowered to
// what it does support).
#pragma once

namespace infer {

// Ordered: each level runs every kernel of the levels below it. avx2 means AVX2 + FMA + F16C;
// avxvnni adds AVX-VNNI (vpdpbusd and vpdpwssd on ymm, VEX-encoded: Alder Lake and later client
// CPUs, the E-core and Sapphire Rapids Xeons, Zen 5); avx512 means AVX-512 F, BW, VL, DQ and VNNI,
// whose kernels never need AVX-VNNI (some CPUs have AVX-512 VNNI but not AVX-VNNI: Ice Lake,
// Zen 4), so avxvnni kernels run only where active_isa() is exactly avxvnni.
enum class CpuIsa : int { scalar = 0, avx2 = 1, avxvnni = 2, avx512 = 3 };

// The best ISA this CPU supports.
CpuIsa detected_isa() noexcept;
// Whether this CPU runs isa's kernels (avxvnni may be missing below a detected avx512).
bool isa_supported(CpuIsa isa) noexcept;
// The ISA kernels dispatch on: detected_isa() lowered by INFER_CPU_ISA; computed once.
CpuIsa active_isa() noexcept;
// Test hook: makes active_isa() return isa from now on, lowered to what the CPU supports.
void set_active_isa(CpuIsa isa) noexcept;
const char* isa_name(CpuIsa isa) noexcept;

}  // namespace infer
