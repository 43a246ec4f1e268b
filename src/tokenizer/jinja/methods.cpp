// The methods of str, list and dict a template can call, as jinja2's sandbox allows them, and
// the global functions.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/jinja/builtins.hpp"
#include "tokenizer/jinja/interpreter.hpp"
#include "tokenizer/jinja/operators.hpp"
#include "tokenizer/jinja/py_string.hpp"

namespace infer::jinja {

namespace {

using MethodFn = Value (*)(Interpreter&, const Value& self, Args&);

std::optional<std::string> optional_text(const BoundArgs& b, size_t i) {
  if (!b.given(i) || b[i].is_none()) return std::nullopt;
  if (!b[i].is_string()) runtime_error(std::string("expected a str, not ") + b[i].type_name());
  return b[i].as_string();
}

const std::string& self_text(const Value& self) { return self.as_string(); }

Value m_strip(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("strip", a, {"chars"});
  return Value(py_strip(self_text(self), optional_text(b, 0), true, true));
}
Value m_lstrip(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("lstrip", a, {"chars"});
  return Value(py_strip(self_text(self), optional_text(b, 0), true, false));
}
Value m_rstrip(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("rstrip", a, {"chars"});
  return Value(py_strip(self_text(self), optional_text(b, 0), false, true));
}

// startswith / endswith with a str or a tuple of str, and optional start / end.
Value affix_test(const Value& self, Args& a, bool prefix) {
  BoundArgs b(prefix ? "startswith" : "endswith", a, {"affix", "start", "end"});
  Value subject = self;
  if (b.given(1) || b.given(2)) subject = *slice_of(self, b.get(1, Value::none()), b.get(2, Value::none()), Value::none());
  const std::string& s = subject.as_string();
  std::vector<Value> candidates;
  if (b[0].is_list() && b[0].as_list().is_tuple) candidates = b[0].as_list().items;
  else candidates.push_back(b[0]);
  for (const Value& c : candidates) {
    if (!c.is_string())
      runtime_error(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " + c.type_name());
    if (prefix ? s.starts_with(c.as_string()) : s.ends_with(c.as_string())) return Value(true);
  }
  return Value(false);
}
Value m_startswith(Interpreter&, const Value& self, Args& a) { return affix_test(self, a, true); }
Value m_endswith(Interpreter&, const Value& self, Args& a) { return affix_test(self, a, false); }

Value split_method(Interpreter& in, const Value& self, Args& a, bool from_right) {
  BoundArgs b(from_right ? "rsplit" : "split", a, {"sep", "maxsplit"});
  const int64_t maxsplit = b.given(1) ? int_arg(b[1], "maxsplit") : -1;
  std::vector<Value> parts;
  for (std::string& p : py_split(self_text(self), optional_text(b, 0), maxsplit, from_right)) parts.emplace_back(std::move(p));
  in.charge(parts.size() + self_text(self).size());
  return Value::list(std::move(parts));
}
Value m_split(Interpreter& in, const Value& self, Args& a) { return split_method(in, self, a, false); }
Value m_rsplit(Interpreter& in, const Value& self, Args& a) { return split_method(in, self, a, true); }

Value m_splitlines(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("splitlines", a, {});
  std::vector<Value> lines;
  for (std::string& l : py_splitlines(self_text(self))) lines.emplace_back(std::move(l));
  return Value::list(std::move(lines));
}

Value m_replace(Interpreter& in, const Value& self, Args& a) {
  BoundArgs b("replace", a, {"old", "new", "count"});
  if (!b[0].is_string() || !b[1].is_string()) runtime_error("replace() arguments must be str");
  std::string out = py_replace(self_text(self), b[0].as_string(), b[1].as_string(), b.given(2) ? int_arg(b[2], "count") : -1);
  in.check_size(out.size());
  in.charge(out.size());
  return Value(std::move(out));
}

Value m_upper(Interpreter&, const Value& self, Args& a) { return map_text("upper", a, py_upper, self_text(self)); }
Value m_lower(Interpreter&, const Value& self, Args& a) { return map_text("lower", a, py_lower, self_text(self)); }
Value m_title(Interpreter&, const Value& self, Args& a) { return map_text("title", a, py_title, self_text(self)); }
Value m_capitalize(Interpreter&, const Value& self, Args& a) { return map_text("capitalize", a, py_capitalize, self_text(self)); }

// find / rfind / index / rindex: the character index of sub, -1 (find) or a ValueError (index).
Value find_method(const Value& self, Args& a, bool from_right, bool raise) {
  BoundArgs b("find", a, {"sub"});
  if (!b[0].is_string()) runtime_error(std::string("must be str, not ") + b[0].type_name());
  const std::string& s = self_text(self);
  const size_t at = from_right ? s.rfind(b[0].as_string()) : s.find(b[0].as_string());
  if (at == std::string::npos) {
    if (raise) runtime_error("substring not found");
    return Value(int64_t{-1});
  }
  return Value(static_cast<int64_t>(char_count(std::string_view(s).substr(0, at))));
}
Value m_find(Interpreter&, const Value& self, Args& a) { return find_method(self, a, false, false); }
Value m_rfind(Interpreter&, const Value& self, Args& a) { return find_method(self, a, true, false); }
Value m_index(Interpreter&, const Value& self, Args& a) { return find_method(self, a, false, true); }
Value m_rindex(Interpreter&, const Value& self, Args& a) { return find_method(self, a, true, true); }

Value m_count(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("count", a, {"x"});
  if (self.is_list()) {
    int64_t n = 0;
    for (const Value& v : self.as_list().items) n += equals(v, b[0]);
    return Value(n);
  }
  if (!b[0].is_string()) runtime_error(std::string("must be str, not ") + b[0].type_name());
  const std::string& s = self_text(self);
  const std::string& sub = b[0].as_string();
  if (sub.empty()) return Value(static_cast<int64_t>(char_count(s) + 1));
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return Value(n);
}

Value m_join(Interpreter& in, const Value& self, Args& a) {
  BoundArgs b("join", a, {"iterable"});
  std::string out;
  size_t i = 0;
  for (const Value& item : in.iterate(b[0])) {
    if (!item.is_string())
      runtime_error("sequence item " + std::to_string(i) + ": expected str instance, " + item.type_name() + " found");
    if (i++) out += self_text(self);
    out += item.as_string();
    in.check_size(out.size());
  }
  in.charge(out.size());
  return Value(std::move(out));
}

// str.format with {}, {0}, {name}, attribute and index lookups and !r / !s conversions; a
// format spec after ':' is not supported.
Value m_format(Interpreter& in, const Value& self, Args& a) {
  const std::string& f = self_text(self);
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      else runtime_error("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) runtime_error("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    if (field.find('{') != std::string::npos) throw Error(Error::Kind::unsupported, "nested fields in str.format are not supported");
    char conversion = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      if (colon + 1 < field.size()) throw Error(Error::Kind::unsupported, "format specs in str.format are not supported");
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    size_t end = std::min(field.find('.'), field.find('['));
    const std::string head = field.substr(0, end);
    Value v;
    if (head.empty() || py_is_digit(head)) {
      const size_t k = head.empty() ? auto_index++ : static_cast<size_t>(std::stoull(head.substr(0, 9)));
      if (k >= a.positional.size()) runtime_error("Replacement index " + std::to_string(k) + " out of range for positional args tuple");
      v = a.positional[k];
    } else {
      const auto it = std::find_if(a.keyword.begin(), a.keyword.end(), [&](const auto& kv) { return kv.first == head; });
      if (it == a.keyword.end()) runtime_error("KeyError: '" + head + "'");
      v = it->second;
    }
    while (end < field.size()) {
      if (field[end] == '.') {
        const size_t next = std::min(field.find('.', end + 1), field.find('[', end + 1));
        v = in.get_attr(v, field.substr(end + 1, next - end - 1));
        end = next;
      } else {
        const size_t rb = field.find(']', end);
        if (rb == std::string::npos) runtime_error("Missing ']' in format string");
        const std::string key = field.substr(end + 1, rb - end - 1);
        v = in.get_item(v, py_is_digit(key) && key.size() < 18 ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
        end = rb + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a') out += v.repr();
    else if (conversion == 0 || conversion == 's') out += v.str();
    else runtime_error(std::string("Unknown conversion specifier ") + conversion);
    in.check_size(out.size());
  }
  in.charge(out.size());
  return Value(std::move(out));
}

Value is_method(const Value& self, Args& a, const char* name, bool (*pred)(std::string_view)) {
  BoundArgs b(name, a, {});
  return Value(pred(self_text(self)));
}
Value m_isdigit(Interpreter&, const Value& self, Args& a) { return is_method(self, a, "isdigit", py_is_digit); }
Value m_isalpha(Interpreter&, const Value& self, Args& a) { return is_method(self, a, "isalpha", py_is_alpha); }
Value m_isalnum(Interpreter&, const Value& self, Args& a) { return is_method(self, a, "isalnum", py_is_alnum); }
Value m_isupper(Interpreter&, const Value& self, Args& a) { return is_method(self, a, "isupper", py_is_upper); }
Value m_islower(Interpreter&, const Value& self, Args& a) { return is_method(self, a, "islower", py_is_lower); }
Value m_isspace(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("isspace", a, {});
  const std::string& s = self_text(self);
  return Value(!s.empty() && py_strip(s, std::nullopt, true, false).empty());
}

Value m_removeprefix(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("removeprefix", a, {"prefix"});
  const std::string& s = self_text(self);
  const std::string p = text_of(b[0]);
  return Value(s.starts_with(p) ? s.substr(p.size()) : s);
}
Value m_removesuffix(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("removesuffix", a, {"suffix"});
  const std::string& s = self_text(self);
  const std::string p = text_of(b[0]);
  return Value(s.ends_with(p) && !p.empty() ? s.substr(0, s.size() - p.size()) : s);
}

// center / ljust / rjust / zfill: padded to `width` characters.
Value pad_method(Interpreter& in, const Value& self, Args& a, char how) {
  BoundArgs b("pad", a, {"width", "fillchar"});
  const std::string& s = self_text(self);
  const int64_t width = int_arg(b[0], "width");
  const std::string fill = how == 'z' ? "0" : text_of(b.get(1, Value(" ")));
  if (char_count(fill) != 1) runtime_error("The fill character must be exactly one character long");
  const int64_t n = static_cast<int64_t>(char_count(s));
  if (width <= n) return self;
  const auto missing = static_cast<size_t>(width - n);
  in.check_size(missing * fill.size() + s.size());
  auto repeat = [&](size_t k) {
    std::string r;
    for (size_t i = 0; i < k; ++i) r += fill;
    return r;
  };
  if (how == 'l') return Value(s + repeat(missing));
  if (how == 'r') return Value(repeat(missing) + s);
  if (how == 'z') {
    const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    return Value(sign ? s.substr(0, 1) + repeat(missing) + s.substr(1) : repeat(missing) + s);
  }
  // Python's center puts the extra character on the left when the width and the text differ in parity.
  const size_t left = missing / 2 + (missing & static_cast<size_t>(width) & 1);
  return Value(repeat(left) + s + repeat(missing - left));
}
Value m_center(Interpreter& in, const Value& self, Args& a) { return pad_method(in, self, a, 'c'); }
Value m_ljust(Interpreter& in, const Value& self, Args& a) { return pad_method(in, self, a, 'l'); }
Value m_rjust(Interpreter& in, const Value& self, Args& a) { return pad_method(in, self, a, 'r'); }
Value m_zfill(Interpreter& in, const Value& self, Args& a) { return pad_method(in, self, a, 'z'); }

Value m_list_index(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("index", a, {"x"});
  const auto& items = self.as_list().items;
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], b[0])) return Value(static_cast<int64_t>(i));
  runtime_error(b[0].repr() + " is not in list");
}

Value m_copy(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("copy", a, {});
  return self;
}

Value m_get(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("get", a, {"key", "default"});
  const Value* v = self.as_dict().find(b[0]);
  return v ? *v : b.get(1, Value::none());
}

Value m_items(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("items", a, {});
  std::vector<Value> out;
  for (const auto& [k, v] : self.as_dict().entries()) out.push_back(Value::list({k, v}, true));
  return Value::list(std::move(out));
}

Value m_keys(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("keys", a, {});
  std::vector<Value> out;
  for (const auto& e : self.as_dict().entries()) out.push_back(e.first);
  return Value::list(std::move(out));
}

Value m_values(Interpreter&, const Value& self, Args& a) {
  BoundArgs b("values", a, {});
  std::vector<Value> out;
  for (const auto& e : self.as_dict().entries()) out.push_back(e.second);
  return Value::list(std::move(out));
}

const std::unordered_map<std::string_view, MethodFn>& str_methods() {
  static const std::unordered_map<std::string_view, MethodFn> table = {
      {"strip", m_strip},       {"lstrip", m_lstrip},         {"rstrip", m_rstrip},         {"startswith", m_startswith},
      {"endswith", m_endswith}, {"split", m_split},           {"rsplit", m_rsplit},         {"splitlines", m_splitlines},
      {"replace", m_replace},   {"upper", m_upper},           {"lower", m_lower},           {"title", m_title},
      {"capitalize", m_capitalize}, {"find", m_find},         {"rfind", m_rfind},           {"index", m_index},
      {"rindex", m_rindex},     {"count", m_count},           {"join", m_join},             {"format", m_format},
      {"isdigit", m_isdigit},   {"isalpha", m_isalpha},       {"isalnum", m_isalnum},       {"isspace", m_isspace},
      {"isupper", m_isupper},   {"islower", m_islower},       {"removeprefix", m_removeprefix},
      {"removesuffix", m_removesuffix}, {"center", m_center}, {"ljust", m_ljust},           {"rjust", m_rjust},
      {"zfill", m_zfill},
  };
  return table;
}

const std::unordered_map<std::string_view, MethodFn>& list_methods() {
  static const std::unordered_map<std::string_view, MethodFn> table = {{"index", m_list_index}, {"count", m_count}, {"copy", m_copy}};
  return table;
}

const std::unordered_map<std::string_view, MethodFn>& dict_methods() {
  static const std::unordered_map<std::string_view, MethodFn> table = {
      {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"copy", m_copy}};
  return table;
}

// The methods jinja2's ImmutableSandboxedEnvironment refuses (modifies_known_mutable).
bool is_mutating(const Value& obj, std::string_view name) {
  static const std::unordered_set<std::string_view> kList = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  static const std::unordered_set<std::string_view> kDict = {"clear", "pop", "popitem", "setdefault", "update"};
  return obj.is_list() ? !obj.is_generator() && kList.count(name) > 0 : obj.is_dict() && kDict.count(name) > 0;
}

// --- globals
Value g_range(Interpreter& in, Args& a) {
  if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3) runtime_error("range() takes 1 to 3 integer arguments");
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = int_arg(a.positional[0], "range");
  } else {
    start = int_arg(a.positional[0], "range");
    stop = int_arg(a.positional[1], "range");
    if (a.positional.size() == 3) step = int_arg(a.positional[2], "range");
  }
  if (step == 0) runtime_error("range() arg 3 must not be zero");
  const double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
  if (count > static_cast<double>(in.options().limits.max_range))
    throw Error(Error::Kind::limit, "range() of " + std::to_string(static_cast<long long>(count)) + " items: more than " +
                                        std::to_string(in.options().limits.max_range));
  in.charge(static_cast<uint64_t>(count));
  std::vector<Value> out;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) out.emplace_back(start + i * step);
  return Value::list(std::move(out));
}

Dict dict_of(Interpreter& in, Args& a, const char* fn) {
  if (a.positional.size() > 1) runtime_error(std::string(fn) + "() takes at most one positional argument");
  Dict d;
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      for (const Value& pair : in.iterate(src)) {
        std::vector<Value> kv = in.iterate(pair);
        if (kv.size() != 2) runtime_error(std::string(fn) + "(): a sequence of pairs is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.keyword) d.set(Value(k), v);
  return d;
}

Value g_dict(Interpreter& in, Args& a) { return Value::dict(dict_of(in, a, "dict")); }

Value g_namespace(Interpreter& in, Args& a) {
  auto ns = in.make_namespace();
  ns->attributes = dict_of(in, a, "namespace");
  return Value(ns);
}

Value g_raise_exception(Interpreter&, Args& a) {
  BoundArgs b("raise_exception", a, {"message"});
  throw Error(Error::Kind::raised, text_of(b[0]));
}

Value g_strftime_now(Interpreter& in, Args& a) {
  BoundArgs b("strftime_now", a, {"format"});
  const std::string format = text_of(b[0]);
  std::tm now{};
  if (in.options().now) {
    now = *in.options().now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  if (format.empty()) return Value("");
  if (format.size() > 1024) throw Error(Error::Kind::limit, "strftime_now: format longer than 1024 bytes");
  std::string out(format.size() * 64 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &now);
  out.resize(n);
  return Value(std::move(out));
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, const std::string& name) {
  const std::unordered_map<std::string_view, MethodFn>* table = nullptr;
  if (obj.is_string()) table = &str_methods();
  else if (obj.is_list() && !obj.is_generator()) table = &list_methods();
  else if (obj.is_dict()) table = &dict_methods();
  else return std::nullopt;
  if (is_mutating(obj, name))
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
  const auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  const MethodFn fn = it->second;
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->call = [obj, fn](Interpreter& in, Args& a) { return fn(in, obj, a); };
  return Value(std::shared_ptr<const Callable>(std::move(c)));
}

const Value* global_function(std::string_view name) {
  static const auto table = [] {
    std::unordered_map<std::string_view, Value> t;
    auto add = [&](std::string_view n, Value (*fn)(Interpreter&, Args&)) {
      auto c = std::make_shared<Callable>();
      c->name = std::string(n);
      c->call = fn;
      t.emplace(n, Value(std::shared_ptr<const Callable>(std::move(c))));
    };
    add("range", g_range);
    add("dict", g_dict);
    add("namespace", g_namespace);
    add("raise_exception", g_raise_exception);
    add("strftime_now", g_strftime_now);
    return t;
  }();
  const auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace infer::jinja
