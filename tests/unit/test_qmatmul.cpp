// The matmul against llama.cpp itself: ggml's CPU mul_mat and activation quantizers, run on the
// same inputs by tests/reference/make-matmul-reference.sh (data in tests/data/matmul/).
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "backend/backend.hpp"
#include "core/half.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "quant/quantize_activations.hpp"
#include "quant_test_util.hpp"
#include "test_data.hpp"

using namespace infer;
using namespace infer::test;

namespace {

std::vector<uint8_t> read_file(const std::string& name) { return read_data_file("matmul", name); }
std::vector<float> read_floats(const std::string& name) { return read_data_floats("matmul", name); }

struct Reference {
  int64_t n_in = 0, n_out = 0, n_rows = 0;
  std::vector<std::string> types;
  std::vector<float> x;
};

Reference load_reference() {
  const auto bytes = read_file("manifest.txt");
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  Reference ref;
  std::string line;
  while (std::getline(in, line) && (line.empty() || line[0] == '#')) {
  }
  std::istringstream(line) >> ref.n_in >> ref.n_out >> ref.n_rows;
  while (std::getline(in, line))
    if (!line.empty()) ref.types.push_back(line);
  ref.x = read_floats("x.f32");
  REQUIRE(ref.x.size() == static_cast<size_t>(ref.n_in * ref.n_rows));
  return ref;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

TEST_CASE("activation quantizers write the bytes of llama.cpp's CPU quantize_row_q8_0, q8_1 and q8_K on every ISA",
          "[quant][reference]") {
  const Reference ref = load_reference();
  const struct {
    const char* file;
    DType type;
  } cases[] = {{"x.q8_0", DType::q8_0}, {"x.q8_1", DType::q8_1}, {"x.q8_k", DType::q8_k}};
  for (CpuIsa isa : supported_isas())
  for (const auto& c : cases) {
    IsaScope scope(isa);  // every compiled variant of the converters (core/isa_variants.hpp)
    INFO(c.file << " isa " << isa_name(isa));
    const auto expect = read_file(c.file);
    const auto row = *dtype_row_bytes(c.type, static_cast<uint64_t>(ref.n_in));
    REQUIRE(expect.size() == row * static_cast<uint64_t>(ref.n_rows));
    std::vector<uint8_t> got(expect.size());
    for (int64_t r = 0; r < ref.n_rows; ++r)
      prepare_activations(c.type, ref.x.data() + r * ref.n_in, got.data() + r * row, ref.n_in);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("row " << i / row << " byte " << i % row);
      REQUIRE(int(got[i]) == int(expect[i]));
    }
  }
}

TEST_CASE("matmul equals llama.cpp's CPU mul_mat bit for bit for every weight type but F32 on the scalar ISA",
          "[matmul][reference]") {
  const Reference ref = load_reference();
  ThreadPool pool(2);
  CpuBackend backend(pool);
  int mismatched_types = 0;
  for (const auto& name : ref.types) {
    const auto t = dtype_from_name(name);
    REQUIRE(t.has_value());
    auto w = read_file(lower(name) + ".w");
    const auto expect = read_floats(lower(name) + ".y");
    REQUIRE(w.size() == *dtype_row_bytes(*t, static_cast<uint64_t>(ref.n_in)) * static_cast<uint64_t>(ref.n_out));
    const TensorView file_view = TensorView::contiguous(*t, 2, {ref.n_in, ref.n_out, 1, 1}, w.data());
    // Also as the CPU backend packs it at load, where it does (Q4_0 on AVX-512).
    std::vector<TensorView> views{file_view};
    if (const TensorView packed = *backend.prepare_weight(file_view, Backend::WeightSource::kept); packed.layout == Layout::cpu_packed)
      views.push_back(packed);
    for (const TensorView& view : views)
    for (CpuIsa isa : supported_isas()) {
      if (*t == DType::f32 && isa == CpuIsa::scalar) continue;  // ggml fuses; the scalar F32 dot does not
      IsaScope scope(isa);
      std::vector<float> y(expect.size());
      matmul(view, ref.x.data(), ref.n_rows, ref.n_in, y.data(), ref.n_out, pool);
      int differ = 0;
      double worst = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        if (f32_bits(y[i]) != f32_bits(expect[i])) {
          ++differ;
          worst = std::max(worst, std::fabs(double(y[i]) - expect[i]) / std::max(1e-30, std::fabs(double(expect[i]))));
        }
      }
      if (differ) {
        ++mismatched_types;
        WARN(name << (view.layout == Layout::cpu_packed ? " packed" : "") << " isa " << isa_name(isa) << ": " << differ << " of " << y.size()
                  << " outputs differ, worst relative " << worst);
      }
    }
  }
  REQUIRE(mismatched_types == 0);
}
