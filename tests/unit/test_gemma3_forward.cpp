// The gemma3 architecture on a tiny random model (6 layers, five of them local with an 8-position
// sliding window): batch and chunk invariance with windowed KV blocks handed back as the window
// moves, and clear errors for a KV cache without the window. (Agreement with llama.cpp on a
// Gemma-3-shaped model is checked by tests/integration/llama_reference.py, on the real Gemma 3
// 270M by tests/integration/real_models.py.)
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "core/mapped_file.hpp"
#include "format/gguf.hpp"
#include "format/model_file.hpp"
#include "kv/kv_manager.hpp"
#include "model/model.hpp"
#include "tiny_llama.hpp"

using namespace infer;

namespace {

std::shared_ptr<const ModelFile> open_gemma() {
  test::TinyLlama spec;
  spec.gemma3 = true;
  spec.n_layer = 6;
  spec.sliding_window = 8;
  spec.seed = 21;
  auto f = gguf::read(MappedFile::from_bytes(spec.write(), "tiny-gemma3.gguf").value());
  REQUIRE(f.ok());
  return std::make_shared<const ModelFile>(std::move(f).value());
}

std::vector<int32_t> prompt(size_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((seed + 37 * i + (i * i) % 11) % 40);
  return t;
}

struct Runner {
  std::unique_ptr<Model> model;
  KvCacheManager kv;
  ThreadPool pool{2};

  explicit Runner(int max_step) : model(load_model(open_gemma()).value()) {
    KvCacheConfig c = model->kv_config(0, 16);
    c.max_sequences = 2;
    c.max_step_tokens = max_step;
    c.budget_bytes = KvCache::budget_for_tokens(c, 2 * 128);
    kv = KvCacheManager::create(c, 0, false).value();
  }

  // Every position's logits for `tokens` run in chunks of `chunk` (the windowed pool is sized
  // for steps of max_step, so longer prompts must hand blocks back to get through).
  std::vector<std::vector<float>> run(const std::vector<int32_t>& tokens, size_t chunk) {
    KvSequence seq;
    std::vector<std::vector<float>> out;
    const int64_t V = model->info().n_vocab;
    for (size_t start = 0; start < tokens.size(); start += chunk) {
      const size_t end = std::min(tokens.size(), start + chunk);
      REQUIRE(kv.append(seq, static_cast<int64_t>(end - start)));
      Batch b;
      b.sequences.push_back(BatchSequence(seq.kv));
      for (size_t t = start; t < end; ++t) b.add(tokens[t], static_cast<int32_t>(t), 0, true);
      std::vector<float> logits(static_cast<size_t>(V) * (end - start));
      REQUIRE(model->forward(b, kv.view(), logits.data(), pool).is_ok());
      for (size_t t = 0; t < end - start; ++t)
        out.emplace_back(logits.begin() + static_cast<ptrdiff_t>(t * V), logits.begin() + static_cast<ptrdiff_t>((t + 1) * V));
    }
    // The last step began at position >= 23: the window (8) had moved past block 0 (16 positions).
    if (tokens.size() >= chunk + 23) CHECK(seq.kv.tables[1].front() == -1);
    kv.release(seq);
    return out;
  }
};

}  // namespace

TEST_CASE("gemma3 reads its shape and sliding-window layout from the file", "[model][gemma3]") {
  auto model = load_model(open_gemma()).value();
  const ModelInfo& info = model->info();
  CHECK(info.architecture == "gemma3");
  CHECK(info.n_layer == 6);
  CHECK(info.head_dim == 8);
  CHECK(info.n_kv_heads == 2);
  CHECK(info.sliding_window == 8);
  CHECK(info.window_layers == std::vector<uint8_t>{1, 1, 1, 1, 1, 0});  // every sixth layer global
  const KvCacheConfig c = model->kv_config(1 << 20);
  REQUIRE(c.groups.size() == 2);
  CHECK(c.groups[0] == KvCacheSpec{0, {5}});
  CHECK(c.groups[1] == KvCacheSpec{8, {0, 1, 2, 3, 4}});
}

TEST_CASE("gemma3 logits are bit-identical however the prompt is chunked, across the window", "[model][gemma3][invariance]") {
  Runner run(16);
  const auto tokens = prompt(100, 3);
  const auto whole = [&] {
    Runner big(128);
    return big.run(tokens, tokens.size());
  }();
  for (size_t chunk : {1, 7, 16}) {
    INFO("chunk " << chunk);
    CHECK(run.run(tokens, chunk) == whole);
  }
}

TEST_CASE("gemma3 rows are bit-identical alone and batched with another sequence", "[model][gemma3][invariance]") {
  Runner run(128);
  const auto a = prompt(70, 1), b = prompt(45, 2);
  const auto alone_a = run.run(a, a.size()), alone_b = run.run(b, b.size());
  KvSequence sa, sb;
  REQUIRE(run.kv.append(sa, static_cast<int64_t>(a.size())));
  REQUIRE(run.kv.append(sb, static_cast<int64_t>(b.size())));
  Batch batch;
  batch.sequences = {BatchSequence(sa.kv), BatchSequence(sb.kv)};
  std::vector<std::pair<int, size_t>> rows;
  for (size_t t = 0; t < a.size(); ++t) {
    rows.push_back({0, t});
    if (t < b.size()) rows.push_back({1, t});
  }
  for (auto [s, t] : rows) batch.add(s == 0 ? a[t] : b[t], static_cast<int32_t>(t), s, true);
  const int64_t V = run.model->info().n_vocab;
  std::vector<float> logits(static_cast<size_t>(V) * rows.size());
  REQUIRE(run.model->forward(batch, run.kv.view(), logits.data(), run.pool).is_ok());
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto [s, t] = rows[r];
    const auto& expect = s == 0 ? alone_a[t] : alone_b[t];
    REQUIRE(std::memcmp(logits.data() + r * static_cast<size_t>(V), expect.data(), static_cast<size_t>(V) * 4) == 0);
  }
}

TEST_CASE("gemma3 refuses a KV cache or batch without its sliding-window tables", "[model][gemma3]") {
  auto model = load_model(open_gemma()).value();
  ThreadPool pool(1);
  std::vector<float> logits(static_cast<size_t>(model->info().n_vocab));
  // A cache planned without the window (every layer full).
  KvCacheConfig plain = model->kv_config(1 << 20);
  plain.groups.clear();
  auto kv = KvCacheManager::create(plain, 0, false).value();
  KvSequence s;
  REQUIRE(kv.append(s, 1));
  Batch b;
  b.sequences.push_back(BatchSequence(s.kv));
  b.add(5, 0, 0, true);
  const Status st = model->forward(b, kv.view(), logits.data(), pool);
  CHECK(st.code() == StatusCode::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("sliding window"));
  // The right cache, but a batch that passes only the full layers' table.
  auto good = KvCacheManager::create(model->kv_config(1 << 20), 0, false).value();
  KvSequence g;
  REQUIRE(good.append(g, 1));
  Batch partial;
  partial.sequences.push_back(BatchSequence{});
  partial.sequences[0].tables[0] = g.kv.tables[0];
  partial.add(5, 0, 0, true);
  const Status st2 = model->forward(partial, good.view(), logits.data(), pool);
  CHECK(st2.code() == StatusCode::invalid_argument);
  CHECK_THAT(st2.message(), Catch::Contains("sliding-window"));
}
