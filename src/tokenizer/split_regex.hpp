// The regular expressions that cut text into words before BPE merging, matched over code points
// with the meaning llama.cpp's unicode_regex_split gives them through std::regex (ECMAScript):
// leftmost match, alternatives tried in order, greedy quantifiers with backtracking, atomic
// lookahead. What std::regex sees there, and so what matches here:
//
//   \p{L} \p{N} \p{P} \p{M} \p{S}   the code point's general category (\p{Lu}, \p{Ll}, \p{Lt},
//                                   \p{Lm}, \p{Lo} all mean \p{L}, as in llama.cpp)
//   \s \S                           Unicode White_Space (llama.cpp maps the non-ASCII ones to \v)
//   literals and ranges             compare the code point, except that non-ASCII whitespace
//                                   reads as \v (U+3000 is not in [　-。])
//   \d \w                           ASCII [0-9], [A-Za-z0-9_]
//
// The subset: alternation, groups ((...), (?:...)), lookahead ((?=...), (?!...)), classes
// ([...], [^...], ranges, the escapes above, \r \n \t \f \v \xHH and escaped punctuation), ^, $
// and the quantifiers ? * + {n} {n,} {n,m} (greedy). A group repeated more than once must match
// exactly one character (as ((?=[\p{L}])([^a-z]))* does), and the whole pattern must not match
// the empty text: then matching never recurses deeper than the pattern is long, however long the
// text, and an unbounded loop remembers what it tried (split_regex.cpp) so that a long run of
// characters does not cost the square of its length. Anything else is refused when compiling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infer/status.hpp"

namespace infer {

class SplitRegex {
 public:
  // `pattern` is UTF-8. `invalid_argument` naming the position for anything outside the subset.
  static Result<SplitRegex> compile(std::string_view pattern);

  // Cuts cpts[begin, end) as llama.cpp's regex splitter does: the matches, found left to right,
  // and the text between them each become a piece; appends the pieces' lengths to `out`.
  void split(std::span<const uint32_t> cpts, size_t begin, size_t end, std::vector<size_t>& out) const;

  // The length of the match that starts at `pos` in cpts[begin, end); 0 when none does.
  size_t match_at(std::span<const uint32_t> cpts, size_t begin, size_t end, size_t pos) const;

 private:
  struct CharClass {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive
    uint8_t categories = 0;                              // bits: 1 << unicode::Category
    uint8_t escapes = 0;                                 // kSpace, kNotSpace, ... below
    bool negated = false;
    bool matches(uint32_t cpt) const;
  };
  struct Node {
    enum Kind : uint8_t { kChar, kSeq, kAlt, kRepeat, kLookahead, kNegativeLookahead, kBegin, kEnd } kind;
    CharClass cls;            // kChar
    std::vector<int> kids;    // kSeq: items; kAlt: alternatives; kRepeat, lookaheads: one
    int min = 1, max = 1;     // kRepeat; max -1: unbounded
    bool one_char = false;    // always consumes exactly one character
    bool nullable = false;    // can match the empty text
  };
  struct Cont;
  class Parser;
  struct LoopMemo;
  struct Matcher;

  size_t match_at(std::span<const uint32_t> cpts, size_t begin, size_t end, size_t pos,
                  std::vector<LoopMemo>& memo) const;

  std::vector<Node> nodes_;
  int root_ = -1;
};

}  // namespace infer
