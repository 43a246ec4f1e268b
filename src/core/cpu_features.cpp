#include "core/cpu_features.hpp"

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <cstring>

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

CpuIsa detect() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return CpuIsa::scalar;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave || !os_saves(0x6)) return CpuIsa::scalar;  // SSE + AVX state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return CpuIsa::scalar;
  const bool avx2 = b & (1u << 5);
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31)) &&  // F DQ BW VL
                      (c & (1u << 11));                                                                // VNNI
  if (avx512 && fma && f16c && os_saves(0xe6)) return CpuIsa::avx512;  // + opmask and ZMM state
  if (avx2 && fma && f16c) return CpuIsa::avx2;
#endif
  return CpuIsa::scalar;
}

CpuIsa lower(CpuIsa a, CpuIsa b) { return static_cast<int>(a) < static_cast<int>(b) ? a : b; }

CpuIsa from_environment(CpuIsa detected) noexcept {
  const char* v = std::getenv("INFER_CPU_ISA");
  if (!v || !*v) return detected;
  if (!std::strcmp(v, "scalar")) return CpuIsa::scalar;
  if (!std::strcmp(v, "avx2")) return lower(CpuIsa::avx2, detected);
  if (!std::strcmp(v, "avx512")) return lower(CpuIsa::avx512, detected);
  return detected;
}

std::atomic<int> g_active{-1};

}  // namespace

CpuIsa detected_isa() noexcept {
  static const CpuIsa isa = detect();
  return isa;
}

CpuIsa active_isa() noexcept {
  int v = g_active.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(from_environment(detected_isa()));
    g_active.store(v, std::memory_order_relaxed);
  }
  return static_cast<CpuIsa>(v);
}

void set_active_isa(CpuIsa isa) noexcept { g_active.store(static_cast<int>(lower(isa, detected_isa()))); }

const char* isa_name(CpuIsa isa) noexcept {
  switch (isa) {
    case CpuIsa::scalar: return "scalar";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
  }
  return "?";
}

}  // namespace infer
