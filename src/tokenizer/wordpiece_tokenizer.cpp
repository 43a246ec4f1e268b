// How the ids come out identical to llama.cpp's (llama-vocab.cpp, llm_tokenizer_wpm_session):
//
//   1. the prompt is split on special-token strings (special_split.cpp);
//   2. each text run is read as code points (invalid bytes become U+FFFD) and normalized: with
//      strip_accents each code point becomes the first of its NFD and combining marks are
//      dropped; NUL, U+FFFD and control characters are dropped; with lowercase, letters are
//      lowercased;
//   3. words end at whitespace; punctuation, ASCII symbols and CJK ideographs are words of
//      their own;
//   4. each word, with "▁" in front, is cut greedily into the longest entries from the left
//      (byte by byte, as llama.cpp compares); a word with a part that no entry covers becomes
//      the unknown token.
//
// add_special puts [CLS] (the BOS) first and [SEP] last, whatever add_bos says, as llama.cpp does.
#include "tokenizer/wordpiece_tokenizer.hpp"

#include <algorithm>
#include <unordered_map>

#include "core/status_macros.hpp"
#include "tokenizer/special_split.hpp"
#include "tokenizer/unicode_tables.hpp"
#include "tokenizer/utf8.hpp"
#include "tokenizer/vocab_tokenizer.hpp"

namespace infer {

namespace {

// llama.cpp's list (the Hugging Face BERT normalizer's), ranges as they are there.
bool is_cjk_ideograph(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class WordPieceTokenizer final : public VocabTokenizer {
 public:
  explicit WordPieceTokenizer(Vocab vocab) : VocabTokenizer(std::move(vocab)) {
    by_text_.reserve(vocab_.text.size());
    for (size_t i = 0; i < vocab_.text.size(); ++i) {
      by_text_[vocab_.text[i]] = static_cast<int32_t>(i);  // a later duplicate wins, as in llama.cpp
      max_len_ = std::max(max_len_, vocab_.text[i].size());
    }
  }

  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special) const override;

 private:
  std::vector<std::string> words(std::string_view text) const;
  Status encode_word(const std::string& word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string_view, int32_t> by_text_;  // into vocab_.text
  size_t max_len_ = 0;                                     // the longest entry, in bytes
};

Result<std::vector<int32_t>> WordPieceTokenizer::encode(std::string_view text, bool add_special,
                                                        bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special) {
    if (bos_id() < 0) return invalid_argument("the vocabulary has no [CLS] (BOS) token to add");
    out.push_back(bos_id());
  }
  for (const Fragment& f : split_on_special_tokens(vocab_, text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    for (const std::string& word : words(f.text)) INFER_RETURN_IF_ERROR(encode_word(word, out));
  }
  if (add_special) {
    if (vocab_.sep < 0) return invalid_argument("the vocabulary has no [SEP] token to add");
    out.push_back(vocab_.sep);
  }
  return out;
}

std::vector<std::string> WordPieceTokenizer::words(std::string_view text) const {
  std::vector<std::string> words(1);
  for (uint32_t cpt : utf8::code_points_lenient(text)) {
    if (vocab_.strip_accents) cpt = unicode::nfd_first(cpt);
    if (unicode::is_whitespace(cpt)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    const unicode::Category cat = unicode::category(cpt);
    if (cpt == 0 || cpt == 0xFFFD || cat == unicode::Category::control) continue;
    if (vocab_.strip_accents && cat == unicode::Category::mark) continue;
    std::string ch;
    utf8::append(ch, vocab_.lowercase ? unicode::to_lower(cpt) : cpt);
    if (cat == unicode::Category::punctuation || (cpt < 0x7F && cat == unicode::Category::symbol) ||
        is_cjk_ideograph(cpt)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(ch);
      words.emplace_back();
    } else {
      words.back() += ch;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

Status WordPieceTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  const std::string text = std::string(kSpaceSymbol) + word;
  const size_t start = out.size();
  for (size_t i = 0; i < text.size();) {
    size_t j = std::min(text.size(), i + max_len_);
    int32_t id = -1;
    for (; j > i; --j) {
      const auto it = by_text_.find(std::string_view(text).substr(i, j - i));
      if (it != by_text_.end()) {
        id = it->second;
        break;
      }
    }
    if (id < 0) {  // a part no entry covers: the whole word is unknown
      out.resize(start);
      break;
    }
    out.push_back(id);
    i = j;
  }
  if (out.size() == start) {
    if (vocab_.unk < 0) return invalid_argument("the word '" + word + "' has no pieces and the vocabulary no [UNK]");
    out.push_back(vocab_.unk);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(Vocab vocab) {
  return std::unique_ptr<Tokenizer>(std::make_unique<WordPieceTokenizer>(std::move(vocab)));
}

}  // namespace infer
