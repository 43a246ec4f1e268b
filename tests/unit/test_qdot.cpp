// The quantized dot products (kernels/cpu/qdot.hpp): each against float64 arithmetic on the
// dequantized weight and activation blocks, and the AVX2 kernels against the scalar ones.
// (Their exact float order is pinned by test_qmatmul.cpp, against llama.cpp's own results.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant/quantize_activations.hpp"
#include "quant_test_util.hpp"

using namespace infer;
using namespace infer::test;

namespace {

const std::vector<DType>& qdot_types() {
  static const std::vector<DType> types = [] {
    std::vector<DType> t;
    for (DType d : computable_types())
      if (d != DType::f32) t.push_back(d);
    return t;
  }();
  return types;
}

// The activation row's values, exactly (float64), from its blocks.
std::vector<double> activation_values(DType at, const std::vector<uint8_t>& a, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    switch (at) {
      case DType::f16: std::memcpy(&h, &a[static_cast<size_t>(2 * i)], 2); v[static_cast<size_t>(i)] = f16_to_f32(h); break;
      case DType::bf16: std::memcpy(&h, &a[static_cast<size_t>(2 * i)], 2); v[static_cast<size_t>(i)] = bf16_to_f32(h); break;
      case DType::q8_0:
      case DType::q8_1: {
        const size_t block = static_cast<size_t>(i / 32) * (at == DType::q8_0 ? 34 : 36);
        std::memcpy(&h, &a[block], 2);
        const auto q = static_cast<int8_t>(a[block + (at == DType::q8_0 ? 2 : 4) + static_cast<size_t>(i % 32)]);
        v[static_cast<size_t>(i)] = double(f16_to_f32(h)) * q;
        break;
      }
      case DType::q8_k: {
        const size_t block = static_cast<size_t>(i / 256) * 292;
        float d;
        std::memcpy(&d, &a[block], 4);
        v[static_cast<size_t>(i)] = double(d) * static_cast<int8_t>(a[block + 4 + static_cast<size_t>(i % 256)]);
        break;
      }
      default: FAIL("not an activation type");
    }
  }
  return v;
}


std::vector<uint8_t> prepare(DType weight, const std::vector<float>& x) {
  const DType at = activation_type(weight);
  std::vector<uint8_t> a(*dtype_row_bytes(at, x.size()));
  prepare_activations(at, x.data(), a.data(), static_cast<int64_t>(x.size()));
  return a;
}

// Sequential float steps along the longest chain of one kernel (qdot.hpp), for the error bound.
double chain_length(DType t, int64_t n) {
  switch (dtype_traits(t)->block_size) {
    case 1: return double(n) / 8;
    case 32: return double(n) / 32;
    default: return 4.0 * double(n) / 256;  // Q4_K: four steps per super-block; the others one
  }
}

}  // namespace

TEST_CASE("activation_type is ggml's vec_dot_type", "[qdot]") {
  REQUIRE(activation_type(DType::f32) == DType::f32);
  REQUIRE(activation_type(DType::f16) == DType::f16);
  REQUIRE(activation_type(DType::bf16) == DType::bf16);
  for (DType t : {DType::q4_0, DType::q5_0, DType::q8_0}) REQUIRE(activation_type(t) == DType::q8_0);
  for (DType t : {DType::q4_1, DType::q5_1}) REQUIRE(activation_type(t) == DType::q8_1);
  for (DType t : {DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k}) REQUIRE(activation_type(t) == DType::q8_k);
}

// Bound: every integer step is exact; each float step (at most chain + 5 of them along any
// partial sum: the scale products, the chain of fused accumulations, the lane tree or the final
// subtraction) rounds once, relative to the magnitude M = Σ|a_i| (|d sc q_i| + |dmin m_i|).
// Q4_1 / Q5_1 also use the activation's s = F16(d_f32 * Σq) for the min term, not dA * Σq:
// |m| |s - dA Σq| per block is part of the bound, computed exactly.
TEST_CASE("every quantized dot agrees with float64 on the dequantized blocks to float rounding", "[qdot]") {
  const double u = std::ldexp(1.0, -24);
  for (DType t : qdot_types()) {
    const auto bs = dtype_traits(t)->block_size;
    for (int64_t n : {int64_t{bs == 1 ? 8 : bs}, int64_t{bs == 1 ? 1000 : bs * 7}}) {
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        const auto w = random_weights(t, 1, n, 100 * seed + static_cast<uint64_t>(t));
        const auto x = test::activation_floats(n, seed);
        const auto a = prepare(t, x);
        const auto av = activation_values(activation_type(t), a, n);
        const auto [scale_part, min_part] = weight_parts(t, w.data(), n);
        double exact = 0, magnitude = 0, extra = 0;
        for (int64_t i = 0; i < n; ++i) {
          const auto k = static_cast<size_t>(i);
          // The float dequantization rounds d*sc*q - dmin*m once: from the parts, exactly.
          exact += (double(scale_part[k]) + double(min_part[k])) * av[k];
          magnitude += (std::fabs(double(scale_part[k])) + std::fabs(double(min_part[k]))) * std::fabs(av[k]);
        }
        if (t == DType::q4_1 || t == DType::q5_1) {
          for (int64_t b = 0; b < n / 32; ++b) {
            const size_t blk = static_cast<size_t>(b) * 36;
            uint16_t d16, s16;
            std::memcpy(&d16, &a[blk], 2);
            std::memcpy(&s16, &a[blk + 2], 2);
            int sum = 0;
            for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(a[blk + 4 + static_cast<size_t>(j)]);
            extra += std::fabs(double(min_part[static_cast<size_t>(b * 32)])) *
                     std::fabs(double(f16_to_f32(s16)) - double(f16_to_f32(d16)) * sum);
          }
        }
        for (CpuIsa isa : supported_isas()) {
          const double got = qdot(qdot_kernel(t, isa), w.data(), a.data(), n);
          const double bound = (chain_length(t, n) + 6) * u * magnitude + extra;
          INFO(dtype_name(t) << " n " << n << " seed " << seed << " isa " << isa_name(isa) << " got " << got << " exact "
                             << exact << " magnitude " << magnitude);
          REQUIRE(std::fabs(got - exact) <= bound);
        }
      }
    }
  }
}

TEST_CASE("AVX2 dot kernels equal the scalar ones bit for bit on random blocks", "[qdot]") {
  if (detected_isa() < CpuIsa::avx2) return;  // nothing to compare on this CPU
  for (DType t : qdot_types()) {
    const auto bs = dtype_traits(t)->block_size;
    for (int64_t n : {int64_t{bs}, int64_t{bs * 9}, int64_t{bs == 1 ? 1003 : bs * 16}}) {
      for (uint64_t seed = 1; seed <= 20; ++seed) {
        // Scales over the whole F16 range on half the draws, subnormals included.
        const auto w = random_weights(t, 1, n, 7 * seed + static_cast<uint64_t>(t), seed % 2 ? kTypicalScale : kAnyFiniteHalf);
        const auto a = prepare(t, test::activation_floats(n, seed));
        const float ref = qdot(cpu_type_traits(t)->dot_ref, w.data(), a.data(), n);
        const float avx2 = qdot(cpu_type_traits(t)->dot_avx2, w.data(), a.data(), n);
        INFO(dtype_name(t) << " n " << n << " seed " << seed << " ref " << ref << " avx2 " << avx2);
        if (std::isnan(ref)) {
          REQUIRE(std::isnan(avx2));
        } else {
          REQUIRE(f32_bits(ref) == f32_bits(avx2));
        }
      }
    }
  }
}

TEST_CASE("a kernel given several activation rows returns each row's single-row result", "[qdot]") {
  for (DType t : qdot_types()) {
    const int64_t n = dtype_traits(t)->block_size == 1 ? 77 : 512;
    const auto w = random_weights(t, 1, n, 40 + static_cast<uint64_t>(t));
    const DType at = activation_type(t);
    const auto row = static_cast<int64_t>(*dtype_row_bytes(at, static_cast<uint64_t>(n)));
    const int64_t stride = row + 12;  // rows apart by more than their size
    const int64_t n_a = 9;            // two 4-row tiles and one more
    std::vector<uint8_t> a(static_cast<size_t>(n_a * stride));
    for (int64_t r = 0; r < n_a; ++r) {
      const auto x = test::activation_floats(n, 50 + static_cast<uint64_t>(r));
      prepare_activations(at, x.data(), a.data() + r * stride, n);
    }
    for (CpuIsa isa : supported_isas()) {
      const QDotFn kernel = qdot_kernel(t, isa);
      for (int64_t count = 1; count <= n_a; ++count) {
        std::vector<float> y(static_cast<size_t>(3 * count), -1.0f);
        kernel(w.data(), a.data(), stride, count, n, y.data(), 3);
        for (int64_t r = 0; r < count; ++r) {
          INFO(dtype_name(t) << " isa " << isa_name(isa) << " rows " << count << " row " << r);
          REQUIRE(f32_bits(y[static_cast<size_t>(3 * r)]) == f32_bits(qdot(kernel, w.data(), a.data() + r * stride, n)));
          REQUIRE(y[static_cast<size_t>(3 * r + 1)] == -1.0f);
        }
      }
    }
  }
}

TEST_CASE("the several-rows decode kernels equal the scalar one-row dot bit for bit", "[qdot]") {
  // Every ISA the CPU runs; n_w 1 to 9: the four-row and two-row passes and the tails; scales over
  // the whole F16 range on half the draws.
  for (CpuIsa isa : supported_isas()) {
    int kernels = 0;
    for (DType t : qdot_types()) {
      const QDotRowsFn rows = cpu_type_traits(t)->dot_rows(isa);
      if (!rows) continue;
      ++kernels;
      for (int64_t n : {int64_t{32}, int64_t{32 * 9}, int64_t{2048}}) {
        for (uint64_t seed = 1; seed <= 6; ++seed) {
          const int64_t n_w = 9;
          const auto w = random_weights(t, n_w, n, 11 * seed + static_cast<uint64_t>(t), seed % 2 ? kTypicalScale : kAnyFiniteHalf);
          const auto ws = static_cast<int64_t>(w.size()) / n_w;
          const auto a = prepare(t, test::activation_floats(n, seed));
          for (int64_t count = 1; count <= n_w; ++count) {
            std::vector<float> y(static_cast<size_t>(count + 1), -1.0f);
            rows(w.data(), ws, count, a.data(), n, y.data());
            for (int64_t j = 0; j < count; ++j) {
              const float ref = qdot(cpu_type_traits(t)->dot_ref, w.data() + j * ws, a.data(), n);
              INFO(dtype_name(t) << " " << isa_name(isa) << " n " << n << " seed " << seed << " rows " << count << " row " << j);
              if (std::isnan(ref)) {
                REQUIRE(std::isnan(y[static_cast<size_t>(j)]));
              } else {
                REQUIRE(f32_bits(y[static_cast<size_t>(j)]) == f32_bits(ref));
              }
            }
            REQUIRE(y[static_cast<size_t>(count)] == -1.0f);
          }
        }
      }
    }
    // AVX2: Q8_0, Q5_0, Q4_1, Q5_1, Q4_0, F16, BF16; AVX-512: its own for the first four, AVX2's
    // for the other three.
    INFO(isa_name(isa));
    REQUIRE(kernels == (isa >= CpuIsa::avx2 ? 7 : 0));
  }
}
