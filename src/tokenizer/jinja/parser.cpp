#include "tokenizer/jinja/parser.hpp"

#include <algorithm>
#include <initializer_list>

#include "tokenizer/jinja/builtins.hpp"
#include "tokenizer/jinja/lexer.hpp"

namespace infer::jinja {

namespace {

using TK = Token::Kind;
using EK = Expr::Kind;
using SK = Stmt::Kind;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const ParseLimits& limits) : t_(std::move(tokens)), limits_(limits) {}

  Program run() {
    Program p;
    p.body = subparse({});
    return p;
  }

 private:
  // --- the token stream
  const Token& cur() const { return t_[pos_]; }
  const Token& look() const { return t_[std::min(pos_ + 1, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op) const { return cur().kind == TK::op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == TK::name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TK::text: return "template text";
      case TK::variable_begin: return "begin of print statement";
      case TK::variable_end: return "end of print statement";
      case TK::block_begin: return "begin of statement block";
      case TK::block_end: return "end of statement block";
      case TK::end: return "end of template";
      case TK::string: return "string";
      case TK::integer:
      case TK::floating: return t.text;
      default: return "'" + t.text + "'";
    }
  }

  [[noreturn]] void fail(const std::string& message, int line = 0) const {
    throw Error(Error::Kind::syntax, message, line ? line : cur().line);
  }
  [[noreturn]] void unsupported(const std::string& message, int line) const {
    throw Error(Error::Kind::unsupported, message, line);
  }

  // A filter or test jinja2 does not know fails the compilation, unless it is inside an if
  // statement's branch or a conditional expression (jinja2's "soft" frames): then only when it
  // is reached (templates guard |from_json with `if 'from_json' is filter`). One that jinja2 knows
  // and this interpreter does not fails when it is reached.
  void check_support(Support support, const char* what, const std::string& name, int line) {
    if (support == Support::unknown && !soft_) unknown_.push_back({std::string("no ") + what + " named '" + name + "'", line});
  }

  void fail_on_unknown() {
    if (!unknown_.empty()) fail(unknown_.front().first, unknown_.front().second);
  }

  // Parses a body with soft_ set as given (restored after).
  template <class F>
  auto with_soft(bool soft, F&& f) {
    const bool saved = soft_;
    soft_ = soft;
    auto result = f();
    soft_ = saved;
    return result;
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  void expect_kind(TK kind, const char* what) {
    if (cur().kind != kind) fail(std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }
  const Token& expect_name() {
    if (cur().kind != TK::name) fail("expected a name, got " + describe(cur()));
    return next();
  }

  // --- nesting
  struct DepthGuard {
    DepthGuard(Parser& parser, int line) : p(parser) {
      if (++p.depth_ > p.limits_.max_depth)
        throw Error(Error::Kind::limit, "the template nests deeper than " + std::to_string(p.limits_.max_depth) + " levels", line);
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  ExprPtr node(EK kind, int line, std::vector<ExprPtr> items = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->items = std::move(items);
    finish(*e);
    return e;
  }

  // Sets the subtree depth once items and kwargs are in place; a tree deeper than the limit
  // (a chain of 10000 '+') would overflow the interpreter's stack.
  void finish(Expr& e) const {
    int d = 0;
    for (const auto& c : e.items)
      if (c) d = std::max(d, c->depth);
    for (const auto& kv : e.kwargs) d = std::max(d, kv.second->depth);
    e.depth = d + 1;
    if (e.depth > limits_.max_depth)
      throw Error(Error::Kind::limit, "an expression nests deeper than " + std::to_string(limits_.max_depth) + " levels", e.line);
  }

  // --- statements
  Body subparse(std::initializer_list<std::string_view> end_names) {
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.kind == TK::end) {
        if (end_names.size() == 0) return body;
        std::string names;
        for (auto n : end_names) names += (names.empty() ? "'" : " or '") + std::string(n) + "'";
        fail("unexpected end of template: expected " + names);
      }
      if (t.kind == TK::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = SK::text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == TK::variable_begin) {
        const int line = next().line;
        auto s = std::make_unique<Stmt>();
        s->kind = SK::output;
        s->line = line;
        s->expr = parse_tuple(true, {});
        expect_kind(TK::variable_end, "end of print statement");
        fail_on_unknown();
        body.push_back(std::move(s));
      } else if (t.kind == TK::block_begin) {
        next();
        if (cur().kind == TK::name && std::find(end_names.begin(), end_names.end(), cur().text) != end_names.end()) return body;
        body.push_back(statement());
        expect_kind(TK::block_end, "end of statement block");
        fail_on_unknown();
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // The body of a block statement: its tag's end, the statements up to one of end_names; with
  // drop_needle that name is consumed.
  Body statements(std::initializer_list<std::string_view> end_names, bool drop_needle) {
    expect_kind(TK::block_end, "end of statement block");
    Body body = subparse(end_names);
    if (drop_needle) next();
    return body;
  }

  StmtPtr statement() {
    const Token& t = cur();
    if (t.kind != TK::name) fail("tag name expected, got " + describe(t));
    DepthGuard guard(*this, t.line);
    const std::string& n = t.text;
    if (n == "if") return parse_if();
    if (n == "for") return parse_for();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "call") return parse_call_block();
    if (n == "filter") return parse_filter_block();
    if (n == "with") return parse_with();
    if (n == "generation") return parse_generation();
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) fail("'" + n + "' outside of a loop");
      auto s = make_stmt(n == "break" ? SK::break_ : SK::continue_);
      next();
      return s;
    }
    static constexpr std::string_view kUnsupported[] = {"include", "import", "from", "extends", "block", "do",
                                                        "autoescape", "trans", "pluralize", "print"};
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), n) != std::end(kUnsupported))
      unsupported("the '" + n + "' statement is not supported", t.line);
    fail("unknown tag '" + n + "'");
  }

  StmtPtr make_stmt(SK kind) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = cur().line;
    return s;
  }

  StmtPtr parse_if() {
    auto s = make_stmt(SK::if_);
    next();
    for (;;) {
      ExprPtr test = parse_tuple(false, {});
      Body body = with_soft(true, [&] { return statements({"elif", "else", "endif"}, false); });
      s->branches.emplace_back(std::move(test), std::move(body));
      const Token& end = next();
      if (end.text == "elif") continue;
      if (end.text == "else") s->else_body = with_soft(true, [&] { return statements({"endif"}, true); });
      return s;
    }
  }

  StmtPtr parse_for() {
    auto s = make_stmt(SK::for_);
    next();
    s->target = parse_assign_target({"in"}, false);
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, {"recursive"});
    if (skip_name("if")) s->condition = parse_expression(true);
    if (is_name("recursive")) unsupported("recursive for loops are not supported", cur().line);
    ++loop_depth_;
    s->body = with_soft(false, [&] { return statements({"endfor", "else"}, false); });
    --loop_depth_;
    if (next().text == "else") s->else_body = statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_set() {
    auto s = make_stmt(SK::set);
    next();
    s->target = parse_assign_target({}, true);
    if (skip_op("=")) {
      s->expr = parse_tuple(true, {});
      return s;
    }
    if (s->target.unpack || !s->target.attribute.empty()) fail("a block {% set %} assigns one name");
    s->kind = SK::set_block;
    s->filters = parse_filters(false);
    s->body = with_soft(false, [&] { return statements({"endset"}, true); });
    return s;
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(SK::macro);
    next();
    s->text = expect_name().text;
    parse_signature(s->params);
    with_callable(*s, [&] { s->body = statements({"endmacro"}, true); });
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make_stmt(SK::call_block);
    next();
    if (is_op("(")) parse_signature(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != EK::call) fail("expected a call after {% call %}", s->line);
    with_callable(*s, [&] { s->body = statements({"endcall"}, true); });
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(SK::filter_block);
    next();
    s->filters = parse_filters(true);
    s->body = with_soft(false, [&] { return statements({"endfilter"}, true); });
    return s;
  }

  StmtPtr parse_with() {
    auto s = make_stmt(SK::with);
    next();
    while (cur().kind != TK::block_end) {
      if (!s->with_targets.empty()) expect_op(",");
      s->with_targets.push_back(parse_assign_target({}, false));
      expect_op("=");
      s->with_values.push_back(parse_expression(true));
    }
    s->body = with_soft(false, [&] { return statements({"endwith"}, true); });
    return s;
  }

  StmtPtr parse_generation() {
    auto s = make_stmt(SK::scope);
    next();
    s->body = with_soft(false, [&] { return statements({"endgeneration"}, true); });
    return s;
  }

  // A macro or call block body: loops outside it do not count, its uses of varargs, kwargs and
  // caller are recorded.
  template <class F>
  void with_callable(Stmt& s, F&& parse_body) {
    const int loops = loop_depth_;
    loop_depth_ = 0;
    callables_.push_back(&s);
    const bool soft = soft_;
    soft_ = false;
    parse_body();
    soft_ = soft;
    callables_.pop_back();
    loop_depth_ = loops;
  }

  void parse_signature(Params& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.names.empty()) expect_op(",");
      params.names.push_back(expect_name().text);
      if (skip_op("=")) params.defaults.push_back(parse_expression(true));
      else if (std::any_of(params.defaults.begin(), params.defaults.end(), [](const ExprPtr& d) { return d != nullptr; }))
        fail("non-default argument follows default argument");
      else params.defaults.push_back(nullptr);
    }
    expect_op(")");
  }

  // name | a, b | (a, b) | ns.attr (with_namespace)
  Target parse_assign_target(std::initializer_list<std::string_view> extra_end, bool with_namespace) {
    Target target;
    if (with_namespace && cur().kind == TK::name && look().kind == TK::op && look().text == ".") {
      target.names.push_back(next().text);
      next();
      target.attribute = expect_name().text;
      return target;
    }
    const bool parens = skip_op("(");
    for (;;) {
      const Token& t = cur();
      if (t.kind != TK::name) fail("can't assign to " + describe(t));
      if (t.text == "true" || t.text == "false" || t.text == "none" || t.text == "True" || t.text == "False" || t.text == "None")
        fail("can't assign to '" + t.text + "'");
      target.names.push_back(next().text);
      if (!skip_op(",")) break;
      target.unpack = true;
      if ((parens && is_op(")")) || cur().kind == TK::block_end) break;
      if (cur().kind == TK::name && std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end()) break;
    }
    if (parens) {
      expect_op(")");
      target.unpack = true;
    }
    return target;
  }

  // --- expressions, lowest precedence first (jinja2's Parser)
  ExprPtr parse_expression(bool with_condexpr) {
    if (!with_condexpr) return parse_or();
    const size_t unknown_before = unknown_.size();
    ExprPtr e = parse_or();
    while (is_name("if")) {
      unknown_.resize(unknown_before);
      const int line = next().line;
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_expression(true) : nullptr;
      std::vector<ExprPtr> items;
      items.push_back(std::move(test));
      items.push_back(std::move(e));
      items.push_back(std::move(otherwise));
      e = node(EK::conditional, line, std::move(items));
      unknown_.resize(unknown_before);
    }
    return e;
  }

  // Expressions separated by commas: a tuple when there is a comma.
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end, bool explicit_parens = false) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("expected an expression, got " + describe(cur()));
    }
    ExprPtr e = node(EK::list, line, std::move(items));
    e->flag = true;
    return e;
  }

  bool tuple_end(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = cur();
    if (t.kind == TK::variable_end || t.kind == TK::block_end || (t.kind == TK::op && t.text == ")")) return true;
    return t.kind == TK::name && std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
  }

  ExprPtr binary_chain(EK kind, const char* word, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while (is_name(word)) {
      const int line = next().line;
      std::vector<ExprPtr> items;
      items.push_back(std::move(left));
      items.push_back((this->*operand)());
      left = node(kind, line, std::move(items));
    }
    return left;
  }

  ExprPtr parse_or() { return binary_chain(EK::logical_or, "or", &Parser::parse_and); }
  ExprPtr parse_and() { return binary_chain(EK::logical_and, "and", &Parser::parse_not); }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const int line = next().line;
      DepthGuard guard(*this, line);
      std::vector<ExprPtr> items;
      items.push_back(parse_not());
      return node(EK::logical_not, line, std::move(items));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> items;
    std::vector<std::string> ops;
    for (;;) {
      const Token& t = cur();
      if (t.kind == TK::op && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        ops.push_back(next().text);
      } else if (is_name("in")) {
        next();
        ops.push_back("in");
      } else if (is_name("not") && look().kind == TK::name && look().text == "in") {
        next();
        next();
        ops.push_back("notin");
      } else {
        break;
      }
      items.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    items.insert(items.begin(), std::move(first));
    ExprPtr e = node(EK::compare, line, std::move(items));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr arithmetic(std::initializer_list<std::string_view> ops, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    for (;;) {
      const Token& t = cur();
      if (t.kind != TK::op || std::find(ops.begin(), ops.end(), t.text) == ops.end()) return left;
      const int line = t.line;
      std::string op = next().text;
      std::vector<ExprPtr> items;
      items.push_back(std::move(left));
      items.push_back((this->*operand)());
      left = node(EK::binary, line, std::move(items));
      left->name = std::move(op);
    }
  }

  ExprPtr parse_math1() { return arithmetic({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_math2() { return arithmetic({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return arithmetic({"**"}, &Parser::parse_unary_filtered); }

  ExprPtr parse_concat() {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    items.push_back(parse_math2());
    while (skip_op("~")) items.push_back(parse_math2());
    if (items.size() == 1) return std::move(items[0]);
    return node(EK::concat, line, std::move(items));
  }

  ExprPtr parse_unary_filtered() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    const int line = cur().line;
    DepthGuard guard(*this, line);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const bool minus = next().text == "-";
      std::vector<ExprPtr> items;
      items.push_back(parse_unary(false));
      e = node(minus ? EK::negate : EK::plus, line, std::move(items));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.kind == TK::name) {
      ExprPtr e = node(EK::literal, line);
      if (t.text == "true" || t.text == "True") e->value = Value(true);
      else if (t.text == "false" || t.text == "False") e->value = Value(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = EK::name;
        e->name = t.text;
        note_name(t.text);
      }
      next();
      return e;
    }
    if (t.kind == TK::string) {
      std::string s;
      while (cur().kind == TK::string) s += next().text;  // adjacent literals join
      ExprPtr e = node(EK::literal, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == TK::integer || t.kind == TK::floating) {
      ExprPtr e = node(EK::literal, line);
      e->value = t.kind == TK::integer ? Value(t.integer) : Value(t.floating);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      std::vector<ExprPtr> items;
      while (!is_op("]")) {
        if (!items.empty()) expect_op(",");
        if (is_op("]")) break;
        items.push_back(parse_expression(true));
      }
      expect_op("]");
      return node(EK::list, line, std::move(items));
    }
    if (is_op("{")) {
      next();
      std::vector<ExprPtr> items;
      while (!is_op("}")) {
        if (!items.empty()) expect_op(",");
        if (is_op("}")) break;
        items.push_back(parse_expression(true));
        expect_op(":");
        items.push_back(parse_expression(true));
      }
      expect_op("}");
      return node(EK::dict, line, std::move(items));
    }
    fail("unexpected " + describe(t));
  }

  void note_name(const std::string& n) {
    if (callables_.empty()) return;
    Stmt& s = *callables_.back();
    if (n == "varargs") s.uses_varargs = true;
    if (n == "kwargs") s.uses_kwargs = true;
    if (n == "caller") s.uses_caller = true;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        next();
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token& t = next();
    const int line = t.line;
    if (t.text == ".") {
      const Token& attr = next();
      std::vector<ExprPtr> items;
      items.push_back(std::move(obj));
      if (attr.kind == TK::name) {
        ExprPtr e = node(EK::getattr, line, std::move(items));
        e->name = attr.text;
        return e;
      }
      if (attr.kind != TK::integer) fail("expected a name or number after '.'", attr.line);
      ExprPtr index = node(EK::literal, line);
      index->value = Value(attr.integer);
      items.push_back(std::move(index));
      return node(EK::getitem, line, std::move(items));
    }
    // '[': an index, a slice, or a tuple of indexes
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    std::vector<ExprPtr> items;
    items.push_back(std::move(obj));
    if (args.size() == 1 && args[0]->kind == EK::slice) {
      for (auto& part : args[0]->items) items.push_back(std::move(part));
      return node(EK::slice, line, std::move(items));
    }
    if (args.size() == 1) {
      items.push_back(std::move(args[0]));
    } else {
      for (const ExprPtr& a : args)
        if (a->kind == EK::slice) unsupported("slices in a tuple of indexes (x[a:b, c]) are not supported", a->line);
      ExprPtr tuple = node(EK::list, line, std::move(args));
      tuple->flag = true;
      items.push_back(std::move(tuple));
    }
    return node(EK::getitem, line, std::move(items));
  }

  // An index, or a slice returned as a slice node holding start, stop, step.
  ExprPtr parse_subscribed() {
    const int line = cur().line;
    std::vector<ExprPtr> parts;
    if (is_op(":")) {
      next();
      parts.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      next();
      parts.push_back(std::move(e));
    }
    auto part = [&] { return is_op("]") || is_op(",") ? nullptr : parse_expression(true); };
    if (is_op(":")) parts.push_back(nullptr);
    else parts.push_back(part());
    if (skip_op(":")) parts.push_back(part());
    else parts.push_back(nullptr);
    return node(EK::slice, line, std::move(parts));
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) unsupported("*args and **kwargs in calls are not supported", cur().line);
      if (cur().kind == TK::name && look().kind == TK::op && look().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument");
        e.items.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
    finish(e);
  }

  ExprPtr parse_call(ExprPtr callee) {
    std::vector<ExprPtr> items;
    items.push_back(std::move(callee));
    ExprPtr e = node(EK::call, cur().line, std::move(items));
    parse_call_args(*e);
    return e;
  }

  // name[.name...][(args)] after a '|' (or after {% filter %})
  ExprPtr parse_filter(ExprPtr value) {
    const Token& t = expect_name();
    std::string name = t.text;
    while (skip_op(".")) name += "." + expect_name().text;
    check_support(filter_support(name), "filter", name, t.line);
    std::vector<ExprPtr> items;
    items.push_back(std::move(value));
    ExprPtr e = node(EK::filter, t.line, std::move(items));
    e->name = std::move(name);
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  std::vector<ExprPtr> parse_filters(bool start_inline) {
    std::vector<ExprPtr> filters;
    while (start_inline || skip_op("|")) {
      start_inline = false;
      filters.push_back(parse_filter(nullptr));
    }
    return filters;
  }

  ExprPtr parse_test(ExprPtr value) {
    const int line = next().line;  // "is"
    const bool negated = skip_name("not");
    const Token& t = expect_name();
    std::string name = t.text;
    while (skip_op(".")) name += "." + expect_name().text;
    check_support(test_support(name), "test", name, t.line);
    std::vector<ExprPtr> items;
    items.push_back(std::move(value));
    ExprPtr e = node(EK::test, line, std::move(items));
    e->name = std::move(name);
    e->flag = negated;
    const Token& c = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((c.kind == TK::name || c.kind == TK::string || c.kind == TK::integer || c.kind == TK::floating ||
                is_op("(") || is_op("[") || is_op("{")) &&
               !(c.kind == TK::name && (c.text == "else" || c.text == "or" || c.text == "and"))) {
      if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
      ExprPtr arg = parse_postfix(parse_primary());
      e->items.push_back(std::move(arg));
      finish(*e);
    }
    return e;
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  ParseLimits limits_;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<Stmt*> callables_;  // macros and call blocks being parsed, innermost last
  bool soft_ = false;              // inside an if statement's branch (see check_support)
  std::vector<std::pair<std::string, int>> unknown_;  // unknown filters and tests not yet forgiven
};

}  // namespace

Program parse(std::string_view source, const ParseLimits& limits) { return Parser(tokenize(source), limits).run(); }

}  // namespace infer::jinja
