#include "model/llama.hpp"

#include <cmath>
#include <cstring>

#include "core/log.hpp"
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
  AlignedBuffer attn_norm, ffn_norm;  // F32
  const TensorInfo *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
};

struct HParams {
  int64_t n_vocab, n_ctx_train;
  int n_embd, n_layer, n_ff, n_head, n_kv_heads, head_dim, n_rot;
  float rms_eps, rope_base, rope_scale;
};

class LlamaModel final : public Model {
 public:
  LlamaModel(std::shared_ptr<const ModelFile> file, HParams hp) : file_(std::move(file)), hp_(hp) {}

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
  AlignedBuffer rope_factors_;  // Llama 3 scaling, or empty
  std::vector<Layer> layers_;

  // Per-step activations, grown on demand.
  Scratch x_, h_, q_, k_, v_, att_, tmp_, g_, u_, rope_, logits_in_;
  BatchAttention attention_;
};

Result<HParams> read_hparams(const ModelFile& f) {
  HParams hp{};
  const std::string a = "llama.";
  INFER_ASSIGN_OR_RETURN(int64_t n_embd, require_int(f, a + "embedding_length"));
  INFER_ASSIGN_OR_RETURN(int64_t n_layer, require_int(f, a + "block_count"));
  INFER_ASSIGN_OR_RETURN(int64_t n_ff, require_int(f, a + "feed_forward_length"));
  INFER_ASSIGN_OR_RETURN(int64_t n_head, require_int(f, a + "attention.head_count"));
  const int64_t n_kv = optional_int(f, a + "attention.head_count_kv", n_head);
  const int64_t n_ctx = optional_int(f, a + "context_length", 2048);
  auto bad = [&](const std::string& what) { return malformed_file(f.path() + ": " + what); };
  if (n_embd <= 0 || n_embd > (1 << 20)) return bad("embedding_length " + std::to_string(n_embd) + " out of range");
  if (n_layer <= 0 || n_layer > 4096) return bad("block_count " + std::to_string(n_layer) + " out of range");
  if (n_ff <= 0 || n_ff > (1 << 22)) return bad("feed_forward_length " + std::to_string(n_ff) + " out of range");
  if (n_head <= 0 || n_embd % n_head != 0)
    return bad("attention.head_count " + std::to_string(n_head) + " does not divide embedding_length " + std::to_string(n_embd));
  if (n_kv <= 0 || n_head % n_kv != 0)
    return bad("attention.head_count_kv " + std::to_string(n_kv) + " does not divide head_count " + std::to_string(n_head));
  const int64_t head_dim = optional_int(f, a + "attention.key_length", n_embd / n_head);
  if (head_dim != n_embd / n_head || optional_int(f, a + "attention.value_length", head_dim) != head_dim)
    return unsupported(f.path() + ": key/value head size other than embedding_length / head_count");
  const int64_t n_rot = optional_int(f, a + "rope.dimension_count", head_dim);
  if (n_rot != head_dim) return bad("rope.dimension_count " + std::to_string(n_rot) + " must equal the head size " + std::to_string(head_dim));
  if (head_dim % 2 != 0) return bad("head size must be even");
  INFER_ASSIGN_OR_RETURN(double eps, optional_number(f, a + "attention.layer_norm_rms_epsilon", 1e-5));
  INFER_ASSIGN_OR_RETURN(double base, optional_number(f, a + "rope.freq_base", 10000.0));
  // Linear scaling: rope.scaling.factor (or the older rope.scale_linear) divides positions.
  double factor = 0.0;
  const std::string* scaling = f.metadata().get_string(a + "rope.scaling.type");
  if (scaling && *scaling != "none" && *scaling != "linear")
    return unsupported(f.path() + ": RoPE scaling '" + *scaling + "' is not supported (none, linear, llama3 factors)");
  INFER_ASSIGN_OR_RETURN(factor, optional_number(f, a + "rope.scaling.factor", 0.0));
  if (factor == 0.0) {
    INFER_ASSIGN_OR_RETURN(factor, optional_number(f, a + "rope.scale_linear", 0.0));
  }
  if (scaling && *scaling == "none") factor = 0.0;
  if (!(eps > 0) || !(base > 0) || factor < 0) return bad("RMS epsilon, RoPE base and scaling factor must be positive");

  hp.n_ctx_train = n_ctx;
  hp.n_embd = static_cast<int>(n_embd);
  hp.n_layer = static_cast<int>(n_layer);
  hp.n_ff = static_cast<int>(n_ff);
  hp.n_head = static_cast<int>(n_head);
  hp.n_kv_heads = static_cast<int>(n_kv);
  hp.head_dim = static_cast<int>(head_dim);
  hp.n_rot = static_cast<int>(n_rot);
  hp.rms_eps = static_cast<float>(eps);
  hp.rope_base = static_cast<float>(base);
  hp.rope_scale = factor > 0 ? static_cast<float>(1.0 / factor) : 1.0f;
  return hp;
}

Status LlamaModel::bind(const LoadOptions& options) {
  const ModelFile& f = *file_;
  WeightBinder w(f, options.weight_type, converted_, options.progress);
  // The vocabulary size comes from the embedding table; it must agree with the tokenizer's.
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) return malformed_file(f.path() + ": missing tensor token_embd.weight");
  hp_.n_vocab = embd->shape[1];
  if (const Array* tokens = f.metadata().get_array("tokenizer.ggml.tokens"); tokens && tokens->count != static_cast<uint64_t>(hp_.n_vocab))
    return malformed_file(f.path() + ": vocabulary size mismatch: tokenizer.ggml.tokens has " + std::to_string(tokens->count) +
                          " entries, token_embd.weight has " + std::to_string(hp_.n_vocab) + " rows");
  if (auto vs = f.metadata().get_integer("llama.vocab_size"); vs && *vs != hp_.n_vocab)
    return malformed_file(f.path() + ": vocabulary size mismatch: llama.vocab_size is " + std::to_string(*vs) +
                          ", token_embd.weight has " + std::to_string(hp_.n_vocab) + " rows");
  const int64_t E = hp_.n_embd, V = hp_.n_vocab, F = hp_.n_ff;
  const int64_t KV = static_cast<int64_t>(hp_.n_kv_heads) * hp_.head_dim;
  INFER_ASSIGN_OR_RETURN(tok_embd_, w.matrix("token_embd.weight", {E, V}));
  INFER_ASSIGN_OR_RETURN(const TensorInfo* out_norm, w.require("output_norm.weight", {E}));
  INFER_ASSIGN_OR_RETURN(output_norm_, w.load_f32(*out_norm));
  INFER_ASSIGN_OR_RETURN(output_, w.optional_matrix("output.weight", {E, V}));
  if (!output_) output_ = tok_embd_;  // tied embeddings
  INFER_ASSIGN_OR_RETURN(const TensorInfo* factors, w.optional("rope_freqs.weight", {hp_.n_rot / 2}));
  if (factors) {
    INFER_ASSIGN_OR_RETURN(rope_factors_, w.load_f32(*factors));
  }

  layers_.resize(static_cast<size_t>(hp_.n_layer));
  for (int l = 0; l < hp_.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& L = layers_[static_cast<size_t>(l)];
    INFER_ASSIGN_OR_RETURN(const TensorInfo* an, w.require(p + "attn_norm.weight", {E}));
    INFER_ASSIGN_OR_RETURN(L.attn_norm, w.load_f32(*an));
    INFER_ASSIGN_OR_RETURN(const TensorInfo* fn, w.require(p + "ffn_norm.weight", {E}));
    INFER_ASSIGN_OR_RETURN(L.ffn_norm, w.load_f32(*fn));
    INFER_ASSIGN_OR_RETURN(L.wq, w.matrix(p + "attn_q.weight", {E, E}));
    INFER_ASSIGN_OR_RETURN(L.wk, w.matrix(p + "attn_k.weight", {E, KV}));
    INFER_ASSIGN_OR_RETURN(L.wv, w.matrix(p + "attn_v.weight", {E, KV}));
    INFER_ASSIGN_OR_RETURN(L.wo, w.matrix(p + "attn_output.weight", {E, E}));
    INFER_ASSIGN_OR_RETURN(L.w_gate, w.matrix(p + "ffn_gate.weight", {E, F}));
    INFER_ASSIGN_OR_RETURN(L.w_up, w.matrix(p + "ffn_up.weight", {E, F}));
    INFER_ASSIGN_OR_RETURN(L.w_down, w.matrix(p + "ffn_down.weight", {F, E}));
  }

  info_.architecture = "llama";
  if (const std::string* name = f.metadata().get_string("general.name")) info_.name = *name;
  info_.n_vocab = hp_.n_vocab;
  info_.n_ctx_train = hp_.n_ctx_train;
  info_.n_embd = hp_.n_embd;
  info_.n_layer = hp_.n_layer;
  info_.n_head = hp_.n_head;
  info_.n_kv_heads = hp_.n_kv_heads;
  info_.head_dim = hp_.head_dim;
  info_.fingerprint = model_fingerprint(f, options.weight_type);
  return Status::ok();
}

Status LlamaModel::forward(const Batch& b, const KvView& kv, float* logits, ThreadPool& pool) {
  INFER_RETURN_IF_ERROR(check_batch(b, kv, hp_.n_layer, hp_.n_vocab, hp_.n_kv_heads, hp_.head_dim));
  const int64_t n = b.rows();
  if (n == 0) return Status::ok();
  const int64_t E = hp_.n_embd, F = hp_.n_ff, hd = hp_.head_dim;
  const int64_t QD = static_cast<int64_t>(hp_.n_head) * hd, KVD = static_cast<int64_t>(hp_.n_kv_heads) * hd;
  for (auto [s, size] : {std::pair{&x_, n * E}, {&h_, n * E}, {&q_, n * QD}, {&k_, n * KVD}, {&v_, n * KVD},
                         {&att_, n * QD}, {&tmp_, n * E}, {&g_, n * F}, {&u_, n * F}, {&rope_, n * hp_.n_rot},
                         {&logits_in_, n * E}})
    INFER_RETURN_IF_ERROR(s->reserve(static_cast<size_t>(size)));
  float *x = x_.data(), *h = h_.data(), *q = q_.data(), *k = k_.data(), *v = v_.data(), *att = att_.data();
  float *tmp = tmp_.data(), *g = g_.data(), *u = u_.data(), *cs = rope_.data();

  for (int64_t r = 0; r < n; ++r)
    dequantize_row(tok_embd_->dtype, tok_embd_->view.row(b.tokens[static_cast<size_t>(r)]), x + r * E, E);
  RopeParams rp{hp_.n_rot, hp_.rope_base, hp_.rope_scale, rope_factors_.empty() ? nullptr : rope_factors_.as<float>()};
  for (int64_t r = 0; r < n; ++r) rope_cache(rp, b.positions[static_cast<size_t>(r)], cs + r * hp_.n_rot);

  const AttentionShape shape{hp_.n_head, hp_.n_kv_heads, hp_.head_dim, 1.0f / std::sqrt(static_cast<float>(hd))};
  INFER_RETURN_IF_ERROR(attention_.plan(b, kv, shape, pool.size()));
  for (int l = 0; l < hp_.n_layer; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    for (int64_t r = 0; r < n; ++r) rms_norm(x + r * E, L.attn_norm.as<float>(), h + r * E, E, hp_.rms_eps);
    matmul(L.wq->view, h, n, E, q, QD, pool);
    matmul(L.wk->view, h, n, E, k, KVD, pool);
    matmul(L.wv->view, h, n, E, v, KVD, pool);
    for (int64_t r = 0; r < n; ++r) {
      rope_apply_norm(q + r * QD, hp_.n_head, hp_.head_dim, hp_.n_rot, cs + r * hp_.n_rot);
      rope_apply_norm(k + r * KVD, hp_.n_kv_heads, hp_.head_dim, hp_.n_rot, cs + r * hp_.n_rot);
      const auto& seq = b.sequences[static_cast<size_t>(b.seq[static_cast<size_t>(r)])];
      kv_store(kv, l, seq.blocks, b.positions[static_cast<size_t>(r)], k + r * KVD, v + r * KVD);
    }
    attention_.run(b, kv, l, q, QD, att, QD, pool);
    matmul(L.wo->view, att, n, QD, tmp, E, pool);
    for (int64_t r = 0; r < n; ++r) add_inplace(x + r * E, tmp + r * E, E);

    for (int64_t r = 0; r < n; ++r) rms_norm(x + r * E, L.ffn_norm.as<float>(), h + r * E, E, hp_.rms_eps);
    matmul(L.w_gate->view, h, n, E, g, F, pool);
    matmul(L.w_up->view, h, n, E, u, F, pool);
    for (int64_t r = 0; r < n; ++r) silu_mul(g + r * F, u + r * F, g + r * F, F);
    matmul(L.w_down->view, g, n, F, tmp, E, pool);
    for (int64_t r = 0; r < n; ++r) add_inplace(x + r * E, tmp + r * E, E);
  }

  // Only the rows that sample pay for the output projection.
  float* sel = logits_in_.data();
  int64_t m = 0;
  for (int64_t r = 0; r < n; ++r)
    if (b.wants_logits[static_cast<size_t>(r)]) rms_norm(x + r * E, output_norm_.as<float>(), sel + (m++) * E, E, hp_.rms_eps);
  if (m > 0) matmul(output_->view, sel, m, E, logits, hp_.n_vocab, pool);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Model>> load_llama(std::shared_ptr<const ModelFile> file, const LoadOptions& options) {
  INFER_ASSIGN_OR_RETURN(HParams hp, read_hparams(*file));
  auto model = std::make_unique<LlamaModel>(std::move(file), hp);
  INFER_RETURN_IF_ERROR(model->bind(options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace infer
