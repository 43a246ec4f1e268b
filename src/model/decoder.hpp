// The decoder-only transformer, written once over ops (src/ops/) and driven by a DecoderSpec
// (model/decoder_spec.hpp): binds the family's tensors from the file, then runs forward steps on
// a Backend. Every family in model/families.cpp is this class with another description.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "model/decoder_spec.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"
#include "ops/attention.hpp"

namespace infer {

class Decoder final : public Model {
 public:
  Decoder(std::shared_ptr<const ModelFile> file, DecoderSpec spec) : file_(std::move(file)), spec_(std::move(spec)) {}

  // Looks up and checks every tensor the description names (errors name the tensor and both
  // shapes), converting matrices when options.weight_type is set.
  Status bind(const LoadOptions& options);
  const ModelInfo& info() const noexcept override { return info_; }
  const DecoderSpec& spec() const noexcept { return spec_; }
  using Model::forward;
  Status forward(const Batch& batch, const KvView& kv, float* logits, Backend& backend) override;

 private:
  struct Layer {
    TensorView attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // F32 vectors
    TensorView wq, wk, wv, wqkv, wo, w_gate, w_up, w_down;  // wqkv or wq/wk/wv; w_up is [gate; up] when fused
    TensorView bq, bk, bv, bqkv, bo;                        // F32 biases; data null when absent
    // Online input rotations (TensorInfo::input_rotation; 0: none) of the matrices reading each
    // input: q/k/v (or qkv), o, gate/up, down.
    int rot_qkv = 0, rot_o = 0, rot_up = 0, rot_down = 0;
    bool windowed = false;
  };
  // A small tensor kept as F32 (norm weights, biases); nullptr data when absent and optional.
  Result<TensorView> vector(WeightBinder& w, const std::string& name, int64_t n, bool required);
  // `rotation`, when given, gets the matrix's input rotation (0 for none or an absent matrix);
  // without it a rotated matrix is an error.
  Result<TensorView> matrix(WeightBinder& w, const std::string& name, int64_t n_in, int64_t n_out, bool required,
                            int* rotation = nullptr);

  std::shared_ptr<const ModelFile> file_;
  DecoderSpec spec_;
  ModelInfo info_;
  Backend* prepared_for_ = nullptr;         // the backend the weights were prepared by (null: as mapped)
  std::deque<ConvertedTensor> converted_;   // matrices quantized at load (LoadOptions), if any
  std::deque<AlignedBuffer> vectors_;       // F32 copies of norms, biases, RoPE factors
  TensorView tok_embd_, output_, output_norm_, output_bias_;
  bool output_tied_ = false;  // output_ is the token embedding (no output.weight in the file)
  int rot_output_ = 0;        // output_'s input rotation (TensorInfo::input_rotation; 0: none)
  const float* rope_factors_ = nullptr;
  bool fused_layers_ = false, separate_layers_ = false;  // layers with a fused QKV matrix, with three
  std::vector<Layer> layers_;

  // Per-step state, reused.
  ops::AttentionPlan attention_;
  std::vector<int32_t> logit_rows_;
};

}  // namespace infer
