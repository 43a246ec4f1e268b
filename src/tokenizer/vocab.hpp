// A tokenizer vocabulary the way llama.cpp sees it: token texts, scores, attributes and special
// ids, read from a model file's tokenizer.ggml.* keys, checked, and adjusted by the same
// text-based rules llama.cpp applies at load time (which tokens end generation, which
// "control-looking" tokens become control tokens). Every tokenizer backend builds on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/metadata.hpp"
#include "format/vocab_fields.hpp"
#include "infer/status.hpp"

namespace infer {

// Token attributes: a bit set, as llama.cpp derives them from the token types.
namespace token_attr {
inline constexpr uint32_t normal = 1u << 0;
inline constexpr uint32_t unknown = 1u << 1;
inline constexpr uint32_t control = 1u << 2;
inline constexpr uint32_t user_defined = 1u << 3;
inline constexpr uint32_t unused = 1u << 4;
inline constexpr uint32_t byte = 1u << 5;
inline constexpr uint32_t lstrip = 1u << 6;  // whitespace before the token is dropped when splitting
inline constexpr uint32_t rstrip = 1u << 7;  // whitespace after the token is dropped when splitting
}  // namespace token_attr


struct Vocab {
  std::vector<std::string> text;  // one per id; llama.cpp's "[EMPTY_<id>]" for empty entries
  std::vector<float> score;
  std::vector<uint32_t> attr;     // token_attr bits

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  int32_t sep = -1;               // WordPiece's [SEP], which ends the ids with add_special
  std::vector<int32_t> eog;       // every id that ends generation (eos, eot, eom, ...), sorted
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // a space goes before each run of text (SentencePiece's
                                  // dummy prefix); decoding drops it again

  // Control, user-defined and unknown tokens: the strings a prompt is split on before the
  // text between them is tokenized. Longest text first; equal lengths by id.
  std::vector<int32_t> split_tokens;

  // BPE only: the merges as pairs, by rank (index), and the pre-tokenizer's name.
  std::vector<std::pair<std::string, std::string>> merges;
  std::string pre;

  // WordPiece only: the normalizer lowercases / drops accents (llama.cpp: both default to true;
  // strip_accents defaults to lowercase).
  bool lowercase = true, strip_accents = true;

  int32_t size() const noexcept { return static_cast<int32_t>(text.size()); }
  bool valid(int32_t id) const noexcept { return id >= 0 && id < size(); }
  bool has(int32_t id, uint32_t attrs) const noexcept { return valid(id) && (attr[id] & attrs) != 0; }
  bool is_eog(int32_t id) const noexcept;
};

// Checks the fields and builds the vocabulary for tokenizer model "llama" (SentencePiece):
// arrays of equal length (and equal to <arch>.vocab_size when declared), token types 1..6,
// special ids in range (-1 accepted as "none" for roles without a default), byte tokens spelled
// <0xHH>. Defaults follow llama.cpp: BOS 1, EOS 2,
// UNK 0 (when in range), add_bos true, add_eos false, add_space_prefix true.
Result<Vocab> build_sentencepiece_vocab(VocabFields fields);

// Checks the fields and builds the vocabulary for tokenizer model "gpt2" (byte-level BPE) or
// "gemma4" (BPE over UTF-8 with "▁" for spaces and <0xAB> byte tokens, pre-tokenizer "gemma4"
// whatever tokenizer.ggml.pre says): the same checks as above, plus merges present, each
// "left right" (split at the first space after its first byte, as llama.cpp does; a merge with no
// space is an error), and a pre-tokenizer libinfer supports (tokenizer.ggml.pre; `unsupported`
// naming it otherwise). A byte token is one byte character for byte-level pre-tokenizers, <0xAB>
// for the others. Merge parts that are no vocabulary entry are kept, as in llama.cpp. Defaults
// follow llama.cpp: "gpt2" BOS and EOS 11 (when in range), "gemma4" none; no UNK; add_bos as the
// pre-tokenizer says (true for the llama-bpe family; always true for gemma4), add_eos false,
// add_space_prefix false.
Result<Vocab> build_bpe_vocab(VocabFields fields);

// Checks the fields and builds the vocabulary for tokenizer model "bert" (WordPiece): the same
// checks as for SentencePiece. Defaults follow llama.cpp: BOS ([CLS]) 101, no EOS, UNK 100, SEP
// 102 (tokenizer.ggml.seperator_token_id, llama.cpp's spelling), add_bos true, lowercase and
// strip_accents true.
Result<Vocab> build_wordpiece_vocab(VocabFields fields);

// SentencePiece's escaped space, "▁" (U+2581), which SentencePiece-style vocabularies spell
// spaces with.
inline constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";
// `text` with each space written as kSpaceSymbol / each kSpaceSymbol as a space.
std::string escape_spaces(std::string_view text);
std::string unescape_spaces(std::string_view text);
// The byte a byte token spelled <0xAB> stands for; -1 when `text` is not so spelled.
int byte_token_value(std::string_view text);
// "<0xAB>", the text of byte b's token (upper-case hex, as llama.cpp looks it up).
std::string byte_token_text(uint8_t b);

// What token `id` adds to decoded text in a vocabulary whose entries spell spaces as "▁" and bytes
// as <0xAB> (SentencePiece, WordPiece, Gemma 4), as llama.cpp's token_to_piece: a normal entry with
// "▁" as a space, a byte token its byte, a user-defined token its text, a control or unknown token
// its text only with `render_special`, anything else (and an id outside the vocabulary) nothing.
std::string spm_style_piece(const Vocab& vocab, int32_t id, bool render_special);

}  // namespace infer
