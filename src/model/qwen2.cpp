// Architecture "qwen2" (Qwen2, Qwen2.5 and their coder/math variants) as llama.cpp reads it:
// the Llama block with biases on the Q, K and V projections, NeoX RoPE (usually base 1e6), and
// the output tied to the embeddings in the small models.
#include "core/status_macros.hpp"
#include "model/families.hpp"

namespace infer {

Result<DecoderSpec> describe_qwen2(const ModelFile& f) {
  INFER_ASSIGN_OR_RETURN(DecoderSpec s, read_decoder_hparams(f, "qwen2", {.rms_eps = 1e-6, .n_ctx = 32768}));
  s.rope_style = ops::RopeStyle::neox;
  s.qkv_bias_required = true;
  s.activation = ops::Activation::silu;
  return s;
}

}  // namespace infer
