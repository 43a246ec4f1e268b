// The pre-tokenizers of byte-level BPE vocabularies: text is cut into words before merging, by
// the regular expression the model was trained with (tokenizer.ggml.pre names it). Each one is a
// hand-written scanner over code points that splits exactly where llama.cpp's does (its
// unicode_regex_split and the custom splitters in unicode.cpp), character classes from
// unicode_tables.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace infer {

// The regex families, named after llama.cpp's LLAMA_VOCAB_PRE_TYPE_*.
enum class PreTokenizer {
  // [\p{P}\$\+<=>\^~\|]+ then GPT2, then \p{N}+, then [0-9][0-9][0-9] (tokenizer.ggml.pre absent
  // or "default")
  default_bpe,
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  gpt2,
  // \p{N} (every digit alone), then GPT2 (StarCoder, SmolLM, ...)
  starcoder,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  llama3,
  // as llama3 but \p{N} (every digit alone)
  qwen2,
};

// What a tokenizer.ggml.pre name selects, as llama.cpp's vocabulary loader sets it.
struct PreTokenizerSpec {
  PreTokenizer kind;
  bool ignore_merges = false;  // a word that is a vocabulary entry is taken whole
  bool add_bos = false;        // the default of tokenizer.ggml.add_bos_token
};

// The pre-tokenizer a tokenizer.ggml.pre value names ("" = absent: llama.cpp's default);
// nullopt for names libinfer does not support.
std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name);

// The supported names, comma-separated (for error messages).
std::string supported_pre_tokenizers();

// Cuts `cpts` into words: the length in code points of each, in order; they sum to cpts.size().
std::vector<size_t> pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cpts);

// The words of UTF-8 `text` (read as utf8::code_points_lenient reads it), as UTF-8.
std::vector<std::string> pre_tokenize_text(PreTokenizer kind, std::string_view text);

}  // namespace infer
