// The pre-tokenizers of BPE vocabularies: text is cut into words before merging, by the regular
// expressions the model was trained with (tokenizer.ggml.pre names them). Each pre-tokenizer is a
// row of one table (pretokenizer.cpp): its names, the regexes exactly as llama.cpp lists them
// (each applied to the pieces the one before made) and the flags llama.cpp's vocabulary loader
// sets with them. A regex for which llama.cpp runs a hand-written splitter (GPT-2's, llama3's,
// qwen2's, qwen35's) runs libinfer's twin of that splitter; any other runs SplitRegex, which
// matches as llama.cpp's std::regex path does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infer/status.hpp"
#include "tokenizer/split_regex.hpp"

namespace infer {

// What a tokenizer.ggml.pre name selects, as llama.cpp's vocabulary loader sets it.
struct PreTokenizerSpec {
  std::string_view type;                      // llama.cpp's LLAMA_VOCAB_PRE_TYPE_*, lowercase
  std::span<const std::string_view> regexes;  // applied in order, each to the pieces of the one before
  bool ignore_merges = false;  // a word that is a vocabulary entry is taken whole
  bool add_bos = false;        // the default of tokenizer.ggml.add_bos_token
  bool always_bos = false;     // add_bos even when the file says false (llama.cpp's Gemma 4 rule)
  // Words are spelled in GPT-2's byte characters (byte_level.hpp) and a symbol that is no entry
  // falls back to the one-byte entries; false: words stay UTF-8 and fall back to <0xAB> tokens.
  bool byte_encode = true;
  bool escape_spaces = false;  // spaces become "▁" before splitting (SentencePiece-style BPE)
  bool newline_words = false;  // a word of newlines that is an entry is that token (Gemma 4)
};

// The spec a tokenizer.ggml.pre value names ("" = absent: llama.cpp's default); nullopt for names
// libinfer does not support.
std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name);

// The supported names, comma-separated (for error messages).
std::string supported_pre_tokenizers();

// Every row of the table, for tests.
std::vector<PreTokenizerSpec> all_pre_tokenizers();

// A pre-tokenizer ready to split: its regexes compiled.
class PreTokenizer {
 public:
  // internal_error when a regex of the row does not compile (a bug in the table).
  static Result<PreTokenizer> create(const PreTokenizerSpec& spec);

  const PreTokenizerSpec& spec() const { return spec_; }

  // Cuts `cpts` into words: the length in code points of each, in order; they sum to cpts.size().
  std::vector<size_t> split(std::span<const uint32_t> cpts) const;

 private:
  struct Stage {
    int scanner = -1;                 // a hand-written splitter (index into pretokenizer.cpp's list)
    std::optional<SplitRegex> regex;  // else this
  };
  PreTokenizerSpec spec_;
  std::vector<Stage> stages_;
};

// The words of UTF-8 `text` (read as utf8::code_points_lenient reads it) under the pre-tokenizer
// that tokenizer.ggml.pre value `name` selects (which must exist), as UTF-8.
std::vector<std::string> pre_tokenize_text(std::string_view name, std::string_view text);

}  // namespace infer
