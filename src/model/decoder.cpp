#include "model/decoder.hpp"

#include <cmath>
#include <string>

#include "core/status_macros.hpp"
#include "model/forward_util.hpp"
#include "ops/embedding.hpp"
#include "ops/matmul.hpp"
#include "ops/norm.hpp"
#include "ops/op_util.hpp"

namespace infer {
namespace {

// The backend's activation slots a step uses.
enum Slot : int { kX, kH, kQ, kK, kV, kQkv, kAtt, kTmp, kGate, kUp, kRope, kRopeWindow, kSel };

TensorView f32_vector(AlignedBuffer& buf, int64_t n) {
  return TensorView::contiguous(DType::f32, 1, {n, 1, 1, 1}, buf.data());
}

bool present(const TensorView& t) { return t.data != nullptr; }

// ops::matmul, its input first shown to the backend's matmul observer when one is set, under the
// weight's file name ("blk.<layer>.<name>", or `name` alone for layer -1).
Status linear(Backend& be, const TensorView& w, const TensorView& x, const TensorView& y, int layer, const char* name) {
  if (const Backend::MatmulObserver& observe = be.matmul_observer())
    observe(layer < 0 ? std::string(name) : "blk." + std::to_string(layer) + "." + name, x);
  return ops::matmul(be, w, x, y);
}

}  // namespace

Result<TensorView> Decoder::vector(WeightBinder& w, const std::string& name, int64_t n, bool required) {
  INFER_ASSIGN_OR_RETURN(const TensorInfo* t, required ? w.require(name, {n}) : w.optional(name, {n}));
  if (!t) return TensorView{};
  INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, w.load_f32(*t));
  vectors_.push_back(std::move(buf));
  TensorView v = f32_vector(vectors_.back(), n);
  if (prepared_for_) return prepared_for_->prepare_weight(v, Backend::WeightSource::kept);
  return v;
}

Result<TensorView> Decoder::matrix(WeightBinder& w, const std::string& name, int64_t n_in, int64_t n_out, bool required,
                                   int* rotation) {
  INFER_ASSIGN_OR_RETURN(const TensorInfo* t, required ? w.matrix(name, {n_in, n_out}) : w.optional_matrix(name, {n_in, n_out}));
  if (rotation) *rotation = t ? t->input_rotation : 0;
  if (!t) return TensorView{};
  if (t->input_rotation != 0 && !rotation)
    return unsupported(file_->path() + ": " + name + ": an input rotation of this tensor is not supported (only linear layers')");
  if (!prepared_for_) return t->view;
  ConvertedTensor* converted = nullptr;
  for (ConvertedTensor& c : converted_)
    if (&c.info == t) converted = &c;
  // A mapped file's pages, and a matrix converted at load, can leave memory once the backend
  // holds its own copy; a file read into memory, and a tensor the reader rewrote, keep theirs.
  const auto source = converted || file_->can_release(t->view.data, t->view.nbytes()) ? Backend::WeightSource::released
                                                                                       : Backend::WeightSource::kept;
  INFER_ASSIGN_OR_RETURN(TensorView prepared, prepared_for_->prepare_weight(t->view, source));
  if (prepared.data != t->view.data) {
    // The backend keeps its own copy (a repacked layout, or huge pages): one copy of the weights
    // stays resident. The file's pages leave memory; a matrix converted at load is freed.
    file_->advise_unused(t->view.data, t->view.nbytes());
    if (converted) converted->data = AlignedBuffer{};
  }
  return prepared;
}

Status Decoder::bind(const LoadOptions& options) {
  const ModelFile& f = *file_;
  DecoderSpec& s = spec_;
  prepared_for_ = options.backend;
  WeightBinder w(f, options.weight_type, converted_, options.progress);
  w.set_rotate_int8(options.rotate_int8);
  // The vocabulary size comes from the embedding table; it must agree with the tokenizer's.
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) return malformed_file(f.path() + ": missing tensor token_embd.weight");
  s.n_vocab = embd->shape[1];
  if (const Array* tokens = f.metadata().get_array("tokenizer.ggml.tokens"); tokens && tokens->count != static_cast<uint64_t>(s.n_vocab))
    return malformed_file(f.path() + ": vocabulary size mismatch: tokenizer.ggml.tokens has " + std::to_string(tokens->count) +
                          " entries, token_embd.weight has " + std::to_string(s.n_vocab) + " rows");
  if (!s.vocab_size_key.empty())
    if (auto vs = f.metadata().get_integer(s.vocab_size_key); vs && *vs != s.n_vocab)
      return malformed_file(f.path() + ": vocabulary size mismatch: " + s.vocab_size_key + " is " + std::to_string(*vs) +
                            ", token_embd.weight has " + std::to_string(s.n_vocab) + " rows");
  const int64_t E = s.n_embd, V = s.n_vocab, F = s.n_ff, hd = s.head_dim;
  const int64_t QD = s.n_head * hd, KVD = s.n_kv_heads * hd;
  INFER_ASSIGN_OR_RETURN(tok_embd_, matrix(w, "token_embd.weight", E, V, true));
  INFER_ASSIGN_OR_RETURN(output_norm_, vector(w, "output_norm.weight", E, true));
  INFER_ASSIGN_OR_RETURN(output_, matrix(w, "output.weight", E, V, false, &rot_output_));
  output_tied_ = !present(output_);
  if (output_tied_) output_ = tok_embd_;  // tied embeddings
  INFER_ASSIGN_OR_RETURN(output_bias_, vector(w, "output.bias", V, false));
  if (s.rope_freq_factors) {
    INFER_ASSIGN_OR_RETURN(TensorView factors, vector(w, "rope_freqs.weight", s.n_rot / 2, false));
    rope_factors_ = static_cast<const float*>(factors.data);
  }

  // Matrices sharing an input must share its rotation (it is applied once, in place).
  const auto same_rotation = [&](int l, const char* what, std::initializer_list<int> rotations) -> Result<int> {
    for (int r : rotations)
      if (r != *rotations.begin())
        return unsupported(f.path() + ": blk." + std::to_string(l) + ": " + what +
                           " rotate their shared input differently (one input rotation for all of them is supported)");
    return *rotations.begin();
  };
  layers_.resize(static_cast<size_t>(s.n_layer));
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& L = layers_[static_cast<size_t>(l)];
    INFER_ASSIGN_OR_RETURN(L.attn_norm, vector(w, p + "attn_norm.weight", E, true));
    if (s.qk_norm) {
      INFER_ASSIGN_OR_RETURN(L.q_norm, vector(w, p + "attn_q_norm.weight", hd, true));
      INFER_ASSIGN_OR_RETURN(L.k_norm, vector(w, p + "attn_k_norm.weight", hd, true));
    }
    if (s.post_norms) {
      INFER_ASSIGN_OR_RETURN(L.post_attn_norm, vector(w, p + "post_attention_norm.weight", E, true));
      INFER_ASSIGN_OR_RETURN(L.post_ffn_norm, vector(w, p + "post_ffw_norm.weight", E, true));
    }
    INFER_ASSIGN_OR_RETURN(L.ffn_norm, vector(w, p + "ffn_norm.weight", E, true));
    // A fused QKV matrix is taken wherever the file has one (as llama.cpp does for every family).
    if (s.fused_qkv || f.find_tensor(p + "attn_qkv.weight")) {
      INFER_ASSIGN_OR_RETURN(L.wqkv, matrix(w, p + "attn_qkv.weight", E, QD + 2 * KVD, true, &L.rot_qkv));
      fused_layers_ = true;
      INFER_ASSIGN_OR_RETURN(L.bqkv, vector(w, p + "attn_qkv.bias", QD + 2 * KVD, s.qkv_bias_required));
    } else {
      int rq = 0, rk = 0, rv = 0;
      INFER_ASSIGN_OR_RETURN(L.wq, matrix(w, p + "attn_q.weight", E, QD, true, &rq));
      INFER_ASSIGN_OR_RETURN(L.wk, matrix(w, p + "attn_k.weight", E, KVD, true, &rk));
      INFER_ASSIGN_OR_RETURN(L.wv, matrix(w, p + "attn_v.weight", E, KVD, true, &rv));
      INFER_ASSIGN_OR_RETURN(L.rot_qkv, same_rotation(l, "attn_q, attn_k and attn_v", {rq, rk, rv}));
      INFER_ASSIGN_OR_RETURN(L.bq, vector(w, p + "attn_q.bias", QD, s.qkv_bias_required));
      INFER_ASSIGN_OR_RETURN(L.bk, vector(w, p + "attn_k.bias", KVD, s.qkv_bias_required));
      INFER_ASSIGN_OR_RETURN(L.bv, vector(w, p + "attn_v.bias", KVD, s.qkv_bias_required));
      separate_layers_ = true;
    }
    INFER_ASSIGN_OR_RETURN(L.wo, matrix(w, p + "attn_output.weight", QD, E, true, &L.rot_o));
    INFER_ASSIGN_OR_RETURN(L.bo, vector(w, p + "attn_output.bias", E, false));
    if (s.fused_gate_up) {
      INFER_ASSIGN_OR_RETURN(L.w_up, matrix(w, p + "ffn_up.weight", E, 2 * F, true, &L.rot_up));
    } else {
      int rg = 0, ru = 0;
      INFER_ASSIGN_OR_RETURN(L.w_gate, matrix(w, p + "ffn_gate.weight", E, F, true, &rg));
      INFER_ASSIGN_OR_RETURN(L.w_up, matrix(w, p + "ffn_up.weight", E, F, true, &ru));
      INFER_ASSIGN_OR_RETURN(L.rot_up, same_rotation(l, "ffn_gate and ffn_up", {rg, ru}));
    }
    INFER_ASSIGN_OR_RETURN(L.w_down, matrix(w, p + "ffn_down.weight", F, E, true, &L.rot_down));
    L.windowed = s.sliding_window > 0 && s.window_layers[static_cast<size_t>(l)] != 0;
  }

  info_.architecture = s.arch;
  if (const std::string* name = f.metadata().get_string("general.name")) info_.name = *name;
  info_.n_vocab = s.n_vocab;
  info_.n_ctx_train = s.n_ctx_train;
  info_.n_embd = s.n_embd;
  info_.n_layer = s.n_layer;
  info_.n_head = s.n_head;
  info_.n_kv_heads = s.n_kv_heads;
  info_.head_dim = s.head_dim;
  if (s.sliding_window > 0) {
    info_.sliding_window = s.sliding_window;
    info_.window_layers = s.window_layers;
  }
  info_.fingerprint = model_fingerprint(f, options.weight_type);
  return Status::ok();
}

Status Decoder::forward(const Batch& b, const KvView& kv, float* logits, Backend& be) {
  const DecoderSpec& s = spec_;
  INFER_RETURN_IF_ERROR(check_batch(b, kv, s.n_layer, s.n_vocab));
  for (int l = 0; l < s.n_layer; ++l) {
    const int want = layers_[static_cast<size_t>(l)].windowed ? s.sliding_window : 0;
    if (kv.window(l) != want)
      return invalid_argument("batch: KV cache layer " + std::to_string(l) + " has sliding window " + std::to_string(kv.window(l)) +
                              ", the model " + std::to_string(want) + " (use Model::kv_config)");
  }
  if (prepared_for_ && prepared_for_ != &be && be.device() != Device::cpu)
    return invalid_argument("forward: the weights were prepared for another backend");
  const int64_t n = b.rows();
  const ops::PagedRows rows = b.paged_rows();
  const ops::AttentionSpec att_spec{s.n_head, s.n_kv_heads, s.head_dim,
                                    s.q_scale > 0 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(s.head_dim))};
  INFER_RETURN_IF_ERROR(attention_.plan(be, rows, kv, att_spec));
  if (n == 0) return Status::ok();
  const int64_t E = s.n_embd, F = s.n_ff, hd = s.head_dim;
  const int64_t QD = static_cast<int64_t>(s.n_head) * hd, KVD = static_cast<int64_t>(s.n_kv_heads) * hd;

  INFER_ASSIGN_OR_RETURN(TensorView x, be.activation(kX, E, n));
  INFER_ASSIGN_OR_RETURN(TensorView h, be.activation(kH, E, n));
  INFER_ASSIGN_OR_RETURN(TensorView att, be.activation(kAtt, QD, n));
  INFER_ASSIGN_OR_RETURN(TensorView tmp, be.activation(kTmp, E, n));
  // Q, K, V: column slices of one [q; k; v] tensor for layers with a fused matrix, or three tensors.
  TensorView qkv, fused[3], separate[3], gate, up, gate_up;
  if (fused_layers_) {
    INFER_ASSIGN_OR_RETURN(qkv, be.activation(kQkv, QD + 2 * KVD, n));
    fused[0] = ops::column_slice(qkv, 0, QD);
    fused[1] = ops::column_slice(qkv, QD, KVD);
    fused[2] = ops::column_slice(qkv, QD + KVD, KVD);
  }
  if (separate_layers_) {
    INFER_ASSIGN_OR_RETURN(separate[0], be.activation(kQ, QD, n));
    INFER_ASSIGN_OR_RETURN(separate[1], be.activation(kK, KVD, n));
    INFER_ASSIGN_OR_RETURN(separate[2], be.activation(kV, KVD, n));
  }
  if (s.fused_gate_up) {
    INFER_ASSIGN_OR_RETURN(gate_up, be.activation(kGate, 2 * F, n));
    gate = ops::column_slice(gate_up, 0, F);
    up = ops::column_slice(gate_up, F, F);
  } else {
    INFER_ASSIGN_OR_RETURN(gate, be.activation(kGate, F, n));
    INFER_ASSIGN_OR_RETURN(up, be.activation(kUp, F, n));
  }

  INFER_RETURN_IF_ERROR(ops::embed(be, tok_embd_, b.tokens, x, s.embd_scale));
  INFER_ASSIGN_OR_RETURN(TensorView rope_full, be.activation(kRope, s.n_rot, n));
  INFER_RETURN_IF_ERROR(ops::rope_table(be, {s.n_rot, s.rope_base, s.rope_scale, rope_factors_}, b.positions, rope_full));
  TensorView rope_window = rope_full;
  if (s.sliding_window > 0 && s.rope_base_window > 0) {
    INFER_ASSIGN_OR_RETURN(rope_window, be.activation(kRopeWindow, s.n_rot, n));
    INFER_RETURN_IF_ERROR(ops::rope_table(be, {s.n_rot, s.rope_base_window, 1.0f, nullptr}, b.positions, rope_window));
  }

  // A linear layer's online input rotation (its weight stored rotated), in place: each input is read
  // by its matrices only.
  const auto rotate = [&be](const TensorView& in, int block) { return block > 0 ? ops::hadamard(be, in, block) : Status::ok(); };
  for (int l = 0; l < s.n_layer; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    INFER_RETURN_IF_ERROR(ops::rms_norm(be, x, L.attn_norm, h, s.rms_eps));
    INFER_RETURN_IF_ERROR(rotate(h, L.rot_qkv));
    const bool is_fused = present(L.wqkv);
    const TensorView& q = is_fused ? fused[0] : separate[0];
    const TensorView& k = is_fused ? fused[1] : separate[1];
    const TensorView& v = is_fused ? fused[2] : separate[2];
    if (is_fused) {
      INFER_RETURN_IF_ERROR(linear(be, L.wqkv, h, qkv, l, "attn_qkv.weight"));
      if (present(L.bqkv)) INFER_RETURN_IF_ERROR(ops::add_bias(be, qkv, L.bqkv));
    } else {
      for (auto [wt, bias, out, name] : {std::tuple{&L.wq, &L.bq, &q, "attn_q.weight"}, {&L.wk, &L.bk, &k, "attn_k.weight"},
                                         {&L.wv, &L.bv, &v, "attn_v.weight"}}) {
        INFER_RETURN_IF_ERROR(linear(be, *wt, h, *out, l, name));
        if (present(*bias)) INFER_RETURN_IF_ERROR(ops::add_bias(be, *out, *bias));
      }
    }
    if (s.qk_norm) {
      INFER_RETURN_IF_ERROR(ops::rms_norm(be, q, L.q_norm, q, s.rms_eps));
      INFER_RETURN_IF_ERROR(ops::rms_norm(be, k, L.k_norm, k, s.rms_eps));
    }
    const TensorView& table = L.windowed ? rope_window : rope_full;
    INFER_RETURN_IF_ERROR(ops::rope(be, q, s.n_head, s.head_dim, s.n_rot, s.rope_style, table));
    INFER_RETURN_IF_ERROR(ops::rope(be, k, s.n_kv_heads, s.head_dim, s.n_rot, s.rope_style, table));
    if (s.q_scale > 0) INFER_RETURN_IF_ERROR(ops::scale(be, q, s.q_scale));
    INFER_RETURN_IF_ERROR(ops::kv_write(be, attention_, kv, l, rows, k, v));
    INFER_RETURN_IF_ERROR(ops::attention(be, attention_, kv, l, rows, q, att));
    INFER_RETURN_IF_ERROR(rotate(att, L.rot_o));
    INFER_RETURN_IF_ERROR(linear(be, L.wo, att, tmp, l, "attn_output.weight"));
    if (present(L.bo)) INFER_RETURN_IF_ERROR(ops::add_bias(be, tmp, L.bo));
    if (s.post_norms) INFER_RETURN_IF_ERROR(ops::rms_norm(be, tmp, L.post_attn_norm, tmp, s.rms_eps));
    INFER_RETURN_IF_ERROR(ops::add(be, x, tmp));

    INFER_RETURN_IF_ERROR(ops::rms_norm(be, x, L.ffn_norm, h, s.rms_eps));
    INFER_RETURN_IF_ERROR(rotate(h, L.rot_up));
    if (s.fused_gate_up) {
      INFER_RETURN_IF_ERROR(linear(be, L.w_up, h, gate_up, l, "ffn_up.weight"));
    } else {
      INFER_RETURN_IF_ERROR(linear(be, L.w_gate, h, gate, l, "ffn_gate.weight"));
      INFER_RETURN_IF_ERROR(linear(be, L.w_up, h, up, l, "ffn_up.weight"));
    }
    INFER_RETURN_IF_ERROR(ops::glu(be, s.activation, gate, up, gate));
    INFER_RETURN_IF_ERROR(rotate(gate, L.rot_down));
    INFER_RETURN_IF_ERROR(linear(be, L.w_down, gate, tmp, l, "ffn_down.weight"));
    if (s.post_norms) INFER_RETURN_IF_ERROR(ops::rms_norm(be, tmp, L.post_ffn_norm, tmp, s.rms_eps));
    INFER_RETURN_IF_ERROR(ops::add(be, x, tmp));
  }

  // Only the rows that sample pay for the output projection.
  logit_rows_.clear();
  for (int64_t r = 0; r < n; ++r)
    if (b.wants_logits[static_cast<size_t>(r)]) logit_rows_.push_back(static_cast<int32_t>(r));
  const int64_t m = static_cast<int64_t>(logit_rows_.size());
  if (m == 0) return Status::ok();
  INFER_ASSIGN_OR_RETURN(TensorView sel, be.activation(kSel, E, m));
  INFER_RETURN_IF_ERROR(ops::copy_rows(be, x, logit_rows_, sel));
  INFER_RETURN_IF_ERROR(ops::rms_norm(be, sel, output_norm_, sel, s.rms_eps));
  INFER_RETURN_IF_ERROR(rotate(sel, rot_output_));
  const TensorView out = ops::rows_view(logits, s.n_vocab, m, s.n_vocab, be.device());
  INFER_RETURN_IF_ERROR(linear(be, output_, sel, out, -1, output_tied_ ? "token_embd.weight" : "output.weight"));
  if (present(output_bias_)) INFER_RETURN_IF_ERROR(ops::add_bias(be, out, output_bias_));
  if (s.final_softcap > 0) INFER_RETURN_IF_ERROR(ops::softcap(be, out, s.final_softcap));
  return Status::ok();
}

}  // namespace infer
