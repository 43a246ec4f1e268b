#include "tokenizer/jinja/py_string.hpp"

#include "tokenizer/jinja/value.hpp"
#include "tokenizer/utf8.hpp"

namespace infer::jinja {

size_t utf8_char_length(std::string_view s, size_t i) {
  const auto b = static_cast<uint8_t>(s[i]);
  size_t n = 1;
  uint32_t min = 0;
  if (b >= 0xc2 && b <= 0xdf) n = 2, min = 0x80;
  else if (b >= 0xe0 && b <= 0xef) n = 3, min = 0x800;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, min = 0x10000;
  else return 1;
  if (i + n > s.size()) return 1;
  uint32_t cp = b & (0x3f >> (n - 1));
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<uint8_t>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 1;
    cp = (cp << 6) | (c & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 1;
  return n;
}

uint32_t decode_utf8_char(std::string_view c) {
  const auto b = static_cast<uint8_t>(c[0]);
  if (c.size() == 1) return b;
  uint32_t cp = b & (0x3f >> (c.size() - 1));
  for (size_t k = 1; k < c.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(c[k]) & 0x3f);
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) { utf8::append(out, cp); }

std::vector<size_t> char_offsets(std::string_view s) {
  std::vector<size_t> at;
  at.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); i += utf8_char_length(s, i)) at.push_back(i);
  at.push_back(s.size());
  return at;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += utf8_char_length(s, i)) ++n;
  return n;
}

bool py_is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool py_is_printable(uint32_t c) {
  if (c == ' ') return true;
  if (py_is_space(c) || c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x180e) return false;
  if ((c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f)) return false;
  if ((c >= 0xd800 && c <= 0xf8ff) || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb) || c >= 0xfffe) return c > 0xffff;
  return true;
}

namespace {

// Iterates the characters of s: f(byte offset, byte length, code point).
template <class F>
void for_each_char(std::string_view s, F&& f) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_length(s, i);
    f(i, n, decode_utf8_char(s.substr(i, n)));
    i += n;
  }
}

bool in_chars(uint32_t c, const std::optional<std::string>& chars) {
  if (!chars) return py_is_space(c);
  bool found = false;
  for_each_char(*chars, [&](size_t, size_t, uint32_t x) { found = found || x == c; });
  return found;
}

uint32_t upper_of(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

uint32_t lower_of(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

bool is_cased_letter(uint32_t c) { return upper_of(c) != c || lower_of(c) != c; }

std::string map_case(std::string_view s, uint32_t (*f)(uint32_t)) {
  std::string out;
  out.reserve(s.size());
  for_each_char(s, [&](size_t i, size_t n, uint32_t c) {
    const uint32_t m = f(c);
    if (c == 0xdf && n == 2 && f == upper_of) out += "SS";  // Python's 'ß'.upper()
    else if (m == c || (n == 1 && c >= 0x80)) out.append(s.substr(i, n));
    else append_utf8(out, m);
  });
  return out;
}

bool all_ascii(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!pred(c)) return false;
  return true;
}

// isupper / islower: at least one cased character, and none of the other case.
bool is_case(std::string_view s, bool upper) {
  bool cased = false;
  bool ok = true;
  for_each_char(s, [&](size_t, size_t, uint32_t c) {
    if (!is_cased_letter(c)) return;
    cased = true;
    if ((upper ? upper_of(c) : lower_of(c)) != c) ok = false;
  });
  return cased && ok;
}

}  // namespace

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<size_t> at = char_offsets(s);
  size_t b = 0, e = at.size() - 1;
  auto cp = [&](size_t k) { return decode_utf8_char(s.substr(at[k], at[k + 1] - at[k])); };
  if (left)
    while (b < e && in_chars(cp(b), chars)) ++b;
  if (right)
    while (e > b && in_chars(cp(e - 1), chars)) --e;
  return std::string(s.substr(at[b], at[e] - at[b]));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) runtime_error("empty separator");
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t at = s.find(*sep, start);
        if (at == std::string_view::npos) break;
        parts.emplace_back(s.substr(start, at - start));
        start = at + sep->size();
      }
      parts.emplace_back(s.substr(start));
      return parts;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    parts.emplace_back(s.substr(0, end));
    return {parts.rbegin(), parts.rend()};
  }
  // Runs of whitespace; leading and trailing whitespace gives no empty parts.
  struct Word {
    size_t begin, end;
  };
  std::vector<Word> words;
  bool in_word = false;
  for_each_char(s, [&](size_t i, size_t n, uint32_t c) {
    if (py_is_space(c)) {
      in_word = false;
    } else if (in_word) {
      words.back().end = i + n;
    } else {
      words.push_back({i, i + n});
      in_word = true;
    }
  });
  if (maxsplit < 0 || static_cast<int64_t>(words.size()) <= maxsplit + 0) {
    for (const Word& w : words) parts.emplace_back(s.substr(w.begin, w.end - w.begin));
    return parts;
  }
  const size_t k = static_cast<size_t>(maxsplit);
  if (!from_right) {
    for (size_t i = 0; i < k; ++i) parts.emplace_back(s.substr(words[i].begin, words[i].end - words[i].begin));
    parts.emplace_back(s.substr(words[k].begin));  // the rest, from the next word on
    return parts;
  }
  const size_t first = words.size() - k;
  parts.emplace_back(s.substr(0, words[first - 1].end));
  for (size_t i = first; i < words.size(); ++i) parts.emplace_back(s.substr(words[i].begin, words[i].end - words[i].begin));
  return parts;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    lines.emplace_back(s.substr(start, i - start));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::string py_upper(std::string_view s) { return map_case(s, upper_of); }
std::string py_lower(std::string_view s) { return map_case(s, lower_of); }

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return {};
  const size_t n = utf8_char_length(s, 0);
  return py_upper(s.substr(0, n)) + py_lower(s.substr(n));
}

std::string py_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for_each_char(s, [&](size_t i, size_t n, uint32_t c) {
    const std::string_view ch = s.substr(i, n);
    out += previous_cased ? py_lower(ch) : py_upper(ch);
    previous_cased = is_cased_letter(c);
  });
  return out;
}

std::string jinja_title(std::string_view s) {
  std::string out;
  bool word_start = true;
  for_each_char(s, [&](size_t i, size_t n, uint32_t c) {
    const std::string_view ch = s.substr(i, n);
    const bool separator = py_is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    out += separator ? std::string(ch) : word_start ? py_upper(ch) : py_lower(ch);
    word_start = separator;
  });
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every character and at the end.
    int64_t done = 0;
    for_each_char(s, [&](size_t i, size_t n, uint32_t) {
      if (count < 0 || done < count) out += new_text, ++done;
      out += s.substr(i, n);
    });
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old_text, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += new_text;
    start = at + old_text.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

bool py_is_digit(std::string_view s) { return all_ascii(s, [](char c) { return c >= '0' && c <= '9'; }); }
bool py_is_alpha(std::string_view s) {
  return all_ascii(s, [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); });
}
bool py_is_alnum(std::string_view s) {
  return all_ascii(s, [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); });
}
bool py_is_upper(std::string_view s) { return is_case(s, true); }
bool py_is_lower(std::string_view s) { return is_case(s, false); }

}  // namespace infer::jinja
