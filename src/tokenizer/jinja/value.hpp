// The values a Jinja chat template computes with, with Python's semantics (what jinja2 runs on):
// undefined, None, bool, int, float, str, list / tuple, dict (insertion-ordered), jinja2's
// namespace, and callables (macros, built-in functions, bound methods).
//
// Strings, lists and dicts are shared, immutable once built (the sandbox of transformers forbids
// a template to change a list or dict); only a namespace is written to, through `set ns.x`.
// Copying a Value is a reference-count increment.
//
// Every operation that a template can get wrong (1 < 'a', undefined.x, {} + 1) throws
// jinja::Error; the interpreter adds the template's line and Template turns it into a Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace infer::jinja {

// What went wrong, as jinja2 would raise it. `kind` decides the Status code at the boundary.
class Error : public std::runtime_error {
 public:
  enum class Kind {
    syntax,       // TemplateSyntaxError: the text is not a template
    unsupported,  // valid Jinja that this interpreter does not implement
    runtime,      // TypeError, UndefinedError, SecurityError, ... while rendering
    raised,       // raise_exception('...') in the template
    limit,        // a limit of Limits was reached
  };
  Error(Kind kind, std::string message, int line = 0) : std::runtime_error(message), kind_(kind), line_(line) {}
  Kind kind() const noexcept { return kind_; }
  int line() const noexcept { return line_; }
  void set_line(int line) noexcept { line_ = line; }

 private:
  Kind kind_;
  int line_;
};

[[noreturn]] inline void runtime_error(std::string message) { throw Error(Error::Kind::runtime, std::move(message)); }

class Value;
struct List;
class Dict;
struct Callable;
struct Namespace;

// Arguments of a call: positional, then keyword in the order written.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
 public:
  enum class Type : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, ns, callable };

  // Undefined; `hint` says why, for the error raised when it is used ("'x' is undefined").
  Value() = default;
  static Value undefined(std::string hint);
  static Value none() { return Value(Storage(std::in_place_index<1>)); }
  Value(bool b) : v_(b) {}  // NOLINT: implicit by design, as are the others
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(std::shared_ptr<const List> l) : v_(std::move(l)) {}
  Value(std::shared_ptr<const Dict> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<Namespace> n) : v_(std::move(n)) {}
  Value(std::shared_ptr<const Callable> c) : v_(std::move(c)) {}
  static Value list(std::vector<Value> items, bool tuple = false);
  // What jinja2's map, select, reject, selectattr, rejectattr, items, unique and reverse return:
  // an iterator, always true, without a length, iterable once.
  static Value generator(std::vector<Value> items);
  static Value dict(Dict d);
  // A str marked safe (|safe, |escape): jinja2's Markup, whose `+` HTML-escapes a plain str.
  static Value markup(std::string s);

  Type type() const noexcept { return v_.index() == kMarkup ? Type::string : static_cast<Type>(v_.index()); }
  bool is_undefined() const noexcept { return type() == Type::undefined; }
  bool is_none() const noexcept { return type() == Type::none; }
  bool is_bool() const noexcept { return type() == Type::boolean; }
  bool is_int() const noexcept { return type() == Type::integer; }
  bool is_float() const noexcept { return type() == Type::floating; }
  // int, float or bool (a bool is an int in Python)
  bool is_number() const noexcept { return is_int() || is_float() || is_bool(); }
  bool is_string() const noexcept { return type() == Type::string; }
  bool is_markup() const noexcept { return v_.index() == kMarkup; }
  bool is_list() const noexcept { return type() == Type::list; }  // also a tuple or generator
  bool is_generator() const noexcept;
  bool is_dict() const noexcept { return type() == Type::dict; }
  bool is_namespace() const noexcept { return type() == Type::ns; }
  bool is_callable() const noexcept { return type() == Type::callable; }

  bool as_bool() const { return std::get<2>(v_); }
  int64_t as_int() const { return std::get<3>(v_); }  // also of a bool: 0 / 1
  double as_float() const { return std::get<4>(v_); }
  const std::string& as_string() const { return is_markup() ? *std::get<kMarkup>(v_).text : *std::get<5>(v_); }
  const List& as_list() const { return *std::get<6>(v_); }
  const Dict& as_dict() const { return *std::get<7>(v_); }
  Namespace& as_namespace() const { return *std::get<8>(v_); }
  const Callable& as_callable() const { return *std::get<9>(v_); }
  const std::string& undefined_hint() const;

  // The number as an int (bool → 0/1); the number as a double.
  int64_t to_int() const { return is_bool() ? (as_bool() ? 1 : 0) : as_int(); }
  double to_double() const { return is_float() ? as_float() : static_cast<double>(to_int()); }

  // Python's bool(): empty strings, lists and dicts, 0, None and undefined are false.
  bool truthy() const;
  // Python's str() (undefined: ""), and repr().
  std::string str() const;
  std::string repr() const;
  // Python's type name, for errors ("str", "dict", "NoneType").
  const char* type_name() const;

 private:
  struct Undefined {
    std::shared_ptr<const std::string> hint;
  };
  struct Markup {
    std::shared_ptr<const std::string> text;
  };
  // In the order of Type; a Markup is a string.
  using Storage = std::variant<Undefined, std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
                               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Namespace>,
                               std::shared_ptr<const Callable>, Markup>;
  static constexpr size_t kMarkup = 10;
  explicit Value(Storage v) : v_(std::move(v)) {}
  Storage v_;
};

// Lists and dicts nest at most this deep (a loop could otherwise build a chain a million levels
// deep, which printing, comparing or freeing would follow into a stack overflow).
inline constexpr int kMaxValueNesting = 512;

struct List {
  std::vector<Value> items;
  int depth = 1;                   // of the nesting: 1 + the deepest list or dict inside
  bool is_tuple = false;           // printed (a, b) instead of [a, b]; otherwise the same
  bool is_generator = false;       // see Value::generator
  mutable bool consumed = false;   // a generator that has been iterated
};

// A Python dict: insertion-ordered, keys compared with Python's == (1 == 1.0 == True).
class Dict {
 public:
  using Entry = std::pair<Value, Value>;
  const Value* find(const Value& key) const;
  const Value* find_str(std::string_view key) const;
  // Inserts, or replaces the value of an equal key in its place.
  void set(Value key, Value value);
  const std::vector<Entry>& entries() const noexcept { return entries_; }
  size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  int depth() const noexcept { return depth_; }  // as List::depth, set by Value::dict

 private:
  friend class Value;
  std::vector<Entry> entries_;
  int depth_ = 1;
};

// jinja2's namespace(): the one value a template may change (`{% set ns.x = 1 %}`).
struct Namespace {
  Dict attributes;
};

class Interpreter;
// A macro, a built-in function or a bound method.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, Args&)> call;
};

// Python's == and <; `less` throws a TypeError where Python does (1 < 'a').
bool equals(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);

// Python's repr() of a str: single quotes unless the text has ' and no ", escapes as Python's.
std::string py_repr_string(std::string_view s);
// Python's repr() of a float: the shortest text that reads back the same ("0.1", "1e+16", "1.0").
std::string py_repr_float(double d);

}  // namespace infer::jinja
