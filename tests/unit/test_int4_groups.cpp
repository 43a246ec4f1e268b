// INT4 weights in groups (DType::i4_g32 / g64 / g128, quant/int4_groups.hpp): the quantizer's blocks
// read field by field from the documented layout (scale in the storage precision, integer zero
// point, codes the nearest for the scale, its reported error), its error against plain
// round-to-nearest min/max quantization, the scalar dot against float64, every ISA's dot against
// the scalar twin bit for bit, and the compressed-tensors conversion and int32 packing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/half.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant/int4_groups.hpp"
#include "quant_test_util.hpp"

using namespace infer;
using namespace infer::test;

namespace {

struct I4Type {
  DType type;
  int64_t group;
  QDotFn ref, avx2, avx512;
};
const std::vector<I4Type>& i4_types() {
  static const std::vector<I4Type> types = {
      {DType::i4_g32, 32, qdot_i4_g32_ref, qdot_i4_g32_avx2, qdot_i4_g32_avx512},
      {DType::i4_g64, 64, qdot_i4_g64_ref, qdot_i4_g64_avx2, qdot_i4_g64_avx512},
      {DType::i4_g128, 128, qdot_i4_g128_ref, qdot_i4_g128_avx2, qdot_i4_g128_avx512},
  };
  return types;
}

// The fields of block b of a row, read from the header's layout here on their own.
struct BlockFields {
  float d, z;
};
BlockFields block_fields(const uint8_t* row, int64_t group, int64_t b) {
  BlockFields f;
  const uint8_t* blk = row + b * (group / 2 + 8);
  std::memcpy(&f.d, blk, 4);
  std::memcpy(&f.z, blk + 4, 4);
  return f;
}
// Code of element i of the row: byte 16 c + k of a block's codes holds elements 32 c + k (low
// nibble) and 32 c + 16 + k (high nibble).
int code(const uint8_t* row, int64_t group, int64_t i) {
  const uint8_t* qs = row + (i / group) * (group / 2 + 8) + 8;
  const int64_t j = i % group;
  const uint8_t byte = qs[16 * (j / 32) + j % 16];
  return j % 32 < 16 ? byte & 15 : byte >> 4;
}
// The element as a float64: d (q - z), exact.
double exact_value(const uint8_t* row, int64_t group, int64_t i) {
  const BlockFields f = block_fields(row, group, i / group);
  return double(f.d) * (code(row, group, i) - double(f.z));
}

float stored_scale(double d, ScalePrecision p) {
  const auto f = static_cast<float>(d);
  if (p == ScalePrecision::f16) return f16_to_f32(f32_to_f16(f));
  if (p == ScalePrecision::bf16) return bf16_to_f32(f32_to_bf16(f));
  return f;
}

// Plain round-to-nearest with the min/max scale (compressed-tensors' observer): symmetric
// d = amax / m (compressed-tensors: m = 7.5), z = 8; asymmetric d = (max - min) / 15 over a range
// holding 0, z = round(-min / d). The scale is stored in p, as the quantizer's is. Σ imp (w - deq)^2.
double rtn_error(const float* w, const float* imp, int64_t n, int64_t group, bool symmetric, double m, ScalePrecision p) {
  double err = 0;
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    double lo = 0, hi = 0;
    for (int64_t i = g0; i < g0 + group; ++i) lo = std::min(lo, double(w[i])), hi = std::max(hi, double(w[i]));
    const double range = symmetric ? std::max(-lo, hi) / m : (hi - lo) / 15;
    const double d = stored_scale(range, p);
    const double z = symmetric ? 8 : std::clamp(std::nearbyint(-lo / range), 0.0, 15.0);
    for (int64_t i = g0; i < g0 + group; ++i) {
      const double q = d > 0 ? std::clamp(std::nearbyint(w[i] / d) + z, 0.0, 15.0) : z;
      const double r = w[i] - d * (q - z);
      err += (imp ? imp[i] : 1.0) * r * r;
    }
  }
  return err;
}

// A weight row as checkpoints have them: groups of very different magnitudes, one of zeros and
// (for the asymmetric range) one of positive values only.
std::vector<float> weight_row(int64_t n, int64_t group, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t g0 = 0, k = 0; g0 < n; g0 += group, ++k) {
    const float mag = std::ldexp(1.0f, -10 + static_cast<int>(rng() % 10));
    for (int64_t i = g0; i < g0 + group; ++i) {
      float v = mag * normal(rng);
      if (k == 1) v = 0.0f;
      if (k == 2) v = std::fabs(v) + mag;
      w[static_cast<size_t>(i)] = v;
    }
  }
  return w;
}

// Rows of random codes, positive scales over many magnitudes and random integer zero points.
std::vector<uint8_t> random_i4_rows(int64_t group, int64_t rows, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t blocks = rows * n / group, bytes = group / 2 + 8;
  std::vector<uint8_t> out(static_cast<size_t>(blocks * bytes));
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out.data() + b * bytes;
    const float d = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -12 + static_cast<int>(rng() % 12));
    const auto z = static_cast<float>(rng() % 16);
    std::memcpy(blk, &d, 4);
    std::memcpy(blk + 4, &z, 4);
    for (int64_t k = 0; k < group / 2; ++k) blk[8 + k] = static_cast<uint8_t>(rng());
  }
  return out;
}

bool same_bits(float a, float b) { return f32_bits(a) == f32_bits(b); }

const char* precision_name(ScalePrecision p) {
  return p == ScalePrecision::f16 ? "f16" : p == ScalePrecision::bf16 ? "bf16" : "f32";
}

}  // namespace

TEST_CASE("INT4 quantizer: scale in its storage precision, integer zero point (8 symmetric), nearest codes, error reported exactly", "[int4]") {
  for (const I4Type& t : i4_types()) {
    const int64_t G = t.group, n = 6 * G;
    for (bool symmetric : {true, false})
      for (bool weighted : {false, true})
        for (ScalePrecision p : {ScalePrecision::f32, ScalePrecision::f16, ScalePrecision::bf16})
          for (uint64_t seed = 1; seed <= 4; ++seed) {
            INFO("group " << G << " symmetric " << symmetric << " importance " << weighted << " scale "
                          << precision_name(p) << " seed " << seed);
            const auto w = weight_row(n, G, seed * 31 + static_cast<uint64_t>(G));
            const auto imp = random_floats(static_cast<size_t>(n), seed + 100, 0.01f, 10.0f);
            const I4QuantOptions o{.group = G, .symmetric = symmetric, .importance = weighted ? imp.data() : nullptr,
                                   .scale_precision = p};
            std::vector<uint8_t> row(static_cast<size_t>(n / G * i4_block_bytes(G)));
            quantize_row_i4(w.data(), row.data(), n, o);
            std::vector<float> deq(static_cast<size_t>(n));
            cpu_type_traits(t.type)->to_float_ref(row.data(), deq.data(), n);
            double err = 0, err_f32 = 0;
            for (int64_t b = 0; b < n / G; ++b) {
              const BlockFields f = block_fields(row.data(), G, b);
              REQUIRE(std::isfinite(f.d));
              REQUIRE(f.d >= 0.0f);
              REQUIRE(stored_scale(f.d, p) == f.d);
              REQUIRE(f.z == std::nearbyint(f.z));
              REQUIRE(f.z >= 0.0f);
              REQUIRE(f.z <= 15.0f);
              if (symmetric) REQUIRE(f.z == 8.0f);
              double amax = 0;
              for (int64_t i = b * G; i < (b + 1) * G; ++i) amax = std::max(amax, std::fabs(double(w[static_cast<size_t>(i)])));
              if (amax == 0) REQUIRE(f.d == 0.0f);
              for (int64_t i = b * G; i < (b + 1) * G; ++i) {
                const auto k = static_cast<size_t>(i);
                const int q = code(row.data(), G, i);
                REQUIRE(deq[k] == f.d * (static_cast<float>(q) - f.z));
                // The nearest code for the scale: half a step from w, or w lies outside the grid
                // [d (0 - z), d (15 - z)] and the code is the grid's end.
                const double v = exact_value(row.data(), G, i), x = w[k];
                const double outside = std::max({0.0, double(f.d) * (0 - f.z) - x, x - double(f.d) * (15 - f.z)});
                REQUIRE(std::fabs(x - v) <= outside + double(f.d) / 2 * (1 + 1e-6));
                if (!weighted) REQUIRE(std::fabs(x - v) <= amax / 3);
                const double wi = weighted ? imp[k] : 1.0;
                err += wi * (x - v) * (x - v);
                err_f32 += wi * (x - deq[k]) * (x - deq[k]);
              }
            }
            const double reported = i4_row_error(w.data(), n, o);
            CHECK(reported == Approx(err).epsilon(1e-9).margin(1e-300));
            CHECK(reported == Approx(err_f32).epsilon(1e-4).margin(1e-300));
          }
  }
}

TEST_CASE("INT4 quantizer's search never loses to plain round-to-nearest min/max quantization", "[int4]") {
  for (const I4Type& t : i4_types()) {
    const int64_t G = t.group, n = 8 * G;
    for (bool symmetric : {true, false})
      for (bool weighted : {false, true})
        for (ScalePrecision p : {ScalePrecision::f32, ScalePrecision::f16, ScalePrecision::bf16})
          for (uint64_t seed = 1; seed <= 25; ++seed) {
            INFO("group " << G << " symmetric " << symmetric << " importance " << weighted << " scale "
                          << precision_name(p) << " seed " << seed);
            // Uniform, normal and heavy-tailed rows.
            std::mt19937_64 rng(seed * 977 + static_cast<uint64_t>(G));
            std::vector<float> w(static_cast<size_t>(n));
            std::normal_distribution<float> normal(0.0f, 0.02f);
            std::student_t_distribution<float> heavy(2.0f);
            std::uniform_real_distribution<float> uniform(-0.3f, 0.1f);
            for (auto& v : w) v = seed % 3 == 0 ? uniform(rng) : seed % 3 == 1 ? normal(rng) : 0.01f * heavy(rng);
            const auto imp = random_floats(static_cast<size_t>(n), seed + 7, 0.01f, 10.0f);
            const float* ip = weighted ? imp.data() : nullptr;
            const I4QuantOptions o{.group = G, .symmetric = symmetric, .importance = ip, .scale_precision = p};
            std::vector<uint8_t> row(static_cast<size_t>(n / G * i4_block_bytes(G)));
            quantize_row_i4(w.data(), row.data(), n, o);
            double err = 0;
            for (int64_t i = 0; i < n; ++i) {
              const double r = double(w[static_cast<size_t>(i)]) - exact_value(row.data(), G, i);
              err += (ip ? ip[i] : 1.0) * r * r;
            }
            for (double m : symmetric ? std::vector<double>{7.0, 7.5, 8.0} : std::vector<double>{15.0}) {
              const double rtn = rtn_error(w.data(), ip, n, G, symmetric, m, p);
              INFO("search " << err << " round-to-nearest (amax / " << m << ") " << rtn);
              CHECK(err <= rtn * (1 + 1e-6));
            }
          }
  }
}

TEST_CASE("INT4 quantizer: the group search equals its scalar twin bit for bit, codes are nearbyint's", "[int4]") {
  // Group lengths of the types and others (a tail of 1 to 3 values after the fours); values
  // uniform, normal, heavy-tailed, with exact zeros, and on the half-steps of a scale.
  for (int64_t g : {32, 64, 128, 4, 5, 37, 130})
    for (bool symmetric : {true, false})
      for (bool weighted : {false, true})
        for (ScalePrecision p : {ScalePrecision::f32, ScalePrecision::f16, ScalePrecision::bf16})
          for (uint64_t seed = 1; seed <= 8; ++seed) {
            INFO("g " << g << " symmetric " << symmetric << " importance " << weighted << " scale " << precision_name(p)
                      << " seed " << seed);
            std::mt19937_64 rng(seed * 131 + static_cast<uint64_t>(g));
            std::normal_distribution<float> normal(0.0f, 0.02f);
            std::student_t_distribution<float> heavy(2.0f);
            std::uniform_real_distribution<float> uniform(-0.3f, 0.1f);
            std::vector<float> w(static_cast<size_t>(g));
            for (size_t i = 0; i < w.size(); ++i) {
              const uint64_t kind = seed % 4;
              w[i] = kind == 0 ? uniform(rng) : kind == 1 ? normal(rng) : kind == 2 ? 0.01f * heavy(rng)
                                                                                 : 0.125f * static_cast<float>(int(i % 17) - 8) + 0.0625f;
              if (i % 11 == 3) w[i] = 0.0f;
            }
            const auto imp = random_floats(static_cast<size_t>(g), seed + 19, 0.01f, 10.0f);
            const float* ip = weighted ? imp.data() : nullptr;
            const I4Group fast = i4_choose_group(w.data(), ip, g, symmetric, p);
            const I4Group ref = i4_choose_group_ref(w.data(), ip, g, symmetric, p);
            CHECK(same_bits(fast.d, ref.d));
            CHECK(same_bits(fast.z, ref.z));
            CHECK(std::memcmp(&fast.err, &ref.err, sizeof(double)) == 0);
          }
  // Codes: clamp(nearbyint(x / d) + z, 0, 15), half-way values to even, far and non-finite ratios
  // at the ends.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> value(-40.0f, 40.0f);
  for (float d : {1.0f, 0.5f, 0.37f, 1e-30f, 3e38f})
    for (float z : {0.0f, 3.0f, 8.0f, 15.0f}) {
      std::vector<float> xs = {0.0f, -0.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -7.5f, 6.5f, 7.5f, 1e30f, -1e30f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
      for (int k = 0; k < 200; ++k) xs.push_back(value(rng) * d);
      for (float x : xs) {
        INFO("x " << x << " d " << d << " z " << z);
        const float q = std::nearbyint(x / d);
        const int expect = static_cast<int>(std::clamp(q + z, 0.0f, 15.0f));
        CHECK(i4_code(x, {d, z}) == expect);
      }
    }
}

TEST_CASE("INT4 dot: the scalar twin is within its float rounding of the float64 product of the dequantized row", "[int4]") {
  const double u = std::ldexp(1.0, -24);
  for (const I4Type& t : i4_types()) {
    const int64_t G = t.group;
    for (int64_t n : {G, 5 * G, int64_t{1408}, int64_t{4096}}) {
      const auto w = random_i4_rows(G, 4, n, 5 + static_cast<uint64_t>(n + G));
      const auto x = activation_floats(n, 11 + static_cast<uint64_t>(n));
      const int64_t row_bytes = n / G * i4_block_bytes(G);
      for (int64_t o = 0; o < 4; ++o) {
        const uint8_t* row = w.data() + o * row_bytes;
        const float y = qdot(t.ref, row, x.data(), n);
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double prod = exact_value(row, G, i) * x[static_cast<size_t>(i)];
          exact += prod;
          mag += std::fabs(prod);
        }
        // Per lane: G / 16 fused steps in a group, one fold per group, then 4 tree additions.
        const double chain = double(G) / 16 + double(n) / G + 4;
        INFO("group " << G << " n " << n << " row " << o);
        CHECK(std::fabs(double(y) - exact) <= chain * u * mag * 1.01);
      }
    }
  }
}

TEST_CASE("INT4 dot kernels of every ISA equal the scalar twin bit for bit for 1 to 9 strided activation rows", "[int4]") {
  const CpuIsa cpu = detected_isa();
  for (const I4Type& t : i4_types()) {
    const CpuTypeTraits& e = *cpu_type_traits(t.type);
    REQUIRE(e.dot_ref == t.ref);
    REQUIRE(e.dot_avx2 == t.avx2);
    REQUIRE(e.dot_avx512 == t.avx512);
    REQUIRE(e.vec_dot_type == DType::f32);
    struct Variant {
      const char* name;
      QDotFn fn;
    };
    std::vector<Variant> variants{{"ref", t.ref}};
    if (cpu >= CpuIsa::avx2) variants.push_back({"avx2", t.avx2});
    if (cpu >= CpuIsa::avx512) variants.push_back({"avx512", t.avx512});
    for (CpuIsa isa : supported_isas()) variants.push_back({isa_name(isa), e.dot(isa)});
    const int64_t G = t.group;
    for (int64_t n : {G, 2 * G, 5 * G, int64_t{1408}}) {
      // Random blocks, and rows from the quantizer (symmetric and asymmetric).
      auto w = random_i4_rows(G, 3, n, 41 + static_cast<uint64_t>(n + G));
      const int64_t row_bytes = n / G * i4_block_bytes(G);
      w.resize(static_cast<size_t>(5 * row_bytes));
      const auto f = weight_row(n, G, 3);
      quantize_row_i4(f.data(), w.data() + 3 * row_bytes, n, {.group = G, .symmetric = true});
      quantize_row_i4(f.data(), w.data() + 4 * row_bytes, n, {.group = G, .symmetric = false});
      const int64_t stride = n + 20;  // floats between activation rows
      const auto x = activation_floats(9 * stride, 13 + static_cast<uint64_t>(n));
      const int64_t as = stride * 4, ys = 3;
      for (int64_t o = 0; o < 5; ++o) {
        const uint8_t* row = w.data() + o * row_bytes;
        std::vector<float> ref(9);
        for (int64_t r = 0; r < 9; ++r) ref[static_cast<size_t>(r)] = qdot(t.ref, row, x.data() + r * stride, n);
        for (const Variant& v : variants) {
          for (int64_t n_a : {1, 2, 3, 4, 5, 9}) {
            INFO("group " << G << " n " << n << " row " << o << " kernel " << v.name << " rows " << n_a);
            std::vector<float> y(static_cast<size_t>(n_a * ys), std::numeric_limits<float>::quiet_NaN());
            v.fn(row, x.data(), as, n_a, n, y.data(), ys);
            for (int64_t r = 0; r < n_a; ++r) {
              REQUIRE(same_bits(y[static_cast<size_t>(r * ys)], ref[static_cast<size_t>(r)]));
              REQUIRE(std::isnan(y[static_cast<size_t>(r * ys + 1)]));  // nothing written between results
            }
          }
        }
      }
    }
  }
}

TEST_CASE("INT4 matmul equals the scalar twin bit for bit on every ISA, whatever the rows and their chunks", "[int4][matmul]") {
  // n_in 2048: F32 activation rows of 8 KiB, met by each weight row 4 at a time (the matmul's
  // chunks of about 32 KiB); n_in 256: 16 at a time. Each result is the same wherever its row falls.
  ThreadPool pool(3);
  for (const I4Type& t : i4_types()) {
    for (int64_t n_in : {int64_t{256}, int64_t{2048}}) {
      const int64_t n_out = 19;
      auto bytes = random_i4_rows(t.group, n_out, n_in, 7 + static_cast<uint64_t>(n_in + t.group));
      const TensorView w = TensorView::contiguous(t.type, 2, {n_in, n_out, 1, 1}, bytes.data());
      const auto x = activation_floats(41 * n_in, 5);
      std::vector<float> ref(static_cast<size_t>(41 * n_out));
      matmul_ref(w, x.data(), 41, n_in, ref.data(), n_out);
      for (CpuIsa isa : supported_isas()) {
        IsaScope scope(isa);
        for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{17}, int64_t{41}}) {
          INFO("group " << t.group << " n_in " << n_in << " isa " << isa_name(isa) << " rows " << rows);
          std::vector<float> y(static_cast<size_t>(rows * n_out));
          matmul(w, x.data(), rows, n_in, y.data(), n_out, pool);
          for (size_t k = 0; k < y.size(); ++k) REQUIRE(same_bits(y[k], ref[k]));
        }
      }
    }
  }
}

TEST_CASE("INT4 weights from compressed-tensors arrays round-trip exactly, a group of 2 G repeats its scale", "[int4]") {
  const int64_t rows = 3, n = 256;
  for (const I4Type& t : i4_types()) {
    const int64_t G = t.group;
    for (int64_t group : {G, 2 * G})
      for (bool symmetric : {true, false}) {
        INFO("type group " << G << " checkpoint group " << group << " symmetric " << symmetric);
        std::mt19937_64 rng(static_cast<uint64_t>(G + group) + symmetric);
        const int64_t groups = n / group;
        std::vector<int8_t> values(static_cast<size_t>(rows * n)), zp;
        for (auto& v : values) v = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
        std::vector<float> scale(static_cast<size_t>(rows * groups));
        for (auto& s : scale) s = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -10 + static_cast<int>(rng() % 8));
        if (!symmetric) {
          zp.resize(scale.size());
          for (auto& z : zp) z = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
        }
        const int64_t row_bytes = n / G * i4_block_bytes(G);
        std::vector<uint8_t> packed(static_cast<size_t>(rows * row_bytes));
        REQUIRE(i4_rows_from_compressed({values, scale, zp, rows, n, group}, t.type, packed.data()).is_ok());
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* row = packed.data() + r * row_bytes;
          std::vector<int8_t> v_back(static_cast<size_t>(n)), zp_back(static_cast<size_t>(n / G));
          std::vector<float> s_back(static_cast<size_t>(n / G));
          i4_row_to_compressed(row, t.type, n, v_back.data(), s_back.data(), zp_back.data());
          std::vector<float> deq(static_cast<size_t>(n));
          cpu_type_traits(t.type)->to_float_ref(row, deq.data(), n);
          for (int64_t i = 0; i < n; ++i) {
            const auto k = static_cast<size_t>(i), s = static_cast<size_t>(r * groups + i / group);
            REQUIRE(v_back[k] == values[static_cast<size_t>(r * n + i)]);
            const int z = symmetric ? 0 : zp[s];
            REQUIRE(deq[k] == scale[s] * static_cast<float>(values[static_cast<size_t>(r * n + i)] - z));
          }
          for (int64_t b = 0; b < n / G; ++b) {
            const auto s = static_cast<size_t>(r * groups + b * G / group);
            REQUIRE(s_back[static_cast<size_t>(b)] == scale[s]);
            REQUIRE(zp_back[static_cast<size_t>(b)] == (symmetric ? 0 : zp[s]));
            REQUIRE(block_fields(row, G, b).z == static_cast<float>((symmetric ? 0 : zp[s]) + 8));
          }
        }
      }
  }
}

TEST_CASE("INT4 compressed-tensors conversion refuses values, zero points and scales out of range and sizes that disagree", "[int4]") {
  const int64_t rows = 2, n = 128, group = 64;
  std::vector<int8_t> values(static_cast<size_t>(rows * n), 3), zp(4, -2);
  std::vector<float> scale(4, 0.5f);
  std::vector<uint8_t> out(static_cast<size_t>(rows * n / 32 * i4_block_bytes(32)));
  auto status = [&](const std::vector<int8_t>& v, const std::vector<float>& s, const std::vector<int8_t>& z, int64_t rw,
                    int64_t nn, int64_t g, DType t) { return i4_rows_from_compressed({v, s, z, rw, nn, g}, t, out.data()).code(); };
  REQUIRE(status(values, scale, zp, rows, n, group, DType::i4_g32) == StatusCode::ok);
  REQUIRE(status(values, scale, {}, rows, n, group, DType::i4_g64) == StatusCode::ok);
  const auto bad = StatusCode::invalid_argument;
  for (int8_t v : {int8_t{8}, int8_t{-9}, int8_t{127}}) {
    auto vv = values;
    vv[77] = v;
    CHECK(status(vv, scale, zp, rows, n, group, DType::i4_g32) == bad);
    auto zz = zp;
    zz[3] = v;
    CHECK(status(values, scale, zz, rows, n, group, DType::i4_g32) == bad);
  }
  for (float s : {-0.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto ss = scale;
    ss[2] = s;
    CHECK(status(values, ss, zp, rows, n, group, DType::i4_g32) == bad);
  }
  const std::vector<int8_t> short_values(values.begin(), values.end() - 1);
  CHECK(status(short_values, scale, zp, rows, n, group, DType::i4_g32) == bad);
  CHECK(status(values, {0.5f, 0.5f, 0.5f}, zp, rows, n, group, DType::i4_g32) == bad);
  CHECK(status(values, scale, {1, 1, 1, 1, 1}, rows, n, group, DType::i4_g32) == bad);
  CHECK(status(values, scale, zp, rows, n, group, DType::i4_g128) == bad);  // 128 does not divide 64
  CHECK(status(values, scale, zp, rows, n, 48, DType::i4_g32) == bad);      // neither 48 | 128 nor 32 | 48
  CHECK(status(values, scale, zp, rows, n, group, DType::q4_0) == bad);
}

TEST_CASE("INT4 int32 words are compressed-tensors' pack_to_int32: element i at bits 4 (i mod 8) of word i / 8, as v + 8", "[int4]") {
  std::vector<int8_t> ramp(16);
  for (int i = 0; i < 16; ++i) ramp[static_cast<size_t>(i)] = static_cast<int8_t>(i - 8);
  std::vector<int32_t> words(2);
  pack_int4_words(ramp.data(), 16, words.data());
  CHECK(static_cast<uint32_t>(words[0]) == 0x76543210u);
  CHECK(static_cast<uint32_t>(words[1]) == 0xFEDCBA98u);
  const std::vector<int8_t> mixed{7, -8, 0, -1, 1, 3, -5, 2};  // stored 15, 0, 8, 7, 9, 11, 3, 10
  pack_int4_words(mixed.data(), 8, words.data());
  CHECK(static_cast<uint32_t>(words[0]) == 0xA3B9780Fu);
  std::vector<int8_t> back(16);
  unpack_int4_words(words.data(), 8, back.data());
  CHECK(std::vector<int8_t>(back.begin(), back.begin() + 8) == mixed);

  std::mt19937_64 rng(3);
  std::vector<int8_t> values(1024);
  for (auto& v : values) v = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
  std::vector<int32_t> packed(128);
  pack_int4_words(values.data(), 1024, packed.data());
  std::vector<int8_t> unpacked(1024);
  unpack_int4_words(packed.data(), 1024, unpacked.data());
  CHECK(unpacked == values);
  std::vector<int32_t> repacked(128);
  pack_int4_words(unpacked.data(), 1024, repacked.data());
  CHECK(repacked == packed);
}
