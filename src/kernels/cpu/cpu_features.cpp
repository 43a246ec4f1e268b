#include "kernels/cpu/cpu_features.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace infer {
namespace {

CpuIsa detect() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return CpuIsa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return CpuIsa::avx2;
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
