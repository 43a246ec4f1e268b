// Splitting a prompt on special-token strings before the text between them is tokenized, the
// way llama.cpp does it (tokenizer_st_partition), so that "<|im_start|>user" becomes the token
// <|im_start|> followed by the text "user".
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace infer {

// Either a run of text (token < 0) or one special token.
struct Fragment {
  std::string_view text;  // into the input; empty for a token
  int32_t token = -1;
};

// Splits `text` on the vocabulary's split_tokens, longest first; each token's occurrences are
// found left to right in the text that no longer-or-earlier token took. Control and unknown
// tokens are matched only when `parse_special`; user-defined tokens always. Tokens with the
// lstrip / rstrip attribute take the ASCII whitespace before / after them along. Empty text runs
// are dropped.
std::vector<Fragment> split_on_special_tokens(const Vocab& vocab, std::string_view text, bool parse_special);

}  // namespace infer
