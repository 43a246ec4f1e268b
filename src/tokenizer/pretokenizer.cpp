// The table of pre-tokenizers, and the hand-written splitters llama.cpp uses for its most common
// regexes. Each splitter scans one piece of text at a time (the pieces an earlier stage made) and
// ends a word wherever llama.cpp's matching splitter does (unicode.cpp, which for these regexes
// does not run std::regex, and differs from it in corner cases); the branch order follows the
// alternatives of the regex. Positions past the piece's end read as "no character", which is how
// lookahead such as \s+(?!\S) sees the end of a piece.
#include "tokenizer/pretokenizer.hpp"

#include <array>
#include <cassert>

#include "tokenizer/unicode_tables.hpp"
#include "tokenizer/utf8.hpp"

namespace infer {

namespace {

// Per code point: the classes the hand-written splitters test.
enum : uint8_t {
  kLetter = 1,  // \p{L}
  kNumber = 2,  // \p{N}
  kSpace = 4,   // \s
  kMark = 8,    // \p{M}
};

uint8_t classify(uint32_t cpt) {
  uint8_t f = 0;
  switch (unicode::category(cpt)) {
    case unicode::Category::letter: f |= kLetter; break;
    case unicode::Category::number: f |= kNumber; break;
    case unicode::Category::mark: f |= kMark; break;
    default: break;
  }
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
  // A character in none of the classes `f` ([^\s\p{L}\p{N}] for f = kSpace | kLetter | kNumber).
  bool none_of(size_t p, uint8_t f) const { return p < end_ && !(flags_[p] & f); }
  bool other(size_t p) const { return none_of(p, kSpace | kLetter | kNumber); }

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
// \s*[\r\n]+|\s+(?!\S)|\s+ where \p{L} stands for the classes `letters` (qwen35: [\p{L}\p{M}]).
void split_llama3(Piece& w, size_t pos, size_t max_digits, uint8_t letters) {
  const auto newline = [&](size_t p) { return w.cpt(p) == '\r' || w.cpt(p) == '\n'; };
  const auto letter = [&](size_t p) { return w.has(p, letters); };
  while (pos < w.end()) {
    if (const size_t n = w.contraction(pos, true)) {
      pos += w.emit(pos + n);
      continue;
    }
    if (!newline(pos) && !w.number(pos) && (letter(pos) || letter(pos + 1))) {
      ++pos;  // a letter, or the one character allowed before the letters
      while (letter(pos)) ++pos;
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
    const uint8_t not_other = kSpace | kNumber | letters;
    const size_t first = w.cpt(pos) == ' ' ? pos + 1 : pos;
    if (w.none_of(first, not_other) || first >= w.end()) {
      pos = first;
      while (w.none_of(pos, not_other)) ++pos;
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

// The regexes, spelled exactly as llama.cpp's llm_tokenizer_bpe lists them (its hand-written
// splitters are chosen by comparing these strings, and so are libinfer's).
constexpr std::string_view kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// CJK unified ideographs, U+0800..U+4E00 (sic, as in the models' tokenizer.json) and Hangul.
constexpr std::string_view kDeepseekCjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

// The regexes that have a hand-written splitter, and the splitter.
struct Scanner {
  std::string_view regex;
  void (*split)(Piece&, size_t);
};
constexpr Scanner kScanners[] = {
    {kGpt2, split_gpt2},
    {kLlama3, [](Piece& w, size_t pos) { split_llama3(w, pos, 3, kLetter); }},
    {kQwen2, [](Piece& w, size_t pos) { split_llama3(w, pos, 1, kLetter); }},
    {kQwen35, [](Piece& w, size_t pos) { split_llama3(w, pos, 1, kLetter | kMark); }},
};

constexpr std::string_view kDefaultRegexes[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
constexpr std::string_view kGpt2Regexes[] = {kGpt2};
constexpr std::string_view kStarcoderRegexes[] = {"\\p{N}", kGpt2};
constexpr std::string_view kLlama3Regexes[] = {kLlama3};
constexpr std::string_view kQwen2Regexes[] = {kQwen2};
constexpr std::string_view kQwen35Regexes[] = {kQwen35};
constexpr std::string_view kFalconRegexes[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
constexpr std::string_view kDeepseekCoderRegexes[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"};
constexpr std::string_view kDeepseekLlmRegexes[] = {
    "[\r\n]",
    // Letters of the Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, ... scripts.
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"
    "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"
    "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
    "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC"
    "\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3"
    "\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"
    "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB"
    "\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
    // ASCII punctuation and symbols, their full-width forms, quotation marks, CJK punctuation.
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
    "\\s+$",
    kDeepseekCjk,
    "\\p{N}+",
};
constexpr std::string_view kNewlineRegexes[] = {"[^\\n]+|[\\n]+"};

// tokenizer.ggml.pre names (space-separated) and what they select, as llama.cpp (0.3.36) sets
// them up; a name whose llama.cpp entry does more than these fields say is not listed.
struct Row {
  std::string_view names;
  PreTokenizerSpec spec;
};
const Row kRows[] = {
    {"default", {"default", kDefaultRegexes}},
    {"gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert mpt olmo jais trillion "
     "granite-docling exaone4",
     {"gpt2", kGpt2Regexes}},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b mellum2", {"starcoder", kStarcoderRegexes}},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano",
     {"llama3", kLlama3Regexes, /*ignore_merges=*/true, /*add_bos=*/true}},
    {"dbrx smaug-bpe", {"dbrx", kLlama3Regexes}},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 megrez stablelm2 hunyuan solar-open", {"qwen2", kQwen2Regexes}},
    {"qwen35", {"qwen35", kQwen35Regexes}},
    {"falcon", {"falcon", kFalconRegexes}},
    {"deepseek-coder", {"deepseek-coder", kDeepseekCoderRegexes}},
    {"deepseek-llm", {"deepseek-llm", kDeepseekLlmRegexes}},
    {"gemma4 granite-embed-multi-311m",
     {.type = "gemma4", .regexes = kNewlineRegexes, .add_bos = true, .always_bos = true, .byte_encode = false,
      .escape_spaces = true, .newline_words = true}},
};

bool row_has_name(const Row& row, std::string_view name) {
  for (size_t pos = 0; pos <= row.names.size();) {
    const size_t space = std::min(row.names.find(' ', pos), row.names.size());
    if (row.names.substr(pos, space - pos) == name) return true;
    pos = space + 1;
  }
  return false;
}

}  // namespace

std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name) {
  if (name.empty()) name = "default";  // no tokenizer.ggml.pre: llama.cpp's default
  for (const Row& row : kRows)
    if (row_has_name(row, name)) return row.spec;
  return std::nullopt;
}

std::string supported_pre_tokenizers() {
  std::string out;
  for (const Row& row : kRows) {
    if (!out.empty()) out += ", ";
    for (const char c : row.names) out += c == ' ' ? std::string(", ") : std::string(1, c);
  }
  return out;
}

std::vector<PreTokenizerSpec> all_pre_tokenizers() {
  std::vector<PreTokenizerSpec> out;
  for (const Row& row : kRows) out.push_back(row.spec);
  return out;
}

Result<PreTokenizer> PreTokenizer::create(const PreTokenizerSpec& spec) {
  PreTokenizer pre;
  pre.spec_ = spec;
  for (const std::string_view regex : spec.regexes) {
    Stage& stage = pre.stages_.emplace_back();
    for (size_t i = 0; i < std::size(kScanners); ++i)
      if (kScanners[i].regex == regex) stage.scanner = static_cast<int>(i);
    if (stage.scanner >= 0) continue;
    auto compiled = SplitRegex::compile(regex);
    if (!compiled.ok()) return internal_error("pre-tokenizer " + std::string(spec.type) + ": " + compiled.status().message());
    stage.regex = std::move(compiled).value();
  }
  return pre;
}

std::vector<size_t> PreTokenizer::split(std::span<const uint32_t> cpts) const {
  if (cpts.empty()) return {};
  const std::vector<uint8_t> flags = classify_all(cpts);
  std::vector<size_t> pieces = {cpts.size()}, next;
  for (const Stage& stage : stages_) {
    next.clear();
    next.reserve(pieces.size());
    size_t begin = 0;
    for (const size_t len : pieces) {
      if (stage.regex) {
        stage.regex->split(cpts, begin, begin + len, next);
      } else {
        Piece w(cpts, flags, begin, begin + len, next);
        kScanners[stage.scanner].split(w, begin);
      }
      begin += len;
    }
    pieces.swap(next);
  }
  return pieces;
}

std::vector<std::string> pre_tokenize_text(std::string_view name, std::string_view text) {
  const auto spec = find_pre_tokenizer(name);
  assert(spec && "pre_tokenize_text: unknown pre-tokenizer name");
  auto pre = PreTokenizer::create(*spec);
  assert(pre.ok());
  const std::vector<uint32_t> cpts = utf8::code_points_lenient(text);
  std::vector<std::string> words;
  size_t begin = 0;
  for (const size_t len : pre->split(cpts)) {
    std::string& w = words.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) utf8::append(w, cpts[i]);
    begin += len;
  }
  return words;
}

}  // namespace infer

