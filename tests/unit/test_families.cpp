// The families on the one decoder beyond llama and gemma3 (qwen2, qwen3, phi3), through the public
// Engine API: each loads with its shape, phi3's fused projections compute what the same weights
// split into separate Q/K/V and gate/up matrices compute, and files a family cannot run are
// refused by name. (Agreement with llama.cpp in every weight type is checked by
// tests/integration/llama_reference.py on the models of tests/reference/make-model-reference.sh.)
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.hpp"
#include "infer/engine.hpp"
#include "test_util.hpp"

using namespace infer;

namespace {

constexpr int kEmbd = 32, kHead = 4, kKvHeads = 2, kFf = 48, kVocab = 40, kLayers = 2;

// Random F32 weights by name and size, drawn once so that two files can hold the same values in
// different layouts.
struct Weights {
  std::map<std::string, std::vector<float>> t;
  std::mt19937_64 rng{7};
  const std::vector<float>& get(const std::string& name, size_t n, float mean, float std) {
    auto [it, fresh] = t.try_emplace(std::string(name).append("/").append(std::to_string(n)));
    if (fresh) {
      std::normal_distribution<float> d(mean, std);
      it->second.resize(n);
      for (float& x : it->second) x = d(rng);
    }
    return it->second;
  }
};

struct FileSpec {
  std::string arch = "qwen2";
  int head_dim = kEmbd / kHead;
  bool fused = false;          // attn_qkv and [gate; up] in ffn_up (phi3's layout)
  bool biases = true;          // attn_q/k/v.bias (qwen2)
  bool zero_biases = false;
  bool qk_norm = false;        // attn_q_norm, attn_k_norm (qwen3)
  std::string skip;            // leave this tensor out
  std::string extra;           // add this [head_dim / 2] tensor
};

std::vector<uint8_t> write_model(const FileSpec& s, Weights& w) {
  gguf::Writer out;
  Metadata& md = out.metadata();
  const std::string a = s.arch + ".";
  md.set("general.architecture", s.arch);
  md.set(a + "context_length", uint32_t{128});
  md.set(a + "embedding_length", uint32_t{kEmbd});
  md.set(a + "block_count", uint32_t{kLayers});
  md.set(a + "feed_forward_length", uint32_t{kFf});
  md.set(a + "attention.head_count", uint32_t{kHead});
  md.set(a + "attention.head_count_kv", uint32_t{kKvHeads});
  md.set(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  md.set(a + "rope.freq_base", 1e6f);
  if (s.head_dim != kEmbd / kHead) {
    md.set(a + "attention.key_length", uint32_t(s.head_dim));
    md.set(a + "attention.value_length", uint32_t(s.head_dim));
  }
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back(std::string("t").append(std::to_string(i)));
  md.set("tokenizer.ggml.model", "llama");
  md.set("tokenizer.ggml.tokens", Array::of_strings(tokens));

  std::vector<std::vector<float>> keep;  // the tensors' data until the file is written
  auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    if (name == s.skip) return;
    keep.push_back(std::move(data));
    const auto& d = keep.back();
    REQUIRE(out.add_tensor(name, DType::f32, shape, {reinterpret_cast<const uint8_t*>(d.data()), d.size() * 4}).is_ok());
  };
  auto cat = [](std::vector<float> x, const std::vector<float>& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  const int q = s.head_dim * kHead, kv = s.head_dim * kKvHeads;
  add("token_embd.weight", {kEmbd, kVocab}, w.get("embd", size_t{kEmbd} * kVocab, 0.0f, 1.0f));
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto W = [&](const std::string& n, size_t count, float mean = 0.0f, float std = 0.3f) { return w.get(p + n, count, mean, std); };
    add(p + "attn_norm.weight", {kEmbd}, W("attn_norm", kEmbd, 1.0f, 0.2f));
    // A [n_embd, rows] matrix is stored row after row, so the fused matrix is the three (or two)
    // matrices one after another.
    const auto& wq = W("q", size_t{kEmbd} * q);
    const auto& wk = W("k", size_t{kEmbd} * kv);
    const auto& wv = W("v", size_t{kEmbd} * kv);
    if (s.fused) add(p + "attn_qkv.weight", {kEmbd, q + 2 * kv}, cat(cat(wq, wk), wv));
    else {
      add(p + "attn_q.weight", {kEmbd, q}, wq);
      add(p + "attn_k.weight", {kEmbd, kv}, wk);
      add(p + "attn_v.weight", {kEmbd, kv}, wv);
    }
    if (s.biases) {
      auto B = [&](const std::string& n, int count) {
        return s.zero_biases ? std::vector<float>(static_cast<size_t>(count), 0.0f) : W(n, static_cast<size_t>(count), 0.0f, 0.5f);
      };
      add(p + "attn_q.bias", {q}, B("bq", q));
      add(p + "attn_k.bias", {kv}, B("bk", kv));
      add(p + "attn_v.bias", {kv}, B("bv", kv));
    }
    if (s.qk_norm) {
      add(p + "attn_q_norm.weight", {s.head_dim}, W("q_norm", static_cast<size_t>(s.head_dim), 1.0f, 0.2f));
      add(p + "attn_k_norm.weight", {s.head_dim}, W("k_norm", static_cast<size_t>(s.head_dim), 1.0f, 0.2f));
    }
    add(p + "attn_output.weight", {q, kEmbd}, W("o", size_t{kEmbd} * q, 0.0f, 0.2f));
    add(p + "ffn_norm.weight", {kEmbd}, W("ffn_norm", kEmbd, 1.0f, 0.2f));
    const auto& gate = W("gate", size_t{kEmbd} * kFf, 0.0f, 0.2f);
    const auto& up = W("up", size_t{kEmbd} * kFf, 0.0f, 0.2f);
    if (s.fused) add(p + "ffn_up.weight", {kEmbd, 2 * kFf}, cat(gate, up));
    else {
      add(p + "ffn_gate.weight", {kEmbd, kFf}, gate);
      add(p + "ffn_up.weight", {kEmbd, kFf}, up);
    }
    add(p + "ffn_down.weight", {kFf, kEmbd}, W("down", size_t{kFf} * kEmbd, 0.0f, 0.2f));
  }
  add("output_norm.weight", {kEmbd}, w.get("output_norm", kEmbd, 1.0f, 0.2f));
  add("output.weight", {kEmbd, kVocab}, w.get("output", size_t{kEmbd} * kVocab, 0.0f, 0.3f));
  if (!s.extra.empty()) add(s.extra, {s.head_dim / 2}, std::vector<float>(static_cast<size_t>(s.head_dim / 2), 1.0f));
  return out.write_to_memory().value();
}

struct OnDisk {
  test::TempDir dir;
  std::string path;
  explicit OnDisk(const std::vector<uint8_t>& bytes) : path(dir.file("model.gguf")) { test::write_bytes(path, bytes); }
};

Result<std::unique_ptr<Engine>> open(const OnDisk& f) {
  EngineConfig c;
  c.threads = 2;
  c.kv_type = KvType::f32;
  c.kv_cache_tokens = 256;
  return Engine::create(f.path, c);
}

const std::vector<int32_t> kPrompt = {1, 5, 9, 13, 2, 30, 31, 7, 7, 19, 22, 3, 38, 11, 17, 25, 4, 8, 36, 12};

// The logits that predict prompt tokens 1 .. n-1, n_vocab floats each.
std::vector<float> prompt_logits(Engine& e) {
  Request r;
  r.prompt_ids = kPrompt;
  r.params.max_tokens = 0;
  r.score.from = 1;
  r.score.logits = true;
  auto done = e.generate(r);
  REQUIRE(done.ok());
  REQUIRE(done->status.is_ok());
  REQUIRE(done->prompt_logits.size() == (kPrompt.size() - 1) * kVocab);
  return done->prompt_logits;
}

}  // namespace

TEST_CASE("qwen2, qwen3 and phi3 files load with their shapes", "[model][families]") {
  Weights w;
  FileSpec qwen3{.arch = "qwen3", .head_dim = 16, .biases = false, .qk_norm = true};
  FileSpec phi3{.arch = "phi3", .fused = true, .biases = false};
  for (const FileSpec& s : {FileSpec{}, qwen3, phi3}) {
    INFO(s.arch);
    OnDisk f(write_model(s, w));
    auto e = open(f);
    REQUIRE(e.ok());
    const ModelDescription m = (*e)->model();
    CHECK(m.architecture == s.arch);
    CHECK(m.n_layer == kLayers);
    CHECK(m.n_vocab == kVocab);
    const auto logits = prompt_logits(**e);
    for (float x : logits) REQUIRE(std::isfinite(x));
  }
}

TEST_CASE("phi3's fused QKV and gate-up projections compute what the same weights split compute", "[model][families]") {
  // qwen2 with zero biases is phi3's block with separate matrices: NeoX RoPE, SwiGLU, no norms on
  // Q/K. The two differ only where the 1/sqrt(head size) scale is applied (phi3: to Q, qwen2:
  // to the scores), so the logits agree to rounding, not bit for bit.
  Weights w;
  OnDisk fused(write_model({.arch = "phi3", .fused = true, .biases = false}, w));
  OnDisk split(write_model({.arch = "qwen2", .zero_biases = true}, w));
  const auto a = prompt_logits(*open(fused).value());
  const auto b = prompt_logits(*open(split).value());
  REQUIRE(a.size() == b.size());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(b[i])));
  }
  INFO("max |diff| " << max_diff << ", max |logit| " << max_abs);
  CHECK(max_abs > 1.0);
  CHECK(max_diff < 1e-4 * max_abs);
}

TEST_CASE("qwen2's Q/K/V biases take part in the result", "[model][families]") {
  Weights w;
  OnDisk with(write_model({}, w));
  OnDisk zero(write_model({.zero_biases = true}, w));
  const auto a = prompt_logits(*open(with).value());
  const auto b = prompt_logits(*open(zero).value());
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
  CHECK(max_diff > 1e-2);
}

TEST_CASE("files a family cannot run are refused with the reason", "[model][families]") {
  Weights w;
  struct Case {
    FileSpec spec;
    const char* needle;
  };
  const Case cases[] = {
      {{.skip = "blk.1.attn_k.bias"}, "blk.1.attn_k.bias"},
      {{.arch = "qwen3", .biases = false, .qk_norm = false}, "attn_q_norm"},
      {{.arch = "phi3", .fused = true, .biases = false, .skip = "blk.0.attn_qkv.weight"}, "attn_q"},
      {{.arch = "phi3", .fused = true, .biases = false, .extra = "rope_factors_long.weight"}, "LongRoPE"},
  };
  for (const Case& c : cases) {
    INFO(c.spec.arch << " / " << c.needle);
    OnDisk f(write_model(c.spec, w));
    auto e = open(f);
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().message().find(c.needle) != std::string::npos);
  }
}
