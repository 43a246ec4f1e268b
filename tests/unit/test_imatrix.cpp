// Importance matrices: the Engine's matmul observer (every weight product of a step, its rows as
// the step has them, and no change to the output), the collector's rules and sums against float64,
// the two file formats (round trip, llama-quantize's normalization, every truncation refused
// without a crash), and the importance-weighted quantizers (the error they weigh is lower than the
// plain quantizers' on the same rows). The bit-for-bit agreement with llama.cpp is
// tests/integration/imatrix_cli.py's and quantize_cli.py's.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "format/imatrix_file.hpp"
#include "infer/engine.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/imatrix.hpp"
#include "quant/quantize.hpp"
#include "tiny_llama.hpp"

using namespace infer;

namespace {

std::string temp_path(const std::string& name) {
  return std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/infer-imatrix-test-" + name + "-" +
         std::to_string(::getpid());
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) : path(temp_path(name)) {}
  ~TempFile() { std::remove(path.c_str()); }
  void write(const std::vector<uint8_t>& bytes) const {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<uint8_t> read() const {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
};

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST_CASE("the matmul observer sees every weight product of every step and changes no output", "[imatrix]") {
  test::TinyLlama spec;
  spec.n_vocab = 64;
  spec.n_ctx = 256;
  spec.seed = 91;
  TempFile model("model.gguf");
  model.write(spec.write());

  struct Seen {
    std::string weight;
    int64_t cols, rows;
    double sum_sq;
  };
  std::vector<Seen> seen;
  EngineConfig c;
  c.threads = 2;
  c.max_batch_tokens = 16;
  c.max_sequences = 1;
  c.on_matmul = [&](const MatmulInput& in) {
    double s = 0;
    for (int64_t r = 0; r < in.rows; ++r)
      for (int64_t j = 0; j < in.cols; ++j) s += static_cast<double>(in.data[r * in.row_stride + j]) * in.data[r * in.row_stride + j];
    seen.push_back({std::string(in.weight), in.cols, in.rows, s});
  };
  auto observed = Engine::create(model.path, c);
  REQUIRE(observed.ok());
  c.on_matmul = nullptr;
  auto plain = Engine::create(model.path, c);
  REQUIRE(plain.ok());

  Request r;
  std::mt19937 rng(5);
  for (int i = 0; i < 40; ++i) r.prompt_ids.push_back(static_cast<int32_t>(3 + rng() % 60));
  r.params.temperature = 0;
  r.params.max_tokens = 3;
  r.params.ignore_eos = true;
  auto a = (*observed)->generate(r);
  auto b = (*plain)->generate(r);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->ids == b->ids);

  // Steps: the prompt in 16 + 16 + 8 rows (the last also samples), then 2 decode steps of 1 row.
  const std::vector<std::string> per_layer = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                              "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
  const std::vector<int64_t> step_rows = {16, 16, 8, 1, 1};
  const size_t per_step = per_layer.size() * static_cast<size_t>(spec.n_layer);
  // Each step ends with output.weight on its sampling rows; the first two sample nothing.
  REQUIRE(seen.size() == step_rows.size() * per_step + 3);
  size_t k = 0;
  for (size_t s = 0; s < step_rows.size(); ++s) {
    for (int l = 0; l < spec.n_layer; ++l)
      for (const std::string& w : per_layer) {
        const Seen& e = seen[k++];
        CHECK(e.weight == "blk." + std::to_string(l) + "." + w);
        CHECK(e.rows == step_rows[s]);
        CHECK(e.cols == (w == "ffn_down.weight" ? spec.n_ff : spec.n_embd));
        CHECK(e.sum_sq > 0.0);
      }
    if (s >= 2) {
      CHECK(seen[k].weight == "output.weight");
      CHECK(seen[k].rows == 1);
      ++k;
    }
  }
}

TEST_CASE("the collector sums squares per column over the products llama-imatrix counts", "[imatrix]") {
  std::mt19937 rng(11);
  quant::ImatrixCollector col;
  const int64_t cols = 24, stride = 30;
  std::vector<double> want(cols, 0.0);
  int64_t want_rows = 0;
  for (int64_t rows : {16, 20, 15, 33}) {
    const std::vector<float> x = random_floats(rng, static_cast<size_t>(rows * stride), 3.0f);
    REQUIRE(col.add("blk.0.ffn_up.weight", x.data(), cols, rows, stride).is_ok());
    REQUIRE(col.add("output.weight", x.data(), cols, rows, stride).is_ok());  // not collected by default
    REQUIRE(col.add("token_embd.weight", x.data(), cols, rows, stride).is_ok());
    if (rows < 16) continue;  // a product of fewer rows (a decode step) is skipped
    want_rows += rows;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) want[static_cast<size_t>(j)] += static_cast<double>(x[r * stride + j]) * x[r * stride + j];
  }
  const Imatrix m = col.result(32, {"text.txt"});
  REQUIRE(m.entries.size() == 1);
  const ImatrixEntry& e = m.entries.at("blk.0.ffn_up.weight");
  REQUIRE(e.counts == std::vector<int64_t>{want_rows});
  REQUIRE(e.sums.size() == static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) CHECK(e.sums[static_cast<size_t>(j)] == Approx(want[static_cast<size_t>(j)]).epsilon(1e-5));
  CHECK(m.chunk_size == 32);
  CHECK(m.chunk_count == static_cast<int32_t>(want_rows / 32));
  CHECK(m.datasets == std::vector<std::string>{"text.txt"});

  // process_output adds output.weight; a changed column count and a non-finite sum are errors.
  quant::ImatrixCollector with_output(quant::ImatrixCollector::Options{true, 16});
  const std::vector<float> x = random_floats(rng, 16 * 24);
  REQUIRE(with_output.add("output.weight", x.data(), 24, 16, 24).is_ok());
  CHECK(with_output.result(16, {}).entries.count("output.weight") == 1);
  CHECK(with_output.add("output.weight", x.data(), 12, 16, 12).code() == StatusCode::invalid_argument);
  std::vector<float> huge(16 * 24, 1e30f);
  CHECK(with_output.add("blk.1.attn_q.weight", huge.data(), 24, 16, 24).code() == StatusCode::invalid_argument);
}

TEST_CASE("imatrix files round-trip in both formats and give llama-quantize's importance", "[imatrix]") {
  std::mt19937 rng(12);
  Imatrix m;
  m.datasets = {"calibration.txt"};
  m.chunk_size = 64;
  m.chunk_count = 3;
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.1.attn_k.weight"}) {
    ImatrixEntry e;
    for (float v : random_floats(rng, 64)) e.sums.push_back(std::fabs(v) * 100.0f);
    e.counts = {200};
    m.entries[name] = e;
  }
  m.entries["blk.1.attn_k.weight"].counts = {0};  // saw nothing: importance 1, left out of .dat files

  TempFile gguf("a.gguf"), dat("a.dat");
  REQUIRE(write_imatrix_gguf(m, gguf.path).is_ok());
  REQUIRE(write_imatrix_dat(m, dat.path).is_ok());
  auto g = read_imatrix(gguf.path);
  REQUIRE(g.ok());
  CHECK_FALSE(g->legacy);
  CHECK(g->datasets == m.datasets);
  CHECK(g->chunk_size == 64);
  CHECK(g->chunk_count == 3);
  REQUIRE(g->entries.size() == 3);
  for (const auto& [name, e] : m.entries) {
    CHECK(g->entries.at(name).sums == e.sums);
    CHECK(g->entries.at(name).counts == e.counts);
  }
  auto d = read_imatrix(dat.path);
  REQUIRE(d.ok());
  CHECK(d->legacy);
  CHECK(d->chunk_count == 3);
  CHECK(d->datasets == m.datasets);
  CHECK(d->entries.size() == 2);
  CHECK(d->entries.at("blk.0.attn_q.weight").counts == std::vector<int64_t>{4});  // ceil(200 / 64) chunks

  // Both files give the same importance: sums / count, 1 where nothing was seen.
  const auto from_gguf = quant::importance(*g), from_dat = quant::importance(*d);
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"})
    for (size_t j = 0; j < 64; ++j) {
      const double want = static_cast<double>(m.entries.at(name).sums[j]) / 200.0;
      CHECK(from_gguf.at(name)[j] == Approx(want).epsilon(1e-6));
      CHECK(from_dat.at(name)[j] == Approx(want).epsilon(1e-6));
    }
  for (float v : from_gguf.at("blk.1.attn_k.weight")) CHECK(v == 1.0f);

  // Every truncation of either file is refused or read, never a crash; a model file is no imatrix.
  for (const TempFile* f : {&gguf, &dat}) {
    const std::vector<uint8_t> bytes = f->read();
    TempFile cut("cut");
    int refused = 0;
    for (size_t n = 0; n < bytes.size(); n += (n < 64 ? 1 : 7)) {
      cut.write(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n)));
      refused += !read_imatrix(cut.path).ok();
    }
    CHECK(refused > 0);
  }
  TempFile bad("bad.dat");
  bad.write({1, 0, 0, 0, 4, 0, 0, 0, 'n', 'a', 'm', 'e', 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f});  // nval 2^31-1
  CHECK(read_imatrix(bad.path).status().code() == StatusCode::malformed_file);
  test::TinyLlama spec;
  TempFile model("model.gguf");
  model.write(spec.write());
  CHECK(read_imatrix(model.path).status().code() == StatusCode::malformed_file);
  CHECK_FALSE(read_imatrix(temp_path("missing")).ok());
}

TEST_CASE("the importance-weighted quantizers lower the error where the importance lies", "[imatrix][quant]") {
  // Rows whose columns matter unequally (a few 100x more): the weighted squared error of the
  // weighted quantizer, summed over many rows, is below the plain quantizer's.
  std::mt19937 rng(13);
  const int64_t n = 512, rows = 64;
  std::vector<float> importance(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(0.01f, 1.0f);
  for (float& w : importance) w = u(rng) * (rng() % 8 == 0 ? 100.0f : 1.0f);
  for (DType t : {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k,
                  DType::q6_k}) {
    INFO(dtype_name(t));
    const RowQuantizerWeighted weighted = weighted_quantizer(t);
    REQUIRE(weighted != nullptr);
    const uint64_t row_bytes = *dtype_row_bytes(t, static_cast<uint64_t>(n));
    std::vector<uint8_t> qa(row_bytes), qb(row_bytes);
    std::vector<float> back(static_cast<size_t>(n));
    double err_weighted = 0, err_plain = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> x = random_floats(rng, static_cast<size_t>(n));
      weighted(x.data(), qa.data(), n, importance.data());
      cpu_type_traits(t)->from_float(x.data(), qb.data(), n);
      for (auto [q, err] : {std::pair{&qa, &err_weighted}, std::pair{&qb, &err_plain}}) {
        dequantize_row(t, q->data(), back.data(), n);
        for (int64_t j = 0; j < n; ++j) {
          const double d = static_cast<double>(back[static_cast<size_t>(j)]) - x[static_cast<size_t>(j)];
          *err += importance[static_cast<size_t>(j)] * d * d;
        }
      }
    }
    CHECK(err_weighted < err_plain);
  }
  CHECK(weighted_quantizer(DType::q8_0) == nullptr);
  CHECK(weighted_quantizer(DType::f16) == nullptr);
}
