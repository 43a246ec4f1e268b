// Dequantization and the reference quantizers, against an independent implementation (llama.cpp's
// llama-quantize output dequantized by gguf-py, tests/data/quant/) and against the scalar
// reference on random blocks for every ISA.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "core/half.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/quantize.hpp"
#include "quant_test_util.hpp"
#include "test_data.hpp"

using namespace infer;
using namespace infer::test;

namespace {

std::vector<uint8_t> read_file(const std::string& name) { return read_data_file("quant", name); }
std::vector<float> read_floats(const std::string& name) { return read_data_floats("quant", name); }

std::vector<std::string> data_lines(const std::string& name) {
  const auto bytes = read_file(name);
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

// Compares bit patterns so that -0 vs +0 or a changed NaN payload would be caught.
void require_same_bits(const std::vector<float>& got, const std::vector<float>& expect) {
  REQUIRE(got.size() == expect.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", expected " << expect[i]);
    REQUIRE(f32_bits(got[i]) == f32_bits(expect[i]));
  }
}

std::vector<float> dequantize_ref(DType t, const std::vector<uint8_t>& src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row_ref(t, src.data(), out.data(), n);
  return out;
}

}  // namespace

TEST_CASE("can_dequantize accepts exactly the types the dtype table marks computable", "[quant]") {
  for (const auto& tr : all_dtypes()) {
    INFO(tr.name);
    REQUIRE(can_dequantize(tr.type) == tr.computable);
  }
  REQUIRE(computable_types().size() == 13);
  for (DType t : computable_types()) REQUIRE(can_dequantize(t));
}

TEST_CASE("dequantize_row equals dequantize_row_ref bit for bit for every type on every ISA", "[quant]") {
  for (DType t : computable_types()) {
    const int64_t n = several_blocks(t);
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      // Scales over the whole finite F16 range, subnormals included.
      const auto src = random_weights(t, 1, n, seed * 7919 + static_cast<uint64_t>(t), kAnyFiniteHalf);
      const auto expect = dequantize_ref(t, src, n);
      for (CpuIsa isa : supported_isas()) {
        IsaScope scope(isa);
        INFO(dtype_name(t) << " seed " << seed << " isa " << isa_name(isa));
        std::vector<float> got(static_cast<size_t>(n));
        dequantize_row(t, src.data(), got.data(), n);
        require_same_bits(got, expect);
      }
    }
  }
}

TEST_CASE("F16 and BF16 rows convert every finite value exactly on every ISA", "[quant]") {
  // NaNs are left out: F16C quiets a signalling NaN, the scalar conversion keeps its payload;
  // weights never hold NaN.
  std::vector<uint16_t> halves, bf16s;
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00) != 0x7c00 || (h & 0x3ff) == 0) halves.push_back(static_cast<uint16_t>(h));
    if ((h & 0x7f80) != 0x7f80 || (h & 0x7f) == 0) bf16s.push_back(static_cast<uint16_t>(h));
  }
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    INFO(isa_name(isa));
    std::vector<float> got(halves.size());
    dequantize_row(DType::f16, halves.data(), got.data(), static_cast<int64_t>(halves.size()));
    for (size_t i = 0; i < halves.size(); ++i) {
      _Float16 ref;
      std::memcpy(&ref, &halves[i], 2);
      REQUIRE(f32_bits(got[i]) == f32_bits(static_cast<float>(ref)));
    }
    got.resize(bf16s.size());
    dequantize_row(DType::bf16, bf16s.data(), got.data(), static_cast<int64_t>(bf16s.size()));
    for (size_t i = 0; i < bf16s.size(); ++i) REQUIRE(f32_bits(got[i]) == static_cast<uint32_t>(bf16s[i]) << 16);
  }
}

// gguf-py dequantizes with numpy float32 operations in ggml's order (scale * q, then -/+ min).
// Observed: all 12 types agree bit for bit, so the comparison is exact, no ulp tolerance. That is
// expected rather than lucky: scale * sub-scale * quant is exact in float or a single rounding of
// the exact product in any grouping (11 + 8 + 6 significant bits at most), and the min is one more
// rounding in both implementations.
TEST_CASE("dequantize_row_ref reproduces gguf-py's dequantization of llama-quantize output", "[quant][reference]") {
  const auto lines = data_lines("manifest.txt");
  REQUIRE(lines.size() == 12);
  for (const auto& line : lines) {
    std::istringstream in(line);
    std::string type_name, stem, tensor;
    int64_t n_in = 0, n_rows = 0;
    in >> type_name >> stem >> n_in >> n_rows >> tensor;
    INFO(line);
    const auto t = dtype_from_name(type_name);
    REQUIRE(t.has_value());
    const auto src = read_file(stem + ".bin");
    const auto expect = read_floats(stem + ".f32");
    REQUIRE(src.size() == *dtype_row_bytes(*t, static_cast<uint64_t>(n_in * n_rows)));
    REQUIRE(expect.size() == static_cast<size_t>(n_in * n_rows));
    require_same_bits(dequantize_ref(*t, src, n_in * n_rows), expect);
    for (CpuIsa isa : supported_isas()) {
      IsaScope scope(isa);
      std::vector<float> got(expect.size());
      dequantize_row(*t, src.data(), got.data(), n_in * n_rows);
      require_same_bits(got, expect);
    }
  }
}

TEST_CASE("every tensor type llama-quantize's usual presets write can be dequantized", "[quant][reference]") {
  const auto lines = data_lines("preset-types.txt");
  REQUIRE(lines.size() >= 30);
  for (const auto& line : lines) {
    INFO(line);
    std::istringstream in(line.substr(line.find(':') + 1));
    int n_types = 0;
    for (std::string name; in >> name; ++n_types) {
      const auto t = dtype_from_name(name);
      REQUIRE(t.has_value());
      REQUIRE(can_dequantize(*t));
    }
    REQUIRE(n_types >= 2);
  }
}

TEST_CASE("every from_float writes llama-quantize's bytes exactly", "[quant][reference]") {
  // manifest.txt lists the rows llama-quantize --pure wrote from source.f32 for each type.
  const auto source = read_floats("source.f32");
  const auto n = static_cast<int64_t>(source.size());
  int checked = 0;
  for (const auto& line : data_lines("manifest.txt")) {
    std::istringstream in(line);
    std::string type_name, stem;
    in >> type_name >> stem;
    const auto t = dtype_from_name(type_name);
    REQUIRE(t.has_value());
    INFO(type_name);
    const auto expect = read_file(stem + ".bin");
    std::vector<uint8_t> got(*dtype_row_bytes(*t, static_cast<uint64_t>(n)));
    cpu_type_traits(*t)->from_float(source.data(), got.data(), n);
    REQUIRE(got == expect);
    ++checked;
  }
  REQUIRE(checked == 12);  // the 10 quantized types, F16 and BF16
}

namespace {
// n values in blocks of 32 whose magnitudes rise from 1e-4 to 1e3 block by block, so that the
// F16 rounding of the block scale varies.
std::vector<float> blocks_across_magnitudes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = std::pow(10.0f, -4.0f + 7.0f * static_cast<float>(b) / static_cast<float>(n / 32));
    const auto v = random_floats(32, rng(), -scale, scale);
    std::copy(v.begin(), v.end(), x.begin() + b * 32);
  }
  return x;
}

}  // namespace

TEST_CASE("Q8_0 round trip error is at most half a step plus the F16 rounding of the scale", "[quant]") {
  const int64_t n = 32 * 400;
  const std::vector<float> x = blocks_across_magnitudes(n, 5);
  std::vector<uint8_t> q(*dtype_row_bytes(DType::q8_0, static_cast<uint64_t>(n)));
  quantize_row_q8_0_ref(x.data(), q.data(), n);
  const auto y = dequantize_ref(DType::q8_0, q, n);
  for (int64_t b = 0; b < n / 32; ++b) {
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double(x[b * 32 + j])));
    const double d = amax / 127;
    uint16_t d16_bits;
    std::memcpy(&d16_bits, &q[static_cast<size_t>(b * 34)], 2);
    const double d16 = f16_to_f32(d16_bits);
    // 0.5 d from rounding q, 127 |d16 - d| from the stored scale, a few float roundings.
    const double bound = 0.5 * d + 127 * std::fabs(d16 - d) + 1e-6 * amax;
    for (int j = 0; j < 32; ++j) {
      const size_t i = static_cast<size_t>(b * 32 + j);
      INFO("block " << b << " element " << j << " x " << x[i] << " y " << y[i]);
      REQUIRE(std::fabs(double(x[i]) - double(y[i])) <= bound);
    }
  }
}

TEST_CASE("Q4_0 round trip error is at most half a step, one step where the top level clips", "[quant]") {
  const int64_t n = 32 * 400;
  const std::vector<float> x = blocks_across_magnitudes(n, 6);
  std::vector<uint8_t> q(*dtype_row_bytes(DType::q4_0, static_cast<uint64_t>(n)));
  quantize_row_q4_0_ref(x.data(), q.data(), n);
  const auto y = dequantize_ref(DType::q4_0, q, n);
  int clipped = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    double extreme = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(double(x[b * 32 + j])) > std::fabs(extreme)) extreme = x[b * 32 + j];
    const double d = extreme / -8;
    uint16_t d16_bits;
    std::memcpy(&d16_bits, &q[static_cast<size_t>(b * 18)], 2);
    const double d16 = f16_to_f32(d16_bits);
    const double stored = 8 * std::fabs(d16 - d) + 1e-6 * std::fabs(extreme);
    for (int j = 0; j < 32; ++j) {
      const size_t i = static_cast<size_t>(b * 32 + j);
      const bool clips = double(x[i]) / d >= 7.5 - 1e-6;  // level 16 does not exist
      clipped += clips;
      const double bound = (clips ? 1.0 : 0.5) * std::fabs(d) + stored;
      INFO("block " << b << " element " << j << " x " << x[i] << " y " << y[i]);
      REQUIRE(std::fabs(double(x[i]) - double(y[i])) <= bound);
      if (double(x[i]) == extreme) REQUIRE(std::fabs(double(y[i]) - extreme) <= stored);  // lands on -8 d
    }
  }
  REQUIRE(clipped > 0);  // the clipping branch was exercised
}

TEST_CASE("an all-zero block quantizes to zeros and back", "[quant]") {
  const std::vector<float> zeros(512, 0.0f);
  for (DType t : computable_types()) {
    INFO(dtype_name(t));
    std::vector<uint8_t> q(*dtype_row_bytes(t, 512));
    cpu_type_traits(t)->from_float(zeros.data(), q.data(), 512);
    for (float v : dequantize_ref(t, q, 512)) REQUIRE(v == 0.0f);
  }
}
