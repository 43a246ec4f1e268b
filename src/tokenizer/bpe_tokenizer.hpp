// The BPE tokenizer: byte-level (tokenizer.ggml.model "gpt2": GPT-2, Llama 3, Qwen 2, SmolLM,
// DeepSeek, Falcon, ...) and over UTF-8 with "▁" for spaces ("gemma4": Gemma 4).
#pragma once

#include <memory>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vocab.hpp"

namespace infer {

// Builds the tokenizer for a checked vocabulary (build_bpe_vocab).
Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab);

}  // namespace infer
