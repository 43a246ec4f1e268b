// INT8 weights in groups (DType::i8_g32 / g64 / g128, quant/int8_groups.hpp: the W8A16 preset's
// group-wise weights): the block layout read field by field, the quantizer's scale and codes, the
// scalar dot against float64, every ISA's dot and matmul against the scalar twin bit for bit, and
// the compressed-tensors conversion.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant/int8_groups.hpp"
#include "quant_test_util.hpp"
#include "row_kernel_checks.hpp"

using namespace infer;
using namespace infer::test;

namespace {

struct I8Type {
  DType type;
  int64_t group;
  QDotFn ref, avx2, avx512;
};
const std::vector<I8Type>& i8_types() {
  static const std::vector<I8Type> types = {
      {DType::i8_g32, 32, qdot_i8_g32_ref, qdot_i8_g32_avx2, qdot_i8_g32_avx512},
      {DType::i8_g64, 64, qdot_i8_g64_ref, qdot_i8_g64_avx2, qdot_i8_g64_avx512},
      {DType::i8_g128, 128, qdot_i8_g128_ref, qdot_i8_g128_avx2, qdot_i8_g128_avx512},
  };
  return types;
}

// Element i of a row as a float64, from the documented layout: block i / G at (G + 4) bytes each,
// its f32 scale first, then the int8 codes.
double exact_value(const uint8_t* row, int64_t group, int64_t i) {
  const uint8_t* blk = row + (i / group) * (group + 4);
  float d;
  std::memcpy(&d, blk, 4);
  return double(d) * static_cast<int8_t>(blk[4 + i % group]);
}

// Rows of random codes (all of [-128, 127]) with positive scales over many magnitudes.
std::vector<uint8_t> random_i8_rows(int64_t group, int64_t rows, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t blocks = rows * n / group, bytes = group + 4;
  std::vector<uint8_t> out(static_cast<size_t>(blocks * bytes));
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out.data() + b * bytes;
    const float d = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -14 + static_cast<int>(rng() % 12));
    std::memcpy(blk, &d, 4);
    for (int64_t k = 0; k < group; ++k) blk[4 + k] = static_cast<uint8_t>(rng());
  }
  return out;
}

}  // namespace

TEST_CASE("INT8 group quantizer: d = max|w| / 127 per group, nearest codes, zero groups all zero", "[int8_groups]") {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const I8Type& t : i8_types()) {
    const int64_t G = t.group, n = 4 * G;
    REQUIRE(dtype_traits(t.type)->block_size == G);
    REQUIRE(dtype_traits(t.type)->block_bytes == G + 4);
    REQUIRE(i8_type_of_group(G) == t.type);
    std::vector<float> w(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = i / G == 1 ? 0.0f : std::ldexp(normal(rng), -static_cast<int>(i / G) * 3);
    std::vector<uint8_t> row(static_cast<size_t>(n / G * (G + 4)));
    cpu_type_traits(t.type)->from_float(w.data(), row.data(), n);
    std::vector<float> deq(static_cast<size_t>(n));
    cpu_type_traits(t.type)->to_float_ref(row.data(), deq.data(), n);
    for (int64_t b = 0; b < n / G; ++b) {
      float amax = 0.0f, d;
      for (int64_t i = b * G; i < (b + 1) * G; ++i) amax = std::max(amax, std::fabs(w[static_cast<size_t>(i)]));
      std::memcpy(&d, row.data() + b * (G + 4), 4);
      INFO("group " << G << " block " << b);
      REQUIRE(d == amax / 127.0f);
      for (int64_t i = b * G; i < (b + 1) * G; ++i) {
        const double v = exact_value(row.data(), G, i);
        REQUIRE(deq[static_cast<size_t>(i)] == static_cast<float>(v));  // one f32 product, exact here
        // The nearest code for d: no other code is closer.
        REQUIRE(std::fabs(v - w[static_cast<size_t>(i)]) <= double(d) / 2 * (1 + 1e-6));
      }
    }
  }
}

TEST_CASE("INT8 group dot: the scalar twin is within its float rounding of the float64 product", "[int8_groups]") {
  const double u = std::ldexp(1.0, -24);
  for (const I8Type& t : i8_types()) {
    const int64_t G = t.group;
    for (int64_t n : {G, 3 * G, int64_t{1408}}) {
      const auto w = random_i8_rows(G, 2, n, 17 + static_cast<uint64_t>(n));
      const auto x = activation_floats(n, 23 + static_cast<uint64_t>(G));
      const int64_t row_bytes = n / G * (G + 4);
      for (int64_t o = 0; o < 2; ++o) {
        const uint8_t* row = w.data() + o * row_bytes;
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double prod = exact_value(row, G, i) * x[static_cast<size_t>(i)];
          exact += prod;
          mag += std::fabs(prod);
        }
        const float y = qdot(t.ref, row, x.data(), n);
        const double chain = double(G) / 16 + double(n) / G + 4;
        INFO("group " << G << " n " << n << " row " << o);
        CHECK(std::fabs(double(y) - exact) <= chain * u * mag * 1.01);
      }
    }
  }
}

TEST_CASE("INT8 group dot kernels of every ISA equal the scalar twin bit for bit for 1 to 9 activation rows", "[int8_groups]") {
  for (const I8Type& t : i8_types()) {
    const CpuTypeTraits& e = *cpu_type_traits(t.type);
    REQUIRE(e.dot_ref == t.ref);
    REQUIRE(e.dot_avx2 == t.avx2);
    REQUIRE(e.dot_avx512 == t.avx512);
    REQUIRE(e.vec_dot_type == DType::f32);
    const int64_t G = t.group;
    for (int64_t n : {G, 2 * G, 5 * G, int64_t{1408}}) {
      const auto w = random_i8_rows(G, 3, n, 41 + static_cast<uint64_t>(n + G));
      require_dots_match_twin(t.type, t.ref, w.data(), 3, n, static_cast<uint64_t>(n / G * (G + 4)), 13 + static_cast<uint64_t>(n));
    }
  }
}

TEST_CASE("INT8 group matmul equals the scalar twin bit for bit on every ISA, whatever the rows and their chunks", "[int8_groups][matmul]") {
  ThreadPool pool(3);
  for (const I8Type& t : i8_types())
    for (int64_t n_in : {int64_t{256}, int64_t{2048}}) {
      auto bytes = random_i8_rows(t.group, 19, n_in, 7 + static_cast<uint64_t>(n_in + t.group));
      require_matmul_matches_ref(t.type, bytes, n_in, 19, 5, pool);
    }
}

TEST_CASE("INT8 group weights from compressed-tensors arrays land exactly, a group of 2 G repeats its scale, bad input is refused", "[int8_groups]") {
  const int64_t rows = 3, n = 256;
  std::mt19937_64 rng(9);
  for (const I8Type& t : i8_types()) {
    const int64_t G = t.group;
    for (int64_t group : {G, 2 * G}) {
      std::vector<int8_t> values(static_cast<size_t>(rows * n));
      for (auto& v : values) v = static_cast<int8_t>(rng());
      std::vector<float> scale(static_cast<size_t>(rows * n / group));
      for (auto& s : scale) s = std::ldexp(1.0f + static_cast<float>(rng() % 100) / 100.0f, -10);
      std::vector<uint8_t> out(static_cast<size_t>(rows * n / G * (G + 4)));
      REQUIRE(i8_groups_from_compressed({values, scale, rows, n, group}, t.type, out.data()).is_ok());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < n; ++i) {
          INFO("group " << G << " checkpoint group " << group << " row " << r << " element " << i);
          const double expect = double(scale[static_cast<size_t>(r * (n / group) + i / group)]) * values[static_cast<size_t>(r * n + i)];
          REQUIRE(exact_value(out.data() + r * (n / G * (G + 4)), G, i) == expect);
        }
    }
  }
  std::vector<int8_t> values(static_cast<size_t>(rows * 64), 1);
  std::vector<float> scale(static_cast<size_t>(rows * 2), 0.5f);
  std::vector<uint8_t> out(static_cast<size_t>(rows * 2 * 36));
  const auto bad = StatusCode::invalid_argument;
  CHECK(i8_groups_from_compressed({values, scale, rows, 64, 32}, DType::i8_g32, out.data()).is_ok());
  CHECK(i8_groups_from_compressed({values, scale, rows, 64, 32}, DType::i8_g64, out.data()).code() == bad);  // 64 does not divide 32
  CHECK(i8_groups_from_compressed({values, scale, rows, 64, 32}, DType::i4_g32, out.data()).code() == bad);
  CHECK(i8_groups_from_compressed({{values.data(), values.size() - 1}, scale, rows, 64, 32}, DType::i8_g32, out.data()).code() == bad);
  CHECK(i8_groups_from_compressed({values, {scale.data(), 5}, rows, 64, 32}, DType::i8_g32, out.data()).code() == bad);
  auto negative = scale;
  negative[3] = -1.0f;
  CHECK(i8_groups_from_compressed({values, negative, rows, 64, 32}, DType::i8_g32, out.data()).code() == bad);
  negative[3] = std::numeric_limits<float>::infinity();
  CHECK(i8_groups_from_compressed({values, negative, rows, 64, 32}, DType::i8_g32, out.data()).code() == bad);
}
