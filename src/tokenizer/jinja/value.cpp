#include "tokenizer/jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/py_string.hpp"

namespace infer::jinja {

Value Value::undefined(std::string hint) { return Value(Storage(Undefined{std::make_shared<const std::string>(std::move(hint))})); }

namespace {

int nesting_of(const Value& v) {
  if (v.is_list()) return v.as_list().depth;
  if (v.is_dict()) return v.as_dict().depth();
  return 0;
}

int checked_depth(int deepest_inside) {
  if (deepest_inside + 1 > kMaxValueNesting)
    throw Error(Error::Kind::limit, "lists and dicts nested deeper than " + std::to_string(kMaxValueNesting) + " levels");
  return deepest_inside + 1;
}

std::shared_ptr<List> make_list(std::vector<Value> items) {
  int deepest = 0;
  for (const Value& v : items) deepest = std::max(deepest, nesting_of(v));
  auto l = std::make_shared<List>();
  l->depth = checked_depth(deepest);
  l->items = std::move(items);
  return l;
}

}  // namespace

Value Value::list(std::vector<Value> items, bool tuple) {
  auto l = make_list(std::move(items));
  l->is_tuple = tuple;
  return Value(std::shared_ptr<const List>(std::move(l)));
}

Value Value::generator(std::vector<Value> items) {
  auto l = make_list(std::move(items));
  l->is_generator = true;
  return Value(std::shared_ptr<const List>(std::move(l)));
}

bool Value::is_generator() const noexcept { return is_list() && as_list().is_generator; }

Value Value::markup(std::string s) {
  return Value(Storage(std::in_place_index<kMarkup>, Markup{std::make_shared<const std::string>(std::move(s))}));
}

Value Value::dict(Dict d) {
  int deepest = 0;
  for (const auto& [k, v] : d.entries_) deepest = std::max({deepest, nesting_of(k), nesting_of(v)});
  d.depth_ = checked_depth(deepest);
  return Value(std::shared_ptr<const Dict>(std::make_shared<Dict>(std::move(d))));
}

const std::string& Value::undefined_hint() const {
  static const std::string kNone = "undefined value";
  const auto& u = std::get<0>(v_);
  return u.hint ? *u.hint : kNone;
}

bool Value::truthy() const {
  switch (type()) {
    case Type::undefined:
    case Type::none: return false;
    case Type::boolean: return as_bool();
    case Type::integer: return as_int() != 0;
    case Type::floating: return as_float() != 0.0;
    case Type::string: return !as_string().empty();
    case Type::list: return as_list().is_generator || !as_list().items.empty();
    case Type::dict: return !as_dict().empty();
    case Type::ns:
    case Type::callable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (type()) {
    case Type::undefined: return "Undefined";
    case Type::none: return "NoneType";
    case Type::boolean: return "bool";
    case Type::integer: return "int";
    case Type::floating: return "float";
    case Type::string: return "str";
    case Type::list: return as_list().is_generator ? "generator" : as_list().is_tuple ? "tuple" : "list";
    case Type::dict: return "dict";
    case Type::ns: return "Namespace";
    case Type::callable: return "function";
  }
  return "?";
}

std::string py_repr_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e+17": the shortest digits that read back the same
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_at = sci.find('e');
  const int exponent = std::stoi(sci.substr(e_at + 1));
  std::string digits = sci.substr(0, e_at);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += e;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits) out = digits + std::string(int_digits - digits.size(), '0') + ".0";
    else out = digits.substr(0, int_digits) + "." + digits.substr(int_digits);
  }
  return sign + out;
}

std::string py_repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_length(s, i);
    const uint32_t c = decode_utf8_char(s.substr(i, n));
    i += n;
    char buf[16];
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || (c >= 0x7f && c < 0xa1) || c == 0xad) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (!py_is_printable(c)) {
      std::snprintf(buf, sizeof buf, c > 0xffff ? "\\U%08x" : "\\u%04x", c);
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

namespace {

// Printing follows namespaces, which can hold themselves: the depth is bounded here.
constexpr int kMaxReprDepth = 2 * kMaxValueNesting;

void repr_to(std::string& out, const Value& v, int depth);

void repr_items_to(std::string& out, const List& l, int depth) {
  if (l.is_generator) {
    out += "<generator object>";
    return;
  }
  out += l.is_tuple ? '(' : '[';
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    repr_to(out, l.items[i], depth + 1);
  }
  if (l.is_tuple && l.items.size() == 1) out += ',';
  out += l.is_tuple ? ')' : ']';
}

void repr_dict_to(std::string& out, const Dict& d, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    repr_to(out, k, depth + 1);
    out += ": ";
    repr_to(out, v, depth + 1);
  }
  out += '}';
}

void repr_to(std::string& out, const Value& v, int depth) {
  if (depth > kMaxReprDepth) throw Error(Error::Kind::limit, "a value nested too deeply to print (a namespace holding itself?)");
  switch (v.type()) {
    case Value::Type::string: out += py_repr_string(v.as_string()); break;
    case Value::Type::list: repr_items_to(out, v.as_list(), depth); break;
    case Value::Type::dict: repr_dict_to(out, v.as_dict(), depth); break;
    case Value::Type::ns:
      out += "<Namespace ";
      repr_dict_to(out, v.as_namespace().attributes, depth);
      out += '>';
      break;
    case Value::Type::undefined: out += "Undefined"; break;  // jinja2's Undefined.__repr__
    default: out += v.str(); break;
  }
}

}  // namespace

std::string Value::str() const {
  switch (type()) {
    case Type::undefined: return "";
    case Type::none: return "None";
    case Type::boolean: return as_bool() ? "True" : "False";
    case Type::integer: return std::to_string(as_int());
    case Type::floating: return py_repr_float(as_float());
    case Type::string: return as_string();
    case Type::list:
    case Type::dict: return repr();
    case Type::ns: return repr();
    case Type::callable: return "<function " + as_callable().name + ">";
  }
  return "";
}

std::string Value::repr() const {
  std::string out;
  repr_to(out, *this, 0);
  return out;
}

bool equals(const Value& a, const Value& b) {
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return a.to_int() == b.to_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::undefined:
    case T::none: return true;
    case T::string: return a.as_string() == b.as_string();
    case T::list: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.is_generator || y.is_generator) return &x == &y;
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals(x.items[i], y.items[i])) return false;
      return true;
    }
    case T::dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case T::ns: return &a.as_namespace() == &b.as_namespace();
    case T::callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() < b.to_double();
    return a.to_int() < b.to_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps code point order
  if (a.is_list() && b.is_list() && a.as_list().is_tuple == b.as_list().is_tuple && !a.is_generator() && !b.is_generator()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined())
    runtime_error((a.is_undefined() ? a : b).undefined_hint());
  runtime_error(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" + b.type_name() + "'");
}

const Value* Dict::find(const Value& key) const {
  for (const auto& e : entries_)
    if (equals(e.first, key)) return &e.second;
  return nullptr;
}

const Value* Dict::find_str(std::string_view key) const {
  for (const auto& e : entries_)
    if (e.first.is_string() && e.first.as_string() == key) return &e.second;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& e : entries_) {
    if (equals(e.first, key)) {
      e.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

}  // namespace infer::jinja
