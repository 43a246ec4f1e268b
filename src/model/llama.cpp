// Architecture "llama" as llama.cpp reads it from GGUF: Llama 2 and 3, TinyLlama, Mistral and
// Mistral-style models (a head size other than n_embd / n_head included). Grouped-query attention,
// RMSNorm, SwiGLU MLP, rotary embeddings in the adjacent-pair "norm" layout (the converter
// permutes Q/K), linear RoPE scaling or Llama 3 per-pair frequency factors (rope_freqs.weight),
// tied output embeddings when output.weight is absent, Q/K/V/output biases when present.
#include "core/status_macros.hpp"
#include "model/families.hpp"

namespace infer {

Result<DecoderSpec> describe_llama(const ModelFile& f) {
  INFER_ASSIGN_OR_RETURN(DecoderSpec s, read_decoder_hparams(f, "llama", {.rms_eps = 1e-5, .n_ctx = 2048}));
  s.rope_style = ops::RopeStyle::norm;
  s.rope_freq_factors = true;
  s.activation = ops::Activation::silu;
  s.vocab_size_key = "llama.vocab_size";
  return s;
}

}  // namespace infer
