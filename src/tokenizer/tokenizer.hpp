// Tokenizer: text to token ids and back, with the ids llama.cpp produces for the same model file.
//
// Every backend (SentencePiece, BPE, WordPiece) implements the same small interface;
// the engine sees only this header. Tokenizers are immutable after loading, so one object may be
// used from any number of threads at once.
//
//   auto tok = load_tokenizer(model_file);              // Result<std::unique_ptr<Tokenizer>>
//   auto ids = (*tok)->encode("Hello", /*add_special=*/true, /*parse_special=*/false);
//   std::string text = (*tok)->decode(*ids);
//
// While generating, an IncrementalDetokenizer turns ids into text as they arrive without ever
// cutting a UTF-8 character in two.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/metadata.hpp"
#include "format/model_file.hpp"
#include "infer/status.hpp"

namespace infer {

struct DecodeOptions {
  // Drops a leading BOS and a trailing EOS when the model adds them (add_bos() / add_eos()).
  bool remove_special = false;
  // Control and unknown tokens contribute their text ("<|im_end|>") instead of nothing.
  bool render_special = false;
  // The ids continue earlier text (tokens generated after a prompt): the first piece keeps its
  // leading space, as llama.cpp's per-token llama_token_to_piece streams it. Otherwise the space
  // that encoding put in front of the text is dropped, as llama_detokenize does.
  bool keep_leading_space = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer();

  // Token ids for `text` (any bytes; invalid UTF-8 falls back to byte tokens).
  //   add_special    adds the BOS / EOS the model asks for (add_bos(), add_eos()), like
  //                  llama.cpp's `add_special`; false adds neither
  //   parse_special  a control token's text in `text` ("<|im_start|>") becomes that token;
  //                  otherwise it is tokenized as plain text. User-defined tokens are always
  //                  matched whole, as in llama.cpp.
  // Fails only when a token the call needs is missing from the vocabulary (a BOS to add, a byte
  // token to fall back on).
  virtual Result<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // The raw vocabulary entry ("▁the", "<0x0A>", "<s>"); empty for an id outside the vocabulary.
  virtual std::string_view token_text(int32_t id) const = 0;

  // What the token contributes to decoded text: "▁" becomes a space, a byte token <0xAB> the byte
  // 0xAB, a control or unknown token "" unless `render_special` (then its text), a user-defined
  // token its text; "" for an id outside the vocabulary.
  virtual std::string token_to_bytes(int32_t id, bool render_special = false) const = 0;

  // The text of `ids`, as llama.cpp's llama_detokenize builds it: the pieces concatenated, with
  // one leading space removed from the first piece when add_space_prefix() (the space encoding
  // put in front of the text) — unless a BOS comes first, kept or dropped by `remove_special`
  // (llama.cpp keeps the space then), or `keep_leading_space`. Hence
  // decode(encode(s, false, false)) == s for text without special-token strings or "▁". Ids
  // outside the vocabulary contribute nothing.
  std::string decode(std::span<const int32_t> ids, DecodeOptions options = {}) const;

  int32_t vocab_size() const noexcept { return vocab_size_; }
  int32_t bos_id() const noexcept { return bos_id_; }  // -1 when the vocabulary has none
  int32_t eos_id() const noexcept { return eos_id_; }  // -1 when none
  int32_t eot_id() const noexcept { return eot_id_; }  // end of turn ("<|im_end|>"); -1 when none
  bool add_bos() const noexcept { return add_bos_; }   // tokenizer.ggml.add_bos_token (SentencePiece: true)
  bool add_eos() const noexcept { return add_eos_; }   // tokenizer.ggml.add_eos_token (default false)
  // Encoding puts a space before the text (SentencePiece's dummy prefix); decoding drops it.
  bool add_space_prefix() const noexcept { return add_space_prefix_; }

  // A control token (BOS, EOS, chat markers): not text, rendered only on request.
  virtual bool is_control(int32_t id) const = 0;
  // Generation ends at this token: EOS, EOT and the other end markers llama.cpp recognises.
  virtual bool is_eog(int32_t id) const = 0;

 protected:
  struct Info {
    int32_t vocab_size = 0;
    int32_t bos = -1, eos = -1, eot = -1;
    bool add_bos = false, add_eos = false, add_space_prefix = false;
  };
  explicit Tokenizer(const Info& info);

 private:
  int32_t vocab_size_, bos_id_, eos_id_, eot_id_;
  bool add_bos_, add_eos_, add_space_prefix_;
};

// Turns a stream of token ids into text as they arrive (for streaming generated text).
// The concatenation of everything push() and flush() return equals tokenizer.decode(all ids,
// options); no chunk ends inside a UTF-8 character: bytes of an unfinished character are held
// back until the token that completes it. Not thread-safe; one per sequence.
class IncrementalDetokenizer {
 public:
  // Borrows `tokenizer`, which must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, DecodeOptions options = {});

  // The text that token `id` completes (often empty while a character is unfinished).
  std::string push(int32_t id);
  // The bytes still held back (a character the ids never finished, returned as they are) at the
  // end of the stream; then starts a new stream.
  std::string flush();
  // Starts a new stream.
  void reset();

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  bool first_ = true;          // the next token is the first of the stream
  bool strip_space_ = false;   // the next piece loses one leading space
  bool eos_held_ = false;      // a trailing-EOS candidate waits for the next token
  std::string pending_;        // bytes of an unfinished character
};

// The tokenizer of a model file, chosen by tokenizer.ggml.model: "llama" (SentencePiece), "gpt2"
// (byte-level BPE, with the pre-tokenizers of pretokenizer.hpp), "gemma4" (Gemma 4's BPE) and
// "bert" (WordPiece) are supported; any other kind, or a pre-tokenizer libinfer lacks, is an
// `unsupported` error naming it. Vocabulary metadata that is
// missing or inconsistent is a clear error (not_found / malformed_file), never a crash.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const ModelFile& file);
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const Metadata& metadata);

// The tokenizer of a SentencePiece tokenizer.model (BPE models): the same tokenizer llama.cpp
// uses for a GGUF file converted from it (see vocab_fields_from_sentencepiece).
Result<std::unique_ptr<Tokenizer>> load_sentencepiece_file(const std::string& path);

}  // namespace infer
