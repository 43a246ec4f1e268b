#include "tokenizer/jinja/interpreter.hpp"

#include <algorithm>

#include "tokenizer/jinja/builtins.hpp"
#include "tokenizer/jinja/operators.hpp"
#include "tokenizer/jinja/py_string.hpp"

namespace infer::jinja {

// Variables of one scope; lookups go up the parents (the outermost holds the render variables).
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  void set(const std::string& name, Value v) {
    for (auto& [n, old] : vars) {
      if (n == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

namespace {

std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

// Adds the line of the innermost node to an error that has none yet.
template <class F>
auto at_line(int line, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (Error& e) {
    if (e.line() == 0) e.set_line(line);
    throw;
  }
}

}  // namespace

// Counts one level of eval / exec recursion; past Limits::max_eval_depth an error, before the
// stack runs out (a recursive macro around a deep expression).
struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter& interpreter) : in(interpreter) {
    if (++in.eval_depth_ > in.options_.limits.max_eval_depth) {
      --in.eval_depth_;
      throw Error(Error::Kind::limit, "evaluation nested deeper than " + std::to_string(in.options_.limits.max_eval_depth) + " levels");
    }
  }
  ~DepthGuard() { --in.eval_depth_; }
  Interpreter& in;
};

Interpreter::Interpreter(const RenderOptions& options) : options_(options) {}

Interpreter::~Interpreter() {
  for (auto& s : closure_scopes_) {
    s->vars.clear();
    s->parent.reset();
  }
  for (auto& ns : namespaces_) ns->attributes = Dict();
}

void Interpreter::charge(uint64_t units) {
  work_ += units;
  if (work_ > options_.limits.max_work)
    throw Error(Error::Kind::limit, "the template did more than " + std::to_string(options_.limits.max_work) + " steps of work");
}

void Interpreter::check_size(size_t bytes) {
  if (bytes > options_.limits.max_output_bytes)
    throw Error(Error::Kind::limit, "the template built a value or output larger than " +
                                        std::to_string(options_.limits.max_output_bytes) + " bytes");
}

std::shared_ptr<Namespace> Interpreter::make_namespace() {
  charge(16);
  auto ns = std::make_shared<Namespace>();
  namespaces_.push_back(ns);
  return ns;
}

std::string Interpreter::render(const Program& program, const Dict& variables) {
  auto root = std::make_shared<Scope>();
  for (const auto& [k, v] : variables.entries())
    if (k.is_string()) root->set(k.as_string(), v);
  closure_scopes_.push_back(root);
  std::string out;
  out_ = &out;
  exec_body(program.body, root);
  return out;
}

void Interpreter::emit(std::string_view text) {
  charge(text.size());
  check_size(out_->size() + text.size());
  out_->append(text);
}

// --- statements

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const StmtPtr& s : body) {
    const Flow f = at_line(s->line, [&] { return exec(*s, scope); });
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  DepthGuard depth(*this);
  charge(1);
  switch (s.kind) {
    case Stmt::Kind::text: emit(s.text); return Flow::normal;
    case Stmt::Kind::output: {
      const Value v = eval(*s.expr, scope);
      emit(v.is_string() ? v.as_string() : v.str());
      return Flow::normal;
    }
    case Stmt::Kind::if_:
      for (const auto& [condition, body] : s.branches)
        if (eval(*condition, scope).truthy()) return exec_body(body, scope);
      return exec_body(s.else_body, scope);
    case Stmt::Kind::for_: return exec_for(s, scope);
    case Stmt::Kind::set: assign(s.target, eval(*s.expr, scope), *scope); return Flow::normal;
    case Stmt::Kind::set_block: {
      Value v(capture(s.body, scope));
      assign(s.target, apply_filters(s.filters, std::move(v), scope), *scope);
      return Flow::normal;
    }
    case Stmt::Kind::macro: define_macro(s, scope); return Flow::normal;
    case Stmt::Kind::call_block: {
      // caller() renders the block's body in a scope of the call site.
      const Stmt* def = &s;
      auto site = scope;
      closure_scopes_.push_back(site);
      auto c = std::make_shared<Callable>();
      c->name = "caller";
      c->call = [def, site](Interpreter& in, Args& args) { return in.call_macro(*def, site, args); };
      const Expr& call = *s.expr;
      Value callee = eval(*call.items[0], scope);
      Args args = eval_args(call, 1, scope);
      args.keyword.emplace_back("caller", Value(std::shared_ptr<const Callable>(std::move(c))));
      const Value result = this->call(callee, args);
      emit(result.str());
      return Flow::normal;
    }
    case Stmt::Kind::filter_block: {
      const Value v = apply_filters(s.filters, Value(capture(s.body, scope)), scope);
      emit(v.str());
      return Flow::normal;
    }
    case Stmt::Kind::with: {
      std::vector<Value> values;
      for (const ExprPtr& e : s.with_values) values.push_back(eval(*e, scope));
      auto inner = child_of(scope);
      for (size_t i = 0; i < values.size(); ++i) assign(s.with_targets[i], values[i], *inner);
      return exec_body(s.body, inner);
    }
    case Stmt::Kind::scope: return exec_body(s.body, child_of(scope));
    case Stmt::Kind::break_: return Flow::break_;
    case Stmt::Kind::continue_: return Flow::continue_;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  if (s.condition) {
    std::vector<Value> kept;
    for (Value& item : items) {
      auto probe = child_of(scope);
      assign(s.target, item, *probe);
      if (eval(*s.condition, probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(s.else_body, scope);
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    if (++iterations_ > options_.limits.max_iterations)
      throw Error(Error::Kind::limit, "the template ran more than " + std::to_string(options_.limits.max_iterations) + " loop iterations");
    charge(16);
    auto inner = child_of(scope);
    assign(s.target, items[static_cast<size_t>(i)], *inner);
    Dict loop;
    loop.set(Value("index"), Value(i + 1));
    loop.set(Value("index0"), Value(i));
    loop.set(Value("revindex"), Value(n - i));
    loop.set(Value("revindex0"), Value(n - i - 1));
    loop.set(Value("first"), Value(i == 0));
    loop.set(Value("last"), Value(i == n - 1));
    loop.set(Value("length"), Value(n));
    loop.set(Value("depth"), Value(int64_t{1}));
    loop.set(Value("depth0"), Value(int64_t{0}));
    if (i > 0) loop.set(Value("previtem"), items[static_cast<size_t>(i - 1)]);
    if (i + 1 < n) loop.set(Value("nextitem"), items[static_cast<size_t>(i + 1)]);
    auto cycle = std::make_shared<Callable>();
    cycle->name = "cycle";
    cycle->call = [i](Interpreter&, Args& a) {
      if (a.positional.empty()) runtime_error("no items for cycling given");
      return a.positional[static_cast<size_t>(i) % a.positional.size()];
    };
    loop.set(Value("cycle"), Value(std::shared_ptr<const Callable>(std::move(cycle))));
    inner->set("loop", Value::dict(std::move(loop)));
    if (exec_body(s.body, inner) == Flow::break_) break;
  }
  return Flow::normal;
}

void Interpreter::assign(const Target& target, const Value& value, Scope& scope) {
  if (!target.attribute.empty()) {
    const Value ns = lookup(target.names[0], scope);
    if (!ns.is_namespace()) runtime_error("cannot assign attribute on non-namespace object");
    ns.as_namespace().attributes.set(Value(target.attribute), value);
    return;
  }
  if (!target.unpack) {
    scope.set(target.names[0], value);
    return;
  }
  const std::vector<Value> parts = iterate(value);
  if (parts.size() < target.names.size())
    runtime_error("not enough values to unpack (expected " + std::to_string(target.names.size()) + ", got " +
                  std::to_string(parts.size()) + ")");
  if (parts.size() > target.names.size())
    runtime_error("too many values to unpack (expected " + std::to_string(target.names.size()) + ")");
  for (size_t i = 0; i < parts.size(); ++i) scope.set(target.names[i], parts[i]);
}

void Interpreter::define_macro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  const Stmt* def = &s;
  closure_scopes_.push_back(scope);
  auto c = std::make_shared<Callable>();
  c->name = s.text;
  c->call = [def, scope](Interpreter& in, Args& args) { return in.call_macro(*def, scope, args); };
  scope->set(s.text, Value(std::shared_ptr<const Callable>(std::move(c))));
}

Value Interpreter::call_macro(const Stmt& def, const std::shared_ptr<Scope>& closure, Args& args) {
  if (call_depth_ >= options_.limits.max_call_depth)
    throw Error(Error::Kind::limit, "macro calls nested deeper than " + std::to_string(options_.limits.max_call_depth));
  struct CallDepth {
    int& d;
    explicit CallDepth(int& depth) : d(depth) { ++d; }
    ~CallDepth() { --d; }
  } calls(call_depth_);
  charge(16);
  const std::string& name = def.kind == Stmt::Kind::macro ? def.text : std::string("caller");
  const Params& p = def.params;
  auto inner = child_of(closure);
  std::vector<bool> bound(p.names.size(), false);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < p.names.size()) {
      inner->set(p.names[i], args.positional[i]);
      bound[i] = true;
    } else if (def.uses_varargs) {
      varargs.push_back(args.positional[i]);
    } else {
      runtime_error("macro '" + name + "' takes not more than " + std::to_string(p.names.size()) + " argument(s)");
    }
  }
  Dict kwargs;
  bool has_caller = false;
  for (auto& [key, value] : args.keyword) {
    const auto it = std::find(p.names.begin(), p.names.end(), key);
    if (it != p.names.end()) {
      const auto k = static_cast<size_t>(it - p.names.begin());
      if (bound[k]) runtime_error("macro '" + name + "' got multiple values for argument '" + key + "'");
      inner->set(key, value);
      bound[k] = true;
    } else if (key == "caller" && def.uses_caller) {
      inner->set("caller", value);
      has_caller = true;
    } else if (def.uses_kwargs) {
      kwargs.set(Value(key), value);
    } else {
      runtime_error("macro '" + name + "' takes no keyword argument '" + key + "'");
    }
  }
  for (size_t i = 0; i < p.names.size(); ++i) {
    if (bound[i]) continue;
    if (p.defaults[i]) inner->set(p.names[i], eval(*p.defaults[i], inner));
    else inner->set(p.names[i], Value::undefined("parameter '" + p.names[i] + "' was not provided"));
  }
  if (def.uses_varargs) inner->set("varargs", Value::list(std::move(varargs), true));
  if (def.uses_kwargs) inner->set("kwargs", Value::dict(std::move(kwargs)));
  if (def.uses_caller && !has_caller) inner->set("caller", Value::undefined("No caller defined"));
  return Value(capture(def.body, inner));
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_body(body, scope);  // a break or continue cannot leave a macro or block set: the parser refuses it
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v, const std::shared_ptr<Scope>& scope) {
  for (const ExprPtr& f : filters) {
    Args args = eval_args(*f, 1, scope);
    v = at_line(f->line, [&] { return apply_filter(*this, f->name, v, args); });
  }
  return v;
}

// --- expressions

Value Interpreter::lookup(const std::string& name, const Scope& scope) const {
  for (const Scope* s = &scope; s; s = s->parent.get())
    for (const auto& [n, v] : s->vars)
      if (n == name) return v;
  if (const Value* g = global_function(name)) return *g;
  return Value::undefined("'" + name + "' is undefined");
}

Args Interpreter::eval_args(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope) {
  Args args;
  for (size_t i = first; i < e.items.size(); ++i) args.positional.push_back(eval(*e.items[i], scope));
  for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, scope));
  return args;
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  DepthGuard depth(*this);
  return at_line(e.line, [&] { return eval_inner(e, scope); });
}

Value Interpreter::eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  charge(1);
  using K = Expr::Kind;
  switch (e.kind) {
    case K::literal: return e.value;
    case K::name: return lookup(e.name, *scope);
    case K::list: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const ExprPtr& item : e.items) items.push_back(eval(*item, scope));
      return Value::list(std::move(items), e.flag);
    }
    case K::dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i], scope);
        d.set(std::move(key), eval(*e.items[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case K::getattr: return get_attr(eval(*e.items[0], scope), e.name);
    case K::getitem: return get_item(eval(*e.items[0], scope), eval(*e.items[1], scope));
    case K::slice: {
      const Value obj = eval(*e.items[0], scope);
      auto part = [&](size_t i) { return e.items[i] ? eval(*e.items[i], scope) : Value::none(); };
      const Value start = part(1), stop = part(2), step = part(3);
      if (auto v = slice_of(obj, start, stop, step)) {
        charge(v->is_string() ? v->as_string().size() : v->as_list().items.size());
        return *v;
      }
      return Value::undefined(std::string("'") + obj.type_name() + " object' has no slices");
    }
    case K::call: {
      const Value callee = eval(*e.items[0], scope);
      Args args = eval_args(e, 1, scope);
      return call(callee, args);
    }
    case K::filter: {
      const Value v = eval(*e.items[0], scope);
      Args args = eval_args(e, 1, scope);
      return apply_filter(*this, e.name, v, args);
    }
    case K::test: {
      const Value v = eval(*e.items[0], scope);
      Args args = eval_args(e, 1, scope);
      return Value(apply_test(*this, e.name, v, args) != e.flag);
    }
    case K::negate: return negate(eval(*e.items[0], scope));
    case K::plus: {
      Value v = eval(*e.items[0], scope);
      if (!v.is_number()) runtime_error(std::string("bad operand type for unary +: '") + v.type_name() + "'");
      return v.is_bool() ? Value(v.to_int()) : v;
    }
    case K::logical_not: return Value(!eval(*e.items[0], scope).truthy());
    case K::binary: return binary_op(*this, e.name, eval(*e.items[0], scope), eval(*e.items[1], scope));
    case K::logical_and: {
      Value a = eval(*e.items[0], scope);
      return a.truthy() ? eval(*e.items[1], scope) : a;
    }
    case K::logical_or: {
      Value a = eval(*e.items[0], scope);
      return a.truthy() ? a : eval(*e.items[1], scope);
    }
    case K::compare: {
      Value left = eval(*e.items[0], scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1], scope);
        if (!compare_op(e.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case K::concat: {
      std::string out;
      for (const ExprPtr& item : e.items) {
        const Value v = eval(*item, scope);
        out += v.is_string() ? v.as_string() : v.str();
        check_size(out.size());
      }
      charge(out.size());
      return Value(std::move(out));
    }
    case K::conditional:
      if (eval(*e.items[0], scope).truthy()) return eval(*e.items[1], scope);
      if (e.items[2]) return eval(*e.items[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

Value Interpreter::call(const Value& callee, Args& args) {
  if (callee.is_undefined()) runtime_error(callee.undefined_hint());
  if (!callee.is_callable()) runtime_error(std::string("'") + callee.type_name() + "' object is not callable");
  charge(1 + args.positional.size() + args.keyword.size());
  return callee.as_callable().call(*this, args);
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Value::Type::undefined: runtime_error(obj.undefined_hint());
    case Value::Type::dict:
      if (auto m = bound_method(obj, name)) return *m;
      if (const Value* v = obj.as_dict().find_str(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    case Value::Type::ns:
      if (const Value* v = obj.as_namespace().attributes.find_str(name)) return *v;
      return Value::undefined("'Namespace object' has no attribute '" + name + "'");
    case Value::Type::string:
    case Value::Type::list:
      if (auto m = bound_method(obj, name)) return *m;
      [[fallthrough]];
    default: return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + name + "'");
  }
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) runtime_error(obj.undefined_hint());
  if (key.is_int() || key.is_bool()) {
    int64_t i = key.to_int();
    if (obj.is_list() && !obj.is_generator()) {
      const auto& items = obj.as_list().items;
      if (i < 0) i += static_cast<int64_t>(items.size());
      if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[static_cast<size_t>(i)];
      return Value::undefined(std::string("'") + obj.type_name() + " object' has no element " + std::to_string(key.to_int()));
    }
    if (obj.is_string()) {
      const std::vector<size_t> at = char_offsets(obj.as_string());
      const auto n = static_cast<int64_t>(at.size() - 1);
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(obj.as_string().substr(at[static_cast<size_t>(i)], at[static_cast<size_t>(i) + 1] - at[static_cast<size_t>(i)]));
      return Value::undefined("'str object' has no element " + std::to_string(key.to_int()));
    }
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  }
  // jinja2 falls back to the attribute of that name for a string key (d['items'] is d.items).
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(std::string("'") + obj.type_name() + " object' has no element " + key.repr());
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.type()) {
    case Value::Type::undefined: return out;
    case Value::Type::list:
      charge(v.as_list().items.size());
      if (v.is_generator()) {
        if (v.as_list().consumed) return out;
        v.as_list().consumed = true;
      }
      return v.as_list().items;
    case Value::Type::dict:
      charge(v.as_dict().size());
      for (const auto& e : v.as_dict().entries()) out.push_back(e.first);
      return out;
    case Value::Type::string: {
      const std::string& s = v.as_string();
      charge(s.size());
      for (size_t i = 0; i < s.size();) {
        const size_t n = utf8_char_length(s, i);
        out.emplace_back(s.substr(i, n));
        i += n;
      }
      return out;
    }
    default: runtime_error(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

}  // namespace infer::jinja
