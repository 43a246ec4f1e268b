// Architecture "phi3" (Phi-3, Phi-3.5 and Phi-4 dense models) as llama.cpp reads it: one fused
// QKV projection (attn_qkv) and one fused gate-and-up projection (ffn_up holds the gate rows,
// then the up rows), SwiGLU, NeoX RoPE, Q scaled by 1/sqrt(head size) before attention.
// llama.cpp runs Phi-3 without its sliding window (attention.sliding_window is ignored there,
// llama.cpp PR 13676), and so does libinfer. The long-context variants' per-layer RoPE factors
// (rope_factors_long/short, with their attention scaling) are not supported yet: such a file is
// refused by name.
#include <cmath>

#include "core/status_macros.hpp"
#include "model/families.hpp"

namespace infer {

Result<DecoderSpec> describe_phi3(const ModelFile& f) {
  INFER_ASSIGN_OR_RETURN(DecoderSpec s, read_decoder_hparams(f, "phi3", {.rms_eps = 1e-5, .n_ctx = 4096}));
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"})
    if (f.find_tensor(name) || f.find_tensor(std::string("blk.0.") + name))
      return unsupported(f.path() + ": " + name + ": Phi-3 long-context RoPE scaling (LongRoPE) is not supported yet");
  s.rope_style = ops::RopeStyle::neox;
  s.fused_qkv = true;
  s.fused_gate_up = true;
  s.q_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  s.activation = ops::Activation::silu;
  return s;
}

}  // namespace infer
