#include "tokenizer/jinja/operators.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "tokenizer/jinja/interpreter.hpp"
#include "tokenizer/jinja/py_string.hpp"

namespace infer::jinja {

namespace {

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
  runtime_error("unsupported operand type(s) for " + std::string(op) + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow(std::string_view op) {
  throw Error(Error::Kind::unsupported, "integer overflow in '" + std::string(op) + "' (integers are 64-bit here)");
}

void zero_division(double divisor) {
  if (divisor == 0.0) runtime_error("division by zero");
}

// Python's float divmod (Objects/floatobject.c): the floor quotient and the modulo with the
// divisor's sign.
std::pair<double, double> float_divmod(double vx, double wx) {
  zero_division(wx);
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > (uint64_t{1} << 40) / s.size()) in.check_size(SIZE_MAX);
    const size_t total = s.size() * static_cast<size_t>(n);
    in.check_size(total);
    in.charge(total);
    std::string out;
    out.reserve(total);
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const auto& items = seq.as_list().items;
  if (!items.empty() && static_cast<uint64_t>(n) > (uint64_t{1} << 40) / items.size()) in.check_size(SIZE_MAX);
  const size_t total = items.size() * static_cast<size_t>(n);
  in.check_size(total * sizeof(Value));
  in.charge(total);
  std::vector<Value> out;
  out.reserve(total);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.as_list().is_tuple);
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1)
      if (__builtin_mul_overflow(result, base, &result)) overflow("**");
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow("**");
  }
  return result;
}

// Python's slice.indices(): the range a slice covers in a sequence of n items.
struct SliceRange {
  int64_t start, stop, step;
};

SliceRange slice_range(int64_t n, const Value& start, const Value& stop, const Value& step) {
  auto index = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.is_int() || v.is_bool()) return v.to_int();
    runtime_error(std::string("slice indices must be integers or None, not ") + v.type_name());
  };
  const int64_t st = index(step).value_or(1);
  if (st == 0) runtime_error("slice step cannot be zero");
  auto adjust = [&](std::optional<int64_t> v, int64_t if_none) {
    if (!v) return if_none;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  return {adjust(index(start), st < 0 ? n - 1 : 0), adjust(index(stop), st < 0 ? -1 : n), st};
}

}  // namespace

Value negate(const Value& v) {
  if (v.is_float()) return Value(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (v.to_int() == std::numeric_limits<int64_t>::min()) overflow("-");
    return Value(-v.to_int());
  }
  if (v.is_undefined()) runtime_error(v.undefined_hint());
  runtime_error(std::string("bad operand type for unary -: '") + v.type_name() + "'");
}

Value binary_op(Interpreter& in, std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) runtime_error(a.undefined_hint());
  if (b.is_undefined()) runtime_error(b.undefined_hint());
  const bool numbers = a.is_number() && b.is_number();
  const bool floats = numbers && (a.is_float() || b.is_float());
  if (op == "+") {
    if (floats) return Value(a.to_double() + b.to_double());
    if (numbers) {
      int64_t r;
      if (__builtin_add_overflow(a.to_int(), b.to_int(), &r)) overflow(op);
      return Value(r);
    }
    if (a.is_string() && b.is_string()) {
      const size_t total = a.as_string().size() + b.as_string().size();
      in.check_size(total);
      in.charge(total);
      if (a.is_markup() || b.is_markup()) {
        // Markup + str escapes the str (markupsafe), and so does str + Markup.
        std::string text = (a.is_markup() ? a.as_string() : html_escape(a.as_string())) +
                           (b.is_markup() ? b.as_string() : html_escape(b.as_string()));
        in.check_size(text.size());
        return Value::markup(std::move(text));
      }
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.as_list().is_tuple == b.as_list().is_tuple && !a.is_generator() && !b.is_generator()) {
      std::vector<Value> items = a.as_list().items;
      const auto& more = b.as_list().items;
      in.check_size((items.size() + more.size()) * sizeof(Value));
      in.charge(items.size() + more.size());
      items.insert(items.end(), more.begin(), more.end());
      return Value::list(std::move(items), a.as_list().is_tuple);
    }
    if (a.is_string()) runtime_error(std::string("can only concatenate str (not \"") + b.type_name() + "\") to str");
    unsupported_operands(op, a, b);
  }
  if (op == "-") {
    if (floats) return Value(a.to_double() - b.to_double());
    if (numbers) {
      int64_t r;
      if (__builtin_sub_overflow(a.to_int(), b.to_int(), &r)) overflow(op);
      return Value(r);
    }
    unsupported_operands(op, a, b);
  }
  if (op == "*") {
    if (floats) return Value(a.to_double() * b.to_double());
    if (numbers) {
      int64_t r;
      if (__builtin_mul_overflow(a.to_int(), b.to_int(), &r)) overflow(op);
      return Value(r);
    }
    auto sequence = [](const Value& v) { return v.is_string() || (v.is_list() && !v.is_generator()); };
    if (sequence(a) && (b.is_int() || b.is_bool())) return repeat(in, a, b.to_int());
    if (sequence(b) && (a.is_int() || a.is_bool())) return repeat(in, b, a.to_int());
    runtime_error(std::string("can't multiply sequence by non-int of type '") + b.type_name() + "'");
  }
  if (op == "/") {
    if (!numbers) unsupported_operands(op, a, b);
    zero_division(b.to_double());
    return Value(a.to_double() / b.to_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Value(printf_format(in, a.as_string(), b));
    if (!numbers) unsupported_operands(op, a, b);
    if (floats) {
      auto [div, mod] = float_divmod(a.to_double(), b.to_double());
      return Value(op == "//" ? div : mod);
    }
    const int64_t x = a.to_int(), y = b.to_int();
    if (y == 0) runtime_error(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) {
      if (op == "//") overflow(op);
      return Value(int64_t{0});
    }
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return Value(op == "//" ? q : r);
  }
  if (op == "**") {
    if (!numbers) unsupported_operands(op, a, b);
    if (!floats && b.to_int() >= 0) return Value(int_pow(a.to_int(), b.to_int()));
    const double x = a.to_double(), y = b.to_double();
    if (x == 0.0 && y < 0) runtime_error("0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y)) throw Error(Error::Kind::unsupported, "a negative number to a fractional power is complex");
    return Value(std::pow(x, y));
  }
  runtime_error("unknown operator " + std::string(op));
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::string:
      if (!item.is_string()) runtime_error(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::list:
      if (container.is_generator()) container.as_list().consumed = true;
      for (const Value& v : container.as_list().items)
        if (equals(v, item)) return true;
      return false;
    case Value::Type::dict: return container.as_dict().find(item) != nullptr;
    case Value::Type::undefined: return false;
    default: runtime_error(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

bool compare_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return less(a, b) || equals(a, b);
  if (op == ">=") return less(b, a) || equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  runtime_error("unknown comparison " + std::string(op));
}

std::optional<Value> slice_of(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) runtime_error(obj.undefined_hint());
  if (obj.is_list() && !obj.is_generator()) {
    const auto& items = obj.as_list().items;
    const SliceRange r = slice_range(static_cast<int64_t>(items.size()), start, stop, step);
    std::vector<Value> out;
    for (int64_t i = r.start; r.step > 0 ? i < r.stop : i > r.stop; i += r.step) out.push_back(items[static_cast<size_t>(i)]);
    return Value::list(std::move(out), obj.as_list().is_tuple);
  }
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    const std::vector<size_t> at = char_offsets(s);
    const SliceRange r = slice_range(static_cast<int64_t>(at.size() - 1), start, stop, step);
    std::string out;
    if (r.step == 1) {
      if (r.start < r.stop) out = s.substr(at[static_cast<size_t>(r.start)], at[static_cast<size_t>(r.stop)] - at[static_cast<size_t>(r.start)]);
      return Value(std::move(out));
    }
    for (int64_t i = r.start; r.step > 0 ? i < r.stop : i > r.stop; i += r.step) {
      const auto k = static_cast<size_t>(i);
      out.append(s, at[k], at[k + 1] - at[k]);
    }
    return Value(std::move(out));
  }
  return std::nullopt;
}

std::string printf_format(Interpreter& in, std::string_view f, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_list() && args.as_list().is_tuple) positional = args.as_list().items;
  else if (args.is_dict()) mapping = &args.as_dict();
  else positional.push_back(args);
  size_t next_arg = 0;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) runtime_error("incomplete format");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      if (close == std::string_view::npos) runtime_error("incomplete format key");
      if (!mapping) runtime_error("format requires a mapping");
      arg = mapping->find_str(f.substr(i + 1, close - i - 1));
      if (!arg) runtime_error("KeyError: '" + std::string(f.substr(i + 1, close - i - 1)) + "'");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < f.size() && std::string_view("-+ 0#").find(f[i]) != std::string_view::npos) spec += f[i++];
    while (i < f.size() && f[i] >= '0' && f[i] <= '9') spec += f[i++];
    if (i < f.size() && f[i] == '.') {
      spec += f[i++];
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') spec += f[i++];
    }
    while (i < f.size() && (f[i] == 'l' || f[i] == 'h' || f[i] == 'L')) ++i;
    if (i >= f.size()) runtime_error("incomplete format");
    const char conv = f[i];
    if (!arg) {
      if (mapping && positional.empty()) positional.push_back(args);
      if (next_arg >= positional.size()) runtime_error("not enough arguments for format string");
      arg = &positional[next_arg++];
    }
    if (spec.size() > 12) throw Error(Error::Kind::limit, "format width too large");
    char buf[512];
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        const std::string text = conv == 's' ? arg->str() : arg->repr();
        spec += 's';  // widths count bytes here, characters in Python
        const int n = std::snprintf(nullptr, 0, spec.c_str(), text.c_str());
        if (n < 0) runtime_error("bad format");
        in.check_size(static_cast<size_t>(n));
        std::string formatted(static_cast<size_t>(n), '\0');
        std::snprintf(formatted.data(), formatted.size() + 1, spec.c_str(), text.c_str());
        out += formatted;
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_number()) runtime_error(std::string("%") + conv + " format: a real number is required, not " + arg->type_name());
        const long long v = arg->is_float() ? static_cast<long long>(arg->as_float()) : arg->to_int();
        spec += "ll";
        spec += conv == 'i' || conv == 'u' ? 'd' : conv;
        std::snprintf(buf, sizeof buf, spec.c_str(), v);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_number()) runtime_error(std::string("must be real number, not ") + arg->type_name());
        spec += conv;
        std::snprintf(buf, sizeof buf, spec.c_str(), arg->to_double());
        out += buf;
        break;
      }
      case 'c': {
        if (arg->is_string() && char_count(arg->as_string()) == 1) out += arg->as_string();
        else if (arg->is_int() && arg->as_int() >= 0 && arg->as_int() <= 0x10ffff) append_utf8(out, static_cast<uint32_t>(arg->as_int()));
        else runtime_error("%c requires an int or a single character");
        break;
      }
      default: runtime_error(std::string("unsupported format character '") + conv + "'");
    }
    in.check_size(out.size());
  }
  if (!mapping && next_arg < positional.size()) runtime_error("not all arguments converted during string formatting");
  return out;
}

}  // namespace infer::jinja
