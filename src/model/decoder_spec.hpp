// What distinguishes one decoder-only transformer family from another, as data: the decoder
// (model/decoder.hpp) is written once and reads this description. A family file
// (model/llama.cpp, model/qwen3.cpp, ...) fills it from the GGUF metadata and registers itself in
// model/families.cpp.
//
// One block, with the optional parts in brackets:
//
//   h = rms_norm(x)                                   attn_norm
//   q, k, v = h·Wq [+bq], h·Wk [+bk], h·Wv [+bv]       attn_q/k/v, or fused attn_qkv [+bias]
//   [q, k = rms_norm per head]                        qk_norm: attn_q_norm, attn_k_norm
//   q, k = rope(q), rope(k)                           rope_style; windowed layers: rope_base_window
//   [q *= q_scale]                                    q_scale (then attention scales by 1)
//   o = attention(q, K, V)·Wo [+bo]                   sliding_window, window_layers
//   [o = rms_norm(o)]                                 post_norms: post_attention_norm
//   x += o
//   h = rms_norm(x)                                   ffn_norm
//   m = (act(h·Wgate) * h·Wup)·Wdown                  activation; fused_gate_up: ffn_up = [gate; up]
//   [m = rms_norm(m)]                                 post_norms: post_ffw_norm
//   x += m
//
// around token_embd (× embd_scale) and output_norm → output (token_embd when tied) [+bias]
// [→ tanh soft-capping].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/model_file.hpp"
#include "infer/status.hpp"
#include "ops/elementwise.hpp"
#include "ops/rope.hpp"

namespace infer {

struct DecoderSpec {
  std::string arch;  // general.architecture, and the prefix of its metadata keys

  // Shape, from the metadata (n_vocab from token_embd.weight).
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0, n_kv_heads = 0, head_dim = 0;
  float rms_eps = 1e-5f;

  // Attention.
  ops::RopeStyle rope_style = ops::RopeStyle::norm;
  int n_rot = 0;                  // rotated dimensions per head
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;        // 1 / linear scaling factor
  bool rope_freq_factors = false; // rope_freqs.weight, when present, divides each pair's angle (Llama 3)
  float rope_base_window = 0.0f;  // RoPE base of the sliding-window layers, unscaled (0: as the others)
  float q_scale = 0.0f;           // > 0: Q *= q_scale after RoPE and attention scales by 1; 0: by 1/sqrt(head_dim)
  int sliding_window = 0;         // 0: every layer sees the whole context
  std::vector<uint8_t> window_layers;  // per layer, != 0: windowed (when sliding_window > 0)

  // Block structure.
  bool qk_norm = false;           // per-head RMS norms of Q and K
  bool qkv_bias_required = false; // Q/K/V biases must be present (they are read whenever present)
  bool fused_qkv = false;         // attn_qkv.weight [n_embd, q + k + v] required (any family takes it where present)
  bool fused_gate_up = false;     // ffn_up.weight [n_embd, 2 n_ff], gate rows first; no ffn_gate
  bool post_norms = false;        // post_attention_norm and post_ffw_norm on the sublayer outputs
  ops::Activation activation = ops::Activation::silu;
  float embd_scale = 1.0f;        // the embedding rows are multiplied by it
  float final_softcap = 0.0f;     // > 0: logits = tanh(logits / c) * c
  std::string vocab_size_key;     // a metadata key that must agree with n_vocab when present
};

struct HParamDefaults {
  double rms_eps = 1e-5;
  int64_t n_ctx = 2048;
};

// The keys every family shares, under "<arch>.": embedding_length, block_count,
// feed_forward_length, attention.head_count(_kv), attention.key_length / value_length (head size,
// default n_embd / n_head), rope.dimension_count (must equal the head size), context_length,
// attention.layer_norm_rms_epsilon, rope.freq_base, and linear RoPE scaling (rope.scaling.type
// none or linear, rope.scaling.factor or rope.scale_linear). Each value is range-checked; errors
// name the file and the key.
Result<DecoderSpec> read_decoder_hparams(const ModelFile& f, const std::string& arch, const HParamDefaults& defaults = {});

// The sliding window of "<arch>.attention.sliding_window" (0 when absent) and the pattern of
// windowed layers "<arch>.attention.sliding_window_pattern": one flag per layer (true = windowed),
// or a period n (layer l windowed unless l % n == n - 1; 0 = all windowed), default `period`.
Status read_sliding_window(const ModelFile& f, DecoderSpec& spec, int64_t period);

}  // namespace infer
