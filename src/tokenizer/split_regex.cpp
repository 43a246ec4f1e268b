// A backtracking matcher in continuation style: a node matches, then calls the rest of the
// pattern (its continuation); the first way through that reaches the pattern's end is the match,
// which is ECMAScript's priority order. A quantified one-character node counts its repetitions
// in a loop and backs off from the longest, so the C++ stack only ever holds one frame per
// pattern node.
//
// Every node sits in one place of the pattern, so its continuation is always the same, and
// whether the continuation succeeds from a position depends on that position alone (no
// captures, no back references). An unbounded loop therefore remembers, per piece, the run it
// counted and the ends it already tried in vain: a later attempt inside the same run knows its
// count and, when all its ends were tried, fails at once. Without that, \s+$ over a long run of
// spaces that does not end the piece would cost the square of the run's length.
#include "tokenizer/split_regex.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/status_macros.hpp"
#include "tokenizer/unicode_tables.hpp"
#include "tokenizer/utf8.hpp"

namespace infer {

namespace {

enum : uint8_t { kSpace = 1, kNotSpace = 2, kDigit = 4, kNotDigit = 8, kWord = 16, kNotWord = 32 };

constexpr uint8_t category_bit(unicode::Category c) { return static_cast<uint8_t>(1u << static_cast<unsigned>(c)); }

bool is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }
bool is_ascii_word(uint32_t c) {
  return is_ascii_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

}  // namespace

bool SplitRegex::CharClass::matches(uint32_t cpt) const {
  // std::regex in llama.cpp never sees a non-ASCII whitespace character, only \v in its place.
  const bool replaced = cpt > 0x7F && unicode::is_whitespace(cpt);
  const uint32_t seen = replaced ? 0x0B : cpt;
  bool hit = std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return seen >= r.first && seen <= r.second; });
  if (!hit && categories && !replaced) hit = (categories & category_bit(unicode::category(cpt))) != 0;
  if (!hit && escapes) {
    const bool space = unicode::is_whitespace(cpt);
    hit = ((escapes & kSpace) && space) || ((escapes & kNotSpace) && !space) ||
          ((escapes & kDigit) && is_ascii_digit(seen)) || ((escapes & kNotDigit) && !is_ascii_digit(seen)) ||
          ((escapes & kWord) && is_ascii_word(seen)) || ((escapes & kNotWord) && !is_ascii_word(seen));
  }
  return hit != negated;
}

class SplitRegex::Parser {
 public:
  Parser(std::string_view pattern, std::vector<Node>& nodes)
      : text_(pattern), p_(utf8::code_points_lenient(pattern)), nodes_(nodes) {}

  Result<int> parse() {
    auto root = alternation();
    if (!root.ok()) return root;
    if (i_ < p_.size()) return error("unbalanced ')'");
    if (uses_category_ && non_ascii_literal_)
      return error("\\p{...} together with non-ASCII characters (llama.cpp refuses this too)");
    if (nodes_[*root].nullable) return error("the pattern matches the empty text");
    return root;
  }

 private:
  Status error(const std::string& what) const {
    return invalid_argument("pre-tokenizer regex '" + std::string(text_) + "' at code point " + std::to_string(i_) +
                            ": " + what);
  }
  bool at(uint32_t c) const { return i_ < p_.size() && p_[i_] == c; }

  int add(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }
  static bool zero_width(const Node& n) {
    return n.kind == Node::kLookahead || n.kind == Node::kNegativeLookahead || n.kind == Node::kBegin ||
           n.kind == Node::kEnd;
  }

  Result<int> alternation() {
    Node alt{Node::kAlt};
    for (;;) {
      auto seq = sequence();
      if (!seq.ok()) return seq;
      alt.kids.push_back(*seq);
      if (!at('|')) break;
      ++i_;
    }
    if (alt.kids.size() == 1) return alt.kids[0];
    alt.one_char = std::all_of(alt.kids.begin(), alt.kids.end(), [&](int k) { return nodes_[k].one_char; });
    alt.nullable = std::any_of(alt.kids.begin(), alt.kids.end(), [&](int k) { return nodes_[k].nullable; });
    return add(std::move(alt));
  }

  Result<int> sequence() {
    Node seq{Node::kSeq};
    while (i_ < p_.size() && !at('|') && !at(')')) {
      auto item = quantified();
      if (!item.ok()) return item;
      seq.kids.push_back(*item);
    }
    if (seq.kids.size() == 1) return seq.kids[0];
    size_t consuming = 0, one_char = 0;
    seq.nullable = true;
    for (const int k : seq.kids) {
      if (!zero_width(nodes_[k])) ++consuming;
      if (nodes_[k].one_char) ++one_char;
      seq.nullable = seq.nullable && nodes_[k].nullable;
    }
    seq.one_char = consuming == 1 && one_char == 1;
    return add(std::move(seq));
  }

  Result<int> quantified() {
    auto atom_id = atom();
    if (!atom_id.ok()) return atom_id;
    int min = 1, max = 1;
    if (at('?')) min = 0;
    else if (at('*')) min = 0, max = -1;
    else if (at('+')) max = -1;
    else if (at('{')) {
      ++i_;
      auto lo = number();
      if (!lo) return error("expected a count after '{'");
      min = max = *lo;
      if (at(',')) {
        ++i_;
        auto hi = number();
        max = hi ? *hi : -1;
        if (hi && *hi < min) return error("a count range {n,m} with m < n");
      }
      if (!at('}')) return error("expected '}'");
    } else {
      return atom_id;
    }
    ++i_;
    if (at('?')) return error("lazy quantifiers are not supported");
    const Node& kid = nodes_[*atom_id];
    if (zero_width(kid)) return error("a quantifier after a zero-width assertion");
    if (max != 1 && !kid.one_char) return error("a group repeated more than once must match exactly one character");
    Node rep{Node::kRepeat};
    rep.kids = {*atom_id};
    rep.min = min;
    rep.max = max;
    rep.nullable = min == 0 || kid.nullable;
    rep.one_char = min == 1 && max == 1 && kid.one_char;
    return add(std::move(rep));
  }

  std::optional<int> number() {
    if (!(i_ < p_.size() && is_ascii_digit(p_[i_]))) return std::nullopt;
    int n = 0;
    while (i_ < p_.size() && is_ascii_digit(p_[i_])) {
      n = n * 10 + static_cast<int>(p_[i_++] - '0');
      if (n > 100000) return std::nullopt;
    }
    return n;
  }

  Result<int> atom() {
    const uint32_t c = p_[i_];
    if (c == '(') {
      ++i_;
      Node::Kind kind = Node::kSeq;  // a plain group
      if (at('?')) {
        ++i_;
        if (at(':')) kind = Node::kSeq;
        else if (at('=')) kind = Node::kLookahead;
        else if (at('!')) kind = Node::kNegativeLookahead;
        else return error("only (?:...), (?=...) and (?!...) groups are supported");
        ++i_;
      }
      auto inner = alternation();
      if (!inner.ok()) return inner;
      if (!at(')')) return error("expected ')'");
      ++i_;
      if (kind == Node::kSeq) return inner;
      Node look{kind};
      look.kids = {*inner};
      look.nullable = true;
      return add(std::move(look));
    }
    if (c == '[') return char_class();
    if (c == '^' || c == '$') {
      ++i_;
      return add(Node{c == '^' ? Node::kBegin : Node::kEnd, {}, {}, 1, 1, false, true});
    }
    if (c == '.' || c == '*' || c == '+' || c == '?' || c == '{' || c == ')' || c == ']' || c == '}')
      return error(std::string("unexpected '") + static_cast<char>(c) + "'");
    Node ch{Node::kChar};
    ch.one_char = true;
    if (c == '\\') {
      INFER_RETURN_IF_ERROR(escape(ch.cls));
    } else {
      literal(ch.cls, c);
      ++i_;
    }
    return add(std::move(ch));
  }

  void literal(CharClass& cls, uint32_t c) {
    if (c > 0x7F) non_ascii_literal_ = true;
    cls.ranges.emplace_back(c, c);
  }

  // Reads the escape at p_[i_] == '\\' into `cls`; sets `*single` to the character when it is one.
  Status escape(CharClass& cls, uint32_t* single = nullptr) {
    ++i_;
    if (i_ >= p_.size()) return error("a trailing '\\'");
    const uint32_t e = p_[i_++];
    uint32_t c = 0;
    switch (e) {
      case 's': cls.escapes |= kSpace; return Status::ok();
      case 'S': cls.escapes |= kNotSpace; return Status::ok();
      case 'd': cls.escapes |= kDigit; return Status::ok();
      case 'D': cls.escapes |= kNotDigit; return Status::ok();
      case 'w': cls.escapes |= kWord; return Status::ok();
      case 'W': cls.escapes |= kNotWord; return Status::ok();
      case 'p': return property(cls);
      case 'r': c = '\r'; break;
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'f': c = '\f'; break;
      case 'v': c = '\v'; break;
      case '0': c = 0; break;
      case 'x': {
        if (i_ + 2 > p_.size()) return error("expected two hex digits after \\x");
        for (int k = 0; k < 2; ++k) {
          const uint32_t h = p_[i_++];
          const int v = h >= '0' && h <= '9' ? static_cast<int>(h - '0')
                        : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? static_cast<int>((h | 0x20) - 'a' + 10)
                                                                 : -1;
          if (v < 0) return error("expected two hex digits after \\x");
          c = c * 16 + static_cast<uint32_t>(v);
        }
        break;
      }
      default:
        if (e > 0x7F || is_ascii_word(e)) return error("unsupported escape");
        c = e;  // escaped punctuation stands for itself
    }
    literal(cls, c);
    if (single) *single = c;
    return Status::ok();
  }

  Status property(CharClass& cls) {
    size_t close = i_;
    while (close < p_.size() && p_[close] != '}') ++close;
    if (!at('{') || close >= p_.size()) return error("expected \\p{Name}");
    std::string name;
    for (size_t k = i_ + 1; k < close; ++k) name += static_cast<char>(p_[k]);
    using C = unicode::Category;
    static constexpr std::pair<std::string_view, C> kNames[] = {
        {"L", C::letter}, {"Lu", C::letter}, {"Ll", C::letter}, {"Lt", C::letter}, {"Lm", C::letter},
        {"Lo", C::letter}, {"N", C::number}, {"P", C::punctuation}, {"M", C::mark}, {"S", C::symbol}};
    for (const auto& [n, cat] : kNames) {
      if (n == name) {
        cls.categories |= category_bit(cat);
        uses_category_ = true;
        i_ = close + 1;
        return Status::ok();
      }
    }
    return error("unsupported property \\p{" + name + "}");
  }

  Result<int> char_class() {
    ++i_;  // '['
    Node ch{Node::kChar};
    ch.one_char = true;
    CharClass& cls = ch.cls;
    if (at('^')) {
      cls.negated = true;
      ++i_;
    }
    while (i_ < p_.size() && !at(']')) {
      uint32_t lo = 0;
      if (at('\\')) {
        CharClass item;
        uint32_t single = 0;
        INFER_RETURN_IF_ERROR(escape(item, &single));
        if (item.ranges.empty()) {  // \s, \p{L}, ...
          cls.categories |= item.categories;
          cls.escapes |= item.escapes;
          continue;
        }
        lo = single;
      } else {
        lo = p_[i_++];
        if (lo > 0x7F) non_ascii_literal_ = true;
      }
      uint32_t hi = lo;
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (at('\\')) {
          CharClass item;
          INFER_RETURN_IF_ERROR(escape(item, &hi));
          if (item.ranges.empty()) return error("a class escape cannot end a range");
        } else {
          hi = p_[i_++];
          if (hi > 0x7F) non_ascii_literal_ = true;
        }
        if (hi < lo) return error("a range out of order");
      }
      cls.ranges.emplace_back(lo, hi);
    }
    if (!at(']')) return error("expected ']'");
    ++i_;
    return add(std::move(ch));
  }

  std::string_view text_;
  std::vector<uint32_t> p_;
  std::vector<Node>& nodes_;
  size_t i_ = 0;
  bool uses_category_ = false, non_ascii_literal_ = false;
};

Result<SplitRegex> SplitRegex::compile(std::string_view pattern) {
  SplitRegex re;
  Parser parser(pattern, re.nodes_);
  auto root = parser.parse();
  if (!root.ok()) return root.status();
  re.root_ = *root;
  return re;
}

// The rest of the pattern after a node: items index.. of sequence `seq`, then `next`.
struct SplitRegex::Cont {
  int seq;
  size_t index;
  const Cont* next;
};

// What an unbounded one-character loop learned in this piece (see the top of the file).
struct SplitRegex::LoopMemo {
  size_t run_start = SIZE_MAX, run_end = 0;  // the characters run_start..run_end-1 all match
  size_t failed_from = SIZE_MAX;             // ends failed_from..run_end were tried in vain
};

struct SplitRegex::Matcher {
  const std::vector<Node>& nodes;
  std::span<const uint32_t> cpts;
  size_t begin, end;
  std::vector<LoopMemo>& memo;  // one per node

  // Node n at pos, then the continuation k; on success `out` is where the whole match ends.
  bool match(int n, size_t pos, const Cont* k, size_t& out) const {
    const Node& node = nodes[n];
    switch (node.kind) {
      case Node::kChar:
        return pos < end && node.cls.matches(cpts[pos]) && resume(k, pos + 1, out);
      case Node::kSeq: {
        if (node.kids.empty()) return resume(k, pos, out);
        const Cont rest{n, 1, k};
        return match(node.kids[0], pos, &rest, out);
      }
      case Node::kAlt:
        for (const int kid : node.kids)
          if (match(kid, pos, k, out)) return true;
        return false;
      case Node::kRepeat: {
        const int kid = node.kids[0];
        if (!nodes[kid].one_char) {  // at most once (checked when compiling)
          if (match(kid, pos, k, out)) return true;
          return node.min == 0 && resume(k, pos, out);
        }
        const size_t min = static_cast<size_t>(node.min);
        const size_t room = end - std::min(pos, end);
        const size_t limit = node.max < 0 ? room : std::min(room, static_cast<size_t>(node.max));
        LoopMemo* m = node.max < 0 ? &memo[n] : nullptr;
        size_t count = 0;
        if (m && pos >= m->run_start && pos <= m->run_end) {
          count = m->run_end - pos;
          if (pos + min >= m->failed_from) return false;  // every end was tried
        } else {
          size_t ignored = 0;
          while (count < limit && match(kid, pos + count, nullptr, ignored)) ++count;
          if (m) *m = LoopMemo{pos, pos + count, SIZE_MAX};
        }
        for (size_t c = count + 1; c-- > min;)
          if (resume(k, pos + c, out)) return true;
        if (m) m->failed_from = std::min(m->failed_from, pos + min);
        return false;
      }
      case Node::kLookahead:
      case Node::kNegativeLookahead: {
        size_t ignored = 0;
        const bool found = match(node.kids[0], pos, nullptr, ignored);
        return found == (node.kind == Node::kLookahead) && resume(k, pos, out);
      }
      case Node::kBegin:
        return pos == begin && resume(k, pos, out);
      case Node::kEnd:
        return pos == end && resume(k, pos, out);
    }
    return false;
  }

  bool resume(const Cont* k, size_t pos, size_t& out) const {
    if (k == nullptr) {
      out = pos;
      return true;
    }
    const Node& seq = nodes[k->seq];
    if (k->index < seq.kids.size()) {
      const Cont rest{k->seq, k->index + 1, k->next};
      return match(seq.kids[k->index], pos, &rest, out);
    }
    return resume(k->next, pos, out);
  }
};

size_t SplitRegex::match_at(std::span<const uint32_t> cpts, size_t begin, size_t end, size_t pos) const {
  std::vector<LoopMemo> memo(nodes_.size());
  return match_at(cpts, begin, end, pos, memo);
}

size_t SplitRegex::match_at(std::span<const uint32_t> cpts, size_t begin, size_t end, size_t pos,
                            std::vector<LoopMemo>& memo) const {
  const Matcher m{nodes_, cpts, begin, end, memo};
  size_t out = pos;
  return m.match(root_, pos, nullptr, out) ? out - pos : 0;
}

void SplitRegex::split(std::span<const uint32_t> cpts, size_t begin, size_t end, std::vector<size_t>& out) const {
  std::vector<LoopMemo> memo(nodes_.size());  // for this piece only
  size_t last = begin;
  for (size_t pos = begin; pos < end;) {
    const size_t len = match_at(cpts, begin, end, pos, memo);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (pos > last) out.push_back(pos - last);
    out.push_back(len);
    pos += len;
    last = pos;
  }
  if (end > last) out.push_back(end - last);
}

}  // namespace infer
