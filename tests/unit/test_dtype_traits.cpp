// The CPU type table (kernels/cpu/dtype_traits.hpp) against the storage table of core/dtype.hpp
// and the format's arithmetic, and the one mapping between the public WeightType and DType.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "core/thread_pool.hpp"
#include "core/weight_type.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "ops/embedding.hpp"
#include "ops/matmul.hpp"
#include "quant_test_util.hpp"

using namespace infer;

TEST_CASE("the CPU type table covers exactly the computable types and the activation types they meet", "[dtype]") {
  // In id order, one entry per type.
  const auto table = all_cpu_types();
  for (size_t i = 1; i < table.size(); ++i) REQUIRE(static_cast<uint32_t>(table[i - 1].type) < static_cast<uint32_t>(table[i].type));
  for (const DTypeTraits& st : all_dtypes()) {
    INFO(st.name);
    const CpuTypeTraits* e = cpu_type_traits(st.type);
    REQUIRE(can_dequantize(st.type) == st.computable);
    if (!st.computable) {
      // Not readable as weights; present only as some weight type's activation type.
      if (!e) continue;
      REQUIRE(e->to_float_ref == nullptr);
      REQUIRE(e->dot_ref == nullptr);
      REQUIRE(e->from_float_activation != nullptr);
      REQUIRE(std::any_of(table.begin(), table.end(), [&](const CpuTypeTraits& w) { return w.to_float_ref && w.vec_dot_type == st.type; }));
      continue;
    }
    REQUIRE(e != nullptr);
    REQUIRE(&e->storage() == &st);
    REQUIRE(e->to_float_ref != nullptr);
    REQUIRE(e->to_float_avx2 != nullptr);
    // Every weight type's activations have a converter, with whole blocks wherever the weight has them.
    const CpuTypeTraits* a = cpu_type_traits(e->vec_dot_type);
    REQUIRE(a != nullptr);
    REQUIRE(a->from_float_activation != nullptr);
    REQUIRE(st.block_size % a->storage().block_size == 0);
    // F32 weights multiply through kernels/cpu/dot.hpp; every other type has both dot variants.
    REQUIRE((e->dot_ref != nullptr) == (st.type != DType::f32));
    REQUIRE((e->dot_avx2 != nullptr) == (st.type != DType::f32));
    if (e->gemm_avx2 || e->gemm_avx512) REQUIRE(e->dot_ref != nullptr);
  }
}

TEST_CASE("from_float then to_float returns every value within the type's own rounding", "[dtype]") {
  std::mt19937 rng(20261204);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int checked = 0;
  for (const CpuTypeTraits& e : all_cpu_types()) {
    if (!e.from_float) continue;
    INFO(e.storage().name);
    REQUIRE(e.to_float_ref != nullptr);
    const int64_t bs = e.storage().block_size, n = 256;
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng) * 3.0f;
    std::vector<uint8_t> bytes(static_cast<size_t>(*dtype_row_bytes(e.type, static_cast<uint64_t>(n))));
    e.from_float(x.data(), bytes.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    e.to_float_ref(bytes.data(), y.data(), n);
    float row_amax = 0.0f;
    for (float v : x) row_amax = std::max(row_amax, std::fabs(v));
    for (int64_t b = 0; b < n; b += bs) {
      float amax = 0.0f;
      for (int64_t i = b; i < b + bs; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(i)]));
      for (int64_t i = b; i < b + bs; ++i) {
        const float v = x[static_cast<size_t>(i)], got = y[static_cast<size_t>(i)];
        // Bounds from each format: F16 keeps 11 significant bits, BF16 8; Q8_0's step is amax/127
        // (half a step off at most, plus its F16 scale's rounding), Q4_0's is amax/8 with the
        // opposite extreme clipped by up to one step, Q5_0's amax/16 likewise. Q4_1 / Q5_1 step
        // over the block's range (at most 2 amax) in 15 / 31 steps: half a step, plus the F16
        // roundings of the step and the min. The K-quants fit each sub-block's grid by search, so
        // an element may sit up to half a step outside the fitted range as well as half a step
        // off inside it: one step of a grid of nmax steps over [-amax, amax] (amax of the 256).
        const double ulp_scale = amax * std::ldexp(1.0, -9);
        const auto kquant = [&](int nmax) { return 2.0 * amax / nmax; };
        double bound = 0.0;
        switch (e.type) {
          case DType::f32: bound = 0.0; break;
          case DType::f16: bound = std::ldexp(std::fabs(v), -11); break;
          case DType::bf16: bound = std::ldexp(std::fabs(v), -8); break;
          case DType::q8_0: bound = amax / 254.0 + amax * std::ldexp(1.0, -10); break;
          case DType::q4_0: bound = amax / 8.0 + ulp_scale; break;
          case DType::q5_0: bound = amax / 16.0 + ulp_scale; break;
          case DType::q4_1: bound = amax / 15.0 + 2 * ulp_scale; break;
          case DType::q5_1: bound = amax / 31.0 + 2 * ulp_scale; break;
          case DType::q2_k: bound = kquant(3); break;
          case DType::q3_k: bound = kquant(4); break;
          case DType::q4_k: bound = kquant(15); break;
          case DType::q5_k: bound = kquant(31); break;
          case DType::q6_k: bound = kquant(32); break;
          // One step of amax / 127 over the whole row, half of it off (plus the f32 division).
          case DType::i8_row:
          case DType::i8_w8a16: bound = row_amax / 254.0 * (1 + std::ldexp(1.0, -16)); break;
          // E4M3 keeps 4 significant bits (half an ulp: 2^-4 relative), subnormal steps of 2^-9 s
          // with s = amax / 448 of the row.
          case DType::f8_row:
          case DType::f8_tensor:
          case DType::f8_w8a8:
            bound = std::max(std::ldexp(double(std::fabs(v)), -4), row_amax / 448.0 * std::ldexp(1.0, -10)) * (1 + std::ldexp(1.0, -16));
            break;
          // INT4 groups: the scale searched from amax / 6 to amax / 9 and refined by least squares;
          // the chosen one never leaves an element further than a third of the group's amax
          // (clipping at 7 steps of amax / 9 is 2 amax / 9 off).
          case DType::i4_g32:
          case DType::i4_g64:
          case DType::i4_g128: bound = amax / 3.0; break;
          // INT8 groups: one step of amax / 127 of the group, half of it off (plus the f32 division).
          case DType::i8_g32:
          case DType::i8_g64:
          case DType::i8_g128: bound = amax / 254.0 * (1 + std::ldexp(1.0, -16)); break;
          default: FAIL("a type with from_float this test has no bound for");
        }
        INFO("element " << i << " x " << v << " got " << got);
        REQUIRE(std::fabs(static_cast<double>(got) - v) <= bound);
      }
    }
    ++checked;
  }
  REQUIRE(checked == 24);  // every computable type
}

TEST_CASE("WeightType and DType map one to one, and unknown values are an error", "[dtype]") {
  REQUIRE(weight_dtype(WeightType::keep).value() == std::nullopt);
  REQUIRE(weight_dtype(WeightType::q8_0).value() == DType::q8_0);
  REQUIRE(weight_dtype(WeightType::q4_0).value() == DType::q4_0);
  REQUIRE(weight_dtype(WeightType::int8).value() == DType::i8_row);
  REQUIRE(weight_dtype(WeightType::fp8).value() == DType::f8_row);
  REQUIRE(weight_dtype(WeightType::fp8_tensor).value() == DType::f8_tensor);
  REQUIRE(weight_dtype(WeightType::int4).value() == DType::i4_g128);
  REQUIRE(weight_dtype(WeightType::fp8_dynamic).value() == DType::f8_w8a8);
  REQUIRE(weight_dtype(WeightType::w8a16).value() == DType::i8_w8a16);
  const auto bad = weight_dtype(static_cast<WeightType>(9));
  REQUIRE(!bad.ok());
  REQUIRE(bad.status().code() == StatusCode::invalid_argument);
  REQUIRE(bad.status().message().find('9') != std::string::npos);
  for (WeightType w : {WeightType::q8_0, WeightType::q4_0, WeightType::int8, WeightType::fp8, WeightType::fp8_tensor, WeightType::int4,
                       WeightType::fp8_dynamic, WeightType::w8a16}) {
    const DType t = *weight_dtype(w).value();
    REQUIRE(weight_type_of(t) == w);
    // Load-time conversion can write it.
    REQUIRE(cpu_type_traits(t) != nullptr);
    REQUIRE(cpu_type_traits(t)->from_float != nullptr);
    REQUIRE(dtype_traits(t)->quantized);
  }
  for (const DTypeTraits& st : all_dtypes())
    if (st.type != DType::q8_0 && st.type != DType::q4_0 && !st.internal)
      REQUIRE(weight_type_of(st.type) == std::nullopt);
}

TEST_CASE("matmul and embed report a weight type no CPU kernel reads instead of crashing", "[dtype][ops]") {
  ThreadPool pool(1);
  CpuBackend be(pool);
  // Q8_1 blocks are valid storage (36 bytes per 32) but only ever activations.
  std::vector<uint8_t> bytes(2 * 36, 0);
  const TensorView w = TensorView::contiguous(DType::q8_1, 2, {32, 2, 1, 1}, bytes.data());
  auto x = be.activation(0, 32, 1);
  auto y = be.activation(1, 2, 1);
  REQUIRE(x.ok());
  REQUIRE(y.ok());
  const Status m = ops::matmul(be, w, *x, *y);
  REQUIRE(m.code() == StatusCode::unsupported);
  REQUIRE(m.message().find("Q8_1") != std::string::npos);
  const int32_t tokens[] = {1};
  const Status e = ops::embed(be, w, tokens, *x);
  REQUIRE(e.code() == StatusCode::unsupported);
  REQUIRE(e.message().find("Q8_1") != std::string::npos);
}

TEST_CASE("the embedding reads a table the CPU backend packed at load exactly as the file's rows", "[dtype][ops][backend]") {
  const int64_t n_embd = 64, n_vocab = 37;  // a partial last group of rows
  const auto bytes = test::random_weights(DType::q4_0, n_vocab, n_embd, 11);
  const TensorView table = TensorView::contiguous(DType::q4_0, 2, {n_embd, n_vocab, 1, 1}, const_cast<uint8_t*>(bytes.data()));
  const std::vector<int32_t> tokens{0, 36, 5, 16, 17, 15};
  // Q4_0 is packed at load from AVX2 up (the AVX-512 tiles' layout on every such level), and
  // stays in the file's rows below.
  for (CpuIsa isa : test::supported_isas()) {
    INFO("isa " << static_cast<int>(isa));
    test::IsaScope scope(isa);
    ThreadPool pool(1);
    CpuBackend be(pool);
    auto packed = be.prepare_weight(table, Backend::WeightSource::kept);
    REQUIRE(packed.ok());
    REQUIRE((packed->layout == Layout::cpu_packed) == (isa >= CpuIsa::avx2));
    auto a = be.activation(0, n_embd, static_cast<int64_t>(tokens.size()));
    auto b = be.activation(1, n_embd, static_cast<int64_t>(tokens.size()));
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(ops::embed(be, table, tokens, *a, 1.0f).is_ok());
    REQUIRE(ops::embed(be, *packed, tokens, *b, 1.0f).is_ok());
    REQUIRE(std::memcmp(a->data, b->data, tokens.size() * n_embd * sizeof(float)) == 0);
  }
}
