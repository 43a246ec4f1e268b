// Architecture "gemma3" as llama.cpp reads it from GGUF (Gemma 3 text models, 270M to 27B):
//
//   x = embedding * sqrt(n_embd)
//   per layer:  h = RMSNorm(x) → Q, K, V → per-head RMSNorm of Q and K → RoPE (NeoX pairs; local
//               layers with rope.freq_base_swa, default 10000, global ones with rope.freq_base
//               and the linear scaling factor) → Q *= 1/sqrt(key_length) → attention (local
//               layers: the last attention.sliding_window positions) → output projection →
//               RMSNorm (post_attention_norm) → x += ...;
//               h = RMSNorm(x) → GELU(tanh)(gate) * up → down → RMSNorm (post_ffw_norm) → x += ...
//   logits = RMSNorm(x) · token_embd (tied) [→ soft-capping when final_logit_softcapping is set]
//
// Norm weights are used as stored: llama.cpp's converter already folded Gemma's (1 + w) into
// them. Every sixth layer is global unless attention.sliding_window_pattern says otherwise (a
// period, or one flag per layer).
#pragma once

#include <memory>

#include "model/model.hpp"

namespace infer {

Result<std::unique_ptr<Model>> load_gemma3(std::shared_ptr<const ModelFile> file, const LoadOptions& options = {});

}  // namespace infer
