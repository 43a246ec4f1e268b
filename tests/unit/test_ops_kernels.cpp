// The element-wise kernels of kernels/cpu/ops.hpp: each SIMD twin against its scalar reference,
// bit for bit, and the reference against float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/half.hpp"
#include "kernels/cpu/ops.hpp"

using namespace infer;

TEST_CASE("gelu_mul: the AVX2 kernel gives the scalar reference's bits on every f16 value, the cut-offs and specials",
          "[ops][gelu]") {
  std::vector<float> g;
  for (uint32_t h = 0; h < (1u << 16); ++h) g.push_back(f16_to_f32(static_cast<uint16_t>(h)));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-12.0f, 12.0f);
  for (int i = 0; i < 4096; ++i) g.push_back(wide(rng));  // between f16 values: the rounding
  for (float x : {-10.0f, std::nextafter(-10.0f, 0.0f), 10.0f, std::nextafter(10.0f, 0.0f), 65520.0f, -65520.0f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 1e-8f, -0.0f})
    g.push_back(x);
  g.push_back(std::numeric_limits<float>::quiet_NaN());
  const size_t n = g.size() + 5;  // a tail the vector loop leaves to the scalar code
  g.resize(n, 0.5f);
  std::vector<float> u(n), ref(n), got(n);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  for (auto& v : u) v = unit(rng);
  gelu_mul_ref(g.data(), u.data(), ref.data(), static_cast<int64_t>(n));
  if (detected_isa() < CpuIsa::avx2) SUCCEED("no AVX2 on this CPU: only the reference runs");
  else {
    gelu_mul_avx2(g.data(), u.data(), got.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      INFO("g " << g[i] << " u " << u[i] << " ref " << ref[i] << " got " << got[i]);
      REQUIRE(f32_bits(got[i]) == f32_bits(ref[i]));
    }
  }
  // The reference is GELU's tanh form of the f16-rounded input, within the rounding of its f16
  // table entry.
  for (size_t i = 0; i < n; ++i) {
    const double x = g[i];
    if (!std::isfinite(x) || std::fabs(x) >= 10.0) continue;
    const double x16 = f16_to_f32(f32_to_f16(g[i]));
    const double want = 0.5 * x16 * (1.0 + std::tanh(0.7978845608028654 * x16 * (1.0 + 0.044715 * x16 * x16))) * u[i];
    INFO("g " << g[i]);
    // One f16 ulp of the entry (relative 2^-10, or below f16's normal range absolute 2^-24),
    // plus the float formula's own error where 1 + tanh cancels (x < -3: up to 2^-24 / (1 + tanh)).
    const double cancel = 1.0 + std::tanh(0.7978845608028654 * x16 * (1.0 + 0.044715 * x16 * x16));
    const double rel = 1e-3 + (cancel > 0 ? 6e-8 / cancel : 0.0);
    REQUIRE(std::fabs(ref[i] - want) <= std::fabs(want) * rel + 6.0e-8 * std::fabs(u[i]) + 1e-30);
  }
}
