// What a template can call by name: jinja2's filters and tests (filters.cpp), the methods of
// str, list and dict, and the globals range, dict, namespace, raise_exception and strftime_now
// (methods.cpp). Arguments bind as in Python: positional, then by keyword.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/value.hpp"

namespace infer::jinja {

class Interpreter;

// Whether a filter or test name is implemented here, one of jinja2's that is not, or unknown
// to jinja2 as well (a syntax error there, when the template is compiled).
enum class Support { implemented, not_implemented, unknown };
Support filter_support(std::string_view name);
Support test_support(std::string_view name);

Value apply_filter(Interpreter& in, std::string_view name, const Value& value, Args& args);
bool apply_test(Interpreter& in, std::string_view name, const Value& value, Args& args);

// obj.name for a str, list or dict method: a bound method; for a method that changes a list or
// dict, an undefined value whose use raises jinja2's SecurityError; nullopt for no method.
std::optional<Value> bound_method(const Value& obj, const std::string& name);

// A global function by name; nullptr when there is none.
const Value* global_function(std::string_view name);

// Python-style binding of call arguments to parameter names ("join", {"d", "attribute"}):
// positional first, then keywords; an unknown keyword, a repeated one or too many positional
// arguments is a TypeError naming the function.
class BoundArgs {
 public:
  BoundArgs(std::string_view function, Args& args, std::initializer_list<std::string_view> names);
  bool given(size_t i) const { return values_[i].has_value(); }
  const Value& operator[](size_t i) const;
  // The argument, else `fallback`.
  Value get(size_t i, Value fallback) const { return given(i) ? *values_[i] : std::move(fallback); }

 private:
  std::vector<std::optional<Value>> values_;
};

// The value's text for string filters and methods: str(value) (undefined: "").
std::string text_of(const Value& v);
// A filter or method that takes no argument and maps a text to a text (upper, lower, ...).
Value map_text(std::string_view function, Args& args, std::string (*f)(std::string_view), std::string_view text);
// An int argument (a bool counts), else a TypeError naming what it is for.
int64_t int_arg(const Value& v, std::string_view what);

}  // namespace infer::jinja
