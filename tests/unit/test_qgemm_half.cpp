// The F16 / BF16 tile kernels (kernels/cpu/qgemm.hpp) called directly, apart from the matmul
// that drives them: every (weight row, activation row) result is bit-identical to the scalar
// qdot reference, for every group size, activation row count and row length (tails of every
// length, several k blocks), with special values (±0, subnormals, the largest magnitudes) in
// the weights, the packed group aligned or not. (The batched matmul over them: test_matmul.cpp.)
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/cpu_features.hpp"
#include "core/half.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/qdot.hpp"
#include "kernels/cpu/qgemm.hpp"
#include "quant_test_util.hpp"

using namespace infer;
using namespace infer::test;

namespace {

struct HalfKernel {
  const char* name;
  DType type;
  const QGemmKernel* kernel;
  CpuIsa needs;
};

std::vector<HalfKernel> half_kernels() {
  return {{"f16 avx2", DType::f16, &qgemm_f16_avx2, CpuIsa::avx2},
          {"bf16 avx2", DType::bf16, &qgemm_bf16_avx2, CpuIsa::avx2},
          {"f16 avx512", DType::f16, &qgemm_f16_avx512, CpuIsa::avx512},
          {"bf16 avx512", DType::bf16, &qgemm_bf16_avx512, CpuIsa::avx512},
          // The layout packed at load, one for both ISAs (its gemv below the tiles' row count, then
          // the tiles converted from its chunks).
          {"f16 pairs avx2", DType::f16, &qgemm_f16_pairs_avx2, CpuIsa::avx2},
          {"bf16 pairs avx2", DType::bf16, &qgemm_bf16_pairs_avx2, CpuIsa::avx2},
          {"f16 pairs avx512", DType::f16, &qgemm_f16_pairs_avx512, CpuIsa::avx512},
          {"bf16 pairs avx512", DType::bf16, &qgemm_bf16_pairs_avx512, CpuIsa::avx512}};
}

// Weights of n_rows x n: random over the whole range of the type, and about one element in 8
// replaced by a special value: ±0, the smallest and largest subnormals, the largest finite
// magnitudes for F16 (BF16: 2^100, large enough to matter, small enough that no sum overflows).
std::vector<uint8_t> special_weights(DType t, int64_t n_rows, int64_t n, uint64_t seed) {
  auto bytes = random_weights(t, n_rows, n, seed, kAnyFiniteHalf);
  const std::vector<uint16_t> specials =
      t == DType::f16 ? std::vector<uint16_t>{0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x7bff, 0xfbff}
                      : std::vector<uint16_t>{0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x7180, 0xf180};
  std::mt19937_64 rng(seed + 1);
  for (size_t i = 0; i < bytes.size(); i += 2)
    if (rng() % 8 == 0) std::memcpy(&bytes[i], &specials[rng() % specials.size()], 2);
  return bytes;
}

// Activation rows as the matmul converts them: F32 values rounded to the type.
std::vector<uint16_t> activations(DType t, int64_t n_rows, int64_t n, uint64_t seed) {
  const auto x = activation_floats(n_rows * n, seed);
  std::vector<uint16_t> a(static_cast<size_t>(n_rows * n));
  prepare_activations(t, x.data(), a.data(), n_rows * n);
  return a;
}

}  // namespace

TEST_CASE("F16 / BF16 tile kernels equal the scalar qdot bit for bit for every group size, row count and length",
          "[qgemm][matmul]") {
  for (const HalfKernel& hk : half_kernels()) {
    if (detected_isa() < hk.needs) continue;
    const QGemmKernel& k = *hk.kernel;
    const QDotFn ref = hk.type == DType::f16 ? qdot_f16_ref : qdot_bf16_ref;
    // Tails of every length below 8; one and several k blocks, the last one partial.
    for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 515, 1283, 2048}) {
      const uint64_t seed = 1000 + static_cast<uint64_t>(n) * 7 + static_cast<uint64_t>(hk.type);
      const int64_t group = k.group_rows;
      const auto w = special_weights(hk.type, group, n, seed);
      const int64_t w_stride = n * 2;
      const int64_t max_a = 50;  // past one super-block of activation rows
      const auto a = activations(hk.type, max_a, n, seed + 2);
      const int64_t a_stride = n * 2;
      const int64_t side_stride = k.side_bytes(n);
      REQUIRE(side_stride % 64 == 0);
      auto side = AlignedBuffer::allocate(static_cast<size_t>(max_a * side_stride)).value();
      for (int64_t r = 0; r < max_a; ++r) k.prepare_side(a.data() + r * n, side.as<uint8_t>() + r * side_stride, n);
      auto packed_buffer = AlignedBuffer::allocate(static_cast<size_t>(k.packed_bytes(n) + 64)).value();
      for (int64_t count = 1; count <= group; ++count) {
        // qgemm.hpp lets the packed group lie at any alignment: odd counts get an unaligned one.
        uint8_t* packed = packed_buffer.data() + (count % 2) * 4;
        k.pack(w.data(), w_stride, count, n, packed);
        for (int64_t n_a : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{6}, int64_t{7},
                            int64_t{8}, int64_t{13}, int64_t{47}, int64_t{48}, int64_t{49}, max_a}) {
          // y has a column past count and a row past n_a that must stay untouched.
          const int64_t y_stride = count + 1;
          const float sentinel = -7.25f;
          std::vector<float> y(static_cast<size_t>((n_a + 1) * y_stride), sentinel);
          k.multiply(packed, count, a.data(), a_stride, side.data(), side_stride, n_a, n, y.data(), y_stride);
          for (int64_t r = 0; r < n_a + 1; ++r)
            for (int64_t j = 0; j < y_stride; ++j) {
              const float got = y[static_cast<size_t>(r * y_stride + j)];
              INFO(hk.name << " n " << n << " count " << count << " n_a " << n_a << " row " << j << " act " << r);
              if (r == n_a || j == count) {
                REQUIRE(got == sentinel);
                continue;
              }
              const float expect = qdot(ref, w.data() + j * w_stride, a.data() + r * n, n);
              INFO("got " << got << " expect " << expect);
              REQUIRE(f32_bits(got) == f32_bits(expect));
            }
        }
      }
    }
  }
}

TEST_CASE("the dtype table's gemm(isa) gives F16 / BF16 and every llama.cpp quantized type their tile kernels from AVX2 up",
          "[qgemm][dtype]") {
  const CpuTypeTraits& f16 = *cpu_type_traits(DType::f16);
  const CpuTypeTraits& bf16 = *cpu_type_traits(DType::bf16);
  const CpuTypeTraits& q4 = *cpu_type_traits(DType::q4_0);
  REQUIRE(f16.gemm(CpuIsa::scalar) == nullptr);
  REQUIRE(f16.gemm(CpuIsa::avx2) == &qgemm_f16_avx2);
  REQUIRE(f16.gemm(CpuIsa::avx512) == &qgemm_f16_avx512);
  REQUIRE(bf16.gemm(CpuIsa::avx2) == &qgemm_bf16_avx2);
  REQUIRE(bf16.gemm(CpuIsa::avx512) == &qgemm_bf16_avx512);
  REQUIRE(q4.gemm(CpuIsa::scalar) == nullptr);
  REQUIRE(q4.gemm(CpuIsa::avx2) == &qgemm_q4_0_avx2);
  REQUIRE(q4.gemm(CpuIsa::avx512) == &qgemm_q4_0_avx512);
  const std::pair<DType, const QGemmKernel*> quantized[] = {{DType::q8_0, &qgemm_q8_0_avx2},
                                                            {DType::q5_0, &qgemm_q5_0_avx2},
                                                            {DType::q4_1, &qgemm_q4_1_avx2},
                                                            {DType::q5_1, &qgemm_q5_1_avx2},
                                                            {DType::q2_k, &qgemm_q2_k_avx2},
                                                            {DType::q3_k, &qgemm_q3_k_avx2},
                                                            {DType::q4_k, &qgemm_q4_k_avx2},
                                                            {DType::q5_k, &qgemm_q5_k_avx2},
                                                            {DType::q6_k, &qgemm_q6_k_avx2}};
  for (const auto& [t, k] : quantized) {
    INFO(dtype_name(t));
    REQUIRE(cpu_type_traits(t)->gemm(CpuIsa::avx2) == k);
    REQUIRE(cpu_type_traits(t)->gemm(CpuIsa::avx512) != k);
    // Packed per call: from the file's rows, and but for Q4_1 and Q5_1 from the layout packed at
    // load (whose own AVX2 kernel, load_packing_avx2, takes the narrower batches; Q4_1's and
    // Q5_1's take every batch).
    REQUIRE(cpu_type_traits(t)->load_packing != k);
    REQUIRE(cpu_type_traits(t)->load_packing_avx2 != k);
    REQUIRE(cpu_type_traits(t)->load_packing_avx2 != nullptr);
    REQUIRE((k->pack_loaded != nullptr) == (t != DType::q4_1 && t != DType::q5_1));
  }
  // Q4_0's AVX2 tile reads the layout it packs at load, the AVX-512 one's.
  REQUIRE(q4.load_packing_avx2 == &qgemm_q4_0_avx2);
  REQUIRE(qgemm_q4_0_avx2.pack_loaded == nullptr);
}
