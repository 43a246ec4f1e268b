// The tree-walking interpreter behind Template::render: scopes as jinja2 has them (a loop
// iteration, a macro call and a with block each get their own; if does not), output capture for
// macros and block sets, and the accounting that enforces Limits. One Interpreter renders once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.hpp"
#include "tokenizer/jinja/template.hpp"

namespace infer::jinja {

struct Scope;

class Interpreter {
 public:
  Interpreter(const RenderOptions& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string render(const Program& program, const Dict& variables);

  // For the built-in filters, tests and functions.
  Value call(const Value& callee, Args& args);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  // Python's iteration: a list's items, a dict's keys, a string's characters; undefined is empty.
  std::vector<Value> iterate(const Value& v);
  // Counts work against Limits::max_work (and a string's size against max_output_bytes).
  void charge(uint64_t units);
  void check_size(size_t bytes);
  std::shared_ptr<Namespace> make_namespace();
  const RenderOptions& options() const { return options_; }

 private:
  enum class Flow { normal, break_, continue_ };

  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void assign(const Target& target, const Value& value, Scope& scope);
  void define_macro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value call_macro(const Stmt& def, const std::shared_ptr<Scope>& closure, Args& args);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v, const std::shared_ptr<Scope>& scope);
  void emit(std::string_view text);

  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  struct DepthGuard;
  Value eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope);
  Args eval_args(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope);
  Value lookup(const std::string& name, const Scope& scope) const;

  RenderOptions options_;
  std::string* out_ = nullptr;  // where output goes: the rendering, or a capture
  uint64_t work_ = 0;
  uint64_t iterations_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;  // the C++ recursion of eval and exec (Limits::max_eval_depth)
  // Macros hold their defining scope, which holds them, and namespaces can hold themselves: the
  // cycles are cut when the render ends.
  std::vector<std::shared_ptr<Scope>> closure_scopes_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

}  // namespace infer::jinja
