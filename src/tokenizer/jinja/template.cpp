#include "tokenizer/jinja/template.hpp"

#include <exception>
#include <new>

#include "tokenizer/jinja/interpreter.hpp"
#include "tokenizer/jinja/parser.hpp"

namespace infer::jinja {

Status status_of(const Error& error) {
  std::string message = error.line() > 0 ? "line " + std::to_string(error.line()) + ": " : "";
  switch (error.kind()) {
    case Error::Kind::syntax: return invalid_argument(message + "syntax error: " + error.what());
    case Error::Kind::unsupported: return unsupported(message + error.what());
    case Error::Kind::runtime: return invalid_argument(message + error.what());
    case Error::Kind::raised: return invalid_argument(message + "raise_exception: " + error.what());
    case Error::Kind::limit: return out_of_range(message + error.what());
  }
  return internal_error(message + error.what());
}

Result<Template> Template::parse(std::string_view text, const Limits& limits) {
  try {
    ParseLimits pl;
    pl.max_depth = limits.max_nesting;
    return Template(std::make_shared<const Program>(jinja::parse(text, pl)));
  } catch (const Error& e) {
    return status_of(e);
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory while parsing the template");
  } catch (const std::exception& e) {
    return internal_error(std::string("parsing the template: ") + e.what());
  }
}

Result<std::string> Template::render(const Dict& variables, const RenderOptions& options) const {
  try {
    Interpreter interpreter(options);
    return interpreter.render(*program_, variables);
  } catch (const Error& e) {
    return status_of(e);
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory while rendering the template");
  } catch (const std::exception& e) {
    return internal_error(std::string("rendering the template: ") + e.what());
  }
}

}  // namespace infer::jinja
