// The syntax tree of a Jinja template, as the parser builds it and the interpreter walks it.
// Nodes are plain structs with a kind; each kind uses the fields its comment names.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.hpp"

namespace infer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    literal,    // value
    name,       // name
    list,       // items (tuple: flag)
    dict,       // items: key, value, key, value, ...
    getattr,    // items[0].name
    getitem,    // items[0][items[1]]
    slice,      // items[0][items[1]:items[2]:items[3]] (null: omitted)
    call,       // items[0](items[1..], kwargs)
    filter,     // items[0] | name(items[1..], kwargs); items[0] null in a {% filter %} block or {% set x | f %}
    test,       // items[0] is [not (flag)] name(items[1..], kwargs)
    negate,     // -items[0]
    plus,       // +items[0]
    logical_not,  // not items[0]
    binary,     // items[0] op items[1]: + - * / // % **
    logical_and,  // items[0] and items[1]
    logical_or,   // items[0] or items[1]
    compare,    // items[0] ops[0] items[1] ops[1] items[2] ...: == != < <= > >= in notin
    concat,     // items[0] ~ items[1] ~ ...
    conditional,  // items[1] if items[0] else items[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // of the subtree (the interpreter recurses this deep)
  bool flag = false;
  std::string name;  // name, attribute, filter or test name, binary operator
  Value value;
  std::vector<ExprPtr> items;
  KeywordArgs kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// What {% set %}, {% for %} and {% with %} assign: a name, names to unpack, or ns.attr.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;     // "a, b" or "(a, b)"
  std::string attribute;   // set ns.attribute (names[0] is ns)
};

// A macro's or a call block's parameters: names with their default values (null: none).
struct Params {
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;
};

struct Stmt {
  enum class Kind {
    text,        // text
    output,      // {{ expr }}
    if_,         // branches: (condition, body)...; else_body
    for_,        // for target in expr [if condition] ... body [else else_body]
    set,         // set target = expr
    set_block,   // set target [| filters] ... body endset
    macro,       // macro name(params) body endmacro
    call_block,  // call(params) expr body endcall
    filter_block,  // filter filters body endfilter
    with,        // with targets = exprs ... body endwith (values in with_values)
    scope,       // {% generation %} body {% endgeneration %}: the body as it is
    break_,
    continue_,
  };
  Kind kind;
  int line = 0;
  std::string text;  // text; macro name
  ExprPtr expr;      // output, for iterable, set value, call block's call
  ExprPtr condition;  // for ... if condition
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  Params params;
  std::vector<ExprPtr> filters;   // set_block, filter_block: filter nodes without a value
  std::vector<Target> with_targets;
  std::vector<ExprPtr> with_values;
  // A macro's or call block's body refers to varargs / kwargs / caller (jinja2 accepts extra
  // arguments only then).
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct Program {
  Body body;
};

}  // namespace infer::jinja
