// JSON for the Jinja interpreter: the |tojson filter as transformers defines it (Python's
// json.dumps with ensure_ascii, indent, separators and sort_keys), and the reading of a JSON
// document into Values (a conversation: objects keep their key order, as Python's json does).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/jinja/value.hpp"

namespace infer::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;             // transformers' default (json.dumps' is true)
  std::optional<std::string> indent;     // None: one line; else the text of one level
  std::optional<std::string> item_separator, key_separator;  // None: ", " / ": " (",", ": " with an indent)
  bool sort_keys = false;
};

// json.dumps(value): a TypeError (jinja::Error) for undefined, namespaces, callables and keys
// that are not str, int, float, bool or None. Nesting deeper than max_depth is an error.
std::string json_dump(const Value& value, const JsonDumpOptions& options, int max_depth = 256);

// A JSON document as Values: objects as dicts, arrays as lists, integers that fit in 64 bits as
// int (others as float), null as None. Throws jinja::Error (syntax) naming the byte offset.
Value json_parse(std::string_view text, int max_depth = 256);

}  // namespace infer::jinja
