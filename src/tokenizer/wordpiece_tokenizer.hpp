// The WordPiece tokenizer (tokenizer.ggml.model "bert": BERT, BGE, ... embedding models), as
// llama.cpp reads it from GGUF: the converter wrote whole-word pieces with a leading "▁" and
// continuation pieces ("##ing" in the original vocabulary) without one.
#pragma once

#include <memory>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vocab.hpp"

namespace infer {

// Builds the tokenizer for a checked vocabulary (build_wordpiece_vocab).
Result<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(Vocab vocab);

}  // namespace infer
