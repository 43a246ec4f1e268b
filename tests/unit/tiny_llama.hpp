// A tiny Llama-architecture GGUF with random F32 weights, written into memory by the tests that
// need a model (the forward pass, the KV cache). Options break it on purpose for error tests.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "format/gguf.hpp"

namespace infer::test {

struct TinyLlama {
  int n_embd = 32, n_layer = 2, n_head = 4, n_kv_heads = 2, n_ff = 48, n_vocab = 40, n_ctx = 128;
  float rope_base = 10000.0f;
  float rope_linear_factor = 0.0f;  // 0: no scaling
  bool tied = false;
  bool rope_factors = false;        // write rope_freqs.weight (Llama 3 style)
  uint64_t seed = 1;
  // Gemma 3 shape instead (write() with gemma3 = true): per-head Q/K norms, post norms, tied
  // output, and layers 0-4 of every 6 local with this sliding window (0: none).
  bool gemma3 = false;
  int sliding_window = 0;
  // Deliberate defects.
  std::string architecture = "llama";
  std::string skip_tensor;           // leave this tensor out
  std::string wrong_shape_tensor;    // give this tensor a transposed/doubled shape
  int extra_vocab_tokens = 0;        // tokenizer vocabulary larger than the embedding table

  std::vector<std::vector<float>> store;  // weight data, kept alive for the writer

  std::vector<uint8_t> write() {
    if (gemma3 && architecture == "llama") architecture = "gemma3";
    gguf::Writer w;
    Metadata& md = w.metadata();
    md.set("general.architecture", architecture);
    const std::string a = architecture + ".";
    md.set(a + "context_length", uint32_t(n_ctx));
    md.set(a + "embedding_length", uint32_t(n_embd));
    md.set(a + "block_count", uint32_t(n_layer));
    md.set(a + "feed_forward_length", uint32_t(n_ff));
    md.set(a + "attention.head_count", uint32_t(n_head));
    md.set(a + "attention.head_count_kv", uint32_t(n_kv_heads));
    md.set(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    md.set(a + "rope.freq_base", rope_base);
    if (gemma3 && sliding_window > 0) md.set(a + "attention.sliding_window", uint32_t(sliding_window));
    if (rope_linear_factor > 0) {
      md.set(a + "rope.scaling.type", "linear");
      md.set(a + "rope.scaling.factor", rope_linear_factor);
    }
    std::vector<std::string> tokens;
    for (int i = 0; i < n_vocab + extra_vocab_tokens; ++i) tokens.push_back(std::string("t").append(std::to_string(i)));
    md.set("tokenizer.ggml.model", "llama");
    md.set("tokenizer.ggml.tokens", Array::of_strings(tokens));

    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int hd = n_embd / n_head, kv = hd * n_kv_heads;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean, float std) {
      if (name == skip_tensor) return;
      if (name == wrong_shape_tensor) shape.back() *= 2;
      size_t count = 1;
      for (auto d : shape) count *= static_cast<size_t>(d);
      store.emplace_back(count);
      for (auto& x : store.back()) x = mean + std * dist(rng);
      const auto& data = store.back();
      Status s = w.add_tensor(name, DType::f32, shape,
                              {reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float)});
      if (!s.is_ok()) throw std::runtime_error(s.message());
    };
    add("token_embd.weight", {n_embd, n_vocab}, 0.0f, 1.0f);
    for (int l = 0; l < n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      add(p + "attn_norm.weight", {n_embd}, 1.0f, 0.2f);
      add(p + "attn_q.weight", {n_embd, n_embd}, 0.0f, 0.3f);
      add(p + "attn_k.weight", {n_embd, kv}, 0.0f, 0.3f);
      add(p + "attn_v.weight", {n_embd, kv}, 0.0f, 0.3f);
      add(p + "attn_output.weight", {n_embd, n_embd}, 0.0f, 0.2f);
      if (gemma3) {
        add(p + "attn_q_norm.weight", {hd}, 1.0f, 0.2f);
        add(p + "attn_k_norm.weight", {hd}, 1.0f, 0.2f);
        add(p + "post_attention_norm.weight", {n_embd}, 1.0f, 0.2f);
        add(p + "post_ffw_norm.weight", {n_embd}, 1.0f, 0.2f);
      }
      add(p + "ffn_norm.weight", {n_embd}, 1.0f, 0.2f);
      add(p + "ffn_gate.weight", {n_embd, n_ff}, 0.0f, 0.2f);
      add(p + "ffn_up.weight", {n_embd, n_ff}, 0.0f, 0.2f);
      add(p + "ffn_down.weight", {n_ff, n_embd}, 0.0f, 0.2f);
    }
    add("output_norm.weight", {n_embd}, 1.0f, 0.2f);
    if (!tied && !gemma3) add("output.weight", {n_embd, n_vocab}, 0.0f, 0.3f);
    if (rope_factors) add("rope_freqs.weight", {hd / 2}, 2.0f, 0.5f);
    return w.write_to_memory().value();
  }
};

}  // namespace infer::test
