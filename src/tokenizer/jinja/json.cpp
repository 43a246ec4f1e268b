#include "tokenizer/jinja/json.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "format/metadata.hpp"
#include "tokenizer/jinja/py_string.hpp"

namespace infer::jinja {

namespace {

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_length(s, i);
    const uint32_t c = decode_utf8_char(s.substr(i, n));
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7e && c != 0x7f)) {
          if (c > 0xffff) {
            const uint32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
          }
          out += buf;
        } else {
          out.append(s.substr(i, n));
        }
    }
    i += n;
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return py_repr_float(d);
}

// The text of a dict key as json.dumps writes it.
std::string key_text(const Value& k) {
  switch (k.type()) {
    case Value::Type::string: return k.as_string();
    case Value::Type::boolean: return k.as_bool() ? "true" : "false";
    case Value::Type::none: return "null";
    case Value::Type::integer: return std::to_string(k.as_int());
    case Value::Type::floating: return float_json(k.as_float());
    default: runtime_error(std::string("keys must be str, int, float, bool or None, not ") + k.type_name());
  }
}

class Dumper {
 public:
  Dumper(const JsonDumpOptions& o, int max_depth) : o_(o), max_depth_(max_depth) {
    item_sep_ = o.item_separator ? *o.item_separator : o.indent ? "," : ", ";
    key_sep_ = o.key_separator ? *o.key_separator : ": ";
  }

  void dump(std::string& out, const Value& v, int depth) {
    if (depth > max_depth_) throw Error(Error::Kind::limit, "tojson: nesting deeper than " + std::to_string(max_depth_));
    switch (v.type()) {
      case Value::Type::none: out += "null"; return;
      case Value::Type::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Value::Type::integer: out += std::to_string(v.as_int()); return;
      case Value::Type::floating: out += float_json(v.as_float()); return;
      case Value::Type::string: dump_string(out, v.as_string(), o_.ensure_ascii); return;
      case Value::Type::list: {
        if (v.is_generator()) runtime_error("Object of type generator is not JSON serializable");
        const auto& items = v.as_list().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep_;
          newline(out, depth + 1);
          dump(out, items[i], depth + 1);
        }
        newline(out, depth);
        out += ']';
        return;
      }
      case Value::Type::dict: {
        std::vector<const Dict::Entry*> entries;
        for (const auto& e : v.as_dict().entries()) entries.push_back(&e);
        if (entries.empty()) {
          out += "{}";
          return;
        }
        if (o_.sort_keys)
          std::stable_sort(entries.begin(), entries.end(), [](const Dict::Entry* a, const Dict::Entry* b) { return less(a->first, b->first); });
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep_;
          newline(out, depth + 1);
          dump_string(out, key_text(entries[i]->first), o_.ensure_ascii);
          out += key_sep_;
          dump(out, entries[i]->second, depth + 1);
        }
        newline(out, depth);
        out += '}';
        return;
      }
      default:
        runtime_error(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
    }
  }

 private:
  void newline(std::string& out, int depth) const {
    if (!o_.indent) return;
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *o_.indent;
  }

  const JsonDumpOptions& o_;
  int max_depth_;
  std::string item_sep_, key_sep_;
};

class Parser {
 public:
  Parser(std::string_view text, int max_depth) : s_(text), max_depth_(max_depth) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Error::Kind::syntax, "JSON at byte " + std::to_string(pos_) + ": " + what);
  }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > max_depth_) fail("nesting deeper than " + std::to_string(max_depth_));
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (literal("true")) return Value(true);
    if (literal("false")) return Value(false);
    if (literal("null")) return Value::none();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Value object(int depth) {
    ++pos_;
    Dict d;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Value::dict(std::move(d));
    }
    for (;;) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
      std::string key = string();
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':'");
      ++pos_;
      d.set(Value(std::move(key)), value(depth + 1));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return Value::dict(std::move(d));
      }
      fail("expected ',' or '}'");
    }
  }

  Value array(int depth) {
    ++pos_;
    std::vector<Value> items;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Value::list(std::move(items));
    }
    for (;;) {
      items.push_back(value(depth + 1));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return Value::list(std::move(items));
      }
      fail("expected ',' or ']'");
    }
  }

  // A string literal: its end found here, its escapes decoded by format/'s json_unquote.
  std::string string() {
    const size_t start = pos_++;
    while (pos_ < s_.size() && s_[pos_] != '"') pos_ += s_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    auto text = json_unquote(s_.substr(start, pos_ - start));
    if (!text.ok()) {
      pos_ = start;
      fail(text.status().message());
    }
    return std::move(text).value();
  }

  Value number() {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    bool is_float = false;
    auto digits = [&] {
      const size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == d) fail("expected a digit");
    };
    digits();
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      digits();
      is_float = true;
    }
    const std::string text(s_.substr(start, pos_ - start));
    if (!is_float) {
      errno = 0;
      const long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) return Value(static_cast<int64_t>(v));
    }
    return Value(std::strtod(text.c_str(), nullptr));
  }

  std::string_view s_;
  size_t pos_ = 0;
  int max_depth_;
};

}  // namespace

std::string json_dump(const Value& value, const JsonDumpOptions& options, int max_depth) {
  std::string out;
  Dumper(options, max_depth).dump(out, value, 0);
  return out;
}

Value json_parse(std::string_view text, int max_depth) { return Parser(text, max_depth).document(); }

}  // namespace infer::jinja
