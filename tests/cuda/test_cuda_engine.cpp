// The Engine on device "cuda" against the same engine on the CPU: a tiny random Llama and a tiny
// Gemma 3 (GeGLU, neox RoPE, per-head norms, sliding window), F32 weights and quantized at load
// (Q8_0, Q4_0). Prompt scoring gives each prompt token's log-probability on both devices: they
// agree within a bound per weight type; greedy ids agree token for token while the CPU's top two
// logits differ by more than that bound. On the GPU, a prompt's greedy ids are the same alone and
// in a batch of 16 mixed prompts (batch invariance). Built into infer-cuda-tests (exit 77 without
// a GPU: skipped).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "infer/engine.hpp"
#include "tiny_llama.hpp"

using namespace infer;

namespace {

struct GgufOnDisk {
  std::string path;
  explicit GgufOnDisk(test::TinyLlama spec, const char* name) {
    const auto bytes = spec.write();
    path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/infer-cuda-engine-" + name + "-" +
           std::to_string(::getpid()) + ".gguf";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~GgufOnDisk() { std::remove(path.c_str()); }
};

std::unique_ptr<Engine> engine(const std::string& path, const std::string& device, WeightType wt) {
  EngineConfig c;
  c.threads = 2;
  c.device = device;
  c.weight_type = wt;
  c.kv_cache_tokens = 4096;
  c.max_sequences = 16;
  auto e = Engine::create(path, c);
  INFO(device << ": " << (e.ok() ? "" : e.status().message()));
  REQUIRE(e.ok());
  return std::move(e).value();
}

std::vector<int32_t> prompt(int i, int n_vocab) {
  std::vector<int32_t> ids;
  for (int k = 0; k < 20 + 7 * i; ++k) ids.push_back(static_cast<int32_t>((k * 31 + i * 17 + 3) % n_vocab));
  return ids;
}

Completion run(Engine& e, const std::vector<int32_t>& ids, int max_tokens, bool score) {
  Request r;
  r.prompt_ids = ids;
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.logprobs = true;
  r.params.top_logprobs = 2;
  if (score) r.score.from = 1;
  auto c = e.generate(std::move(r));
  REQUIRE(c.ok());
  return std::move(c).value();
}

}  // namespace

TEST_CASE("cuda engine: log-probabilities within a bound of the CPU's and the same greedy ids where the CPU's choice is clear", "[cuda][engine]") {
  for (bool gemma : {false, true}) {
    test::TinyLlama spec;
    spec.n_embd = 64, spec.n_head = 4, spec.n_kv_heads = 2, spec.n_ff = 96, spec.n_vocab = 64, spec.n_ctx = 1024, spec.seed = 9;
    spec.gemma3 = gemma;
    spec.sliding_window = gemma ? 16 : 0;
    if (gemma) spec.n_layer = 6;
    GgufOnDisk file(spec, gemma ? "gemma3" : "llama");
    for (WeightType wt : {WeightType::keep, WeightType::q8_0, WeightType::q4_0}) {
      // F32 weights: the same products summed in another order (float32). Quantized: the CPU
      // quantizes activations to Q8 and the GPU does not.
      const double bound = wt == WeightType::keep ? 1e-3 : 5e-2;
      INFO((gemma ? "gemma3 " : "llama ") << static_cast<int>(wt));
      auto cpu = engine(file.path, "cpu", wt);
      auto gpu = engine(file.path, "cuda", wt);
      for (int i = 0; i < 3; ++i) {
        const auto ids = prompt(i, spec.n_vocab);
        const Completion a = run(*cpu, ids, 24, true), b = run(*gpu, ids, 24, true);
        REQUIRE(a.prompt_logprobs.size() == b.prompt_logprobs.size());
        for (size_t k = 0; k < a.prompt_logprobs.size(); ++k) CHECK(std::fabs(a.prompt_logprobs[k].logprob - b.prompt_logprobs[k].logprob) <= bound);
        REQUIRE(a.logprobs.size() == a.ids.size());
        for (size_t k = 0; k < a.ids.size() && k < b.ids.size(); ++k) {
          const auto& top = a.logprobs[k].top;
          REQUIRE(top.size() == 2);
          if (top[0].logprob - top[1].logprob <= 2 * bound) break;  // a near tie: the rest may differ
          CHECK(a.ids[k] == b.ids[k]);
          if (a.ids[k] != b.ids[k]) break;
          CHECK(std::fabs(a.logprobs[k].logprob - b.logprobs[k].logprob) <= bound);
        }
      }
    }
  }
}

TEST_CASE("cuda engine: greedy ids are identical alone and in a batch of 16 mixed prompts", "[cuda][engine]") {
  test::TinyLlama spec;
  spec.n_embd = 64, spec.n_head = 4, spec.n_kv_heads = 2, spec.n_ff = 96, spec.n_vocab = 64, spec.n_ctx = 1024, spec.seed = 4;
  GgufOnDisk file(spec, "batch");
  for (WeightType wt : {WeightType::keep, WeightType::q8_0}) {
    auto gpu = engine(file.path, "cuda", wt);
    std::vector<std::vector<int32_t>> alone;
    for (int i = 0; i < 16; ++i) alone.push_back(run(*gpu, prompt(i, spec.n_vocab), 32, false).ids);
    std::vector<RequestId> ids;
    for (int i = 0; i < 16; ++i) {
      Request r;
      r.prompt_ids = prompt(i, spec.n_vocab);
      r.params.temperature = 0;
      r.params.max_tokens = 32;
      r.params.ignore_eos = true;
      auto id = gpu->submit(std::move(r));
      REQUIRE(id.ok());
      ids.push_back(*id);
    }
    for (int i = 0; i < 16; ++i) {
      auto c = gpu->wait(ids[static_cast<size_t>(i)]);
      REQUIRE(c.ok());
      CHECK(c->ids == alone[static_cast<size_t>(i)]);
    }
  }
}
