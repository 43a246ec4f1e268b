#include "format/json.hpp"

#include <unordered_set>
#include <vector>

namespace infer::json {

Result<Json> parse(std::string_view text, const std::string& what) {
  // One set of keys per open object, to find duplicates; the callback sees keys in order.
  std::vector<std::unordered_set<std::string>> open;
  std::string problem;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (!problem.empty()) return false;
    if (depth > kMaxDepth) {
      problem = "nested deeper than " + std::to_string(kMaxDepth) + " levels";
      return false;
    }
    switch (event) {
      case Json::parse_event_t::object_start: open.emplace_back(); break;
      case Json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open.empty() && parsed.is_string() && !open.back().insert(parsed.get_ref<const std::string&>()).second) {
          problem = "duplicate key \"" + parsed.get_ref<const std::string&>().substr(0, 96) + "\"";
          return false;
        }
        break;
      default: break;
    }
    return true;
  };
  Json doc = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (!problem.empty()) return malformed_file(what + ": " + problem);
  if (doc.is_discarded()) return malformed_file(what + ": not valid JSON");
  return doc;
}

const Json* member(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::optional<int64_t> get_int(const Json& object, std::string_view key) {
  const Json* v = member(object, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  return std::nullopt;
}

std::optional<double> get_number(const Json& object, std::string_view key) {
  const Json* v = member(object, key);
  if (!v || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<bool> get_bool(const Json& object, std::string_view key) {
  const Json* v = member(object, key);
  if (!v || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

const std::string* get_string(const Json& object, std::string_view key) {
  const Json* v = member(object, key);
  if (!v || !v->is_string()) return nullptr;
  return &v->get_ref<const std::string&>();
}

const char* type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    default: return "something else";
  }
}

}  // namespace infer::json
