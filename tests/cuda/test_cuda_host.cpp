// The CUDA kernels' weight-block decoders (cuda/quant_blocks.cuh), compiled for the host, read
// every element of random blocks of each type the backend uploads exactly as the scalar
// dequantizer does (bit for bit). Needs no GPU: it runs in every INFER_CUDA build.
#include <catch2/catch.hpp>  // main: tests/unit/main.cpp (infer-catch-main)

#include <cstring>
#include <vector>

#include "cuda/quant_blocks.cuh"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/quantize_activations.hpp"
#include "quant_test_util.hpp"

using namespace infer;

namespace {

template <class Block>
void check_type(DType t) {
  INFO(dtype_name(t));
  const int64_t n_in = 1024, rows = 9;
  for (auto scales : {test::kTypicalScale, test::kAnyFiniteHalf}) {
    const auto bytes = test::random_weights(t, rows, n_in, 31, scales);
    const uint64_t row_bytes = *dtype_row_bytes(t, n_in);
    std::vector<float> ref(static_cast<size_t>(n_in));
    int64_t mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = bytes.data() + r * row_bytes;
      dequantize_row_ref(t, row, ref.data(), n_in);
      for (int64_t e = 0; e < n_in; ++e) {
        const float got = Block::elem(row + (e / Block::kElems) * Block::kBytes, static_cast<int>(e % Block::kElems));
        if (std::memcmp(&got, &ref[static_cast<size_t>(e)], 4) != 0 && !(got != got && ref[static_cast<size_t>(e)] != ref[static_cast<size_t>(e)]))
          ++mismatches;
      }
    }
    CHECK(mismatches == 0);
  }
}

}  // namespace

TEST_CASE("the device block decoders read every uploaded weight type bit for bit as the scalar dequantizer", "[cuda-host]") {
  CHECK(cuda::BlockQ4_K::kBytes == static_cast<int>(*dtype_row_bytes(DType::q4_k, 256)));
  CHECK(cuda::BlockQ6_K::kBytes == static_cast<int>(*dtype_row_bytes(DType::q6_k, 256)));
  CHECK(cuda::BlockQ4_0::kBytes == static_cast<int>(*dtype_row_bytes(DType::q4_0, 32)));
  CHECK(cuda::BlockQ8_0::kBytes == static_cast<int>(*dtype_row_bytes(DType::q8_0, 32)));
  check_type<cuda::BlockF32>(DType::f32);
  check_type<cuda::BlockF16>(DType::f16);
  check_type<cuda::BlockBF16>(DType::bf16);
  check_type<cuda::BlockQ8_0>(DType::q8_0);
  check_type<cuda::BlockQ4_0>(DType::q4_0);
  check_type<cuda::BlockQ4_K>(DType::q4_k);
  check_type<cuda::BlockQ6_K>(DType::q6_k);
}

TEST_CASE("the device Q8_0 quantizer of the KV cache writes the CPU's bytes", "[cuda-host]") {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto x = test::random_floats(32 * 64, seed, -3.0f, 3.0f);
    for (size_t i = 0; i < 32; ++i) x[i] = 0.0f;                 // an all-zero block: d = 0
    x[40] = 0.5f, x[41] = -0.5f, x[33] = 127.0f, x[34] = 0.5f;  // ties at x * 127 / amax
    std::vector<uint8_t> want(34 * 64), got(34 * 64);
    quantize_activations_q8_0(x.data(), want.data(), static_cast<int64_t>(x.size()));
    for (size_t b = 0; b < 64; ++b) cuda::quantize_q8_0(x.data() + 32 * b, got.data() + 34 * b);
    CHECK(got == want);
  }
}
