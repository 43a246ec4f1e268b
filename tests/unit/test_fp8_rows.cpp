// FP8 E4M3 weights (DType::f8_row / f8_tensor / f8_w8a8, quant/fp8_rows.hpp): the 256 codes against the OCP
// e4m3fn definition decoded here on its own, rounding to nearest with ties to even and saturation,
// the weight quantizer's error, the dot against float64, every ISA's dot and the matmul against
// the scalar twin bit for bit, batch invariance, the compressed-tensors conversion, and W8A8-FP8
// (activations quantized per token: the quantizer, the dots, the matmul).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.hpp"
#include "core/half.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant/fp8_rows.hpp"
#include "quant_test_util.hpp"
#include "row_kernel_checks.hpp"

using namespace infer;
using namespace infer::test;

namespace {

// OCP 8-bit floating point, E4M3: value of a code from its fields (NaN for S.1111.111).
double ocp_e4m3(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double mag = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

// The finite code nearest to v (|v| <= 448), ties to the even code, by search over all codes.
int nearest_code(double v) {
  int best = -1;
  double best_err = 0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F || (c & 0x80) != (std::signbit(v) ? 0x80 : 0)) continue;
    const double err = std::fabs(ocp_e4m3(c) - v);
    if (best < 0 || err < best_err || (err == best_err && c % 2 == 0)) best = c, best_err = err;
  }
  return best;
}

// Rows of random finite codes (no NaN) with positive scales.
std::vector<uint8_t> random_rows(int64_t rows, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(static_cast<size_t>(rows * (n + 8)), 0);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out.data() + r * (n + 8);
    for (int64_t i = 0; i < n; ++i) {
      auto c = static_cast<uint8_t>(rng());
      if ((c & 0x7F) == 0x7F) c ^= 1;
      row[i] = c;
    }
    const float s = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -14 + static_cast<int>(rng() % 8));
    std::memcpy(row + n, &s, 4);
  }
  return out;
}

bool same_bits(float a, float b) { return f32_bits(a) == f32_bits(b); }

}  // namespace

TEST_CASE("e4m3 decoding matches the OCP definition for all 256 codes", "[fp8]") {
  for (int c = 0; c < 256; ++c) {
    INFO("code " << c);
    const double want = ocp_e4m3(c);
    if (std::isnan(want)) REQUIRE(std::isnan(e4m3_to_f32(static_cast<uint8_t>(c))));
    else REQUIRE(double(e4m3_to_f32(static_cast<uint8_t>(c))) == want);
  }
  // Anchors from the specification: max 448, min normal 2^-6, min subnormal 2^-9, 1.0.
  CHECK(e4m3_to_f32(0x7E) == 448.0f);
  CHECK(e4m3_to_f32(0x08) == 0.015625f);
  CHECK(e4m3_to_f32(0x01) == 0.001953125f);
  CHECK(e4m3_to_f32(0x38) == 1.0f);
  CHECK(e4m3_to_f32(0xB8) == -1.0f);
}

TEST_CASE("f32 to e4m3 rounds to the nearest code, ties to even, saturating at 448", "[fp8]") {
  // Every finite code round-trips.
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    REQUIRE(f32_to_e4m3(static_cast<float>(ocp_e4m3(c))) == c);
  }
  // Midpoints between neighbours (exact in f32) go to the even code; a hair off them, to the nearer.
  for (int c = 0; c < 0x7E; ++c) {
    for (int sign : {0, 0x80}) {
      const double lo = ocp_e4m3(c | sign), hi = ocp_e4m3((c + 1) | sign);
      const auto mid = static_cast<float>((lo + hi) / 2);
      REQUIRE(double(mid) == (lo + hi) / 2);
      INFO("between codes " << (c | sign) << " and " << ((c + 1) | sign));
      REQUIRE(f32_to_e4m3(mid) == ((c % 2 == 0 ? c : c + 1) | sign));
      REQUIRE(f32_to_e4m3(std::nextafter(mid, static_cast<float>(lo))) == (c | sign));
      REQUIRE(f32_to_e4m3(std::nextafter(mid, static_cast<float>(hi))) == ((c + 1) | sign));
    }
  }
  for (float v : {448.0f, 449.0f, 463.9f, 464.0f, 1e6f, 3e38f}) {
    CHECK(f32_to_e4m3(v) == 0x7E);
    CHECK(f32_to_e4m3(-v) == 0xFE);
  }
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> e(-12, 9);
  for (int k = 0; k < 20000; ++k) {
    const auto v = static_cast<float>((rng() & 1 ? -1 : 1) * std::pow(2.0, e(rng)));
    if (std::fabs(v) > 448) continue;
    REQUIRE(f32_to_e4m3(v) == nearest_code(v));
  }
}

TEST_CASE("FP8 weight quantizer: s = max|w| / 448, codes are the nearest to w / s", "[fp8]") {
  std::mt19937_64 rng(7);
  for (int64_t n : {int64_t{32}, int64_t{576}}) {
    for (int trial = 0; trial < 10; ++trial) {
      const float mag = std::ldexp(1.0f, -16 + 3 * trial);
      const auto w = random_floats(static_cast<size_t>(n), rng(), -mag, mag);
      std::vector<uint8_t> row(static_cast<size_t>(n + 8));
      quantize_row_f8_row(w.data(), row.data(), n);
      double amax = 0;
      for (float v : w) amax = std::max(amax, std::fabs(double(v)));
      const float s = f8_row_scale(row.data(), n);
      CHECK(std::fabs(double(s) - amax / 448) <= amax / 448 * std::ldexp(1.0, -24));
      std::vector<float> back(static_cast<size_t>(n));
      dequantize_f8_row(row.data(), back.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<size_t>(i);
        REQUIRE(row[k] == nearest_code(static_cast<float>(w[k] / s)));
        // Half a step of the code grid (3 mantissa bits, subnormal step 2^-9) plus the roundings
        // of the quotient and of the dequantized product.
        const double q = std::fabs(double(w[k]) / s);
        const double step = q < 0.015625 ? std::ldexp(1.0, -9) : std::ldexp(1.0, static_cast<int>(std::floor(std::log2(q))) - 3);
        REQUIRE(std::fabs(double(back[k]) - w[k]) <= double(s) * (step / 2 + q * std::ldexp(1.0, -22)));
      }
    }
  }
}

TEST_CASE("FP8 dot: the scalar twin is within its float rounding of the float64 product", "[fp8]") {
  const double u = std::ldexp(1.0, -24);
  for (int64_t n : {int64_t{32}, int64_t{576}, int64_t{4096}}) {
    const auto w = random_rows(6, n, 3 + static_cast<uint64_t>(n));
    const auto x = activation_floats(n, 9);
    for (int64_t o = 0; o < 6; ++o) {
      const uint8_t* row = w.data() + o * (n + 8);
      const float y = qdot(qdot_f8_row_ref, row, x.data(), n);
      const double s = f8_row_scale(row, n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double p = ocp_e4m3(row[static_cast<size_t>(i)]) * double(x[static_cast<size_t>(i)]);
        exact += p;
        mag += std::fabs(p);
      }
      // n/16 fused steps per lane, 4 tree additions, the scale product.
      const double chain = double(n) / 16 + 5;
      CHECK(std::fabs(double(y) - exact * s) <= chain * u * mag * s * 1.01);
    }
  }
}

TEST_CASE("FP8 dot kernels of every ISA and the matmul equal the scalar twin bit for bit, every row count, batch invariant", "[fp8][matmul]") {
  REQUIRE(cpu_type_traits(DType::f8_tensor)->dot_ref == cpu_type_traits(DType::f8_row)->dot_ref);
  for (int64_t n : {int64_t{32}, int64_t{64}, int64_t{2080}}) {
    const auto w = random_rows(3, n, 21 + static_cast<uint64_t>(n));
    require_dots_match_twin(DType::f8_row, qdot_f8_row_ref, w.data(), 3, n, static_cast<uint64_t>(n + 8), 7);
  }
  ThreadPool pool(3);
  // n_in 2080: activation rows of 8 KiB, which the matmul meets 4 at a time; n_in 96: 16.
  for (int64_t n_in : {int64_t{96}, int64_t{2080}}) {
    auto bytes = random_rows(37, n_in, 99);
    for (DType t : {DType::f8_row, DType::f8_tensor}) require_matmul_matches_ref(t, bytes, n_in, 37, 3, pool);
  }
}

TEST_CASE("FP8 weights from compressed-tensors arrays round-trip exactly, bad input is refused", "[fp8]") {
  const int64_t rows = 4, n = 32;
  std::mt19937_64 rng(17);
  std::vector<uint8_t> weight(static_cast<size_t>(rows * n));
  for (auto& c : weight) {
    c = static_cast<uint8_t>(rng());
    if ((c & 0x7F) == 0x7F) c = 0x7E;
  }
  std::vector<float> scale{0.5f, 0.25f, 1.0f / 3, 2.0f};
  std::vector<uint8_t> packed(static_cast<size_t>(rows * (n + 8)));
  REQUIRE(f8_rows_from_compressed({weight, scale, rows, n}, packed.data()).is_ok());
  std::vector<uint8_t> weight_back(weight.size());
  std::vector<float> scale_back(static_cast<size_t>(rows));
  f8_rows_to_compressed(packed.data(), rows, n, weight_back.data(), scale_back.data());
  CHECK(weight_back == weight);
  CHECK(scale_back == scale);
  std::vector<float> deq(static_cast<size_t>(n));
  dequantize_row(DType::f8_row, packed.data() + (n + 8), deq.data(), n);
  for (int64_t i = 0; i < n; ++i) REQUIRE(deq[static_cast<size_t>(i)] == static_cast<float>(0.25 * ocp_e4m3(weight[static_cast<size_t>(n + i)])));
  // Per tensor: one scale for every row.
  const std::vector<float> one{0.125f};
  REQUIRE(f8_rows_from_compressed({weight, one, rows, n}, packed.data()).is_ok());
  f8_rows_to_compressed(packed.data(), rows, n, weight_back.data(), scale_back.data());
  CHECK(scale_back == std::vector<float>(static_cast<size_t>(rows), 0.125f));
  // Refused: a NaN code, a row length not a multiple of 32, a scale count that fits neither.
  auto nan_code = weight;
  nan_code[5] = 0xFF;
  CHECK(f8_rows_from_compressed({nan_code, scale, rows, n}, packed.data()).code() == StatusCode::invalid_argument);
  CHECK(f8_rows_from_compressed({weight, scale, 8, 16}, packed.data()).code() == StatusCode::invalid_argument);
  const std::vector<float> three{1, 2, 3}, negative{1, -1, 1, 1};
  CHECK(f8_rows_from_compressed({weight, three, rows, n}, packed.data()).code() == StatusCode::invalid_argument);
  CHECK(f8_rows_from_compressed({weight, negative, rows, n}, packed.data()).code() == StatusCode::invalid_argument);
}

TEST_CASE("W8A8-FP8 activations: s = max|x| / 448, each value the e4m3 value nearest to x / s, held decoded", "[fp8]") {
  for (int64_t n : {int64_t{32}, int64_t{576}}) {
    auto x = activation_floats(n, 31 + static_cast<uint64_t>(n));
    x[5] = -3.0f * x[5] - 7.0f;  // a clear largest magnitude
    std::vector<float> row(static_cast<size_t>(n + 2));
    quantize_activations_f8(x.data(), row.data(), n);
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float s = amax / 448.0f;
    REQUIRE(f8_act_scale(row.data(), n) == s);
    uint32_t zero;
    std::memcpy(&zero, row.data() + n + 1, 4);
    REQUIRE(zero == 0);
    for (int64_t i = 0; i < n; ++i) {
      const double q = double(x[static_cast<size_t>(i)] / s);  // the f32 quotient, as defined
      INFO("i " << i << " x " << x[static_cast<size_t>(i)]);
      REQUIRE(double(row[static_cast<size_t>(i)]) == ocp_e4m3(nearest_code(std::clamp(q, -448.0, 448.0))));
    }
  }
  // An all-zero row: scale 0, values 0.
  std::vector<float> zeros(64, 0.0f), row(66, 1.0f);
  quantize_activations_f8(zeros.data(), row.data(), 64);
  REQUIRE(f8_act_scale(row.data(), 64) == 0.0f);
  for (int i = 0; i < 64; ++i) REQUIRE(row[static_cast<size_t>(i)] == 0.0f);
}

TEST_CASE("W8A8-FP8 dot: every ISA and the matmul equal the scalar twin, which is within rounding of float64", "[fp8][matmul]") {
  const CpuTypeTraits& e = *cpu_type_traits(DType::f8_w8a8);
  REQUIRE(e.vec_dot_type == DType::f8_act);
  const double u = std::ldexp(1.0, -24);
  for (int64_t n : {int64_t{32}, int64_t{64}, int64_t{2080}}) {
    const auto w = random_rows(3, n, 41 + static_cast<uint64_t>(n));
    const auto x = activation_floats(9 * n, 17);
    const int64_t a_row = 4 * n + 8;
    std::vector<uint8_t> act(static_cast<size_t>(9 * a_row));
    for (int64_t r = 0; r < 9; ++r) quantize_activations_f8(x.data() + r * n, act.data() + r * a_row, n);
    for (int64_t o = 0; o < 3; ++o) {
      const uint8_t* row = w.data() + o * (n + 8);
      std::vector<float> ref(9);
      qdot_f8_w8a8_ref(row, act.data(), a_row, 9, n, ref.data(), 1);
      for (int64_t r = 0; r < 9; ++r) {  // against float64: exact products, n/16 + 4 roundings, the scales
        const auto* a = reinterpret_cast<const float*>(act.data() + r * a_row);
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double p = ocp_e4m3(row[static_cast<size_t>(i)]) * double(a[i]);
          exact += p;
          mag += std::fabs(p);
        }
        const double s = double(f8_row_scale(row, n)) * double(f8_act_scale(a, n));
        CHECK(std::fabs(double(ref[static_cast<size_t>(r)]) - exact * s) <= (double(n) / 16 + 6) * u * mag * s * 1.01);
      }
      for (CpuIsa isa : supported_isas()) {
        INFO("isa " << isa_name(isa) << " n " << n);
        for (int64_t n_a = 1; n_a <= 9; ++n_a) {
          std::vector<float> y(static_cast<size_t>(n_a));
          e.dot(isa)(row, act.data(), a_row, n_a, n, y.data(), 1);
          for (int64_t r = 0; r < n_a; ++r) REQUIRE(same_bits(y[static_cast<size_t>(r)], ref[static_cast<size_t>(r)]));
        }
      }
    }
  }
  // Through the matmul: activations quantized per row, the same bits at every row count and ISA.
  ThreadPool pool(3);
  const int64_t n_in = 96, n_out = 37;
  auto bytes = random_rows(n_out, n_in, 7);
  const TensorView w = TensorView::contiguous(DType::f8_w8a8, 2, {n_in, n_out, 1, 1}, bytes.data());
  const auto x = activation_floats(40 * n_in, 5);
  std::vector<float> ref(static_cast<size_t>(40 * n_out));
  matmul_ref(w, x.data(), 40, n_in, ref.data(), n_out);
  std::vector<uint8_t> act(static_cast<size_t>(4 * n_in + 8));
  quantize_activations_f8(x.data() + 3 * n_in, act.data(), n_in);
  REQUIRE(same_bits(ref[static_cast<size_t>(3 * n_out + 5)], qdot(qdot_f8_w8a8_ref, bytes.data() + 5 * (n_in + 8), act.data(), n_in)));
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{40}}) {
      std::vector<float> y(static_cast<size_t>(rows * n_out));
      matmul(w, x.data(), rows, n_in, y.data(), n_out, pool);
      for (size_t k = 0; k < y.size(); ++k) REQUIRE(same_bits(y[k], ref[k]));
    }
  }
}
