#include "core/cpu_features.hpp"

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <cstring>

#include "core/log.hpp"

namespace infer {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Reads CPUID and XGETBV directly: GCC and clang disagree on which names __builtin_cpu_supports
// accepts ("f16c" is unknown to clang 14), and the OS must also have enabled the register state.
bool os_saves(uint64_t mask) noexcept {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((static_cast<uint64_t>(hi) << 32 | lo) & mask) == mask;
}
#endif

struct Detected {
  CpuIsa best = CpuIsa::scalar;
  bool avx_vnni = false;  // AVX-VNNI, with the AVX2 level
};

Detected detect() noexcept {
  Detected r;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return r;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave || !os_saves(0x6)) return r;  // SSE + AVX state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return r;
  const bool avx2 = b & (1u << 5);
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31)) &&  // F DQ BW VL
                      (c & (1u << 11));                                                                // VNNI
  unsigned a1 = 0, b1, c1, d1;
  const bool avx_vnni = a >= 1 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 4));  // leaf 7.1 EAX
  if (!(avx2 && fma && f16c)) return r;
  r.avx_vnni = avx_vnni;
  r.best = avx512 && os_saves(0xe6) ? CpuIsa::avx512 : avx_vnni ? CpuIsa::avxvnni : CpuIsa::avx2;  // + opmask, ZMM
#if INFER_EMULATED_ISA
  // infer-emulated-isa-tests: its AVX-512 and AVX-VNNI kernels are compiled for AVX2, their
  // intrinsics emulated (INFER_EMULATED_ISA_TESTS, src/CMakeLists.txt).
  r.avx_vnni = true;
  r.best = CpuIsa::avx512;
#endif
#endif
  return r;
}

const Detected& detected() noexcept {
  static const Detected d = detect();
  return d;
}

// isa, lowered to the best level at or below it that this CPU runs.
CpuIsa supported_at_most(CpuIsa isa) noexcept {
  const Detected& d = detected();
  if (static_cast<int>(isa) > static_cast<int>(d.best)) isa = d.best;
  if (isa == CpuIsa::avxvnni && !d.avx_vnni) isa = CpuIsa::avx2;
  return isa;
}

// INFER_CPU_ISA applied to the detected level, with a warning where it names no level or one the
// CPU does not run.
CpuIsa from_environment() noexcept {
  const char* v = std::getenv("INFER_CPU_ISA");
  const CpuIsa best = detected().best;
  if (!v || !*v) return best;
  for (CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avxvnni, CpuIsa::avx512}) {
    if (std::strcmp(v, isa_name(isa)) != 0) continue;
    const CpuIsa runs = supported_at_most(isa);
    if (runs != isa) INFER_LOG_WARN("INFER_CPU_ISA=%s: this CPU does not run it; the kernels run %s", v, isa_name(runs));
    return runs;
  }
  INFER_LOG_WARN("INFER_CPU_ISA=%s is not scalar, avx2, avxvnni or avx512; the kernels run %s", v, isa_name(best));
  return best;
}

std::atomic<int> g_active{-1};

}  // namespace

CpuIsa detected_isa() noexcept { return detected().best; }

bool isa_supported(CpuIsa isa) noexcept { return supported_at_most(isa) == isa; }

CpuIsa active_isa() noexcept {
  int v = g_active.load(std::memory_order_relaxed);
  if (v < 0) {
    static const CpuIsa from_env = from_environment();  // read (and warned about) once
    v = static_cast<int>(from_env);
    g_active.store(v, std::memory_order_relaxed);
  }
  return static_cast<CpuIsa>(v);
}

void set_active_isa(CpuIsa isa) noexcept { g_active.store(static_cast<int>(supported_at_most(isa))); }

const char* isa_name(CpuIsa isa) noexcept {
  switch (isa) {
    case CpuIsa::scalar: return "scalar";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avxvnni: return "avxvnni";
    case CpuIsa::avx512: return "avx512";
  }
  return "?";
}

}  // namespace infer
