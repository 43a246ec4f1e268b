// A Jinja template as transformers' apply_chat_template runs it: jinja2's sandboxed environment
// (ImmutableSandboxedEnvironment: lists and dicts cannot be changed), trim_blocks and
// lstrip_blocks, the loopcontrols extension ({% break %}, {% continue %}), the filter tojson
// redefined as json.dumps(ensure_ascii=False, ...), the globals raise_exception and
// strftime_now, and {% generation %} blocks rendered as their body.
//
//   auto t = jinja::Template::parse(text);                 // syntax errors name the line
//   jinja::Dict vars;
//   vars.set("messages", jinja::json_parse(R"([{"role": "user", "content": "Hi"}])"));
//   vars.set("add_generation_prompt", true);
//   auto prompt = t->render(vars);
//
// Templates are untrusted input: parsing and rendering never crash and never loop or allocate
// without bound; the limits below end a render that goes too far with an `out_of_range` error.
// Errors are Statuses whose message starts with "line N: ":
//   invalid_argument  a syntax error, an error jinja2 raises while rendering (TypeError,
//                     UndefinedError, SecurityError), or raise_exception('message') ("line N:
//                     raise_exception: message")
//   unsupported       valid Jinja that this interpreter does not implement (named)
//   out_of_range      a limit reached
// docs/chat.md lists what is implemented and where the interpreter departs from Python.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "infer/status.hpp"
#include "tokenizer/jinja/value.hpp"

namespace infer::jinja {

struct Limits {
  size_t max_output_bytes = size_t{32} << 20;  // of the rendering, and of any string built
  uint64_t max_work = uint64_t{1} << 27;       // expression nodes evaluated + bytes and items built
  uint64_t max_iterations = 1000000;           // for-loop iterations, over the whole render
  int max_call_depth = 100;                    // macro calls in progress at once
  int max_nesting = 200;                       // nesting of expressions and blocks in the text
  int max_eval_depth = 1000;                   // expressions, blocks and macro calls being evaluated at once
  int64_t max_range = 100000;                  // items of range(), as jinja2's sandbox (MAX_RANGE)
};

struct RenderOptions {
  // The time strftime_now() formats; unset: the local time now (transformers: datetime.now()).
  std::optional<std::tm> now;
  Limits limits;
};

struct Program;

class Template {
 public:
  // The template text, parsed; `invalid_argument` for a syntax error, `unsupported` for a
  // construct that is not implemented, each naming the line.
  static Result<Template> parse(std::string_view text, const Limits& limits = {});

  // The template rendered with `variables` (messages, add_generation_prompt, bos_token, ...).
  Result<std::string> render(const Dict& variables, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

// The Status for a jinja::Error (see above for the codes).
Status status_of(const Error& error);

}  // namespace infer::jinja
