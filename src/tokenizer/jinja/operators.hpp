// Python's operators on Values, as jinja2 evaluates them: arithmetic (int and float, str and
// list concatenation and repetition, printf-style %), comparisons, `in`, and slicing. Integers
// are 64-bit: a result that does not fit is an error (Python's would grow).
#pragma once

#include <optional>
#include <string_view>

#include "tokenizer/jinja/value.hpp"

namespace infer::jinja {

class Interpreter;

// op: + - * / // % **
Value binary_op(Interpreter& in, std::string_view op, const Value& a, const Value& b);
Value negate(const Value& v);
// op: == != < <= > >= in notin
bool compare_op(std::string_view op, const Value& a, const Value& b);
// `item in container`
bool contains(const Value& container, const Value& item);
// obj[start:stop:step] of a list, tuple or str; None for a type that has no slices.
std::optional<Value> slice_of(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python's `format % args` for str (the |format filter too).
std::string printf_format(Interpreter& in, std::string_view format, const Value& args);

}  // namespace infer::jinja
