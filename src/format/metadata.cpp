#include "format/metadata.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace infer {

const char* value_type_name(ValueType t) noexcept {
  switch (t) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::f32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::u64: return "u64";
    case ValueType::i64: return "i64";
    case ValueType::f64: return "f64";
  }
  return "?";
}

uint32_t value_type_size(ValueType t) noexcept {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
    case ValueType::string: case ValueType::array: return 0;
  }
  return 0;
}

namespace {

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads packed element i of `a` as a Value of the element type.
std::optional<Value> packed_at(const Array& a, uint64_t i) {
  const uint32_t size = value_type_size(a.elem_type);
  if (size == 0 || i >= a.count) return std::nullopt;
  const uint8_t* p = a.packed.data() + i * size;
  switch (a.elem_type) {
    case ValueType::u8: return Value(load<uint8_t>(p));
    case ValueType::i8: return Value(load<int8_t>(p));
    case ValueType::u16: return Value(load<uint16_t>(p));
    case ValueType::i16: return Value(load<int16_t>(p));
    case ValueType::u32: return Value(load<uint32_t>(p));
    case ValueType::i32: return Value(load<int32_t>(p));
    case ValueType::f32: return Value(load<float>(p));
    case ValueType::boolean: return Value(*p != 0);
    case ValueType::u64: return Value(load<uint64_t>(p));
    case ValueType::i64: return Value(load<int64_t>(p));
    case ValueType::f64: return Value(load<double>(p));
    default: return std::nullopt;
  }
}

// Shortest decimal that reads back to the same value (as a float for f32, a double for f64).
void append_number(std::string& out, double v, bool is_f32, bool json) {
  if (!std::isfinite(v)) {
    out += json ? "null" : (std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
    return;
  }
  char buf[40];
  for (int precision = is_f32 ? 6 : 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    const double back = std::strtod(buf, nullptr);
    if (is_f32 ? static_cast<float>(back) == static_cast<float>(v) : back == v) break;
  }
  out += buf;
}

void append_utf8_escaped(std::string& out, std::string_view s, bool json) {
  static const char* hex = "0123456789abcdef";
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n') { out += "\\n"; ++i; }
    else if (c == '\t') { out += "\\t"; ++i; }
    else if (c == '\r') { out += "\\r"; ++i; }
    else if (c < 0x20 || c == 0x7f) {
      out += json ? "\\u00" : "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // Validate one UTF-8 sequence; copy it whole or replace one byte with U+FFFD.
      size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
      if (c >= 0xf5) len = 0;
      bool valid = len > 0 && i + len <= s.size();
      for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (valid && len == 3) {
        unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
        valid = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
      }
      if (valid && len == 4) {
        unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
        valid = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
      }
      if (valid) {
        out.append(s.substr(i, len));
        i += len;
      } else {
        out += "\xef\xbf\xbd";
        ++i;
      }
    }
  }
}

void render(std::string& out, const Value& v, size_t max_items, bool json);

void render_array(std::string& out, const Array& a, size_t max_items, bool json) {
  out += '[';
  const uint64_t shown = std::min<uint64_t>(a.count, max_items);
  for (uint64_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (a.elem_type == ValueType::string) {
      render(out, Value(a.strings[i]), max_items, json);
    } else if (a.elem_type == ValueType::array) {
      render_array(out, a.arrays[i], max_items, json);
    } else if (auto e = packed_at(a, i)) {
      render(out, *e, max_items, json);
    }
  }
  if (!json && shown < a.count) {
    out += shown ? ", ... (" : "... (";
    out += std::to_string(a.count) + " items)";
  }
  out += ']';
}

void render(std::string& out, const Value& v, size_t max_items, bool json) {
  switch (v.type()) {
    case ValueType::string:
      out += '"';
      append_utf8_escaped(out, *v.as_string(), json);
      out += '"';
      break;
    case ValueType::array: render_array(out, *v.as_array(), max_items, json); break;
    case ValueType::boolean: out += *v.get_if<bool>() ? "true" : "false"; break;
    case ValueType::f32: case ValueType::f64: append_number(out, *v.as_number(), v.type() == ValueType::f32, json); break;
    case ValueType::u64: out += std::to_string(*v.get_if<uint64_t>()); break;
    default: out += std::to_string(*v.as_integer()); break;
  }
}

}  // namespace

std::optional<double> Array::number_at(uint64_t i) const {
  auto v = packed_at(*this, i);
  return v ? v->as_number() : std::nullopt;
}

std::optional<int64_t> Array::integer_at(uint64_t i) const {
  auto v = packed_at(*this, i);
  return v ? v->as_integer() : std::nullopt;
}

Array Array::of_strings(std::vector<std::string> values) {
  Array a;
  a.elem_type = ValueType::string;
  a.count = values.size();
  a.strings = std::move(values);
  return a;
}

Array Array::of_arrays(std::vector<Array> values) {
  Array a;
  a.elem_type = ValueType::array;
  a.count = values.size();
  a.arrays = std::move(values);
  return a;
}

std::optional<int64_t> Value::as_integer() const noexcept {
  return std::visit(
      [](const auto& x) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (x > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
          return static_cast<int64_t>(x);
        } else if constexpr (std::is_integral_v<T>) {
          return static_cast<int64_t>(x);
        } else {
          return std::nullopt;
        }
      },
      v_);
}

std::optional<double> Value::as_number() const noexcept {
  return std::visit(
      [](const auto& x) -> std::optional<double> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<T>) return static_cast<double>(x);
        else return std::nullopt;
      },
      v_);
}

void Metadata::set(std::string key, Value value) {
  if (auto it = index_.find(key); it != index_.end()) {
    entries_[it->second].value = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.push_back({std::move(key), std::move(value)});
}

bool Metadata::insert(std::string key, Value value) {
  if (index_.count(key)) return false;
  index_.emplace(key, entries_.size());
  entries_.push_back({std::move(key), std::move(value)});
  return true;
}

bool Metadata::erase(std::string_view key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].key, i);
  return true;
}

const Value* Metadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].value;
}

std::optional<int64_t> Metadata::get_integer(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type() == ValueType::boolean) return std::nullopt;
  return v->as_integer();
}

std::optional<double> Metadata::get_number(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type() == ValueType::boolean) return std::nullopt;
  return v->as_number();
}

std::optional<bool> Metadata::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (const bool* b = v->get_if<bool>()) return *b;
  return std::nullopt;
}

const std::string* Metadata::get_string(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_string() : nullptr;
}

const Array* Metadata::get_array(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_array() : nullptr;
}

std::string value_to_string(const Value& v, size_t max_items) {
  std::string out;
  render(out, v, max_items, false);
  return out;
}

std::string value_to_json(const Value& v, size_t max_items) {
  std::string out;
  render(out, v, max_items, true);
  return out;
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  append_utf8_escaped(out, s, true);
  out += '"';
  return out;
}

Result<std::string> json_unquote(std::string_view s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') return invalid_argument("not a JSON string (\"...\")");
  std::string out;
  const auto hex4 = [&](size_t at, uint32_t& v) {
    if (at + 4 > s.size() - 1) return false;
    v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const char c = s[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  };
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') return invalid_argument("an unescaped '\"' inside the JSON string");
    if (static_cast<unsigned char>(c) < 0x20) return invalid_argument("a control character inside the JSON string");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i + 1 > s.size() - 1) return invalid_argument("the JSON string ends inside an escape");
    switch (s[i]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp = 0;
        if (!hex4(i + 1, cp)) return invalid_argument("\\u needs four hex digits");
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo = 0;
          if (i + 2 >= s.size() - 1 || s[i + 1] != '\\' || s[i + 2] != 'u' || !hex4(i + 3, lo) || lo < 0xDC00 || lo > 0xDFFF)
            return invalid_argument("a lone UTF-16 high surrogate in \\u escapes");
          i += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return invalid_argument("a lone UTF-16 low surrogate in \\u escapes");
        }
        if (cp < 0x80) {
          out += static_cast<char>(cp);
        } else if (cp < 0x800) {
          out += static_cast<char>(0xC0 | (cp >> 6));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          out += static_cast<char>(0xE0 | (cp >> 12));
          out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          out += static_cast<char>(0xF0 | (cp >> 18));
          out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
          out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        }
        break;
      }
      default: return invalid_argument(std::string("unknown escape \\") + s[i] + " in the JSON string");
    }
  }
  return out;
}

}  // namespace infer
