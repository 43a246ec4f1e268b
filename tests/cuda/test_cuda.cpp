// CUDA backend tests. They need a GPU: without one the program exits with 77, which CTest reports
// as skipped (never as passed).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.hpp"
#include "cuda/device.hpp"

using namespace infer;

int main(int argc, char** argv) {
  if (cuda::device_count() == 0) {
    std::printf("no CUDA device: the CUDA tests are skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("the device reports sane properties", "[cuda][convert]") {
  auto info = cuda::device_info(0);
  REQUIRE(info.ok());
  CHECK(!info->name.empty());
  CHECK(info->total_memory > (1ull << 30));
  CHECK(info->sm_major >= 5);
  CHECK_FALSE(cuda::device_info(cuda::device_count()).ok());
}

TEST_CASE("device buffers round-trip bytes and refuse out-of-range copies", "[cuda][convert]") {
  std::vector<uint8_t> src(1 << 20);
  std::mt19937 rng(3);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  auto buf = cuda::DeviceBuffer::allocate(src.size());
  REQUIRE(buf.ok());
  REQUIRE(buf->copy_from_host(src).is_ok());
  std::vector<uint8_t> back(src.size());
  REQUIRE(buf->copy_to_host(back).is_ok());
  CHECK(back == src);
  CHECK(buf->copy_from_host(src, 1).code() == StatusCode::out_of_range);
}

TEST_CASE("F16, BF16 and Q8_0 rows convert to F32 exactly as the scalar reference", "[cuda][convert]") {
  const int64_t cols = 256, rows = 33;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (DType t : {DType::f16, DType::bf16, DType::q8_0, DType::f32}) {
    INFO(dtype_name(t));
    const auto* tr = dtype_traits(t);
    std::vector<uint8_t> host(static_cast<size_t>(rows * cols / tr->block_size * tr->block_bytes));
    std::vector<float> expect(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = dist(rng);
      if (t == DType::f32) {
        std::memcpy(&host[4 * i], &v, 4);
        expect[i] = v;
      } else if (t == DType::f16 || t == DType::bf16) {
        const uint16_t h = t == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(&host[2 * i], &h, 2);
        expect[i] = t == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    }
    if (t == DType::q8_0) {
      for (int64_t b = 0; b < rows * cols / 32; ++b) {
        const uint16_t d = f32_to_f16(0.01f + static_cast<float>(rng() % 100) / 1000.0f);
        std::memcpy(&host[b * 34], &d, 2);
        for (int k = 0; k < 32; ++k) {
          const auto q = static_cast<int8_t>(rng());
          host[b * 34 + 2 + k] = static_cast<uint8_t>(q);
          expect[b * 32 + k] = f16_to_f32(d) * static_cast<float>(q);
        }
      }
    }
    auto src = cuda::DeviceBuffer::allocate(host.size());
    auto dst = cuda::DeviceBuffer::allocate(expect.size() * 4);
    REQUIRE(src.ok());
    REQUIRE(dst.ok());
    REQUIRE(src->copy_from_host(host).is_ok());
    auto view = TensorView::contiguous(t, 2, {cols, rows, 1, 1}, src->data(), Device::cuda);
    REQUIRE(cuda::convert_rows_to_f32(view, rows, static_cast<float*>(dst->data())).is_ok());
    std::vector<float> got(expect.size());
    REQUIRE(dst->copy_to_host({reinterpret_cast<uint8_t*>(got.data()), got.size() * 4}).is_ok());
    CHECK(std::memcmp(got.data(), expect.data(), got.size() * 4) == 0);
  }
}
