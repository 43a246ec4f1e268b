// Architecture "qwen3" (Qwen3 dense models) as llama.cpp reads it: the Llama block without
// biases, with per-head RMS norms of Q and K before NeoX RoPE, and a head size set by
// attention.key_length (128, whatever n_embd / n_head is).
#include "core/status_macros.hpp"
#include "model/families.hpp"

namespace infer {

Result<DecoderSpec> describe_qwen3(const ModelFile& f) {
  INFER_ASSIGN_OR_RETURN(DecoderSpec s, read_decoder_hparams(f, "qwen3", {.rms_eps = 1e-6, .n_ctx = 40960}));
  s.rope_style = ops::RopeStyle::neox;
  s.qk_norm = true;
  s.activation = ops::Activation::silu;
  return s;
}

}  // namespace infer
