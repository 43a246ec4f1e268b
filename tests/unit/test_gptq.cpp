// GPTQ for INT4 groups, INT8 and FP8 rows (quant/gptq.hpp): the factor U against its definition (Uᵀ U (H + λI) = I),
// a diagonal H giving exactly the plain quantizer's rows, and on correlated inputs a smaller output
// error ||(W - Q) Xᵀ|| than the plain quantizer's with the same importance, every thread count
// giving the same bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/fp8_rows.hpp"
#include "quant/gptq.hpp"
#include "quant/int4_groups.hpp"
#include "quant/int8_groups.hpp"
#include "quant/int8_rows.hpp"

using namespace infer;
using namespace infer::quant;

namespace {

struct Problem {
  int64_t rows, n, t;
  std::vector<float> w;   // rows x n
  std::vector<float> x;   // t x n: correlated columns, a few loud ones
  std::vector<double> h;  // n x n: Σ x xᵀ
};

Problem make_problem(int64_t rows, int64_t n, int64_t t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  Problem p{rows, n, t, {}, {}, {}};
  p.w.resize(static_cast<size_t>(rows * n));
  for (float& v : p.w) v = nd(rng) * 0.05f;
  // x = z M with M mixing neighbouring columns, column scales from 0.25 to 8.
  std::vector<float> z(static_cast<size_t>(t * n));
  for (float& v : z) v = nd(rng);
  std::vector<float> scale(static_cast<size_t>(n));
  for (auto& s : scale) s = std::ldexp(1.0f, static_cast<int>(rng() % 6) - 2);
  p.x.resize(static_cast<size_t>(t * n));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float v = z[static_cast<size_t>(r * n + j)];
      for (int64_t k = 1; k <= 3; ++k) v += 0.6f * z[static_cast<size_t>(r * n + (j + k) % n)];
      p.x[static_cast<size_t>(r * n + j)] = v * scale[static_cast<size_t>(j)];
    }
  p.h.assign(static_cast<size_t>(n * n), 0.0);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        p.h[static_cast<size_t>(i * n + j)] += double(p.x[static_cast<size_t>(r * n + i)]) * p.x[static_cast<size_t>(r * n + j)];
  return p;
}

// Σ over rows and calibration rows of ((w - q) · x)², dequant(o, q) giving row o's dequantized values.
template <class Dequant>
double output_error(const Problem& p, Dequant&& dequant) {
  double e = 0.0;
  std::vector<float> q(static_cast<size_t>(p.n));
  for (int64_t o = 0; o < p.rows; ++o) {
    dequant(o, q.data());
    for (int64_t r = 0; r < p.t; ++r) {
      double d = 0.0;
      for (int64_t j = 0; j < p.n; ++j)
        d += (double(p.w[static_cast<size_t>(o * p.n + j)]) - q[static_cast<size_t>(j)]) * p.x[static_cast<size_t>(r * p.n + j)];
      e += d * d;
    }
  }
  return e;
}

// The same, q from rows of INT4 blocks.
double output_error(const Problem& p, const std::vector<uint8_t>& blocks, DType type) {
  const int64_t row_bytes = p.n / i4_group_size(type) * i4_block_bytes(i4_group_size(type));
  return output_error(p, [&](int64_t o, float* q) {
    if (type == DType::i4_g32) dequantize_i4_g32(blocks.data() + o * row_bytes, q, p.n);
    else dequantize_i4_g64(blocks.data() + o * row_bytes, q, p.n);
  });
}

// Problem 11's rows quantized by `gptq(row, o, dst)` against the plain INT4 quantizer with the
// same importance (the inputs' mean squares), groups of 32 and 64, with and without zero points:
// GPTQ's output error must be below 0.8 of the plain one's.
template <class Gptq>
void check_lower_output_error(const Problem& p, Gptq&& gptq) {
  std::vector<float> imp(static_cast<size_t>(p.n));
  for (int64_t j = 0; j < p.n; ++j) imp[static_cast<size_t>(j)] = static_cast<float>(p.h[static_cast<size_t>(j * p.n + j)] / double(p.t));
  for (int64_t group : {int64_t{32}, int64_t{64}}) {
    for (bool symmetric : {true, false}) {
      const I4QuantOptions o{.group = group, .symmetric = symmetric, .importance = imp.data()};
      const int64_t row_bytes = p.n / group * i4_block_bytes(group);
      std::vector<uint8_t> g(static_cast<size_t>(p.rows * row_bytes)), plain(g.size());
      for (int64_t r = 0; r < p.rows; ++r) {
        gptq(p.w.data() + r * p.n, o, g.data() + r * row_bytes);
        quantize_row_i4(p.w.data() + r * p.n, plain.data() + r * row_bytes, p.n, o);
      }
      const DType type = *i4_type_of_group(group);
      const double eg = output_error(p, g, type), ep = output_error(p, plain, type);
      INFO("group " << group << " symmetric " << symmetric << ": GPTQ " << eg << ", plain " << ep);
      CHECK(eg < 0.8 * ep);
    }
  }
}

// U of a diagonal H (1 to 5 on the diagonal): GPTQ spreads no error with it.
std::vector<double> diagonal_factor(int64_t n, std::vector<bool>& dead) {
  std::vector<double> h(static_cast<size_t>(n * n), 0.0);
  for (int64_t j = 0; j < n; ++j) h[static_cast<size_t>(j * n + j)] = 1.0 + double(j % 5);
  auto u = gptq_factor(h, n, dead);
  REQUIRE(u.ok());
  return std::move(u).value();
}

}  // namespace

TEST_CASE("GPTQ's factor U is upper triangular with Uᵀ U (H + λI) = I", "[gptq]") {
  const Problem p = make_problem(1, 64, 200, 3);
  std::vector<bool> dead;
  const auto u = gptq_factor(p.h, p.n, dead);
  REQUIRE(u.ok());
  double mean = 0.0;
  for (int64_t j = 0; j < p.n; ++j) mean += p.h[static_cast<size_t>(j * p.n + j)];
  const double damp = 0.01 * mean / double(p.n);
  double worst = 0.0;
  for (int64_t i = 0; i < p.n; ++i) {
    for (int64_t j = 0; j < i; ++j) REQUIRE((*u)[static_cast<size_t>(i * p.n + j)] == 0.0);
    for (int64_t j = 0; j < p.n; ++j) {  // (Uᵀ U (H + λI))[i][j]
      double v = 0.0;
      for (int64_t k = 0; k < p.n; ++k) {
        double uu = 0.0;
        for (int64_t m = 0; m <= std::min(i, k); ++m) uu += (*u)[static_cast<size_t>(m * p.n + i)] * (*u)[static_cast<size_t>(m * p.n + k)];
        v += uu * (p.h[static_cast<size_t>(k * p.n + j)] + (k == j ? damp : 0.0));
      }
      worst = std::max(worst, std::fabs(v - (i == j ? 1.0 : 0.0)));
    }
  }
  CHECK(worst < 1e-9);
  for (bool d : dead) CHECK(!d);
  // Not positive definite, even damped by up to its mean diagonal: an error, not a crash.
  const std::vector<double> bad{1.0, 5.0, 5.0, 1.0};
  CHECK(!gptq_factor(bad, 2, dead).ok());
  // A column that never saw an input is dead: its weight becomes 0, the rest still factors.
  std::vector<double> h = p.h;
  for (int64_t k = 0; k < p.n; ++k) h[static_cast<size_t>(7 * p.n + k)] = h[static_cast<size_t>(k * p.n + 7)] = 0.0;
  REQUIRE(gptq_factor(h, p.n, dead).ok());
  for (int64_t j = 0; j < p.n; ++j) CHECK(dead[static_cast<size_t>(j)] == (j == 7));
}

TEST_CASE("GPTQ with a diagonal H is the plain INT4 quantizer with the same importance", "[gptq]") {
  const Problem p = make_problem(6, 256, 1, 5);
  std::vector<double> h(static_cast<size_t>(p.n * p.n), 0.0);
  std::vector<float> imp(static_cast<size_t>(p.n));
  for (int64_t j = 0; j < p.n; ++j) h[static_cast<size_t>(j * p.n + j)] = imp[static_cast<size_t>(j)] = 1.0f + float(j % 7);
  std::vector<bool> dead;
  const auto u = gptq_factor(h, p.n, dead);
  REQUIRE(u.ok());
  for (bool symmetric : {true, false}) {
    const I4QuantOptions o{.group = 64, .symmetric = symmetric, .importance = imp.data()};
    std::vector<uint8_t> a(static_cast<size_t>(4 * 40)), b(a.size());
    for (int64_t r = 0; r < p.rows; ++r) {
      gptq_quantize_row(p.w.data() + r * p.n, p.n, *u, dead, o, a.data());
      quantize_row_i4(p.w.data() + r * p.n, b.data(), p.n, o);
      REQUIRE(a == b);
    }
  }
}

TEST_CASE("GPTQ lowers the output error on correlated inputs, with and without zero points", "[gptq]") {
  const Problem p = make_problem(24, 256, 512, 11);
  std::vector<bool> dead;
  const auto u = gptq_factor(p.h, p.n, dead);
  REQUIRE(u.ok());
  check_lower_output_error(p, [&](const float* w, const I4QuantOptions& o, uint8_t* dst) {
    gptq_quantize_row(w, p.n, *u, dead, o, dst);
  });
}

TEST_CASE("GPTQ's activation order: columns by decreasing second moment, U of the permuted H", "[gptq]") {
  const Problem p = make_problem(1, 64, 200, 13);
  std::vector<double> h = p.h;
  for (int64_t k = 0; k < p.n; ++k) h[static_cast<size_t>(5 * p.n + k)] = h[static_cast<size_t>(k * p.n + 5)] = 0.0;  // dead
  h[static_cast<size_t>(9 * p.n + 9)] = h[static_cast<size_t>(3 * p.n + 3)];  // a tie: 3 before 9
  const std::vector<int64_t> order = gptq_act_order(h, p.n);
  REQUIRE(order.size() == static_cast<size_t>(p.n));
  CHECK(order.back() == 5);
  for (size_t t = 1; t < order.size(); ++t) {
    const double a = h[static_cast<size_t>(order[t - 1] * p.n + order[t - 1])], b = h[static_cast<size_t>(order[t] * p.n + order[t])];
    CHECK((a > b || (a == b && order[t - 1] < order[t]) || order[t] == 5));
  }
  std::vector<bool> dead;
  const auto u = gptq_factor(h, p.n, dead, order);
  REQUIRE(u.ok());
  for (int64_t j = 0; j < p.n; ++j) CHECK(dead[static_cast<size_t>(j)] == (j == 5));
  // Uᵀ U (H_P + λI) = I, H_P the permuted H with the dead column's diagonal 1 and its row and column 0.
  double mean = 0.0;
  for (int64_t j = 0; j < p.n; ++j) mean += j == 5 ? 1.0 : h[static_cast<size_t>(j * p.n + j)];
  const double damp = 0.01 * mean / double(p.n);
  const auto hp = [&](int64_t a, int64_t b) {
    const int64_t i = order[static_cast<size_t>(a)], j = order[static_cast<size_t>(b)];
    if (i == 5 || j == 5) return i == j ? 1.0 + damp : 0.0;
    return h[static_cast<size_t>(i * p.n + j)] + (i == j ? damp : 0.0);
  };
  double worst = 0.0;
  for (int64_t i = 0; i < p.n; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double v = 0.0;
      for (int64_t k = 0; k < p.n; ++k) {
        double uu = 0.0;
        for (int64_t m = 0; m <= std::min(i, k); ++m) uu += (*u)[static_cast<size_t>(m * p.n + i)] * (*u)[static_cast<size_t>(m * p.n + k)];
        v += uu * hp(k, j);
      }
      worst = std::max(worst, std::fabs(v - (i == j ? 1.0 : 0.0)));
    }
  CHECK(worst < 1e-9);
  // The identity order is the plain factor, bit for bit; a non-permutation is an error.
  std::vector<int64_t> identity(static_cast<size_t>(p.n));
  for (int64_t j = 0; j < p.n; ++j) identity[static_cast<size_t>(j)] = j;
  std::vector<bool> dead2;
  CHECK(*gptq_factor(h, p.n, dead2, identity) == *gptq_factor(h, p.n, dead2));
  identity[1] = 0;
  CHECK(!gptq_factor(h, p.n, dead2, identity).ok());
}

TEST_CASE("GPTQ in activation order: a diagonal H gives the plain quantizer, correlated inputs a smaller output error",
          "[gptq]") {
  {  // Diagonal: nothing spread, the static groups are the plain quantizer's.
    const Problem p = make_problem(6, 256, 1, 5);
    std::vector<double> h(static_cast<size_t>(p.n * p.n), 0.0);
    std::vector<float> imp(static_cast<size_t>(p.n));
    for (int64_t j = 0; j < p.n; ++j) h[static_cast<size_t>(j * p.n + j)] = imp[static_cast<size_t>(j)] = 1.0f + float(j % 7);
    const std::vector<int64_t> order = gptq_act_order(h, p.n);
    std::vector<bool> dead;
    const auto u = gptq_factor(h, p.n, dead, order);
    REQUIRE(u.ok());
    for (bool symmetric : {true, false}) {
      const I4QuantOptions o{.group = 64, .symmetric = symmetric, .importance = imp.data()};
      std::vector<uint8_t> a(static_cast<size_t>(4 * 40)), b(a.size());
      for (int64_t r = 0; r < p.rows; ++r) {
        gptq_quantize_row_ordered(p.w.data() + r * p.n, p.n, *u, dead, order, o, a.data());
        quantize_row_i4(p.w.data() + r * p.n, b.data(), p.n, o);
        REQUIRE(a == b);
      }
    }
  }
  const Problem p = make_problem(24, 256, 512, 11);
  const std::vector<int64_t> order = gptq_act_order(p.h, p.n);
  std::vector<bool> dead;
  const auto u = gptq_factor(p.h, p.n, dead, order);
  REQUIRE(u.ok());
  check_lower_output_error(p, [&](const float* w, const I4QuantOptions& o, uint8_t* dst) {
    gptq_quantize_row_ordered(w, p.n, *u, dead, order, o, dst);
  });
}

TEST_CASE("GPTQ for INT8 rows: a diagonal H gives the plain per-channel quantizer's bytes", "[gptq][int8]") {
  const Problem p = make_problem(6, 256, 1, 7);
  std::vector<bool> dead;
  const auto u = diagonal_factor(p.n, dead);
  std::vector<uint8_t> a(static_cast<size_t>(i8_row_bytes(p.n))), b(a.size());
  for (int64_t r = 0; r < p.rows; ++r) {
    gptq_quantize_row_i8(p.w.data() + r * p.n, p.n, u, dead, a.data());
    quantize_row_i8_row(p.w.data() + r * p.n, b.data(), p.n);
    REQUIRE(a == b);
  }
  // An all-zero row: scale 0, codes 0, as the plain quantizer.
  const std::vector<float> zero(static_cast<size_t>(p.n), 0.0f);
  gptq_quantize_row_i8(zero.data(), p.n, u, dead, a.data());
  quantize_row_i8_row(zero.data(), b.data(), p.n);
  CHECK(a == b);
}

TEST_CASE("GPTQ for INT8 rows lowers the output error on correlated inputs, the codes and sums consistent", "[gptq][int8]") {
  const Problem p = make_problem(24, 256, 512, 13);
  std::vector<bool> dead;
  const auto u = gptq_factor(p.h, p.n, dead);
  REQUIRE(u.ok());
  const int64_t row_bytes = i8_row_bytes(p.n);
  std::vector<uint8_t> g(static_cast<size_t>(p.rows * row_bytes)), plain(g.size());
  for (int64_t r = 0; r < p.rows; ++r) {
    gptq_quantize_row_i8(p.w.data() + r * p.n, p.n, *u, dead, g.data() + r * row_bytes);
    quantize_row_i8_row(p.w.data() + r * p.n, plain.data() + r * row_bytes, p.n);
    // The row's scale is the plain quantizer's (max|w| / 127 before compensation), Σ q its codes'.
    CHECK(i8_row_scale(g.data() + r * row_bytes, p.n) == i8_row_scale(plain.data() + r * row_bytes, p.n));
    const auto* q = reinterpret_cast<const int8_t*>(g.data() + r * row_bytes);
    int32_t sum = 0;
    for (int64_t j = 0; j < p.n; ++j) {
      CHECK(q[j] >= -127);
      sum += q[j];
    }
    CHECK(i8_row_sum(g.data() + r * row_bytes, p.n) == sum);
  }
  const auto deq = [&](const std::vector<uint8_t>& rows) {
    return [&](int64_t o, float* q) { dequantize_i8_row(rows.data() + o * row_bytes, q, p.n); };
  };
  const double eg = output_error(p, deq(g)), ep = output_error(p, deq(plain));
  INFO("GPTQ " << eg << ", plain " << ep);
  CHECK(eg < 0.8 * ep);
}

TEST_CASE("GPTQ for INT8 groups: a diagonal H gives the plain group quantizer's bytes, correlated inputs a smaller error",
          "[gptq][int8_groups]") {
  for (ScalePrecision prec : {ScalePrecision::f32, ScalePrecision::bf16}) {
    const Problem p = make_problem(24, 256, 512, 17);
    for (int64_t group : {int64_t{32}, int64_t{128}}) {
      INFO("group " << group << " precision " << static_cast<int>(prec));
      const int64_t row_bytes = p.n / group * i8_block_bytes(group);
      std::vector<bool> dead;
      const auto diag = diagonal_factor(p.n, dead);
      std::vector<uint8_t> a(static_cast<size_t>(row_bytes)), b(a.size());
      for (int64_t r = 0; r < 4; ++r) {
        gptq_quantize_row_i8_groups(p.w.data() + r * p.n, p.n, diag, dead, group, prec, a.data());
        quantize_row_i8_groups(p.w.data() + r * p.n, b.data(), p.n, group, prec);
        REQUIRE(a == b);
      }
      const auto u = gptq_factor(p.h, p.n, dead);
      REQUIRE(u.ok());
      std::vector<uint8_t> g(static_cast<size_t>(p.rows * row_bytes)), plain(g.size());
      for (int64_t r = 0; r < p.rows; ++r) {
        gptq_quantize_row_i8_groups(p.w.data() + r * p.n, p.n, *u, dead, group, prec, g.data() + r * row_bytes);
        quantize_row_i8_groups(p.w.data() + r * p.n, plain.data() + r * row_bytes, p.n, group, prec);
      }
      const auto deq = [&](const std::vector<uint8_t>& rows) {
        return [&, group](int64_t o, float* q) {
          for (int64_t k = 0; k < p.n / group; ++k) {
            const uint8_t* blk = rows.data() + o * row_bytes + k * i8_block_bytes(group);
            float d;
            std::memcpy(&d, blk, 4);
            for (int64_t i = 0; i < group; ++i) q[k * group + i] = d * static_cast<int8_t>(blk[4 + i]);
          }
        };
      };
      const double eg = output_error(p, deq(g)), ep = output_error(p, deq(plain));
      INFO("GPTQ " << eg << ", plain " << ep);
      CHECK(eg < 0.8 * ep);
    }
  }
}

TEST_CASE("GPTQ for FP8 rows: a diagonal H gives the plain quantizer's bytes, and correlated inputs a smaller error",
          "[gptq][fp8]") {
  {
    const Problem p = make_problem(6, 256, 1, 7);
    std::vector<bool> dead;
    const auto u = diagonal_factor(p.n, dead);
    std::vector<uint8_t> a(static_cast<size_t>(p.n + 8)), b(a.size());
    for (int64_t r = 0; r < p.rows; ++r) {
      gptq_quantize_row_f8(p.w.data() + r * p.n, p.n, u, dead, 0.0f, a.data());  // per channel
      quantize_row_f8_row(p.w.data() + r * p.n, b.data(), p.n);
      REQUIRE(a == b);
      gptq_quantize_row_f8(p.w.data() + r * p.n, p.n, u, dead, 0.001f, a.data());  // the matrix's scale
      quantize_row_f8_scaled(p.w.data() + r * p.n, b.data(), p.n, 0.001f);
      REQUIRE(a == b);
    }
  }
  const Problem p = make_problem(24, 256, 512, 13);
  std::vector<bool> dead;
  const auto u = gptq_factor(p.h, p.n, dead);
  REQUIRE(u.ok());
  const int64_t row_bytes = p.n + 8;
  std::vector<uint8_t> g(static_cast<size_t>(p.rows * row_bytes)), plain(g.size());
  for (int64_t r = 0; r < p.rows; ++r) {
    gptq_quantize_row_f8(p.w.data() + r * p.n, p.n, *u, dead, 0.0f, g.data() + r * row_bytes);
    quantize_row_f8_row(p.w.data() + r * p.n, plain.data() + r * row_bytes, p.n);
    CHECK(f8_row_scale(g.data() + r * row_bytes, p.n) == f8_row_scale(plain.data() + r * row_bytes, p.n));
  }
  const auto deq = [&](const std::vector<uint8_t>& rows) {
    return [&](int64_t o, float* q) { dequantize_f8_row(rows.data() + o * row_bytes, q, p.n); };
  };
  const double eg = output_error(p, deq(g)), ep = output_error(p, deq(plain));
  INFO("GPTQ " << eg << ", plain " << ep);
  CHECK(eg < 0.8 * ep);
}
