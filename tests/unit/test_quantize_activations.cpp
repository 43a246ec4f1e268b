// The activation quantizers (quant/quantize_activations.hpp): round-trip error bounds, bytes worked
// out by hand, and their rounding rules. (Equality with llama.cpp's own quantizers on the same
// floats is in test_qmatmul.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/block_formats.hpp"
#include "quant/quantize_activations.hpp"
#include "quant_test_util.hpp"

using namespace infer;
using namespace infer::quant;
using namespace infer::test;

namespace {

// Rows whose 32-element blocks range in magnitude from 1e-4 to 1e3 (so the F16 rounding of the
// scale varies), some with a single large outlier.
std::vector<float> spread_row(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = std::pow(10.0f, -4.0f + 7.0f * static_cast<float>(b) / static_cast<float>(n / 32));
    const auto v = random_floats(32, rng(), -scale, scale);
    std::copy(v.begin(), v.end(), x.begin() + b * 32);
    if (b % 5 == 2) x[static_cast<size_t>(b * 32 + 7)] *= 30.0f;
  }
  return x;
}

double block_amax(const float* x, int n) {
  double m = 0;
  for (int j = 0; j < n; ++j) m = std::max(m, std::fabs(double(x[j])));
  return m;
}

}  // namespace

// Bound: q = round(x * (127 / amax)) is within 1/2 + 2 * 127 * 2^-24 of x / d (d = amax / 127,
// exactly), so |x - d q| <= d (1/2 + 2^-16); the stored F16 scale d16 adds 127 |d16 - d|.
TEST_CASE("Q8_0 and Q8_1 activations round-trip within half a step plus the F16 rounding of the scale",
          "[quant][activations]") {
  const int64_t n = 32 * 300;
  const auto x = spread_row(n, 3);
  std::vector<BlockQ8_0> q0(static_cast<size_t>(n / 32));
  std::vector<BlockQ8_1> q1(static_cast<size_t>(n / 32));
  quantize_activations_q8_0(x.data(), q0.data(), n);
  quantize_activations_q8_1(x.data(), q1.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    const auto& b0 = q0[static_cast<size_t>(b)];
    const auto& b1 = q1[static_cast<size_t>(b)];
    const double d = block_amax(&x[static_cast<size_t>(b * 32)], 32) / 127;
    const double d16 = f16_to_f32(b0.d);
    REQUIRE(b1.d == b0.d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const double xi = x[static_cast<size_t>(b * 32 + j)];
      INFO("block " << b << " element " << j << " x " << xi << " q " << int(b0.qs[j]) << " d " << d);
      REQUIRE(b1.qs[j] == b0.qs[j]);
      REQUIRE(std::fabs(xi - d * b0.qs[j]) <= d * (0.5 + std::ldexp(1.0, -16)));
      REQUIRE(std::fabs(xi - d16 * b0.qs[j]) <= d * (0.5 + std::ldexp(1.0, -16)) + 127 * std::fabs(d16 - d));
      sum += b0.qs[j];
    }
    // s is d * Σq with the F32 d, rounded to F16.
    REQUIRE(b1.s == f32_to_f16(static_cast<float>(d) * static_cast<float>(sum)));
  }
}

// Bound: as Q8_0 with the sign chosen so that the extreme maps to -127; d is stored as F32.
TEST_CASE("Q8_K activations round-trip within half a step and carry exact 16-element sums", "[quant][activations]") {
  const int64_t n = 256 * 40;
  const auto x = spread_row(n, 4);
  std::vector<BlockQ8_K> q(static_cast<size_t>(n / 256));
  quantize_activations_q8_k(x.data(), q.data(), n);
  for (int64_t b = 0; b < n / 256; ++b) {
    const auto& blk = q[static_cast<size_t>(b)];
    const float* xb = &x[static_cast<size_t>(b * 256)];
    const double d = block_amax(xb, 256) / 127;
    REQUIRE(std::fabs(std::fabs(double(blk.d)) - d) <= 4 * std::ldexp(1.0, -24) * d);
    for (int j = 0; j < 256; ++j) {
      INFO("block " << b << " element " << j << " x " << xb[j] << " q " << int(blk.qs[j]));
      REQUIRE(std::fabs(double(xb[j]) - double(blk.d) * blk.qs[j]) <= d * (0.5 + std::ldexp(1.0, -15)));
    }
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += blk.qs[16 * s + j];
      REQUIRE(blk.bsums[s] == sum);
    }
  }
}

TEST_CASE("Q8_0 and Q8_1 round halves to even (worked by hand)", "[quant][activations]") {
  // amax = 127: the multiplier is exactly 1, so q is x rounded half to even (ggml's reference
  // weight quantizer would round half away from zero: 1, 3, -3, 4, 0).
  float x[32] = {127.0f, 0.5f, 2.5f, -2.5f, 3.5f, -0.5f, 1.25f, -126.75f};
  BlockQ8_0 b0;
  BlockQ8_1 b1;
  quantize_activations_q8_0(x, &b0, 32);
  quantize_activations_q8_1(x, &b1, 32);
  const int8_t expect[8] = {127, 0, 2, -2, 4, 0, 1, -127};
  for (int j = 0; j < 8; ++j) {
    REQUIRE(b0.qs[j] == expect[j]);
    REQUIRE(b1.qs[j] == expect[j]);
  }
  for (int j = 8; j < 32; ++j) REQUIRE(b0.qs[j] == 0);
  REQUIRE(b0.d == 0x3C00);  // 1.0
  REQUIRE(b1.d == 0x3C00);
  REQUIRE(b1.s == f32_to_f16(5.0f));  // 127 + 2 - 2 + 4 + 1 - 127

  // amax = 63.5: d = 0.5 (F16 0x3800), multiplier 2: 0.25 -> 0.5 -> 0, 0.75 -> 1.5 -> 2,
  // -1.25 -> -2.5 -> -2, 1.0 -> 2, -63.5 -> -127.
  float y[32] = {0.25f, 0.75f, -1.25f, 1.0f, -63.5f};
  quantize_activations_q8_0(y, &b0, 32);
  REQUIRE(b0.d == 0x3800);
  const int8_t expect_y[5] = {0, 2, -2, 2, -127};
  for (int j = 0; j < 5; ++j) REQUIRE(b0.qs[j] == expect_y[j]);
}

TEST_CASE("Q8_K maps the first element of largest magnitude to -127 (worked by hand)", "[quant][activations]") {
  float x[256] = {};
  x[3] = 2.0f;
  x[4] = -1.0f;
  x[5] = 1.0f;
  x[6] = 0.5f;
  x[17] = -2.0f;  // ties with x[3]; the first one wins
  BlockQ8_K b;
  quantize_activations_q8_k(x, &b, 256);
  // iscale = -127 / 2 = -63.5: 2 -> -127, -1 -> 63.5 -> 64, 1 -> -63.5 -> -64, 0.5 -> -31.75 -> -32,
  // -2 -> 127.
  REQUIRE(b.qs[3] == -127);
  REQUIRE(b.qs[4] == 64);
  REQUIRE(b.qs[5] == -64);
  REQUIRE(b.qs[6] == -32);
  REQUIRE(b.qs[17] == 127);
  REQUIRE(b.d == 1.0f / (-127.0f / 2.0f));
  REQUIRE(b.bsums[0] == -127 + 64 - 64 - 32);
  REQUIRE(b.bsums[1] == 127);
  for (int s = 2; s < 16; ++s) REQUIRE(b.bsums[s] == 0);

  // The extreme negative and first: the sign flips, it still maps to -127.
  x[3] = -2.0f;
  x[17] = 2.0f;
  quantize_activations_q8_k(x, &b, 256);
  REQUIRE(b.qs[3] == -127);
  REQUIRE(b.qs[17] == 127);
  REQUIRE(b.qs[4] == -64);  // -1 * 63.5 = -63.5 -> -64 (half to even)
  REQUIRE(b.d == 1.0f / (127.0f / 2.0f));
}

TEST_CASE("all-zero activation blocks quantize to zero scales, quants and sums", "[quant][activations]") {
  const std::vector<float> zeros(512, 0.0f);
  std::vector<BlockQ8_0> q0(16);
  std::vector<BlockQ8_1> q1(16);
  std::vector<BlockQ8_K> qk(2);
  std::memset(static_cast<void*>(qk.data()), 0x5A, qk.size() * sizeof(BlockQ8_K));
  quantize_activations_q8_0(zeros.data(), q0.data(), 512);
  quantize_activations_q8_1(zeros.data(), q1.data(), 512);
  quantize_activations_q8_k(zeros.data(), qk.data(), 512);
  for (const auto& b : q0) {
    REQUIRE(b.d == 0);
    for (int8_t v : b.qs) REQUIRE(v == 0);
  }
  for (const auto& b : q1) REQUIRE((b.d == 0 && b.s == 0));
  for (const auto& b : qk) {
    REQUIRE(b.d == 0.0f);
    for (int8_t v : b.qs) REQUIRE(v == 0);
    for (int16_t s : b.bsums) REQUIRE(s == 0);
  }
}

TEST_CASE("F16 and BF16 activations are each element rounded to nearest even", "[quant][activations]") {
  const auto x = spread_row(32 * 50, 5);
  std::vector<uint16_t> h(x.size()), b(x.size());
  prepare_activations(DType::f16, x.data(), h.data(), static_cast<int64_t>(x.size()));
  prepare_activations(DType::bf16, x.data(), b.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    _Float16 ref = static_cast<_Float16>(x[i]);  // the compiler's conversion rounds to nearest even
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    REQUIRE(h[i] == ref_bits);
    // BF16: the upper half of the float, rounded to nearest even on the dropped 16 bits.
    const uint32_t u = f32_bits(x[i]);
    const uint32_t lower = u & 0xFFFF, upper = u >> 16;
    const uint32_t rounded = lower > 0x8000 || (lower == 0x8000 && (upper & 1)) ? upper + 1 : upper;
    REQUIRE(b[i] == rounded);
  }
}

TEST_CASE("F16 activations are f32_to_f16's bits for every float exponent, rounding boundary and NaN payload",
          "[quant][activations]") {
  // The row converter selects among precomputed cases (to vectorize); f32_to_f16 branches. Every
  // ISA's variant of it.
  std::mt19937 rng(7);
  std::vector<float> x;
  for (uint32_t hi = 0; hi < (1u << 20); ++hi) {
    for (uint32_t low : {0u, 0x800u, 0x7ffu, 0x801u, 0xfffu, static_cast<uint32_t>(rng() & 0xfff)})
      x.push_back(f32_from_bits(hi << 12 | low));
  }
  std::vector<uint16_t> h(x.size());
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    prepare_activations(DType::f16, x.data(), h.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      INFO(isa_name(isa) << " bits " << f32_bits(x[i]));
      REQUIRE(h[i] == f32_to_f16(x[i]));
    }
  }
}

TEST_CASE("every ISA's Q8_0, Q8_1 and Q8_K quantizer writes the scalar variant's bytes", "[quant][activations]") {
  const int64_t n = 256 * 24;
  std::vector<std::vector<float>> rows = {spread_row(n, 21), spread_row(n, 22)};
  // Halves to round (amax 127 per block: multipliers 1 and -1), and per 256 both signs of the
  // largest magnitude at several places (the first one decides Q8_K's sign).
  std::mt19937 rng(23);
  std::vector<float> ties(static_cast<size_t>(n));
  for (auto& v : ties) v = static_cast<float>(static_cast<int>(rng() % 509) - 254) / 2.0f;
  for (int64_t b = 0; b < n / 32; ++b) ties[static_cast<size_t>(b * 32 + b % 32)] = b % 3 == 0 ? -127.0f : 127.0f;
  rows.push_back(ties);
  rows.push_back(std::vector<float>(static_cast<size_t>(n), 0.0f));
  for (const auto& x : rows) {
    std::vector<BlockQ8_0> q0(static_cast<size_t>(n / 32)), e0(q0.size());
    std::vector<BlockQ8_1> q1(static_cast<size_t>(n / 32)), e1(q1.size());
    std::vector<BlockQ8_K> qk(static_cast<size_t>(n / 256)), ek(qk.size());
    {
      IsaScope scalar(CpuIsa::scalar);
      quantize_activations_q8_0(x.data(), e0.data(), n);
      quantize_activations_q8_1(x.data(), e1.data(), n);
      quantize_activations_q8_k(x.data(), ek.data(), n);
    }
    for (CpuIsa isa : supported_isas()) {
      IsaScope scope(isa);
      quantize_activations_q8_0(x.data(), q0.data(), n);
      quantize_activations_q8_1(x.data(), q1.data(), n);
      quantize_activations_q8_k(x.data(), qk.data(), n);
      INFO(isa_name(isa));
      REQUIRE(std::memcmp(q0.data(), e0.data(), q0.size() * sizeof(BlockQ8_0)) == 0);
      REQUIRE(std::memcmp(q1.data(), e1.data(), q1.size() * sizeof(BlockQ8_1)) == 0);
      REQUIRE(std::memcmp(qk.data(), ek.data(), qk.size() * sizeof(BlockQ8_K)) == 0);
    }
  }
}
