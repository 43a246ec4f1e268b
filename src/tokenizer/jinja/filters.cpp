// jinja2's filters and tests (jinja2/filters.py, jinja2/tests.py), with transformers' tojson.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <unordered_map>
#include <utility>

#include "tokenizer/jinja/builtins.hpp"
#include "tokenizer/jinja/interpreter.hpp"
#include "tokenizer/jinja/json.hpp"
#include "tokenizer/jinja/operators.hpp"
#include "tokenizer/jinja/py_string.hpp"

namespace infer::jinja {

BoundArgs::BoundArgs(std::string_view function, Args& args, std::initializer_list<std::string_view> names)
    : values_(names.size()) {
  const std::vector<std::string_view> n(names);
  if (args.positional.size() > n.size())
    runtime_error(std::string(function) + "() takes at most " + std::to_string(n.size()) + " argument(s) (" +
                  std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = std::move(args.positional[i]);
  for (auto& [key, value] : args.keyword) {
    const auto it = std::find(n.begin(), n.end(), key);
    if (it == n.end()) runtime_error(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    auto& slot = values_[static_cast<size_t>(it - n.begin())];
    if (slot) runtime_error(std::string(function) + "() got multiple values for argument '" + key + "'");
    slot = std::move(value);
  }
}

const Value& BoundArgs::operator[](size_t i) const {
  static const Value kMissing;
  return values_[i] ? *values_[i] : kMissing;
}

std::string text_of(const Value& v) { return v.str(); }

Value map_text(std::string_view function, Args& args, std::string (*f)(std::string_view), std::string_view text) {
  BoundArgs b(function, args, {});
  return Value(f(text));
}

int64_t int_arg(const Value& v, std::string_view what) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  runtime_error(std::string(what) + ": an integer is required, not " + v.type_name());
}

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, Args&);
using TestFn = bool (*)(Interpreter&, const Value&, Args&);

std::function<Value(const Value&)> attribute_getter(Interpreter& in, const Value& attribute) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const std::string& p : py_split(attribute.as_string(), std::string("."), -1, false)) {
      if (py_is_digit(p) && p.size() < 18) parts.emplace_back(static_cast<int64_t>(std::strtoll(p.c_str(), nullptr, 10)));
      else parts.emplace_back(p);
    }
  } else {
    parts.push_back(attribute);
  }
  return [&in, parts](const Value& item) {
    Value v = item;
    for (const Value& p : parts) v = in.get_item(v, p);
    return v;
  };
}

// A sort key: the value, lower-cased when it is a string and case does not count.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.as_string()));
  return v;
}

size_t length_of(const Value& v) {
  switch (v.type()) {
    case Value::Type::string: return char_count(v.as_string());
    case Value::Type::list:
      if (v.is_generator()) runtime_error("object of type 'generator' has no len()");
      return v.as_list().items.size();
    case Value::Type::dict: return v.as_dict().size();
    case Value::Type::undefined: return 0;
    default: runtime_error(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

Value f_length(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("length", a, {});
  return Value(static_cast<int64_t>(length_of(v)));
}

Value f_default(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("default", a, {"default_value", "boolean"});
  const bool boolean = b.get(1, false).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return b.get(0, Value(""));
  return v;
}

Value f_trim(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("trim", a, {"chars"});
  std::optional<std::string> chars;
  if (b.given(0) && !b[0].is_none()) chars = text_of(b[0]);
  return Value(py_strip(text_of(v), chars, true, true));
}

Value f_upper(Interpreter&, const Value& v, Args& a) { return map_text("upper", a, py_upper, text_of(v)); }
Value f_lower(Interpreter&, const Value& v, Args& a) { return map_text("lower", a, py_lower, text_of(v)); }
Value f_capitalize(Interpreter&, const Value& v, Args& a) { return map_text("capitalize", a, py_capitalize, text_of(v)); }
Value f_title(Interpreter&, const Value& v, Args& a) { return map_text("title", a, jinja_title, text_of(v)); }

Value f_string(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("string", a, {});
  return Value(text_of(v));
}

Value f_safe(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("safe", a, {});
  return v.is_markup() ? v : Value::markup(text_of(v));
}

Value f_escape(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("escape", a, {});
  return v.is_markup() ? v : Value::markup(html_escape(text_of(v)));
}

Value f_replace(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("replace", a, {"old", "new", "count"});
  const int64_t count = b.given(2) && !b[2].is_none() ? int_arg(b[2], "replace count") : -1;
  std::string out = py_replace(text_of(v), text_of(b[0]), text_of(b[1]), count);
  in.check_size(out.size());
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("join", a, {"d", "attribute"});
  const std::string sep = text_of(b.get(0, Value("")));
  std::vector<Value> items = in.iterate(v);
  if (b.given(1) && !b[1].is_none()) {
    auto get = attribute_getter(in, b[1]);
    for (Value& item : items) item = get(item);
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += text_of(items[i]);
    in.check_size(out.size());
  }
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_list(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("list", a, {});
  return Value::list(in.iterate(v));
}

Value f_items(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) runtime_error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.as_dict().entries()) out.push_back(Value::list({k, val}, true));
  return Value::generator(std::move(out));
}

Value f_first(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("first", a, {});
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("last", a, {});
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_reverse(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("reverse", a, {});
  if (v.is_string()) return *slice_of(v, Value::none(), Value::none(), Value(int64_t{-1}));
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::generator(std::move(items));
}

Value f_tojson(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = b.get(0, false).truthy();
  if (b.given(1) && !b[1].is_none()) {
    if (b[1].is_string()) o.indent = b[1].as_string();
    else o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(b[1], "tojson indent"), 0, 64)), ' ');
  }
  if (b.given(2) && !b[2].is_none()) {
    std::vector<Value> seps = in.iterate(b[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) runtime_error("tojson separators: two strings expected");
    o.item_separator = seps[0].as_string();
    o.key_separator = seps[1].as_string();
  }
  o.sort_keys = b.get(3, false).truthy();
  std::string out = json_dump(v, o);
  in.check_size(out.size());
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_dictsort(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) runtime_error("dictsort: a mapping is required");
  const bool case_sensitive = b.get(0, false).truthy();
  const std::string by = text_of(b.get(1, Value("key")));
  if (by != "key" && by != "value") runtime_error("You can only sort by either \"key\" or \"value\"");
  const size_t pos = by == "key" ? 0 : 1;
  std::vector<Value> items;
  for (const auto& [k, val] : v.as_dict().entries()) items.push_back(Value::list({k, val}, true));
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return less(sort_key(x.as_list().items[pos], case_sensitive), sort_key(y.as_list().items[pos], case_sensitive));
  });
  if (b.get(2, false).truthy()) std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_sort(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = b.get(0, false).truthy();
  const bool case_sensitive = b.get(1, false).truthy();
  std::vector<Value> items = in.iterate(v);
  std::function<Value(const Value&)> key = [](const Value& x) { return x; };
  if (b.given(2) && !b[2].is_none()) key = attribute_getter(in, b[2]);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = sort_key(key(x), case_sensitive), ky = sort_key(key(y), case_sensitive);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  return Value::list(std::move(items));
}

Value f_unique(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("unique", a, {"case_sensitive", "attribute"});
  const bool case_sensitive = b.get(0, false).truthy();
  std::function<Value(const Value&)> key = [](const Value& x) { return x; };
  if (b.given(1) && !b[1].is_none()) key = attribute_getter(in, b[1]);
  std::vector<Value> out, seen;
  for (const Value& item : in.iterate(v)) {
    const Value k = sort_key(key(item), case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    in.charge(seen.size());
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, Args& a, bool max) {
  BoundArgs b(max ? "max" : "min", a, {"case_sensitive", "attribute"});
  const bool case_sensitive = b.get(0, false).truthy();
  std::function<Value(const Value&)> key = [](const Value& x) { return x; };
  if (b.given(1) && !b[1].is_none()) key = attribute_getter(in, b[1]);
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value ki = sort_key(key(items[i]), case_sensitive), kb = sort_key(key(items[best]), case_sensitive);
    if (max ? less(kb, ki) : less(ki, kb)) best = i;
  }
  return items[best];
}

Value f_max(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, Args& a) { return min_max(in, v, a, false); }

Value f_sum(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("sum", a, {"attribute", "start"});
  Value total = b.get(1, Value(int64_t{0}));
  std::function<Value(const Value&)> key = [](const Value& x) { return x; };
  if (b.given(0) && !b[0].is_none()) key = attribute_getter(in, b[0]);
  for (const Value& item : in.iterate(v)) total = binary_op(in, "+", total, key(item));
  return total;
}

Value f_abs(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) return v.to_int() < 0 ? negate(v) : Value(v.to_int());
  runtime_error(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

// Python's float(str): optional whitespace and sign, digits with underscores, inf, nan.
std::optional<double> parse_float(std::string text) {
  text = py_strip(text, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_' && i > 0 && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(text[i + 1])))
      continue;
    clean += text[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

Value f_float(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("float", a, {"default"});
  if (v.is_number()) return Value(v.to_double());
  if (v.is_string())
    if (auto d = parse_float(v.as_string())) return Value(*d);
  return b.get(0, Value(0.0));
}

Value f_int(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("int", a, {"default", "base"});
  const Value fallback = b.get(0, Value(int64_t{0}));
  if (v.is_int() || v.is_bool()) return Value(v.to_int());
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return fallback;
  const int64_t base = b.given(1) ? int_arg(b[1], "int base") : 10;
  std::string text = py_strip(v.as_string(), std::nullopt, true, true);
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  if (!text.empty() && base >= 2 && base <= 36) {
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(text.c_str(), &end, static_cast<int>(base));
    if (end == text.c_str() + text.size() && errno == 0 && text.find_first_of(" \t") == std::string::npos) return Value(static_cast<int64_t>(n));
  }
  if (auto d = parse_float(v.as_string()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) return Value(static_cast<int64_t>(*d));
  return fallback;
}

Value f_round(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("round", a, {"precision", "method"});
  const int64_t precision = std::clamp<int64_t>(b.given(0) ? int_arg(b[0], "round precision") : 0, -300, 300);
  const std::string method = text_of(b.get(1, Value("common")));
  if (!v.is_number()) runtime_error(std::string("round: a number is required, not ") + v.type_name());
  if (method == "common" && !v.is_float() && precision >= 0) return Value(v.to_int());  // round(int) is an int
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.to_double() * scale;
  double r;
  if (method == "common") r = std::nearbyint(x);  // Python's round(): halves to even
  else if (method == "ceil") r = std::ceil(x);
  else if (method == "floor") r = std::floor(x);
  else runtime_error("method must be common, ceil or floor");
  return Value(r / scale);
}

Value f_format(Interpreter& in, const Value& v, Args& a) {
  if (!a.positional.empty() && !a.keyword.empty()) runtime_error("can't handle positional and keyword arguments at the same time");
  if (!a.keyword.empty()) {
    Dict d;
    for (auto& [k, val] : a.keyword) d.set(Value(k), val);
    return Value(printf_format(in, text_of(v), Value::dict(std::move(d))));
  }
  return Value(printf_format(in, text_of(v), Value::list(a.positional, true)));
}

Value f_indent(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("indent", a, {"width", "first", "blank"});
  std::string indentation;
  const Value width = b.get(0, Value(int64_t{4}));
  if (width.is_string()) indentation = width.as_string();
  else indentation.assign(static_cast<size_t>(std::clamp<int64_t>(int_arg(width, "indent width"), 0, 1024)), ' ');
  const bool first = b.get(1, false).truthy(), blank = b.get(2, false).truthy();
  std::vector<std::string> lines = py_splitlines(text_of(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indentation;
    }
    out += lines[i];
    in.check_size(out.size());
  }
  if (first) out = indentation + out;
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, Args& a) {
  BoundArgs b("wordcount", a, {});
  int64_t words = 0;
  bool in_word = false;
  for (unsigned char c : text_of(v)) {
    const bool word_char = std::isalnum(c) || c == '_' || c >= 0x80;
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value(words);
}

Value f_batch(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("batch", a, {"linecount", "fill_with"});
  const int64_t n = int_arg(b[0], "batch linecount");
  if (n <= 0) runtime_error("batch: linecount must be positive");
  std::vector<Value> batches, current;
  for (const Value& item : in.iterate(v)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == n) batches.push_back(Value::list(std::exchange(current, {})));
  }
  if (!current.empty()) {
    if (b.given(1) && !b[1].is_none())
      while (static_cast<int64_t>(current.size()) < n) current.push_back(b[1]);
    batches.push_back(Value::list(std::move(current)));
  }
  return Value::generator(std::move(batches));
}

Value f_attr(Interpreter& in, const Value& v, Args& a) {
  BoundArgs b("attr", a, {"name"});
  // getattr() alone: a dict's keys are not attributes here.
  const std::string name = text_of(b[0]);
  if (v.is_dict()) {
    if (auto m = bound_method(v, name)) return *m;
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  return in.get_attr(v, name);
}

// select / reject: the items for which the test (or truthiness) holds, or does not.
Value select_items(Interpreter& in, const Value& v, Args& a, bool keep, bool by_attribute) {
  std::vector<Value> rest = std::move(a.positional);
  std::function<Value(const Value&)> key = [](const Value& x) { return x; };
  if (by_attribute) {
    if (rest.empty()) runtime_error("selectattr / rejectattr need an attribute");
    key = attribute_getter(in, rest.front());
    rest.erase(rest.begin());
  }
  if (!v.truthy()) return Value::generator({});  // jinja2 iterates nothing when the value is false
  std::string test;
  if (!rest.empty()) {
    test = text_of(rest.front());
    rest.erase(rest.begin());
    if (test_support(test) != Support::implemented) runtime_error("No test named '" + test + "'");
  }
  std::vector<Value> out;
  for (const Value& item : in.iterate(v)) {
    const Value x = key(item);
    bool pass;
    if (test.empty()) {
      pass = x.truthy();
    } else {
      Args targs{rest, a.keyword};
      pass = apply_test(in, test, x, targs);
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, Args& a) { return select_items(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, Args& a) { return select_items(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, Args& a) { return select_items(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, Args& a) { return select_items(in, v, a, false, true); }

Value f_map(Interpreter& in, const Value& v, Args& a) {
  std::vector<Value> out;
  if (!v.truthy()) return Value::generator({});
  const auto attribute = std::find_if(a.keyword.begin(), a.keyword.end(), [](const auto& kv) { return kv.first == "attribute"; });
  if (attribute != a.keyword.end()) {
    auto get = attribute_getter(in, attribute->second);
    std::optional<Value> fallback;
    for (const auto& [k, val] : a.keyword) {
      if (k == "default") fallback = val;
      else if (k != "attribute") runtime_error("map() got an unexpected keyword argument '" + k + "'");
    }
    for (const Value& item : in.iterate(v)) {
      Value x = get(item);
      out.push_back(x.is_undefined() && fallback ? *fallback : x);
    }
    return Value::generator(std::move(out));
  }
  if (a.positional.empty()) runtime_error("map requires a filter argument");
  const std::string filter = text_of(a.positional.front());
  if (filter_support(filter) != Support::implemented) runtime_error("No filter named '" + filter + "'");
  std::vector<Value> rest(a.positional.begin() + 1, a.positional.end());
  for (const Value& item : in.iterate(v)) {
    Args fargs{rest, a.keyword};
    out.push_back(apply_filter(in, filter, item, fargs));
  }
  return Value::generator(std::move(out));
}

const std::unordered_map<std::string_view, FilterFn>& filters() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},         {"capitalize", f_capitalize}, {"count", f_length},
      {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},     {"e", f_escape},
      {"escape", f_escape},     {"first", f_first},       {"float", f_float},           {"format", f_format},
      {"indent", f_indent},     {"int", f_int},           {"items", f_items},           {"join", f_join},
      {"last", f_last},         {"length", f_length},     {"list", f_list},             {"lower", f_lower},
      {"map", f_map},           {"max", f_max},           {"min", f_min},               {"reject", f_reject},
      {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},     {"round", f_round},
      {"safe", f_safe},         {"select", f_select},     {"selectattr", f_selectattr}, {"sort", f_sort},
      {"string", f_string},     {"sum", f_sum},           {"title", f_title},           {"tojson", f_tojson},
      {"trim", f_trim},         {"unique", f_unique},     {"upper", f_upper},           {"wordcount", f_wordcount},
  };
  return table;
}

// --- tests
bool t_defined(Interpreter&, const Value& v, Args&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, Args&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, Args&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, Args&) { return v.is_bool(); }
bool t_false(Interpreter&, const Value& v, Args&) { return v.is_bool() && !v.as_bool(); }
bool t_true(Interpreter&, const Value& v, Args&) { return v.is_bool() && v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, Args&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, Args&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, Args&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, Args&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, Args&) { return v.is_dict(); }
bool t_callable(Interpreter&, const Value& v, Args&) { return v.is_callable(); }
bool t_escaped(Interpreter&, const Value&, Args&) { return false; }
bool t_iterable(Interpreter&, const Value& v, Args&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }
// len() and [] both work: str, list, tuple, dict, and jinja2's Undefined.
bool t_sequence(Interpreter&, const Value& v, Args&) {
  return v.is_string() || (v.is_list() && !v.is_generator()) || v.is_dict() || v.is_undefined();
}
bool t_lower(Interpreter&, const Value& v, Args&) { return py_is_lower(text_of(v)); }
bool t_upper(Interpreter&, const Value& v, Args&) { return py_is_upper(text_of(v)); }

bool t_even(Interpreter&, const Value& v, Args&) { return int_arg(v, "even") % 2 == 0; }
bool t_odd(Interpreter&, const Value& v, Args&) { return int_arg(v, "odd") % 2 != 0; }

const Value& one_arg(Args& a, const char* test) {
  if (a.positional.size() != 1 || !a.keyword.empty()) runtime_error(std::string("the test '") + test + "' takes one argument");
  return a.positional[0];
}

bool t_divisibleby(Interpreter& in, const Value& v, Args& a) {
  const Value& n = one_arg(a, "divisibleby");
  return equals(binary_op(in, "%", v, n), Value(int64_t{0}));
}
bool t_eq(Interpreter&, const Value& v, Args& a) { return equals(v, one_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, Args& a) { return !equals(v, one_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, Args& a) { return compare_op("<", v, one_arg(a, "lt")); }
bool t_le(Interpreter&, const Value& v, Args& a) { return compare_op("<=", v, one_arg(a, "le")); }
bool t_gt(Interpreter&, const Value& v, Args& a) { return compare_op(">", v, one_arg(a, "gt")); }
bool t_ge(Interpreter&, const Value& v, Args& a) { return compare_op(">=", v, one_arg(a, "ge")); }
bool t_in(Interpreter&, const Value& v, Args& a) { return contains(one_arg(a, "in"), v); }
bool t_sameas(Interpreter&, const Value& v, Args& a) {
  const Value& other = one_arg(a, "sameas");
  if (v.type() != other.type()) return false;
  if (v.is_list() || v.is_dict() || v.is_string()) return equals(v, other) && v.repr() == other.repr();
  return equals(v, other);
}
bool t_filter(Interpreter&, const Value& v, Args&) { return v.is_string() && filter_support(v.as_string()) == Support::implemented; }
bool t_test(Interpreter&, const Value& v, Args&) { return v.is_string() && test_support(v.as_string()) == Support::implemented; }

const std::unordered_map<std::string_view, TestFn>& tests() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"boolean", t_boolean},   {"callable", t_callable}, {"defined", t_defined},   {"divisibleby", t_divisibleby},
      {"eq", t_eq},             {"equalto", t_eq},        {"==", t_eq},             {"escaped", t_escaped},
      {"even", t_even},         {"false", t_false},       {"filter", t_filter},     {"float", t_float},
      {"ge", t_ge},             {">=", t_ge},             {"gt", t_gt},             {"greaterthan", t_gt},
      {">", t_gt},              {"in", t_in},             {"integer", t_integer},   {"iterable", t_iterable},
      {"le", t_le},             {"<=", t_le},             {"lower", t_lower},       {"lt", t_lt},
      {"lessthan", t_lt},       {"<", t_lt},              {"mapping", t_mapping},   {"ne", t_ne},
      {"!=", t_ne},             {"none", t_none},         {"number", t_number},     {"odd", t_odd},
      {"sameas", t_sameas},     {"sequence", t_sequence}, {"string", t_string},     {"test", t_test},
      {"true", t_true},         {"undefined", t_undefined}, {"upper", t_upper},
  };
  return table;
}

}  // namespace

Support filter_support(std::string_view name) {
  if (filters().count(name)) return Support::implemented;
  static constexpr std::string_view kJinjaOnly[] = {"center", "filesizeformat", "forceescape", "groupby", "pprint",
                                                    "random", "slice", "striptags", "truncate", "urlencode", "urlize",
                                                    "wordwrap", "xmlattr"};
  for (std::string_view n : kJinjaOnly)
    if (n == name) return Support::not_implemented;
  return Support::unknown;
}

Support test_support(std::string_view name) { return tests().count(name) ? Support::implemented : Support::unknown; }

Value apply_filter(Interpreter& in, std::string_view name, const Value& value, Args& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) {
    if (filter_support(name) == Support::not_implemented)
      throw Error(Error::Kind::unsupported, "the filter '" + std::string(name) + "' is not supported");
    runtime_error("No filter named '" + std::string(name) + "' found.");
  }
  return it->second(in, value, args);
}

bool apply_test(Interpreter& in, std::string_view name, const Value& value, Args& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) runtime_error("No test named '" + std::string(name) + "' found.");
  return it->second(in, value, args);
}

}  // namespace infer::jinja
