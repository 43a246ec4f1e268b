// Architecture "llama" as llama.cpp reads it from GGUF: Llama 2 and 3, TinyLlama, Mistral-style
// models. Grouped-query attention, RMSNorm, SwiGLU MLP, rotary embeddings (adjacent-pair "norm"
// layout, since the converter permutes Q/K) with linear or Llama-3 frequency scaling, tied
// output embeddings when output.weight is absent.
#pragma once

#include <memory>

#include "model/model.hpp"

namespace infer {

Result<std::unique_ptr<Model>> load_llama(std::shared_ptr<const ModelFile> file, const LoadOptions& options = {});

}  // namespace infer
