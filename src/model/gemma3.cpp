#include "model/gemma3.hpp"

#include <cmath>
#include <string>

#include "core/status_macros.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/ops.hpp"
#include "model/forward_util.hpp"
#include "model/weights.hpp"
#include "quant/dequantize.hpp"

namespace infer {
namespace {

struct Layer {
  AlignedBuffer attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // F32
  const TensorInfo *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
  bool local = false;  // sliding-window layer
};

struct HParams {
  int64_t n_vocab, n_ctx_train;
  int n_embd, n_layer, n_ff, n_head, n_kv_heads, head_dim;
  float rms_eps;
  float rope_base, rope_scale;          // global layers
  float rope_base_local;                // sliding-window layers (scale 1)
  float attn_scale;                     // applied to Q before attention
  float final_softcap;                  // 0 = none
  int sliding_window;                   // 0 = every layer global
  std::vector<uint8_t> local;           // per layer
};

class Gemma3Model final : public Model {
 public:
  Gemma3Model(std::shared_ptr<const ModelFile> file, HParams hp) : file_(std::move(file)), hp_(std::move(hp)) {}

  Status bind(const LoadOptions& options);
  const ModelInfo& info() const noexcept override { return info_; }
  Status forward(const Batch& batch, const KvView& kv, float* logits, ThreadPool& pool) override;

 private:
  std::shared_ptr<const ModelFile> file_;
  HParams hp_;
  ModelInfo info_;
  std::deque<ConvertedTensor> converted_;  // matrices quantized at load (LoadOptions), if any
  const TensorInfo* tok_embd_ = nullptr;
  const TensorInfo* output_ = nullptr;  // token_embd when tied
  AlignedBuffer output_norm_;
  std::vector<Layer> layers_;

  Scratch x_, h_, q_, k_, v_, att_, tmp_, g_, u_, rope_global_, rope_local_, logits_in_;
  BatchAttention attention_;
};

// The sliding-window pattern: attention.sliding_window_pattern as one flag per layer (true =
// local), or as a period n (layer l local unless l % n == n - 1; 0 = all local), default 6.
Result<std::vector<uint8_t>> read_window_pattern(const ModelFile& f, const std::string& key, int n_layer) {
  std::vector<uint8_t> local(static_cast<size_t>(n_layer));
  if (const Array* flags = f.metadata().get_array(key)) {
    if (flags->count != static_cast<uint64_t>(n_layer))
      return malformed_file(f.path() + ": " + key + " has " + std::to_string(flags->count) + " entries for " +
                            std::to_string(n_layer) + " layers");
    for (int l = 0; l < n_layer; ++l) {
      const auto v = flags->integer_at(static_cast<uint64_t>(l));
      if (!v) return malformed_file(f.path() + ": " + key + " must hold booleans");
      local[static_cast<size_t>(l)] = *v != 0;
    }
    return local;
  }
  const int64_t period = optional_int(f, key, 6);
  if (period < 0) return malformed_file(f.path() + ": " + key + " must not be negative");
  for (int l = 0; l < n_layer; ++l) local[static_cast<size_t>(l)] = period == 0 || (l % period < period - 1);
  return local;
}

Result<HParams> read_hparams(const ModelFile& f) {
  HParams hp{};
  const std::string a = "gemma3.";
  auto bad = [&](const std::string& what) { return malformed_file(f.path() + ": " + what); };
  INFER_ASSIGN_OR_RETURN(int64_t n_embd, require_int(f, a + "embedding_length"));
  INFER_ASSIGN_OR_RETURN(int64_t n_layer, require_int(f, a + "block_count"));
  INFER_ASSIGN_OR_RETURN(int64_t n_ff, require_int(f, a + "feed_forward_length"));
  INFER_ASSIGN_OR_RETURN(int64_t n_head, require_int(f, a + "attention.head_count"));
  const int64_t n_kv = optional_int(f, a + "attention.head_count_kv", n_head);
  if (n_embd <= 0 || n_embd > (1 << 20)) return bad("embedding_length " + std::to_string(n_embd) + " out of range");
  if (n_layer <= 0 || n_layer > 4096) return bad("block_count " + std::to_string(n_layer) + " out of range");
  if (n_ff <= 0 || n_ff > (1 << 22)) return bad("feed_forward_length " + std::to_string(n_ff) + " out of range");
  if (n_head <= 0 || n_head > 4096) return bad("attention.head_count " + std::to_string(n_head) + " out of range");
  if (n_kv <= 0 || n_head % n_kv != 0)
    return bad("attention.head_count_kv " + std::to_string(n_kv) + " does not divide head_count " + std::to_string(n_head));
  const int64_t head_dim = optional_int(f, a + "attention.key_length", n_embd / n_head);
  if (head_dim <= 0 || head_dim > 4096 || head_dim % 2 != 0) return bad("attention.key_length must be even and positive");
  if (optional_int(f, a + "attention.value_length", head_dim) != head_dim)
    return unsupported(f.path() + ": value head size other than the key head size");
  if (const int64_t n_rot = optional_int(f, a + "rope.dimension_count", head_dim); n_rot != head_dim)
    return unsupported(f.path() + ": rope.dimension_count " + std::to_string(n_rot) + " other than the head size");
  INFER_ASSIGN_OR_RETURN(double eps, optional_number(f, a + "attention.layer_norm_rms_epsilon", 1e-6));
  INFER_ASSIGN_OR_RETURN(double base, optional_number(f, a + "rope.freq_base", 10000.0));
  INFER_ASSIGN_OR_RETURN(double base_local, optional_number(f, a + "rope.freq_base_swa", 10000.0));
  const std::string* scaling = f.metadata().get_string(a + "rope.scaling.type");
  if (scaling && *scaling != "none" && *scaling != "linear")
    return unsupported(f.path() + ": RoPE scaling '" + *scaling + "' is not supported (none, linear)");
  INFER_ASSIGN_OR_RETURN(double factor, optional_number(f, a + "rope.scaling.factor", 0.0));
  if (scaling && *scaling == "none") factor = 0.0;
  INFER_ASSIGN_OR_RETURN(double softcap, optional_number(f, a + "final_logit_softcapping", 0.0));
  if (!(eps > 0) || !(base > 0) || !(base_local > 0) || factor < 0 || softcap < 0)
    return bad("RMS epsilon, RoPE bases, scaling factor and soft-capping must be positive");
  const int64_t window = optional_int(f, a + "attention.sliding_window", 0);
  if (window < 0 || window > INT32_MAX) return bad("attention.sliding_window out of range");

  hp.n_ctx_train = optional_int(f, a + "context_length", 8192);
  hp.n_embd = static_cast<int>(n_embd);
  hp.n_layer = static_cast<int>(n_layer);
  hp.n_ff = static_cast<int>(n_ff);
  hp.n_head = static_cast<int>(n_head);
  hp.n_kv_heads = static_cast<int>(n_kv);
  hp.head_dim = static_cast<int>(head_dim);
  hp.rms_eps = static_cast<float>(eps);
  hp.rope_base = static_cast<float>(base);
  hp.rope_scale = factor > 0 ? static_cast<float>(1.0 / factor) : 1.0f;
  hp.rope_base_local = static_cast<float>(base_local);
  // Gemma's query_pre_attn_scalar: the head size, except for the 27B model (62 layers), which
  // uses n_embd / n_head (as llama.cpp, after gemma_pytorch's config).
  const float qk = hp.n_layer == 62 ? static_cast<float>(hp.n_embd / hp.n_head) : static_cast<float>(hp.head_dim);
  hp.attn_scale = 1.0f / std::sqrt(qk);
  hp.final_softcap = static_cast<float>(softcap);
  hp.sliding_window = static_cast<int>(window);
  if (window > 0) {
    INFER_ASSIGN_OR_RETURN(hp.local, read_window_pattern(f, a + "attention.sliding_window_pattern", hp.n_layer));
  } else {
    hp.local.assign(static_cast<size_t>(hp.n_layer), 0);
  }
  return hp;
}

Status Gemma3Model::bind(const LoadOptions& options) {
  const ModelFile& f = *file_;
  WeightBinder w(f, options.weight_type, converted_, options.progress);
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) return malformed_file(f.path() + ": missing tensor token_embd.weight");
  hp_.n_vocab = embd->shape[1];
  if (const Array* tokens = f.metadata().get_array("tokenizer.ggml.tokens"); tokens && tokens->count != static_cast<uint64_t>(hp_.n_vocab))
    return malformed_file(f.path() + ": vocabulary size mismatch: tokenizer.ggml.tokens has " + std::to_string(tokens->count) +
                          " entries, token_embd.weight has " + std::to_string(hp_.n_vocab) + " rows");
  const int64_t E = hp_.n_embd, V = hp_.n_vocab, F = hp_.n_ff, hd = hp_.head_dim;
  const int64_t QD = hp_.n_head * hd, KVD = hp_.n_kv_heads * hd;
  INFER_ASSIGN_OR_RETURN(tok_embd_, w.matrix("token_embd.weight", {E, V}));
  INFER_ASSIGN_OR_RETURN(const TensorInfo* out_norm, w.require("output_norm.weight", {E}));
  INFER_ASSIGN_OR_RETURN(output_norm_, w.load_f32(*out_norm));
  INFER_ASSIGN_OR_RETURN(output_, w.optional_matrix("output.weight", {E, V}));
  if (!output_) output_ = tok_embd_;

  layers_.resize(static_cast<size_t>(hp_.n_layer));
  for (int l = 0; l < hp_.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& L = layers_[static_cast<size_t>(l)];
    const auto norm = [&](const std::string& name, int64_t n, AlignedBuffer& dst) -> Status {
      INFER_ASSIGN_OR_RETURN(const TensorInfo* t, w.require(p + name, {n}));
      INFER_ASSIGN_OR_RETURN(dst, w.load_f32(*t));
      return Status::ok();
    };
    INFER_RETURN_IF_ERROR(norm("attn_norm.weight", E, L.attn_norm));
    INFER_RETURN_IF_ERROR(norm("attn_q_norm.weight", hd, L.q_norm));
    INFER_RETURN_IF_ERROR(norm("attn_k_norm.weight", hd, L.k_norm));
    INFER_RETURN_IF_ERROR(norm("post_attention_norm.weight", E, L.post_attn_norm));
    INFER_RETURN_IF_ERROR(norm("ffn_norm.weight", E, L.ffn_norm));
    INFER_RETURN_IF_ERROR(norm("post_ffw_norm.weight", E, L.post_ffn_norm));
    INFER_ASSIGN_OR_RETURN(L.wq, w.matrix(p + "attn_q.weight", {E, QD}));
    INFER_ASSIGN_OR_RETURN(L.wk, w.matrix(p + "attn_k.weight", {E, KVD}));
    INFER_ASSIGN_OR_RETURN(L.wv, w.matrix(p + "attn_v.weight", {E, KVD}));
    INFER_ASSIGN_OR_RETURN(L.wo, w.matrix(p + "attn_output.weight", {QD, E}));
    INFER_ASSIGN_OR_RETURN(L.w_gate, w.matrix(p + "ffn_gate.weight", {E, F}));
    INFER_ASSIGN_OR_RETURN(L.w_up, w.matrix(p + "ffn_up.weight", {E, F}));
    INFER_ASSIGN_OR_RETURN(L.w_down, w.matrix(p + "ffn_down.weight", {F, E}));
    L.local = hp_.local[static_cast<size_t>(l)] != 0;
  }

  info_.architecture = "gemma3";
  if (const std::string* name = f.metadata().get_string("general.name")) info_.name = *name;
  info_.n_vocab = hp_.n_vocab;
  info_.n_ctx_train = hp_.n_ctx_train;
  info_.n_embd = hp_.n_embd;
  info_.n_layer = hp_.n_layer;
  info_.n_head = hp_.n_head;
  info_.n_kv_heads = hp_.n_kv_heads;
  info_.head_dim = hp_.head_dim;
  if (hp_.sliding_window > 0) {
    info_.sliding_window = hp_.sliding_window;
    info_.window_layers = hp_.local;
  }
  info_.fingerprint = model_fingerprint(f, options.weight_type);
  return Status::ok();
}

Status Gemma3Model::forward(const Batch& b, const KvView& kv, float* logits, ThreadPool& pool) {
  INFER_RETURN_IF_ERROR(check_batch(b, kv, hp_.n_layer, hp_.n_vocab, hp_.n_kv_heads, hp_.head_dim));
  if (hp_.sliding_window > 0 && (kv.windowed != hp_.local || kv.sliding_window != hp_.sliding_window))
    return invalid_argument("batch: KV cache sliding window does not match the model (use Model::kv_config)");
  if (hp_.sliding_window == 0 && !kv.windowed.empty())
    return invalid_argument("batch: KV cache has windowed layers the model does not have");
  const int64_t n = b.rows();
  if (n == 0) return Status::ok();
  const int64_t E = hp_.n_embd, F = hp_.n_ff, hd = hp_.head_dim;
  const int64_t QD = static_cast<int64_t>(hp_.n_head) * hd, KVD = static_cast<int64_t>(hp_.n_kv_heads) * hd;
  for (auto [s, size] : {std::pair{&x_, n * E}, {&h_, n * E}, {&q_, n * QD}, {&k_, n * KVD}, {&v_, n * KVD},
                         {&att_, n * QD}, {&tmp_, n * E}, {&g_, n * F}, {&u_, n * F}, {&rope_global_, n * hd},
                         {&rope_local_, n * hd}, {&logits_in_, n * E}})
    INFER_RETURN_IF_ERROR(s->reserve(static_cast<size_t>(size)));
  float *x = x_.data(), *h = h_.data(), *q = q_.data(), *k = k_.data(), *v = v_.data(), *att = att_.data();
  float *tmp = tmp_.data(), *g = g_.data(), *u = u_.data();
  float *cs_global = rope_global_.data(), *cs_local = rope_local_.data();

  const float embd_scale = std::sqrt(static_cast<float>(E));
  for (int64_t r = 0; r < n; ++r) {
    dequantize_row(tok_embd_->dtype, tok_embd_->view.row(b.tokens[static_cast<size_t>(r)]), x + r * E, E);
    scale_inplace(x + r * E, embd_scale, E);
  }
  const RopeParams global{hp_.head_dim, hp_.rope_base, hp_.rope_scale, nullptr};
  const RopeParams local{hp_.head_dim, hp_.rope_base_local, 1.0f, nullptr};
  for (int64_t r = 0; r < n; ++r) {
    rope_cache(global, b.positions[static_cast<size_t>(r)], cs_global + r * hd);
    rope_cache(local, b.positions[static_cast<size_t>(r)], cs_local + r * hd);
  }

  // The query scale is applied to Q itself (as llama.cpp does), so attention scales by 1.
  const AttentionShape shape{hp_.n_head, hp_.n_kv_heads, hp_.head_dim, 1.0f};
  INFER_RETURN_IF_ERROR(attention_.plan(b, kv, shape, pool.size()));
  for (int l = 0; l < hp_.n_layer; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    const float* cs = L.local ? cs_local : cs_global;
    for (int64_t r = 0; r < n; ++r) rms_norm(x + r * E, L.attn_norm.as<float>(), h + r * E, E, hp_.rms_eps);
    matmul(L.wq->view, h, n, E, q, QD, pool);
    matmul(L.wk->view, h, n, E, k, KVD, pool);
    matmul(L.wv->view, h, n, E, v, KVD, pool);
    for (int64_t r = 0; r < n; ++r) {
      float *qr = q + r * QD, *kr = k + r * KVD;
      for (int hh = 0; hh < hp_.n_head; ++hh) rms_norm(qr + hh * hd, L.q_norm.as<float>(), qr + hh * hd, hd, hp_.rms_eps);
      for (int hh = 0; hh < hp_.n_kv_heads; ++hh) rms_norm(kr + hh * hd, L.k_norm.as<float>(), kr + hh * hd, hd, hp_.rms_eps);
      rope_apply_neox(qr, hp_.n_head, hp_.head_dim, hp_.head_dim, cs + r * hd);
      rope_apply_neox(kr, hp_.n_kv_heads, hp_.head_dim, hp_.head_dim, cs + r * hd);
      scale_inplace(qr, hp_.attn_scale, QD);
      const BatchSequence& seq = b.sequences[static_cast<size_t>(b.seq[static_cast<size_t>(r)])];
      kv_store(kv, l, seq.table(kv, l), b.positions[static_cast<size_t>(r)], kr, v + r * KVD);
    }
    attention_.run(b, kv, l, q, QD, att, QD, pool);
    matmul(L.wo->view, att, n, QD, tmp, E, pool);
    for (int64_t r = 0; r < n; ++r) {
      rms_norm(tmp + r * E, L.post_attn_norm.as<float>(), tmp + r * E, E, hp_.rms_eps);
      add_inplace(x + r * E, tmp + r * E, E);
    }

    for (int64_t r = 0; r < n; ++r) rms_norm(x + r * E, L.ffn_norm.as<float>(), h + r * E, E, hp_.rms_eps);
    matmul(L.w_gate->view, h, n, E, g, F, pool);
    matmul(L.w_up->view, h, n, E, u, F, pool);
    for (int64_t r = 0; r < n; ++r) gelu_mul(g + r * F, u + r * F, g + r * F, F);
    matmul(L.w_down->view, g, n, F, tmp, E, pool);
    for (int64_t r = 0; r < n; ++r) {
      rms_norm(tmp + r * E, L.post_ffn_norm.as<float>(), tmp + r * E, E, hp_.rms_eps);
      add_inplace(x + r * E, tmp + r * E, E);
    }
  }

  float* sel = logits_in_.data();
  int64_t m = 0;
  for (int64_t r = 0; r < n; ++r)
    if (b.wants_logits[static_cast<size_t>(r)]) rms_norm(x + r * E, output_norm_.as<float>(), sel + (m++) * E, E, hp_.rms_eps);
  if (m > 0) {
    matmul(output_->view, sel, m, E, logits, hp_.n_vocab, pool);
    if (hp_.final_softcap > 0) {
      const float c = hp_.final_softcap;
      for (int64_t i = 0; i < m * hp_.n_vocab; ++i) logits[i] = std::tanh(logits[i] * (1.0f / c)) * c;
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Model>> load_gemma3(std::shared_ptr<const ModelFile> file, const LoadOptions& options) {
  INFER_ASSIGN_OR_RETURN(HParams hp, read_hparams(*file));
  auto model = std::make_unique<Gemma3Model>(std::move(file), std::move(hp));
  INFER_RETURN_IF_ERROR(model->bind(options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace infer
