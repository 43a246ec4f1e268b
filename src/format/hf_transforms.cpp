#include "format/hf_transforms.hpp"

#include <cmath>
#include <cstring>
#include <regex>

#include "core/status_macros.hpp"
#include "format/safetensors.hpp"

namespace infer::hf {
namespace {

constexpr int64_t kMaxRotation = int64_t{1} << 15;  // ops::kMaxInputRotation

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// A string or a list of strings (compressed-tensors' targets and ignore); absent: empty.
Result<std::vector<std::string>> string_list(const json::Json& object, const char* key, const std::string& at) {
  std::vector<std::string> out;
  const json::Json* v = json::member(object, key);
  if (!v || v->is_null()) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) return malformed_file(at + "." + key + " is " + json::type_name(*v) + ", not a string or a list");
  for (const json::Json& e : *v) {
    if (!e.is_string()) return malformed_file(at + "." + key + " holds " + json::type_name(e) + ", not a string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// compressed-tensors' target matching of a linear module: "Linear" (its class), the exact name,
// or "re:" and a regular expression matched from the start of the name (Python's re.match).
bool matches(const std::string& module, const std::string& target) {
  if (target == "Linear") return true;
  if (target.starts_with("re:")) {
    try {
      return std::regex_search(module, std::regex(target.substr(3)), std::regex_constants::match_continuous);
    } catch (const std::regex_error&) {
      return false;  // parse() compiled every pattern already
    }
  }
  return module == target;
}

}  // namespace

Result<InputRotations> InputRotations::parse(const json::Json& config, const std::string& where) {
  InputRotations r;
  const json::Json* q = json::member(config, "quantization_config");
  if (!q || !q->is_object()) return r;
  const json::Json* tc = json::member(*q, "transform_config");
  if (!tc || tc->is_null() || (tc->is_object() && tc->empty())) return r;
  const std::string at = where + ": quantization_config.transform_config";
  if (!tc->is_object()) return malformed_file(at + " is " + json::type_name(*tc) + ", not an object");
  const json::Json* groups = json::member(*tc, "config_groups");
  if (!groups || !groups->is_object()) return malformed_file(at + " has no config_groups object");
  for (const auto& [name, scheme] : groups->items()) {
    const std::string g = at + ".config_groups." + name.substr(0, 64);
    if (!scheme.is_object()) return malformed_file(g + " is " + json::type_name(scheme) + ", not an object");
    r.scheme_names_.push_back(name);
    const std::string* type = json::get_string(scheme, "type");
    if (!type) return malformed_file(g + " has no type");
    if (*type != "hadamard")
      return unsupported(g + ": transform type '" + type->substr(0, 32) +
                         "' is not supported (hadamard, Sylvester's matrix computed online, is)");
    if (json::get_bool(scheme, "randomize").value_or(false))
      return unsupported(g + ": randomized Hadamard transforms (a stored permutation) are not supported");
    int64_t head_dim = 0;
    if (const json::Json* h = json::member(scheme, "head_dim"); h && !h->is_null()) {
      const auto v = json::get_int(scheme, "head_dim");
      if (!v || !is_pow2(*v) || *v < 2 || *v > kMaxRotation)
        return unsupported(g + ".head_dim must be a power of two from 2 to " + std::to_string(kMaxRotation));
      head_dim = *v;
    }
    const json::Json* apply = json::member(scheme, "apply");
    if (!apply || apply->is_null()) continue;
    if (!apply->is_array()) return malformed_file(g + ".apply is " + json::type_name(*apply) + ", not a list");
    for (size_t i = 0; i < apply->size(); ++i) {
      const json::Json& a = (*apply)[i];
      const std::string ai = g + ".apply[" + std::to_string(i) + "]";
      if (!a.is_object()) return malformed_file(ai + " is " + json::type_name(a) + ", not an object");
      const std::string* location = json::get_string(a, "location");
      if (!location) return malformed_file(ai + " has no location");
      if (*location == "weight_input" || *location == "weight_output") continue;  // folded into the weights
      if (*location != "input")
        return unsupported(ai + ": online '" + location->substr(0, 32) +
                           "' transforms are not supported (input ones, and those folded into the weights, are)");
      Scheme s;
      s.name = name;
      s.head_dim = head_dim;
      INFER_ASSIGN_OR_RETURN(s.targets, string_list(a, "targets", ai));
      INFER_ASSIGN_OR_RETURN(s.ignore, string_list(a, "ignore", ai));
      for (const auto* list : {&s.targets, &s.ignore})
        for (const std::string& t : *list)
          if (t.starts_with("re:")) {
            try {
              std::regex check(t.substr(3));
            } catch (const std::regex_error&) {
              return unsupported(ai + ": pattern '" + t.substr(0, 96) + "' is not a regular expression libinfer reads");
            }
          }
      r.schemes_.push_back(std::move(s));
    }
  }
  return r;
}

Result<int32_t> InputRotations::of(const std::string& module, int64_t n) const {
  const Scheme* found = nullptr;
  for (const Scheme& s : schemes_) {
    const auto any = [&](const std::vector<std::string>& list) {
      for (const std::string& t : list)
        if (matches(module, t)) return true;
      return false;
    };
    if (!any(s.targets) || any(s.ignore)) continue;
    if (found)
      return unsupported(module + ": two online input transforms (" + found->name + ", " + s.name +
                         ") are not supported (one is)");
    found = &s;
  }
  if (!found) return 0;
  const int64_t size = found->head_dim > 0 ? found->head_dim : n;
  if (!is_pow2(size) || size < 2 || size > kMaxRotation || n % size != 0)
    return unsupported(module + ": transform " + found->name + " rotates blocks of " + std::to_string(size) + " of its " +
                       std::to_string(n) + " input columns (a power of two from 2 to " + std::to_string(kMaxRotation) +
                       " dividing them is supported)");
  return static_cast<int32_t>(size);
}

bool InputRotations::is_transform_tensor(const std::string& name) const {
  for (const std::string& s : scheme_names_)
    for (const char* location : {"_input.", "_output.", "_weight_input.", "_weight_output."})
      for (const char* leaf : {"weight", "perm"}) {
        const std::string tail = "." + s + location + leaf;
        if (name.size() > tail.size() && name.ends_with(tail)) return true;
      }
  return false;
}

std::string InputRotations::module_of(const std::string& tensor_name) {
  const size_t leaf = tensor_name.rfind('.');
  const size_t transform = leaf == std::string::npos ? leaf : tensor_name.rfind('.', leaf - 1);
  return transform == std::string::npos ? std::string() : tensor_name.substr(0, transform);
}

Status InputRotations::check_tensor(const safetensors::Tensor& t, DType dtype, int32_t module_rotation,
                                    const std::string& where) const {
  const std::string what = where + ": transform tensor '" + t.name.substr(0, 96) + "'";
  if (!t.name.ends_with("_input.weight") || t.name.ends_with("_weight_input.weight"))
    return unsupported(what + ": only online input transforms are supported");
  if (module_rotation == 0) return malformed_file(what + ": its module has no online input transform in transform_config");
  if (t.shape.size() != 2 || t.shape[0] != module_rotation || t.shape[1] != module_rotation)
    return malformed_file(what + " is not the " + std::to_string(module_rotation) + " x " + std::to_string(module_rotation) +
                          " matrix of its scheme");
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::f64)
    return malformed_file(what + " is not a float tensor");
  // Sylvester's H_n: entry (i, j) is c (-1)^popcount(i & j), the same c everywhere (1 as
  // compressed-tensors stores it, or 1/sqrt(n) in the tensor's precision).
  const int64_t n = module_rotation;
  const float c = safetensors::element_as_f32(dtype, t.data, 0);
  if (!(c > 0.0f) || !std::isfinite(c)) return unsupported(what + " is not Sylvester's Hadamard matrix");
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float want = (__builtin_popcountll(static_cast<uint64_t>(i & j)) & 1) != 0 ? -c : c;
      if (safetensors::element_as_f32(dtype, t.data, i * n + j) != want)
        return unsupported(what + " is not Sylvester's Hadamard matrix (entry [" + std::to_string(i) + ", " +
                           std::to_string(j) + "]): only the deterministic hadamard transform is supported");
    }
  return Status::ok();
}

}  // namespace infer::hf
