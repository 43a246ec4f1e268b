// F16/BF16 conversions against independent references: the compiler's _Float16 arithmetic type
// for F16, and float64 rounding done by hand for BF16.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "core/half.hpp"

using namespace infer;

TEST_CASE("F16 -> F32 is exact for all 65536 half values", "[core][half]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&ref, &bits, 2);
    const float expect = static_cast<float>(ref);
    const float got = f16_to_f32(bits);
    if (std::isnan(expect)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(f32_bits(got) == f32_bits(expect));
    }
  }
}

TEST_CASE("F32 -> F16 rounds to nearest even like the compiler's _Float16", "[core][half]") {
  std::mt19937 rng(42);
  auto check = [](float f) {
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    const uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      REQUIRE((got & 0x7c00) == 0x7c00);
      REQUIRE((got & 0x3ff) != 0);
    } else {
      INFO("f = " << f << " bits " << f32_bits(f));
      REQUIRE(got == ref_bits);
    }
  };
  // Every float whose upper 20 bits vary (all exponents, both signs, rounding boundaries).
  for (uint32_t hi = 0; hi < (1u << 20); ++hi) {
    const uint32_t low = rng() & 0xfff;
    check(f32_from_bits(hi << 12));
    check(f32_from_bits((hi << 12) | low));
    check(f32_from_bits((hi << 12) | 0x1000 >> 1));
  }
}

TEST_CASE("BF16 conversions round to nearest even and keep NaN", "[core][half]") {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    const float f = f32_from_bits(u);
    const uint16_t b = f32_to_bf16(f);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(bf16_to_f32(b)));
      continue;
    }
    // Reference: the two bf16 neighbours of f, chosen by float64 distance, ties to even.
    const uint32_t lo_bits = u & 0xffff0000u;
    const double lo = bf16_to_f32(static_cast<uint16_t>(lo_bits >> 16));
    // The next bf16 away from zero, in float64 so that the step past the largest finite value
    // (which rounds to infinity) is measured correctly.
    const int e = static_cast<int>((lo_bits >> 23) & 0xff);
    const double ulp = std::ldexp(1.0, (e == 0 ? 1 : e) - 127 - 7);
    const double x = f;
    const double hi = lo + std::copysign(ulp, x);
    const double dlo = std::fabs(x - lo), dhi = std::fabs(hi - x);
    uint16_t expect = static_cast<uint16_t>(lo_bits >> 16);
    if (dhi < dlo || (dhi == dlo && (expect & 1))) expect = static_cast<uint16_t>((lo_bits >> 16) + 1);
    if (std::isinf(f)) expect = static_cast<uint16_t>(u >> 16);
    REQUIRE(b == expect);
  }
  CHECK(bf16_to_f32(f32_to_bf16(1.0f)) == 1.0f);
  CHECK(std::isinf(bf16_to_f32(f32_to_bf16(3.4e38f))));
}
