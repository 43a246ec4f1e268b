// libFuzzer target for the Jinja chat-template interpreter. The input is a template text; it is
// parsed and, when it parses, rendered with a conversation that has every kind of value a chat
// template meets (strings with unicode, numbers, lists, dicts, None, tools with nested schemas).
// Any input must give a rendering or a failed Status with a message — never a crash, a sanitizer
// report, a hang, or an allocation out of proportion (run with -malloc_limit_mb; the limits are
// lowered here so that a slow input shows as a limit error, not a timeout). The seed corpus is
// the real templates of tests/data/chat_templates and the snippets of snippets.json
// (tests/fuzz/make_jinja_corpus.py).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tokenizer/jinja/json.hpp"
#include "tokenizer/jinja/template.hpp"

namespace {

const infer::jinja::Dict& variables() {
  static const infer::jinja::Dict vars = [] {
    using infer::jinja::Value;
    const Value v = infer::jinja::json_parse(R"({
      "messages": [
        {"role": "system", "content": "You are helpful. Ünïcödé ✓ 你好"},
        {"role": "user", "content": "  What's 2 + 2?\n"},
        {"role": "assistant", "content": "<think>easy</think>4", "reasoning_content": "sum",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2.5}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"result\": 4}"},
        {"role": "user", "content": [{"type": "text", "text": "and an image"}, {"type": "image"}]}
      ],
      "tools": [{"type": "function", "function": {"name": "add", "description": "Add.",
                 "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number", "enum": [1, 2]}},
                                "required": ["a"]}}}],
      "documents": null, "add_generation_prompt": true, "enable_thinking": false,
      "bos_token": "<s>", "eos_token": "</s>", "xs": [3, 1, 2], "n": -7, "f": 0.1, "t": true
    })");
    return v.as_dict();
  }();
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  infer::jinja::RenderOptions options;
  options.limits.max_work = 2000000;
  options.limits.max_iterations = 20000;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_range = 10000;
  std::tm now{};
  now.tm_year = 125;
  now.tm_mday = 1;
  options.now = now;
  auto t = infer::jinja::Template::parse(text, options.limits);
  if (!t.ok()) {
    if (t.status().message().empty()) std::abort();
    return 0;
  }
  auto out = t->render(variables(), options);
  if (!out.ok() && out.status().message().empty()) std::abort();
  if (out.ok() && out->size() > options.limits.max_output_bytes) std::abort();
  return 0;
}
