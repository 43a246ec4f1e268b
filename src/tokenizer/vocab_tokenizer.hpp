// The part every tokenizer backend shares: it holds a checked Vocab and answers the questions about
// single tokens from it. Backends derive from it and add encode() (and token_to_bytes() when their
// entries are not spelled SentencePiece-style).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/vocab.hpp"

namespace infer {

class VocabTokenizer : public Tokenizer {
 public:
  std::string_view token_text(int32_t id) const override {
    return vocab_.valid(id) ? std::string_view(vocab_.text[id]) : std::string_view();
  }
  // SentencePiece-style entries ("▁" for a space, <0xAB> byte tokens): spm_style_piece.
  std::string token_to_bytes(int32_t id, bool render_special) const override {
    return spm_style_piece(vocab_, id, render_special);
  }
  bool is_control(int32_t id) const override { return vocab_.has(id, token_attr::control); }
  bool is_eog(int32_t id) const override { return vocab_.is_eog(id); }

 protected:
  explicit VocabTokenizer(Vocab vocab)
      : Tokenizer(Info{vocab.size(), vocab.bos, vocab.eos, vocab.eot, vocab.add_bos, vocab.add_eos,
                       vocab.add_space_prefix}),
        vocab_(std::move(vocab)) {}

  Vocab vocab_;
};

}  // namespace infer
