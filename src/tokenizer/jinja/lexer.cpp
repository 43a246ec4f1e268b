#include "tokenizer/jinja/lexer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "tokenizer/jinja/py_string.hpp"
#include "tokenizer/jinja/value.hpp"

namespace infer::jinja {

namespace {

[[noreturn]] void syntax_error(const std::string& message, int line) { throw Error(Error::Kind::syntax, message, line); }

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "\r\n" and "\r" become "\n"; one trailing newline goes (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's "unicode-escape" decoding of a string literal's body, as jinja2 applies it.
std::string decode_escapes(std::string_view body, int line) {
  std::string out;
  auto hex = [&](size_t at, size_t n) -> uint32_t {
    if (at + n > body.size()) syntax_error("truncated \\x, \\u or \\U escape in a string literal", line);
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = body[at + k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else syntax_error("truncated \\x, \\u or \\U escape in a string literal", line);
    }
    return v;
  };
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n': break;  // a line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': append_utf8(out, hex(i + 1, 2)); i += 2; break;
      case 'u': append_utf8(out, hex(i + 1, 4)); i += 4; break;
      case 'U': {
        const uint32_t cp = hex(i + 1, 8);
        if (cp > 0x10ffff) syntax_error("\\U escape out of range in a string literal", line);
        append_utf8(out, cp);
        i += 8;
        break;
      }
      case 'N': throw Error(Error::Kind::unsupported, "\\N{...} escapes in string literals are not supported", line);
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
          append_utf8(out, v);
        } else if (static_cast<unsigned char>(e) >= 0x80) {
          // jinja2 turns non-ASCII characters into \x.., \u.... escapes before decoding: a
          // backslash before one keeps that escape's text.
          const size_t n = utf8_char_length(body, i);
          const uint32_t cp = decode_utf8_char(body.substr(i, n));
          char buf[16];
          std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
          out += buf;
          i += n - 1;
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : s_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t at = next_tag(pos_);
      if (at == std::string::npos) {
        emit_text(s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      const char kind = s_[at + 1];  // '{', '%' or '#'
      const char sign = at + 2 < s_.size() ? s_[at + 2] : '\0';
      std::string text = s_.substr(pos_, at - pos_);
      if (sign == '-') text = py_strip(text, std::nullopt, false, true);
      else if (sign != '+' && kind != '{') lstrip_line(text);
      count_lines(pos_, at);
      emit_text(std::move(text));
      pos_ = at + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') comment();
      else if (kind == '%' && raw_begin()) raw();
      else tag(kind == '{');
    }
    tokens_.push_back({Token::Kind::end, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1))
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < s_.size(); ++i) line_ += s_[i] == '\n';
  }

  // lstrip_blocks: drop the spaces before a block or comment tag when only they precede it on its line.
  void lstrip_line(std::string& text) const {
    const size_t nl = text.rfind('\n');
    const size_t line_start = nl == std::string::npos ? 0 : nl + 1;
    if (line_start == 0 && !line_starting_) return;
    const std::string_view rest = std::string_view(text).substr(line_start);
    for (size_t i = 0; i < rest.size();) {
      const size_t n = utf8_char_length(rest, i);
      if (!py_is_space(decode_utf8_char(rest.substr(i, n)))) return;
      i += n;
    }
    text.resize(line_start);
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({Token::Kind::text, std::move(text), 0, 0, line_});
  }

  // After a tag's closing delimiter at pos_: "-" strips all whitespace, trim_blocks one newline.
  void after_tag_end(bool strip, bool trim_newline) {
    const size_t begin = pos_;
    if (strip) {
      while (pos_ < s_.size()) {
        const size_t n = utf8_char_length(s_, pos_);
        if (!py_is_space(decode_utf8_char(std::string_view(s_).substr(pos_, n)))) break;
        pos_ += n;
      }
    } else if (trim_newline && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    count_lines(begin, pos_);
    line_starting_ = pos_ > 0 && s_[pos_ - 1] == '\n';
  }

  void comment() {
    const int start_line = line_;
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) syntax_error("missing end of comment tag", start_line);
    count_lines(pos_, end);
    const bool strip = end > pos_ && s_[end - 1] == '-';
    pos_ = end + 2;
    after_tag_end(strip, true);
  }

  // "{% raw %}" (pos_ just after "{%" and its sign): consumes it when it is one.
  bool raw_begin() {
    size_t p = pos_;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n')) ++p;
    if (s_.compare(p, 3, "raw") != 0 || (p + 3 < s_.size() && is_name_char(s_[p + 3]))) return false;
    p += 3;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n')) ++p;
    bool strip = false;
    if (p < s_.size() && s_[p] == '-') strip = true, ++p;
    if (s_.compare(p, 2, "%}") != 0) return false;
    count_lines(pos_, p + 2);
    pos_ = p + 2;
    after_tag_end(strip, false);
    return true;
  }

  void raw() {
    const int start_line = line_;
    for (size_t at = next_tag(pos_); at != std::string::npos; at = next_tag(at + 1)) {
      if (s_[at + 1] != '%') continue;
      size_t p = at + 2;
      const char sign = p < s_.size() ? s_[p] : '\0';
      if (sign == '-' || sign == '+') ++p;
      while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n')) ++p;
      if (s_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n')) ++p;
      bool strip_after = false;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) strip_after = s_[p] == '-', ++p;
      if (s_.compare(p, 2, "%}") != 0) continue;
      std::string text = s_.substr(pos_, at - pos_);
      if (sign == '-') text = py_strip(text, std::nullopt, false, true);
      else if (sign != '+') lstrip_line(text);
      count_lines(pos_, at);
      emit_text(std::move(text));
      count_lines(at, p + 2);
      pos_ = p + 2;
      after_tag_end(strip_after, true);
      return;
    }
    syntax_error("missing {% endraw %} for the {% raw %} here", start_line);
  }

  // The tokens of a {{ ... }} or {% ... %} tag, pos_ just after its opening delimiter.
  void tag(bool variable) {
    const int start_line = line_;
    tokens_.push_back({variable ? Token::Kind::variable_begin : Token::Kind::block_begin, "", 0, 0, line_});
    std::vector<char> open;  // brackets not yet closed: the tag cannot end inside them
    for (;;) {
      while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\f' || s_[pos_] == '\v'))
        line_ += s_[pos_++] == '\n';
      if (pos_ >= s_.size())
        syntax_error(std::string("unexpected end of template: missing the end of the ") +
                         (variable ? "{{ ... }} expression" : "{% ... %} tag"),
                     start_line);
      if (open.empty() && end_of_tag(variable)) return;
      const char c = s_[pos_];
      if (c == '\'' || c == '"') string_literal();
      else if (is_digit(c)) number();
      else if (is_name_start(c)) name();
      else op(open);
    }
  }

  bool end_of_tag(bool variable) {
    const std::string_view rest = std::string_view(s_).substr(pos_);
    const std::string_view close = variable ? "}}" : "%}";
    bool strip = false;
    size_t n = 0;
    if (rest.starts_with(close)) n = 2;
    else if (rest.size() >= 3 && rest[0] == '-' && rest.substr(1).starts_with(close)) n = 3, strip = true;
    else if (!variable && rest.size() >= 3 && rest[0] == '+' && rest.substr(1).starts_with(close)) n = 3;
    if (n == 0) return false;
    tokens_.push_back({variable ? Token::Kind::variable_end : Token::Kind::block_end, "", 0, 0, line_});
    pos_ += n;
    const bool keep_newline = n == 3 && rest[0] == '+';
    after_tag_end(strip, !variable && !keep_newline);
    return true;
  }

  void string_literal() {
    const int start_line = line_;
    const char quote = s_[pos_];
    size_t p = pos_ + 1;
    while (p < s_.size() && s_[p] != quote) {
      if (s_[p] == '\\') ++p;
      ++p;
    }
    if (p >= s_.size()) syntax_error("unterminated string literal", start_line);
    const std::string_view body = std::string_view(s_).substr(pos_ + 1, p - pos_ - 1);
    count_lines(pos_, p);
    tokens_.push_back({Token::Kind::string, decode_escapes(body, start_line), 0, 0, start_line});
    pos_ = p + 1;
  }

  // Digits with single underscores between them ("1_000"); returns the end.
  size_t digits(size_t p) const {
    if (p >= s_.size() || !is_digit(s_[p])) return p;
    while (p < s_.size() && is_digit(s_[p])) {
      ++p;
      if (p + 1 < s_.size() && s_[p] == '_' && is_digit(s_[p + 1])) ++p;
    }
    return p;
  }

  void number() {
    size_t p = digits(pos_);
    bool is_float = false;
    // A float needs digits after the point, and is never read right after a '.' (x.0.1).
    const bool after_dot = pos_ > 0 && s_[pos_ - 1] == '.';
    if (!after_dot && p + 1 < s_.size() && s_[p] == '.' && is_digit(s_[p + 1])) {
      p = digits(p + 1);
      is_float = true;
    }
    if (!after_dot && p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
      size_t q = p + 1;
      if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < s_.size() && is_digit(s_[q])) {
        p = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < p; ++i)
      if (s_[i] != '_') text += s_[i];
    Token t{is_float ? Token::Kind::floating : Token::Kind::integer, text, 0, 0, line_};
    if (is_float) {
      t.floating = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.integer = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) throw Error(Error::Kind::unsupported, "integer literal " + text + " does not fit in 64 bits", line_);
    }
    tokens_.push_back(std::move(t));
    pos_ = p;
  }

  void name() {
    size_t p = pos_;
    while (p < s_.size() && is_name_char(s_[p])) ++p;
    tokens_.push_back({Token::Kind::name, s_.substr(pos_, p - pos_), 0, 0, line_});
    pos_ = p;
  }

  void op(std::vector<char>& open) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    const std::string_view rest = std::string_view(s_).substr(pos_);
    for (std::string_view two : kTwo) {
      if (rest.starts_with(two)) {
        tokens_.push_back({Token::Kind::op, std::string(two), 0, 0, line_});
        pos_ += 2;
        return;
      }
    }
    const char c = s_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
      syntax_error(std::string("unexpected character '") + c + "'", line_);
    if (c == '(' || c == '[' || c == '{') open.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (open.empty()) syntax_error(std::string("unexpected '") + c + "'", line_);
      if (open.back() != c) syntax_error(std::string("unexpected '") + c + "', expected '" + open.back() + "'", line_);
      open.pop_back();
    }
    tokens_.push_back({Token::Kind::op, std::string(1, c), 0, 0, line_});
    ++pos_;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the text about to be read starts a line (lstrip_blocks)
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace infer::jinja
