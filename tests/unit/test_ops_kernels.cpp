// The element-wise kernels of kernels/cpu/ops.hpp: each SIMD twin against its scalar reference,
// bit for bit, and the reference against float64; ops::hadamard against float64.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention_cache.hpp"
#include "backend/backend.hpp"
#include "core/cpu_features.hpp"
#include "core/half.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/ops.hpp"
#include "ops/elementwise.hpp"
#include "ops/op_util.hpp"
#include "quant_test_util.hpp"

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

TEST_CASE("every ISA's variant of the norm, activation, RoPE and Hadamard kernels gives the scalar variant's bits", "[ops]") {
  const int64_t n = 517;  // vector bodies and a tail
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-9.0f, 9.0f);
  std::vector<float> x(n), w(n), u(n);
  for (auto* v : {&x, &w, &u})
    for (auto& e : *v) e = dist(rng);
  // Arguments where exp_ggml leaves its fast path (|x| / ln 2 > 126) or saturates, inside the
  // vector bodies and the groups of 8.
  for (auto [i, v] : {std::pair{5, 100.0f}, {17, -100.0f}, {33, 200.0f}, {40, -200.0f}, {50, 88.5f}, {61, -87.5f}, {300, -1e4f}})
    x[static_cast<size_t>(i)] = v;
  const RopeParams rope{64, 10000.0f, 1.0f, nullptr};
  // Every kernel's outputs, concatenated.
  auto run = [&] {
    std::vector<float> out;
    auto append = [&](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
    std::vector<float> y(n);
    rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    append(y);
    silu_mul(x.data(), u.data(), y.data(), n);
    append(y);
    gelu_mul(x.data(), u.data(), y.data(), n);
    append(y);
    y = x;
    add_inplace(y.data(), u.data(), n);
    append(y);
    scale_inplace(y.data(), 0.37f, n);
    append(y);
    y = x;
    softmax_inplace(y.data(), n);
    append(y);
    std::vector<float> cs(64);
    rope_cache(rope, 1234, cs.data());
    append(cs);
    std::vector<float> heads(x.begin(), x.begin() + 4 * 96);
    rope_apply_norm(heads.data(), 4, 96, 64, cs.data());
    append(heads);
    heads.assign(x.begin(), x.begin() + 4 * 96);
    rope_apply_neox(heads.data(), 4, 96, 64, cs.data());
    append(heads);
    for (int block : {2, 4, 8, 16, 32, 64, 512}) {  // within one vector, several, and the whole row
      y.assign(x.begin(), x.begin() + 512);
      hadamard_inplace(y.data(), 512, block);
      append(y);
    }
    return out;
  };
  std::vector<float> expect;
  {
    test::IsaScope scalar(CpuIsa::scalar);
    expect = run();
  }
  for (CpuIsa isa : test::supported_isas()) {
    test::IsaScope scope(isa);
    const auto got = run();
    REQUIRE(got.size() == expect.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("isa " << isa_name(isa) << " output " << i);
      REQUIRE(f32_bits(got[i]) == f32_bits(expect[i]));
    }
  }
}

TEST_CASE("rms_norm_rows gives every row rms_norm's bits, on every ISA, for any number of rows", "[ops]") {
  // Magnitudes from 1e-4 to 1e4, so that the float64 sum rounds and its order shows.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-4, 4);
  for (int64_t n : {int64_t{3}, int64_t{8}, int64_t{256}, int64_t{517}}) {
    const int max_rows = 45;  // one batch of 32, then 13 (two chains and a partial one)
    std::vector<float> x(static_cast<size_t>(n * max_rows)), w(static_cast<size_t>(n));
    for (auto& v : x) v = mant(rng) * std::pow(10.0f, static_cast<float>(expo(rng)));
    for (auto& v : w) v = mant(rng);
    std::vector<float> expect(x.size());
    {
      test::IsaScope scalar(CpuIsa::scalar);
      for (int r = 0; r < max_rows; ++r) rms_norm(x.data() + r * n, w.data(), expect.data() + r * n, n, 1e-6f);
    }
    for (CpuIsa isa : test::supported_isas()) {
      test::IsaScope scope(isa);
      for (int count : {1, 7, 8, 9, 31, 32, 33, max_rows}) {
        std::vector<float> y(x.size(), -1.0f);
        std::vector<const float*> xs;
        std::vector<float*> ys;
        for (int r = 0; r < count; ++r) {
          // Rows in reverse order: each row's result must not depend on its place in the batch.
          xs.push_back(x.data() + (count - 1 - r) * n);
          ys.push_back(y.data() + (count - 1 - r) * n);
        }
        for (int k = 0; k < count; k += 32) rms_norm_rows(xs.data() + k, ys.data() + k, std::min(32, count - k), w.data(), n, 1e-6f);
        for (int64_t i = 0; i < count * n; ++i) {
          INFO("isa " << isa_name(isa) << " n " << n << " rows " << count << " element " << i);
          REQUIRE(f32_bits(y[static_cast<size_t>(i)]) == f32_bits(expect[static_cast<size_t>(i)]));
        }
      }
    }
  }
}

TEST_CASE("ops::hadamard rotates each row's blocks by the orthonormal Walsh-Hadamard matrix, strided rows too, and "
          "refuses blocks that do not fit", "[ops]") {
  ThreadPool pool(2);
  CpuBackend be(pool);
  const int64_t cols = 1536, rows = 5;  // SmolLM2's down_proj input: 3 blocks of 512
  auto x = be.activation(0, 2 * cols, rows);
  REQUIRE(x.ok());
  const auto values = test::random_floats(static_cast<size_t>(2 * cols * rows), 7, -4.0f, 4.0f);
  std::copy(values.begin(), values.end(), static_cast<float*>(x->data));
  for (int block : {512, 64}) {
    // The second half of each row: a column slice, as Phi-3's fused gate/up gives the down input.
    std::vector<float> before(static_cast<float*>(x->data), static_cast<float*>(x->data) + 2 * cols * rows);
    REQUIRE(ops::hadamard(be, ops::column_slice(*x, cols, cols), block).is_ok());
    for (int64_t r = 0; r < rows; ++r) {
      const float* got = ops::row_f32(*x, r);
      const float* was = before.data() + r * 2 * cols;
      std::vector<double> expect(was + cols, was + 2 * cols);
      test::hadamard_reference(expect.data(), static_cast<int>(cols), block);
      for (int64_t i = 0; i < cols; ++i) {
        INFO("block " << block << " row " << r << " column " << i);
        REQUIRE(got[i] == was[i]);  // the first half untouched
        REQUIRE(std::fabs(double(got[cols + i]) - expect[static_cast<size_t>(i)]) <= 1e-5 * 4 * std::sqrt(double(block)));
      }
    }
  }
  for (int bad : {0, 1, 3, 96, 1024, 1 << 16}) {
    INFO("block " << bad);
    const Status s = ops::hadamard(be, ops::column_slice(*x, 0, cols), bad);
    REQUIRE(s.code() == StatusCode::invalid_argument);
    REQUIRE(s.message().find("hadamard") != std::string::npos);
  }
}
