// The Jinja lexer, configured as transformers' apply_chat_template configures jinja2: default
// delimiters, trim_blocks and lstrip_blocks on, newlines normalized to "\n", one trailing newline
// of the template dropped. It cuts a template into text and the tokens of its tags:
//
//   "Hi {{ name|upper }}!{% if x %}..."
//    text("Hi ") variable_begin name(name) op(|) name(upper) variable_end text("!")
//    block_begin name(if) name(x) block_end ...
//
// Whitespace control is applied here, as in jinja2: "{%-" / "{{-" / "{#-" strip the whitespace
// before the tag, "-%}" / "-}}" / "-#}" the whitespace after it; trim_blocks drops the newline
// after a block or comment tag, lstrip_blocks the spaces and tabs before one on its line ("{%+"
// keeps them). Comments are dropped; {% raw %}...{% endraw %} becomes text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infer::jinja {

struct Token {
  enum class Kind { text, variable_begin, variable_end, block_begin, block_end, name, string, integer, floating, op, end };
  Kind kind;
  std::string text;      // text, name, string (escapes decoded), op ("//", "(", ...)
  int64_t integer = 0;
  double floating = 0;
  int line = 1;
};

// The tokens of `source`, ending with Kind::end. Throws jinja::Error (syntax) with the line for
// an unterminated tag, comment or string, or a character that starts no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace infer::jinja
