// Architecture "gemma3" (Gemma 3 text models) as llama.cpp reads it: RMSNorm before and after
// each sublayer (post_attention_norm, post_ffw_norm), per-head RMS norms of Q and K, GeGLU MLP
// (GELU, tanh approximation), NeoX RoPE, embeddings scaled by sqrt(n_embd), Q scaled before
// attention, and interleaved sliding-window layers (five local layers, RoPE base 10000, then one
// global layer, by default) over a separate KV pool. Final logit soft-capping when the file sets
// it; output tied to the embeddings.
#include <cmath>

#include "core/status_macros.hpp"
#include "model/families.hpp"
#include "model/weights.hpp"

namespace infer {

Result<DecoderSpec> describe_gemma3(const ModelFile& f) {
  INFER_ASSIGN_OR_RETURN(DecoderSpec s, read_decoder_hparams(f, "gemma3", {.rms_eps = 1e-6, .n_ctx = 8192}));
  INFER_ASSIGN_OR_RETURN(double base_local, optional_number(f, "gemma3.rope.freq_base_swa", 10000.0));
  INFER_ASSIGN_OR_RETURN(double softcap, optional_number(f, "gemma3.final_logit_softcapping", 0.0));
  if (!(base_local > 0) || softcap < 0) return malformed_file(f.path() + ": RoPE bases and soft-capping must be positive");
  INFER_RETURN_IF_ERROR(read_sliding_window(f, s, 6));
  s.rope_style = ops::RopeStyle::neox;
  s.rope_base_window = static_cast<float>(base_local);
  // Gemma's query_pre_attn_scalar: the head size, except for the 27B model (62 layers), which
  // uses n_embd / n_head (as llama.cpp, after gemma_pytorch's config).
  const float qk = s.n_layer == 62 ? static_cast<float>(s.n_embd / s.n_head) : static_cast<float>(s.head_dim);
  s.q_scale = 1.0f / std::sqrt(qk);
  s.qk_norm = true;
  s.post_norms = true;
  s.activation = ops::Activation::gelu;
  s.embd_scale = std::sqrt(static_cast<float>(s.n_embd));
  s.final_softcap = static_cast<float>(softcap);
  return s;
}

}  // namespace infer
