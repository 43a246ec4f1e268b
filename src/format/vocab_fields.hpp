// The tokenizer.ggml.* keys of a model file as plain fields: what a GGUF file stores, or what a
// converter writes for a tokenizer (llama.cpp's convert_hf_to_gguf.py, the Hugging Face directory
// reader). Checking them and building a vocabulary is the tokenizer's business (tokenizer/vocab.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/metadata.hpp"
#include "infer/status.hpp"

namespace infer {

// GGUF token types (tokenizer.ggml.token_type); the numbers are SentencePiece's piece types.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};


// The tokenizer.ggml.* fields of a model file as stored, before any check: what a GGUF file
// holds, or what llama.cpp's converter writes for a tokenizer.model.
struct VocabFields {
  std::string model;                   // tokenizer.ggml.model: "llama", "gpt2", ...
  std::vector<std::string> tokens;     // tokenizer.ggml.tokens
  std::vector<float> scores;           // tokenizer.ggml.scores; empty when absent
  std::vector<int32_t> token_types;    // tokenizer.ggml.token_type; empty when absent
  // Special token ids (tokenizer.ggml.<name>_token_id); nullopt when the key is absent.
  std::optional<int64_t> bos, eos, eot, eom, unk, pad, sep;
  std::optional<int64_t> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::optional<bool> lowercase, strip_accents;  // tokenizer.ggml.normalizer.* (WordPiece)
  std::optional<int64_t> declared_vocab_size;  // <arch>.vocab_size, when present
  std::string model_name;                      // general.name (a few llama.cpp rules key on it)
  // BPE ("gpt2", "gemma4") only:
  std::optional<std::vector<std::string>> merges;  // tokenizer.ggml.merges, "left right" by rank
  std::string pre;                                 // tokenizer.ggml.pre; empty when absent

  // Writes the fields that are set as tokenizer.ggml.* keys (for writers such as
  // infer-make-model).
  void write_to(Metadata& md) const;
};

// Reads the tokenizer.ggml.* keys. Fails (naming the key) when a key holds the wrong kind of
// value: tokens not an array of strings, scores not f32/i32, token types not i32, ids not
// integers, flags not booleans, merges not an array of strings, pre not a string; not_found when
// tokenizer.ggml.model or .tokens is missing.
Result<VocabFields> read_vocab_fields(const Metadata& md);

}  // namespace infer
