// The Jinja parser: jinja2's grammar and operator precedence (its Parser class), over the tokens
// of the lexer. Statements: if / elif / else, for (with an inline `if`, else, break, continue),
// set (also ns.attr and the block form), macro, call, filter, with, generation (transformers'
// extension, rendered as its body) and raw. Anything else (include, import, extends, block, do,
// ...) is an `unsupported` error naming it and its line. Filters and tests are checked by name
// here, as jinja2 checks them when it compiles a template.
#pragma once

#include <string_view>

#include "tokenizer/jinja/ast.hpp"

namespace infer::jinja {

struct ParseLimits {
  int max_depth = 200;  // nesting of expressions and blocks together
};

// Throws jinja::Error (syntax or unsupported) with the line.
Program parse(std::string_view source, const ParseLimits& limits = {});

}  // namespace infer::jinja
