// How the ids come out identical to llama.cpp's (llama-vocab.cpp, llm_tokenizer_bpe_session):
//
//   1. the prompt is split on special-token strings (special_split.cpp);
//   2. with escape_spaces (Gemma 4), spaces become "▁";
//   3. each text run is read as code points (invalid bytes become U+FFFD, as llama.cpp reads
//      them) and cut into words by the vocabulary's pre-tokenizer (pretokenizer.cpp);
//   4. with byte_encode, each word's UTF-8 bytes are spelled with GPT-2's byte characters
//      (byte_level.hpp); otherwise the word stays UTF-8;
//   5. with ignore_merges, a word that is a vocabulary entry is that token (with newline_words,
//      a word of newlines only); otherwise the word's characters are merged pairwise, lowest
//      merge rank first (leftmost on ties), whether or not the merged text is an entry;
//   6. each final symbol is looked up; one that is no entry contributes the entries that its
//      single bytes are (llama.cpp looks up each byte as a one-byte text, or as <0xAB> without
//      byte_encode; bytes that are no entry are dropped).
#include "tokenizer/bpe_tokenizer.hpp"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "core/status_macros.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/special_split.hpp"
#include "tokenizer/utf8.hpp"
#include "tokenizer/vocab_tokenizer.hpp"

namespace infer {

namespace {

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(Vocab vocab, PreTokenizer pre) : VocabTokenizer(std::move(vocab)), pre_(std::move(pre)) {
    // A later duplicate owns the text, as in llama.cpp's text-to-id map.
    by_text_.reserve(vocab_.text.size());
    for (size_t i = 0; i < vocab_.text.size(); ++i) by_text_[vocab_.text[i]] = static_cast<int32_t>(i);
    // The first of duplicate merges keeps its rank.
    rank_.reserve(vocab_.merges.size());
    for (size_t i = 0; i < vocab_.merges.size(); ++i)
      rank_.try_emplace(vocab_.merges[i].first + ' ' + vocab_.merges[i].second, static_cast<int32_t>(i));
  }

  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special) const override;

  std::string token_to_bytes(int32_t id, bool render_special) const override;

 private:
  int32_t find(std::string_view text) const {
    const auto it = by_text_.find(text);
    return it == by_text_.end() ? -1 : it->second;
  }
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  // Appends the ids of one pre-tokenized word, already spelled in byte characters.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  PreTokenizer pre_;
  std::unordered_map<std::string_view, int32_t> by_text_;  // into vocab_.text
  // "left right" -> merge rank. Unambiguous: symbols never hold a space (they are spelled in byte
  // characters, or spaces are "▁").
  std::unordered_map<std::string, int32_t> rank_;
};

Result<std::vector<int32_t>> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && add_bos()) {
    if (bos_id() < 0) return invalid_argument("the vocabulary asks for a BOS token but has none");
    out.push_back(bos_id());
  }
  for (const Fragment& f : split_on_special_tokens(vocab_, text, parse_special)) {
    if (f.token >= 0) out.push_back(f.token);
    else encode_text(f.text, out);
  }
  if (add_special && add_eos()) {
    if (eos_id() < 0) return invalid_argument("the vocabulary asks for an EOS token but has none");
    out.push_back(eos_id());
  }
  return out;
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  const PreTokenizerSpec& spec = pre_.spec();
  std::string escaped;
  if (spec.escape_spaces) {
    escaped = escape_spaces(text);
    text = escaped;
  }
  const std::vector<uint32_t> cpts = utf8::code_points_lenient(text);
  std::string bytes, word;
  size_t begin = 0;
  for (const size_t len : pre_.split(cpts)) {
    bytes.clear();
    for (size_t i = begin; i < begin + len; ++i) utf8::append(bytes, cpts[i]);
    begin += len;
    if (!spec.byte_encode) {
      encode_word(bytes, out);
      continue;
    }
    word.clear();
    for (const char c : bytes) word += byte_level::char_of(static_cast<uint8_t>(c));
    encode_word(word, out);
  }
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const PreTokenizerSpec& spec = pre_.spec();
  if (spec.ignore_merges || (spec.newline_words && word.find_first_not_of('\n') == std::string_view::npos)) {
    if (const int32_t id = find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Symbols: a doubly linked list over the word's characters; a merged-away symbol has n == 0.
  struct Symbol {
    uint32_t start, n;
    int32_t prev, next;
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(utf8::lead_length(static_cast<uint8_t>(word[i])), word.size() - i);
    const auto index = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(n), index - 1, -1});
    if (index > 0) sym[index - 1].next = index;
    i += n;
  }
  const auto text = [&](int32_t s) { return word.substr(sym[s].start, sym[s].n); };

  // A candidate merge of two adjacent symbols, valid while both keep the lengths they had.
  struct Pair {
    int32_t rank, left, right;
    uint32_t n_left, n_right;
  };
  const auto later = [](const Pair& a, const Pair& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(later)> queue(later);
  std::string key;
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    key.assign(text(left));
    key += ' ';
    key += text(right);
    const auto it = rank_.find(key);
    if (it != rank_.end()) queue.push({it->second, left, right, sym[left].n, sym[right].n});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (l.n != p.n_left || r.n != p.n_right) continue;  // one of them changed since
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }

  for (int32_t s = sym.empty() ? -1 : 0; s >= 0; s = sym[s].next) {
    const std::string_view t = text(s);
    if (const int32_t id = find(t); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char c : t) {
      const int32_t id = spec.byte_encode ? find(std::string_view(&c, 1)) : find(byte_token_text(static_cast<uint8_t>(c)));
      if (id >= 0) out.push_back(id);
    }
  }
}

std::string BpeTokenizer::token_to_bytes(int32_t id, bool render_special) const {
  if (!pre_.spec().byte_encode) return VocabTokenizer::token_to_bytes(id, render_special);
  if (!vocab_.valid(id)) return {};
  const uint32_t attr = vocab_.attr[id];
  const std::string& text = vocab_.text[id];
  if (attr & (token_attr::control | token_attr::unknown)) return render_special ? text : std::string();
  if (attr & token_attr::user_defined) return text;
  if (attr & (token_attr::normal | token_attr::byte)) {
    // llama_decode_text: a character that stands for no byte is spelled out, as llama.cpp does.
    std::string out;
    for (const uint32_t cpt : utf8::code_points_lenient(text)) {
      if (const int b = byte_level::byte_of(cpt); b >= 0) {
        out += static_cast<char>(b);
        continue;
      }
      std::string c;
      utf8::append(c, cpt);
      static constexpr char kHex[] = "0123456789abcdef";
      out += "[UNK_BYTE_0x";
      for (const char ch : c) {
        out += kHex[static_cast<uint8_t>(ch) >> 4];
        out += kHex[static_cast<uint8_t>(ch) & 15];
      }
      out += text + "]";
    }
    return out;
  }
  return {};  // unused and undefined tokens render as nothing, as in llama.cpp
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab) {
  const auto spec = find_pre_tokenizer(vocab.pre);
  if (!spec) return unsupported("tokenizer.ggml.pre '" + vocab.pre + "' is not a supported pre-tokenizer");
  INFER_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::create(*spec));
  return std::unique_ptr<Tokenizer>(std::make_unique<BpeTokenizer>(std::move(vocab), std::move(pre)));
}

}  // namespace infer
