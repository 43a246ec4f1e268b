// JSON documents from model directories (safetensors headers, config.json, tokenizer.json, ...),
// parsed with nlohmann::json (Debian's nlohmann-json3-dev, header-only) and checked the way the
// readers need: no exception escapes, a duplicate key in any object is an error (nlohmann would
// keep the last one silently), and nesting is bounded. Internal to src/format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "infer/status.hpp"

namespace infer::json {

using Json = nlohmann::json;

inline constexpr int kMaxDepth = 64;

// Parses `text`; malformed_file naming `what` (a path) on a syntax error, a duplicate key or
// nesting deeper than kMaxDepth.
Result<Json> parse(std::string_view text, const std::string& what);

// Typed access that never throws: nullopt / nullptr when the key is missing or of another type.
const Json* member(const Json& object, std::string_view key);
std::optional<int64_t> get_int(const Json& object, std::string_view key);  // integers only
std::optional<double> get_number(const Json& object, std::string_view key);
std::optional<bool> get_bool(const Json& object, std::string_view key);
const std::string* get_string(const Json& object, std::string_view key);

// The JSON type of a value, for messages: "a string", "an array", ...
const char* type_name(const Json& v);

}  // namespace infer::json
