// The SentencePiece tokenizer (tokenizer.ggml.model "llama"), backed by libsentencepiece.
// libsentencepiece's types stay inside sentencepiece_tokenizer.cpp.
#pragma once

#include <memory>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vocab.hpp"

namespace infer {

// Builds the tokenizer for a checked vocabulary (build_sentencepiece_vocab). Fails (internal)
// only if libsentencepiece refuses the model handed to it.
Result<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(Vocab vocab);

}  // namespace infer
