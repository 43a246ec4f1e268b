// INT8 W8A8 (DType::i8_row, quant/int8_rows.hpp): the weight and activation quantizers against
// float64, round-half-even at midpoints, the scalar dot against the documented arithmetic done
// in float64 / int64, every ISA's kernels (dot, tiles, activation quantizer) against the scalar
// twin bit for bit, the matmul's batch invariance, and the compressed-tensors conversion.
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
#include "quant/int8_rows.hpp"
#include "quant_test_util.hpp"
#include "row_kernel_checks.hpp"

using namespace infer;
using namespace infer::test;

namespace {

struct RowFields {
  std::vector<int8_t> q;
  float scale;
  int32_t sum;
};

// The fields of a row as quant/int8_rows.hpp lays them out, read byte by byte here.
RowFields fields(const uint8_t* row, int64_t n) {
  RowFields f;
  f.q.assign(reinterpret_cast<const int8_t*>(row), reinterpret_cast<const int8_t*>(row) + n);
  std::memcpy(&f.scale, row + n, 4);
  std::memcpy(&f.sum, row + n + 4, 4);
  return f;
}

// Rows of random quants (-128 included, as a checkpoint may hold) with a stored Σ, each with a
// positive scale over many magnitudes; every `extreme`-th row all -128 (the largest sums).
std::vector<uint8_t> random_rows(int64_t rows, int64_t n, uint64_t seed, int extreme = 0) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(static_cast<size_t>(rows * (n + 8)));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out.data() + r * (n + 8);
    int32_t sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const auto q = extreme && r % extreme == 0 ? int8_t{-128} : static_cast<int8_t>(rng());
      row[i] = static_cast<uint8_t>(q);
      sum += q;
    }
    const float scale = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -12 + static_cast<int>(rng() % 12));
    std::memcpy(row + n, &scale, 4);
    std::memcpy(row + n + 4, &sum, 4);
  }
  return out;
}

std::vector<uint8_t> activations(const std::vector<float>& x, int64_t rows, int64_t n) {
  std::vector<uint8_t> a(static_cast<size_t>(rows * (n + 8)));
  for (int64_t r = 0; r < rows; ++r) quantize_activations_i8_row_ref(x.data() + r * n, a.data() + r * (n + 8), n);
  return a;
}

// The documented dot, in float64 / int64: float(Σ qw qa) * (sw * sa), each step rounded to f32.
float expected_dot(const uint8_t* w, const uint8_t* a, int64_t n) {
  const RowFields fw = fields(w, n), fa = fields(a, n);
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += int64_t{fw.q[static_cast<size_t>(i)]} * fa.q[static_cast<size_t>(i)];
  const auto isum = static_cast<float>(static_cast<double>(sum));  // |sum| < 2^31: exact in double
  const auto scales = static_cast<float>(double(fw.scale) * double(fa.scale));
  return static_cast<float>(double(isum) * double(scales));
}

bool same_bits(float a, float b) { return f32_bits(a) == f32_bits(b); }

}  // namespace

TEST_CASE("INT8 weight quantizer: s = max|w| / 127, |w - s q| <= s / 2, the stored sum is Σ q (float64)", "[int8]") {
  std::mt19937_64 rng(3);
  for (int64_t n : {int64_t{32}, int64_t{96}, int64_t{2048}}) {
    for (int trial = 0; trial < 20; ++trial) {
      const float mag = std::ldexp(1.0f, -20 + trial * 2);
      std::vector<float> w = random_floats(static_cast<size_t>(n), rng(), -mag, mag);
      if (trial == 3) std::fill(w.begin(), w.end(), 0.0f);
      std::vector<uint8_t> row(static_cast<size_t>(n + 8));
      quantize_row_i8_row(w.data(), row.data(), n);
      const RowFields f = fields(row.data(), n);
      double amax = 0;
      for (float v : w) amax = std::max(amax, std::fabs(double(v)));
      // The f32 division amax / 127 is within half an ulp of the exact quotient.
      CHECK(std::fabs(double(f.scale) - amax / 127) <= amax / 127 * std::ldexp(1.0, -24));
      int64_t sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int q = f.q[static_cast<size_t>(i)];
        REQUIRE(q >= -127);
        REQUIRE(q <= 127);
        sum += q;
        // Half a step, plus the rounding of the f32 quotient w / s (at most half an ulp of 127).
        const double err = std::fabs(double(w[static_cast<size_t>(i)]) - double(f.scale) * q);
        REQUIRE(err <= double(f.scale) * (0.5 + 127 * std::ldexp(1.0, -24)));
      }
      CHECK(sum == f.sum);
      if (amax == 0) CHECK(f.scale == 0.0f);
    }
  }
}

TEST_CASE("INT8 quantizers round half to even at exact midpoints, weights and activations", "[int8]") {
  // max|x| = 127: s = 1 and 127 / max = 1 exactly, so x itself is the quotient.
  std::vector<float> x(32, 0.0f);
  const float halves[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -125.5f};
  const int expect[] = {0, 2, 2, 0, -2, -2, 126, -126};
  x[0] = 127.0f;
  for (int i = 0; i < 8; ++i) x[static_cast<size_t>(1 + i)] = halves[i];
  std::vector<uint8_t> w(40), a(40);
  quantize_row_i8_row(x.data(), w.data(), 32);
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    quantize_activations_i8_row(x.data(), a.data(), 32);
    for (const auto& row : {w, a}) {
      const RowFields f = fields(row.data(), 32);
      CHECK(f.scale == 1.0f);
      CHECK(f.q[0] == 127);
      for (int i = 0; i < 8; ++i) CHECK(f.q[static_cast<size_t>(1 + i)] == expect[i]);
    }
  }
}

TEST_CASE("INT8 per-token activation quantizer: q = rne(f32(x * f32(127 / max|x|))) in float64, same bytes on every ISA", "[int8]") {
  for (int64_t n : {int64_t{32}, int64_t{64}, int64_t{96}, int64_t{2080}}) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      std::vector<float> x = activation_floats(n, seed);
      if (seed == 8) std::fill(x.begin(), x.end(), 0.0f);
      std::vector<uint8_t> ref(static_cast<size_t>(n + 8));
      quantize_activations_i8_row_ref(x.data(), ref.data(), n);
      const RowFields f = fields(ref.data(), n);
      double amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(double(v)));
      const auto id = amax != 0 ? static_cast<float>(127.0 / amax) : 0.0f;
      CHECK(f.scale == static_cast<float>(amax / 127.0));
      int64_t sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double product = static_cast<float>(double(x[static_cast<size_t>(i)]) * double(id));  // the f32 product
        REQUIRE(f.q[static_cast<size_t>(i)] == static_cast<int>(std::nearbyint(product)));
        sum += f.q[static_cast<size_t>(i)];
      }
      CHECK(sum == f.sum);
      for (CpuIsa isa : supported_isas()) {
        IsaScope scope(isa);
        std::vector<uint8_t> got(ref.size());
        quantize_activations_i8_row(x.data(), got.data(), n);
        INFO("isa " << isa_name(isa));
        REQUIRE(got == ref);
      }
    }
  }
}

TEST_CASE("INT8 dot: the scalar twin is float(Σ qw qa) * (sw * sa) exactly, and near the float64 product", "[int8]") {
  for (int64_t n : {int64_t{32}, int64_t{160}, int64_t{4096}}) {
    const auto w = random_rows(8, n, 11 + static_cast<uint64_t>(n), 3);
    const auto x = activation_floats(4 * n, 5);
    const auto a = activations(x, 4, n);
    for (int64_t o = 0; o < 8; ++o) {
      for (int64_t r = 0; r < 4; ++r) {
        const uint8_t* wr = w.data() + o * (n + 8);
        const uint8_t* ar = a.data() + r * (n + 8);
        const float y = qdot(qdot_i8_row_ref, wr, ar, n);
        REQUIRE(same_bits(y, expected_dot(wr, ar, n)));
        // Against the real product of the dequantized rows: three f32 roundings.
        const RowFields fw = fields(wr, n), fa = fields(ar, n);
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double p = double(fw.scale) * fw.q[static_cast<size_t>(i)] * double(fa.scale) * fa.q[static_cast<size_t>(i)];
          exact += p;
          mag += std::fabs(p);
        }
        CHECK(std::fabs(double(y) - exact) <= 3.01 * std::ldexp(1.0, -24) * std::fabs(exact) + 1e-30 * mag);
      }
    }
  }
}

TEST_CASE("INT8 dot kernels of every ISA equal the scalar twin bit for bit, 1 to 9 activation rows, the int32 limit included", "[int8]") {
  const CpuTypeTraits& e = *cpu_type_traits(DType::i8_row);
  for (int64_t n : {int64_t{32}, int64_t{64}, int64_t{96}, int64_t{4128}, kI8RowMaxElements}) {
    // At 2^17 every weight -128 and the first activation row all 127: Σ = -128 * 127 * 2^17, near -2^31.
    const bool limit = n == kI8RowMaxElements;
    const auto w = random_rows(3, n, 21 + static_cast<uint64_t>(n), limit ? 1 : 2);
    std::vector<float> x = activation_floats(9 * n, 7);
    if (limit)
      for (size_t i = 0; i < x.size(); ++i) x[i] = i < static_cast<size_t>(n) || i % 3 ? 1.0f : -1.0f;
    const auto a = activations(x, 9, n);
    for (int64_t o = 0; o < 3; ++o) {
      const uint8_t* wr = w.data() + o * (n + 8);
      std::vector<float> ref(9);
      qdot_i8_row_ref(wr, a.data(), n + 8, 9, n, ref.data(), 1);
      for (int64_t r = 0; r < 9; ++r) REQUIRE(same_bits(ref[static_cast<size_t>(r)], expected_dot(wr, a.data() + r * (n + 8), n)));
      for (CpuIsa isa : supported_isas()) {
        INFO("isa " << isa_name(isa) << " n " << n);
        for (int64_t n_a = 1; n_a <= 9; ++n_a) {
          std::vector<float> y(static_cast<size_t>(2 * n_a), -1.0f);
          e.dot(isa)(wr, a.data(), n + 8, n_a, n, y.data(), 2);
          for (int64_t r = 0; r < n_a; ++r) REQUIRE(same_bits(y[static_cast<size_t>(2 * r)], ref[static_cast<size_t>(r)]));
        }
      }
    }
  }
}

TEST_CASE("INT8 matmul equals matmul_ref bit for bit for 1 to 33 rows and n_out of 1 to 37 on every ISA (tiles included)", "[int8][matmul]") {
  ThreadPool pool(3);
  for (int64_t n_in : {int64_t{96}, int64_t{512}}) {
    for (int64_t n_out : {int64_t{1}, int64_t{16}, int64_t{37}}) {
      auto bytes = random_rows(n_out, n_in, 31 + static_cast<uint64_t>(n_in + n_out), 5);
      const TensorView w = TensorView::contiguous(DType::i8_row, 2, {n_in, n_out, 1, 1}, bytes.data());
      REQUIRE(w.row_bytes() == static_cast<uint64_t>(n_in + 8));
      const auto x = activation_floats(33 * n_in, 9);
      std::vector<float> ref(static_cast<size_t>(33 * n_out));
      matmul_ref(w, x.data(), 33, n_in, ref.data(), n_out);
      for (CpuIsa isa : supported_isas()) {
        IsaScope scope(isa);
        for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{16}, int64_t{33}}) {
          INFO("isa " << isa_name(isa) << " n_in " << n_in << " n_out " << n_out << " rows " << rows);
          std::vector<float> y(static_cast<size_t>(rows * n_out));
          matmul(w, x.data(), rows, n_in, y.data(), n_out, pool);
          for (size_t k = 0; k < y.size(); ++k) REQUIRE(same_bits(y[k], ref[k]));
        }
      }
    }
  }
}

TEST_CASE("INT8 matmul: a row's result is the same alone, in a batch of 64 and with 1 or 3 threads", "[int8][matmul]") {
  const int64_t n_in = 256, n_out = 48;
  auto bytes = random_rows(n_out, n_in, 41);
  const TensorView w = TensorView::contiguous(DType::i8_row, 2, {n_in, n_out, 1, 1}, bytes.data());
  const auto x = activation_floats(64 * n_in, 13);
  ThreadPool one(1), three(3);
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    std::vector<float> batch(static_cast<size_t>(64 * n_out)), batch1(batch.size());
    matmul(w, x.data(), 64, n_in, batch.data(), n_out, three);
    matmul(w, x.data(), 64, n_in, batch1.data(), n_out, one);
    REQUIRE(batch == batch1);
    for (int64_t r : {int64_t{0}, int64_t{17}, int64_t{63}}) {
      std::vector<float> alone(static_cast<size_t>(n_out));
      matmul(w, x.data() + r * n_in, 1, n_in, alone.data(), n_out, three);
      for (int64_t o = 0; o < n_out; ++o) REQUIRE(same_bits(alone[static_cast<size_t>(o)], batch[static_cast<size_t>(r * n_out + o)]));
    }
  }
}

TEST_CASE("INT8 weights from compressed-tensors arrays (per channel and per tensor) round-trip exactly", "[int8]") {
  const int64_t rows = 5, n = 64;
  std::mt19937_64 rng(17);
  std::vector<int8_t> weight(static_cast<size_t>(rows * n));
  for (auto& q : weight) q = static_cast<int8_t>(rng());
  weight[3] = -128;
  weight[4] = 127;
  // Scales as a BF16 checkpoint stores them ([rows, 1]), converted to f32 exactly.
  std::vector<float> scale;
  for (int64_t r = 0; r < rows; ++r) scale.push_back(bf16_to_f32(static_cast<uint16_t>(0x3b00 + 37 * r)));
  std::vector<uint8_t> packed(static_cast<size_t>(rows * i8_row_bytes(n)));
  REQUIRE(i8_rows_from_compressed({weight, scale, rows, n}, packed.data()).is_ok());
  std::vector<int8_t> weight_back(weight.size());
  std::vector<float> scale_back(static_cast<size_t>(rows));
  i8_rows_to_compressed(packed.data(), rows, n, weight_back.data(), scale_back.data());
  CHECK(weight_back == weight);
  CHECK(scale_back == scale);
  // The rows are valid I8_ROW rows: Σ q stored, dequantized to q * s exactly.
  for (int64_t r = 0; r < rows; ++r) {
    const RowFields f = fields(packed.data() + r * i8_row_bytes(n), n);
    int32_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += weight[static_cast<size_t>(r * n + i)];
    CHECK(f.sum == sum);
    std::vector<float> deq(static_cast<size_t>(n));
    dequantize_row(DType::i8_row, packed.data() + r * i8_row_bytes(n), deq.data(), n);
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(deq[static_cast<size_t>(i)] == static_cast<float>(double(weight[static_cast<size_t>(r * n + i)]) * scale[static_cast<size_t>(r)]));
  }
  // A per-tensor scale applies to every row.
  const std::vector<float> one{0.0125f};
  REQUIRE(i8_rows_from_compressed({weight, one, rows, n}, packed.data()).is_ok());
  i8_rows_to_compressed(packed.data(), rows, n, weight_back.data(), scale_back.data());
  CHECK(weight_back == weight);
  CHECK(scale_back == std::vector<float>(static_cast<size_t>(rows), 0.0125f));
}

TEST_CASE("INT8 compressed-tensors conversion refuses bad shapes and scales with invalid_argument", "[int8]") {
  std::vector<int8_t> weight(2 * 48, 1);
  std::vector<float> scale{1.0f, 2.0f};
  std::vector<uint8_t> out(4096);
  CHECK(i8_rows_from_compressed({weight, scale, 2, 48}, out.data()).code() == StatusCode::invalid_argument);  // not 32k
  CHECK(i8_rows_from_compressed({weight, scale, 3, 32}, out.data()).code() == StatusCode::invalid_argument);  // sizes
  std::vector<int8_t> w64(2 * 64, 1);
  CHECK(i8_rows_from_compressed({w64, scale, 2, 64}, out.data()).is_ok());
  const std::vector<float> three{1, 2, 3}, negative{1, -2}, nan{1, std::nanf("")};
  CHECK(i8_rows_from_compressed({w64, three, 2, 64}, out.data()).code() == StatusCode::invalid_argument);
  CHECK(i8_rows_from_compressed({w64, negative, 2, 64}, out.data()).code() == StatusCode::invalid_argument);
  CHECK(i8_rows_from_compressed({w64, nan, 2, 64}, out.data()).code() == StatusCode::invalid_argument);
}

TEST_CASE("I8_ROW is libinfer's own type: n + 8 bytes a row, and no GGUF type", "[int8][dtype]") {
  const DTypeTraits& t = *dtype_traits(DType::i8_row);
  CHECK(t.internal);
  CHECK(dtype_row_bytes(DType::i8_row, 2048) == 2056u);
  CHECK(dtype_row_bytes(DType::i8_row, 48) == std::nullopt);
  CHECK(can_dequantize(DType::i8_row));
  CHECK(activation_type(DType::i8_row) == DType::i8_row);
}

// W8A16 (DType::i8_w8a16): the same rows against F32 activations, the FP8 weight-only arithmetic
// (quant/fp8_rows.hpp) with each code's value float(q) (exact).
TEST_CASE("W8A16 dot: the scalar twin is within its float rounding of the float64 product", "[int8]") {
  const double u = std::ldexp(1.0, -24);
  for (int64_t n : {int64_t{32}, int64_t{576}, int64_t{4096}}) {
    const auto w = random_rows(6, n, 5 + static_cast<uint64_t>(n), 3);
    const auto x = activation_floats(n, 11);
    for (int64_t o = 0; o < 6; ++o) {
      const uint8_t* row = w.data() + o * (n + 8);
      const float y = qdot(qdot_i8_w8a16_ref, row, x.data(), n);
      const RowFields f = fields(row, n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double p = double(f.q[static_cast<size_t>(i)]) * double(x[static_cast<size_t>(i)]);
        exact += p;
        mag += std::fabs(p);
      }
      // n/16 fused steps per lane, 4 tree additions, the scale product.
      const double chain = double(n) / 16 + 5;
      INFO("n " << n << " row " << o);
      CHECK(std::fabs(double(y) - exact * f.scale) <= chain * u * mag * f.scale * 1.01);
    }
  }
}

TEST_CASE("W8A16 dot kernels of every ISA and the matmul (tiles included) equal the scalar twin bit for bit", "[int8][matmul]") {
  REQUIRE(cpu_type_traits(DType::i8_w8a16)->vec_dot_type == DType::f32);
  for (int64_t n : {int64_t{32}, int64_t{64}, int64_t{2080}}) {
    const auto w = random_rows(3, n, 23 + static_cast<uint64_t>(n), 2);
    require_dots_match_twin(DType::i8_w8a16, qdot_i8_w8a16_ref, w.data(), 3, n, static_cast<uint64_t>(n + 8), 13);
  }
  ThreadPool pool(3);
  for (int64_t n_in : {int64_t{96}, int64_t{2080}}) {
    auto bytes = random_rows(37, n_in, 101);
    require_matmul_matches_ref(DType::i8_w8a16, bytes, n_in, 37, 5, pool);
  }
}
