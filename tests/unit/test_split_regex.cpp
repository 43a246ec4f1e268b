// SplitRegex against the ECMAScript semantics llama.cpp gets from std::regex, and the table of
// pre-tokenizers built on it. The ids of whole vocabularies against llama.cpp's are checked by
// the llama.cpp vocabulary suite (tests/integration/llama_vocab_suite.cpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/split_regex.hpp"
#include "tokenizer/unicode_tables.hpp"
#include "tokenizer/utf8.hpp"

namespace {

using namespace infer;
using V = std::vector<std::string>;

// The pieces SplitRegex cuts `text` into, as UTF-8.
V split(std::string_view pattern, std::string_view text) {
  auto re = SplitRegex::compile(pattern);
  REQUIRE(re.ok());
  const std::vector<uint32_t> cpts = utf8::code_points_lenient(text);
  std::vector<size_t> lens;
  re->split(cpts, 0, cpts.size(), lens);
  V out;
  size_t begin = 0;
  for (const size_t len : lens) {
    std::string& w = out.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) utf8::append(w, cpts[i]);
    begin += len;
  }
  return out;
}

}  // namespace

TEST_CASE("SplitRegex: matches and the text between them are the pieces, leftmost match first", "[bpe][regex]") {
  CHECK(split("[0-9][0-9][0-9]", "x1234y56789") == V{"x", "123", "4y", "567", "89"});
  CHECK(split("\\p{N}+", "ab12c\xC2\xB2") == V{"ab", "12", "c", "\xC2\xB2"});  // ² is a number
  CHECK(split("\\p{N}", "").empty());
  // Alternatives in order, not the longest: "ab" is never tried where "a" matches.
  CHECK(split("a|ab", "ab") == V{"a", "b"});
  // Greedy, backing off for what follows.
  CHECK(split("a+ab", "aaab") == V{"aaab"});
  CHECK(split("\\s+(?!\\S)|\\s+", "a   b  ") == V{"a", "  ", " ", "b", "  "});
  CHECK(split("\\s+$", "a  b  ") == V{"a  b", "  "});
  CHECK(split("x{2,3}", "xxxxxxx") == V{"xxx", "xxx", "x"});
  // Lookahead is tested, not consumed; a repeated one-character group loops.
  CHECK(split("((?=[\\p{L}])([^a-z]))+", "abCDe1F") == V{"ab", "CD", "e1", "F"});
}

TEST_CASE("SplitRegex: characters are classed as llama.cpp's std::regex sees them", "[bpe][regex]") {
  // \p{L} is any letter, \p{Lu} too (llama.cpp maps the subcategories to \p{L}); \p{M} marks.
  CHECK(split("\\p{L}+", "\xC3\xA9t\xC3\xA9 1") == V{"\xC3\xA9t\xC3\xA9", " 1"});
  CHECK(split("\\p{Lu}+", "ab") == V{"ab"});
  CHECK(split("[\\p{L}\\p{M}]+", "e\xCC\x81 x") == V{"e\xCC\x81", " ", "x"});
  // Non-ASCII whitespace is \s, never a literal: U+3000 is outside [\u3000-\u3002] there.
  CHECK(split("[\xE3\x80\x80-\xE3\x80\x82]+", "a\xE3\x80\x80\xE3\x80\x81") == V{"a\xE3\x80\x80", "\xE3\x80\x81"});
  CHECK(split("\\s", "a\xE3\x80\x80") == V{"a", "\xE3\x80\x80"});
  // \d and \w are ASCII only.
  CHECK(split("\\d+", "\xD9\xA3" "12") == V{"\xD9\xA3", "12"});
  CHECK(split("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", "(ab\ncd") == V{"(ab", "\n", "cd"});
}

TEST_CASE("SplitRegex refuses what it does not implement instead of matching wrongly", "[bpe][regex]") {
  for (const char* bad : {"", "a*", "(?=a)", "a+?", "(ab)+", "\\p{Han}+", "\\bx", "[a-", "(a", "a)", "x{3,1}",
                          ".+", "\\p{L}\xC3\xA9"}) {
    INFO(bad);
    const auto re = SplitRegex::compile(bad);
    REQUIRE_FALSE(re.ok());
    CHECK(re.status().code() == StatusCode::invalid_argument);
  }
}

TEST_CASE("every pre-tokenizer of the table compiles, and names resolve to their row", "[bpe][regex]") {
  for (const PreTokenizerSpec& spec : all_pre_tokenizers()) {
    INFO(spec.type);
    CHECK(PreTokenizer::create(spec).ok());
  }
  CHECK(find_pre_tokenizer("")->type == "default");
  CHECK(find_pre_tokenizer("deepseek-r1-qwen")->type == "qwen2");
  CHECK(find_pre_tokenizer("llama-bpe")->ignore_merges);
  CHECK_FALSE(find_pre_tokenizer("qwen"));
  CHECK_FALSE(find_pre_tokenizer("llama3 "));
}

TEST_CASE("the new pre-tokenizers split where llama.cpp's regexes do", "[bpe][regex]") {
  // deepseek-coder: newlines alone, letters with one space before, punctuation runs, CJK, digits.
  CHECK(pre_tokenize_text("deepseek-coder", "Hi, you!\n12 \xE4\xB8\xAD\xE6\x96\x87") ==
        V{"Hi", ",", " you", "!", "\n", "1", "2", " ", "\xE4\xB8\xAD\xE6\x96\x87"});
  // deepseek-llm: its own letter and punctuation classes; trailing whitespace; number runs.
  CHECK(pre_tokenize_text("deepseek-llm", "Hi, you!\n12  ") == V{"Hi", ",", " you", "!", "\n", "12", "  "});
  // falcon: the default's punctuation class plus the backquote; digit triples.
  CHECK(pre_tokenize_text("falcon", "`x`=12345") == V{"`", "x", "`=", "123", "45"});
  // qwen35: combining marks join the letters (qwen2 cuts them off).
  CHECK(pre_tokenize_text("qwen35", "ne\xCC\x81" "e") == V{"ne\xCC\x81" "e"});
  CHECK(pre_tokenize_text("qwen2", "ne\xCC\x81" "e") == V{"ne", "\xCC\x81" "e"});
  // gemma4: newline runs and the text between them.
  CHECK(pre_tokenize_text("gemma4", "a b\n\nc") == V{"a b", "\n\n", "c"});
}

TEST_CASE("the WordPiece normalizer's Unicode facts are the simple lowercase and the first code point of NFD",
          "[bpe][regex]") {
  CHECK(unicode::to_lower('A') == 'a');
  CHECK(unicode::to_lower(0x130) == 'i');     // İ: the simple mapping, not "i̇"
  CHECK(unicode::to_lower(0x3A3) == 0x3C3);   // Σ
  CHECK(unicode::to_lower('a') == 'a');
  CHECK(unicode::nfd_first(0xC4) == 'A');     // Ä
  CHECK(unicode::nfd_first(0x1EAD) == 'a');   // ậ
  CHECK(unicode::nfd_first(0xAC00) == 0x1100);  // a Hangul syllable decomposes to its first jamo
  CHECK(unicode::nfd_first('x') == 'x');
}

TEST_CASE("SplitRegex's loop memory never changes a split: the same pieces as matching afresh at every position",
          "[bpe][regex]") {
  // Random texts over characters every class of the table tells apart.
  const std::vector<uint32_t> alphabet = {' ', ' ', '\n', '\r', 'a', 'Z', '1', ',', '`', '\'', 's',
                                          0x4E2D, 0x3000, 0x301, 0xE9, 0xB2, 0x85};
  std::vector<std::string_view> patterns = {"\\s+$", "\\s+(?!\\S)|\\s+", "\\s?\\p{L}+", "[^\\n]+|[\\n]+",
                                            "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+", " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"};
  for (const PreTokenizerSpec& spec : all_pre_tokenizers())
    for (const std::string_view r : spec.regexes) patterns.push_back(r);
  uint32_t seed = 12345;
  const auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint32_t> cpts(next() % 40);
    for (uint32_t& c : cpts) c = alphabet[(next() >> 8) % alphabet.size()];
    for (const std::string_view pattern : patterns) {
      auto re = SplitRegex::compile(pattern);
      if (!re.ok()) continue;  // a hand-written splitter's regex, e.g. with (?i:...)
      std::vector<size_t> pieces;
      re->split(cpts, 0, cpts.size(), pieces);
      std::vector<size_t> fresh;
      size_t last = 0;
      for (size_t pos = 0; pos < cpts.size();) {
        const size_t len = re->match_at(cpts, 0, cpts.size(), pos);
        if (len == 0) {
          ++pos;
          continue;
        }
        if (pos > last) fresh.push_back(pos - last);
        fresh.push_back(len);
        last = pos += len;
      }
      if (cpts.size() > last) fresh.push_back(cpts.size() - last);
      INFO(pattern << " trial " << trial);
      CHECK(pieces == fresh);
    }
  }
}
