// Each splitter scans one piece of text at a time (the pieces an earlier stage made) and ends a
// word wherever llama.cpp's matching splitter does; the branch order follows the alternatives of
// the regex. Positions past the piece's end read as "no character", which is how lookahead
// such as \s+(?!\S) sees the end of a piece.
#include "tokenizer/pretokenizer.hpp"

#include <array>

#include "tokenizer/unicode_tables.hpp"
#include "tokenizer/utf8.hpp"

namespace infer {

namespace {

// Per code point: the classes the regexes test.
enum : uint8_t {
  kLetter = 1,       // \p{L}
  kNumber = 2,       // \p{N}
  kSpace = 4,        // \s
  kPunctuation = 8,  // [\p{P}\$\+<=>\^~\|] (the default pre-tokenizer's first pattern)
};

uint8_t classify(uint32_t cpt) {
  uint8_t f = 0;
  switch (unicode::category(cpt)) {
    case unicode::Category::letter: f |= kLetter; break;
    case unicode::Category::number: f |= kNumber; break;
    case unicode::Category::punctuation: f |= kPunctuation; break;
    default: break;
  }
  if (cpt == '$' || cpt == '+' || cpt == '<' || cpt == '=' || cpt == '>' || cpt == '^' || cpt == '~' || cpt == '|')
    f |= kPunctuation;
  if (unicode::is_whitespace(cpt)) f |= kSpace;
  return f;
}

std::vector<uint8_t> classify_all(std::span<const uint32_t> cpts) {
  static const auto ascii = [] {
    std::array<uint8_t, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = classify(c);
    return t;
  }();
  std::vector<uint8_t> flags(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) flags[i] = cpts[i] < 128 ? ascii[cpts[i]] : classify(cpts[i]);
  return flags;
}

constexpr uint32_t kNone = 0xFFFFFFFF;

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// One piece [begin, end) of the text being cut into words (appended to `out` as lengths).
class Piece {
 public:
  Piece(std::span<const uint32_t> cpts, std::span<const uint8_t> flags, size_t begin, size_t end,
        std::vector<size_t>& out)
      : cpts_(cpts), flags_(flags), end_(end), word_start_(begin), out_(out) {}

  size_t end() const { return end_; }
  uint32_t cpt(size_t p) const { return p < end_ ? cpts_[p] : kNone; }
  bool has(size_t p, uint8_t f) const { return p < end_ && (flags_[p] & f); }
  bool letter(size_t p) const { return has(p, kLetter); }
  bool number(size_t p) const { return has(p, kNumber); }
  bool space(size_t p) const { return has(p, kSpace); }
  // [^\s\p{L}\p{N}]: any character but whitespace, letters and numbers.
  bool other(size_t p) const { return p < end_ && !(flags_[p] & (kSpace | kLetter | kNumber)); }

  // Ends the current word at `to`; returns its length (0: nothing since the last word).
  size_t emit(size_t to) {
    const size_t len = to - word_start_;
    if (len > 0) out_.push_back(len);
    word_start_ = to;
    return len;
  }

  // 's 't 're 've 'm 'll 'd at p: the contraction's length, else 0.
  size_t contraction(size_t p, bool any_case) const {
    if (cpt(p) != '\'' || p + 1 >= end_) return 0;
    const auto low = [&](size_t q) { return any_case ? ascii_lower(cpt(q)) : cpt(q); };
    const uint32_t a = low(p + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (p + 2 >= end_) return 0;
    const uint32_t b = low(p + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

 private:
  std::span<const uint32_t> cpts_;
  std::span<const uint8_t> flags_;
  size_t end_;
  size_t word_start_;
  std::vector<size_t>& out_;
};

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(Piece& w, size_t pos) {
  while (pos < w.end()) {
    if (const size_t n = w.contraction(pos, false)) {
      pos += w.emit(pos + n);
      continue;
    }
    const size_t first = w.cpt(pos) == ' ' ? pos + 1 : pos;  // after the optional space
    if (w.letter(first) || w.number(first) || w.other(first)) {
      const auto same = w.letter(first) ? &Piece::letter : w.number(first) ? &Piece::number : &Piece::other;
      pos = first;
      while ((w.*same)(pos)) ++pos;
      w.emit(pos);
      continue;
    }
    size_t spaces = 0;
    while (w.space(pos + spaces)) ++spaces;
    if (spaces > 1 && pos + spaces < w.end()) {
      pos += spaces - 1;  // \s+(?!\S): the last space goes with the next word
    } else if (spaces > 0) {
      pos += spaces;
    } else {
      ++pos;
    }
    w.emit(pos);
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(Piece& w, size_t pos, size_t max_digits) {
  const auto newline = [&](size_t p) { return w.cpt(p) == '\r' || w.cpt(p) == '\n'; };
  while (pos < w.end()) {
    if (const size_t n = w.contraction(pos, true)) {
      pos += w.emit(pos + n);
      continue;
    }
    if (!newline(pos) && !w.number(pos) && (w.letter(pos) || w.letter(pos + 1))) {
      ++pos;  // a letter, or the one character allowed before the letters
      while (w.letter(pos)) ++pos;
      w.emit(pos);
      continue;
    }
    if (w.number(pos)) {
      size_t run_start = pos;
      while (w.number(pos)) {
        if (++pos - run_start >= max_digits) {
          w.emit(pos);
          run_start = pos;
        }
      }
      w.emit(pos);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*". A space that ends the piece is a word of its own here.
    const size_t first = w.cpt(pos) == ' ' ? pos + 1 : pos;
    if (w.other(first) || first >= w.end()) {
      pos = first;
      while (w.other(pos)) ++pos;
      while (newline(pos)) ++pos;
      w.emit(pos);
      continue;
    }
    size_t spaces = 0, after_newline = 0;
    while (w.space(pos + spaces)) {
      if (newline(pos + spaces)) after_newline = pos + spaces + 1;
      ++spaces;
    }
    if (after_newline > 0) {
      pos = after_newline;  // \s*[\r\n]+
    } else if (spaces > 1 && pos + spaces < w.end()) {
      pos += spaces - 1;  // \s+(?!\S)
    } else if (spaces > 0) {
      pos += spaces;
    } else {
      ++pos;
    }
    w.emit(pos);
  }
}

using Pieces = std::vector<size_t>;  // lengths of consecutive pieces

// Each piece cut by `split`, which is called with a Piece and its start.
template <class Split>
Pieces refine(std::span<const uint32_t> cpts, std::span<const uint8_t> flags, const Pieces& pieces, Split split) {
  Pieces out;
  out.reserve(pieces.size());
  size_t begin = 0;
  for (const size_t len : pieces) {
    Piece w(cpts, flags, begin, begin + len, out);
    split(w, begin);
    begin += len;
  }
  return out;
}

// A regex of one character class, [class]+ (or [class] alone): its matches and the gaps between
// them each become a piece.
void split_runs(Piece& w, size_t pos, uint8_t cls, bool single) {
  while (pos < w.end()) {
    if (!w.has(pos, cls)) {
      while (pos < w.end() && !w.has(pos, cls)) ++pos;
    } else if (single) {
      ++pos;
    } else {
      while (w.has(pos, cls)) ++pos;
    }
    w.emit(pos);
  }
}

// [0-9][0-9][0-9]: matches left to right, and the gaps between them.
void split_digit_triples(Piece& w, size_t pos) {
  const auto digit = [&](size_t p) { return w.cpt(p) >= '0' && w.cpt(p) <= '9'; };
  while (pos < w.end()) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      w.emit(pos);
      pos += 3;
      w.emit(pos);
    } else {
      ++pos;
    }
  }
  w.emit(pos);
}

}  // namespace

std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name) {
  struct Entry {
    std::string_view name;
    PreTokenizerSpec spec;
  };
  using P = PreTokenizer;
  // The names llama.cpp (0.3.36) maps to these regexes with no other special behaviour.
  static constexpr Entry kNames[] = {
      {"", {P::default_bpe}},          {"default", {P::default_bpe}},
      {"gpt-2", {P::gpt2}},            {"phi-2", {P::gpt2}},
      {"jina-es", {P::gpt2}},          {"jina-de", {P::gpt2}},
      {"gigachat", {P::gpt2}},         {"jina-v2-es", {P::gpt2}},
      {"jina-v2-de", {P::gpt2}},       {"a.x-4.0", {P::gpt2}},
      {"mellum", {P::gpt2}},           {"mpt", {P::gpt2}},
      {"olmo", {P::gpt2}},             {"jais", {P::gpt2}},
      {"trillion", {P::gpt2}},         {"granite-docling", {P::gpt2}},
      {"exaone4", {P::gpt2}},          {"starcoder", {P::starcoder}},
      {"refact", {P::starcoder}},      {"command-r", {P::starcoder}},
      {"smollm", {P::starcoder}},      {"codeshell", {P::starcoder}},
      {"exaone", {P::starcoder}},      {"minerva-7b", {P::starcoder}},
      {"mellum2", {P::starcoder}},     {"llama3", {P::llama3, true, true}},
      {"llama-v3", {P::llama3, true, true}}, {"llama-bpe", {P::llama3, true, true}},
      {"falcon3", {P::llama3, true, true}},  {"falcon-h1", {P::llama3, true, true}},
      {"pixtral", {P::llama3, true, true}},  {"midm-2.0", {P::llama3, true, true}},
      {"lfm2", {P::llama3, true, true}},     {"jina-v5-nano", {P::llama3, true, true}},
      {"dbrx", {P::llama3}},           {"smaug-bpe", {P::llama3}},
      {"qwen2", {P::qwen2}},           {"deepseek-r1-qwen", {P::qwen2}},
      {"kormo", {P::qwen2}},           {"f2llmv2", {P::qwen2}},
      {"megrez", {P::qwen2}},          {"stablelm2", {P::qwen2}},
      {"hunyuan", {P::qwen2}},         {"solar-open", {P::qwen2}},
  };
  for (const Entry& e : kNames)
    if (e.name == name) return e.spec;
  return std::nullopt;
}

std::string supported_pre_tokenizers() {
  return "default, gpt-2, smollm, starcoder, llama-bpe (llama3), qwen2 and their aliases in llama.cpp";
}

std::vector<size_t> pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cpts) {
  if (cpts.empty()) return {};
  const std::vector<uint8_t> flags = classify_all(cpts);
  Pieces pieces = {cpts.size()};
  const auto stage = [&](auto split) { pieces = refine(cpts, flags, pieces, split); };
  const auto gpt2 = [](Piece& w, size_t pos) { split_gpt2(w, pos); };
  switch (kind) {
    case PreTokenizer::default_bpe:
      stage([](Piece& w, size_t pos) { split_runs(w, pos, kPunctuation, false); });
      stage(gpt2);
      stage([](Piece& w, size_t pos) { split_runs(w, pos, kNumber, false); });
      stage(split_digit_triples);
      break;
    case PreTokenizer::gpt2:
      stage(gpt2);
      break;
    case PreTokenizer::starcoder:
      stage([](Piece& w, size_t pos) { split_runs(w, pos, kNumber, true); });
      stage(gpt2);
      break;
    case PreTokenizer::llama3:
      stage([](Piece& w, size_t pos) { split_llama3(w, pos, 3); });
      break;
    case PreTokenizer::qwen2:
      stage([](Piece& w, size_t pos) { split_llama3(w, pos, 1); });
      break;
  }
  return pieces;
}

std::vector<std::string> pre_tokenize_text(PreTokenizer kind, std::string_view text) {
  const std::vector<uint32_t> cpts = utf8::code_points_lenient(text);
  std::vector<std::string> words;
  size_t begin = 0;
  for (const size_t len : pre_tokenize(kind, cpts)) {
    std::string& w = words.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) utf8::append(w, cpts[i]);
    begin += len;
  }
  return words;
}

}  // namespace infer
