#include "format/vocab_fields.hpp"

#include <span>
#include <string_view>

#include "core/status_macros.hpp"

namespace infer {

namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";

// The special-id keys, in the order llama.cpp reads them. The deprecated FIM names fill the same
// slots as the current ones and are never written.
struct IdKey {
  const char* name;
  std::optional<int64_t> VocabFields::*field;
  bool deprecated = false;
};
constexpr IdKey kIdKeys[] = {
    {"bos_token_id", &VocabFields::bos},         {"eos_token_id", &VocabFields::eos},
    {"eot_token_id", &VocabFields::eot},         {"eom_token_id", &VocabFields::eom},
    {"unknown_token_id", &VocabFields::unk},     {"padding_token_id", &VocabFields::pad},
    {"seperator_token_id", &VocabFields::sep},
    {"fim_pre_token_id", &VocabFields::fim_pre}, {"fim_suf_token_id", &VocabFields::fim_suf},
    {"fim_mid_token_id", &VocabFields::fim_mid}, {"fim_pad_token_id", &VocabFields::fim_pad},
    {"fim_rep_token_id", &VocabFields::fim_rep}, {"fim_sep_token_id", &VocabFields::fim_sep},
    {"prefix_token_id", &VocabFields::fim_pre, true}, {"suffix_token_id", &VocabFields::fim_suf, true},
    {"middle_token_id", &VocabFields::fim_mid, true},
};

struct FlagKey {
  const char* name;
  std::optional<bool> VocabFields::*field;
};
constexpr FlagKey kFlagKeys[] = {
    {"add_bos_token", &VocabFields::add_bos},
    {"add_eos_token", &VocabFields::add_eos},
    {"add_space_prefix", &VocabFields::add_space_prefix},
    {"normalizer.lowercase", &VocabFields::lowercase},
    {"normalizer.strip_accents", &VocabFields::strip_accents},
};

std::string key_of(std::string_view name) { return std::string(kPrefix) + std::string(name); }

std::string kind_of(const Value& v) {
  if (const Array* a = v.as_array()) return std::string("array of ") + value_type_name(a->elem_type);
  return value_type_name(v.type());
}

Result<std::optional<int64_t>> read_id(const Metadata& md, const std::string& key) {
  const Value* v = md.find(key);
  if (!v) return std::optional<int64_t>();
  auto i = v->type() == ValueType::boolean ? std::nullopt : v->as_integer();
  if (!i) return malformed_file(key + ": expected an integer token id, found " + kind_of(*v));
  return std::optional<int64_t>(*i);
}

Result<std::optional<bool>> read_flag(const Metadata& md, const std::string& key) {
  const Value* v = md.find(key);
  if (!v) return std::optional<bool>();
  const bool* b = v->get_if<bool>();
  if (!b) return malformed_file(key + ": expected a boolean, found " + kind_of(*v));
  return std::optional<bool>(*b);
}

}  // namespace

void VocabFields::write_to(Metadata& md) const {
  md.set(key_of("model"), model);
  md.set(key_of("tokens"), Array::of_strings(tokens));
  if (!scores.empty()) md.set(key_of("scores"), Array::of(ValueType::f32, std::span<const float>(scores)));
  if (!token_types.empty())
    md.set(key_of("token_type"), Array::of(ValueType::i32, std::span<const int32_t>(token_types)));
  for (const IdKey& k : kIdKeys)
    if (const auto& v = this->*k.field; v && !k.deprecated) md.set(key_of(k.name), static_cast<uint32_t>(*v));
  for (const FlagKey& k : kFlagKeys)
    if (const auto& v = this->*k.field) md.set(key_of(k.name), *v);
  if (merges) md.set(key_of("merges"), Array::of_strings(*merges));
  if (!pre.empty()) md.set(key_of("pre"), pre);
}

Result<VocabFields> read_vocab_fields(const Metadata& md) {
  VocabFields f;
  const std::string model_key = key_of("model");
  const Value* model = md.find(model_key);
  if (!model) return not_found(model_key + " is missing: the file has no tokenizer");
  if (!model->as_string()) return malformed_file(model_key + ": expected a string, found " + kind_of(*model));
  f.model = *model->as_string();

  const std::string tokens_key = key_of("tokens");
  const Value* tokens = md.find(tokens_key);
  if (!tokens) return not_found(tokens_key + " is missing: the file has no vocabulary");
  if (!tokens->as_array() || tokens->as_array()->elem_type != ValueType::string)
    return malformed_file(tokens_key + ": expected an array of strings, found " + kind_of(*tokens));
  f.tokens = tokens->as_array()->strings;

  const std::string scores_key = key_of("scores");
  if (const Value* v = md.find(scores_key)) {
    const Array* a = v->as_array();
    if (a && a->elem_type == ValueType::f32) {
      const auto s = a->as<float>();
      f.scores.assign(s.begin(), s.end());
    } else if (a && a->elem_type == ValueType::i32) {  // llama.cpp accepts integer scores too
      for (int32_t s : a->as<int32_t>()) f.scores.push_back(static_cast<float>(s));
    } else {
      return malformed_file(scores_key + ": expected an array of f32, found " + kind_of(*v));
    }
    if (f.scores.size() != (a ? a->count : 0)) return malformed_file(scores_key + ": array data is truncated");
  }

  const std::string types_key = key_of("token_type");
  if (const Value* v = md.find(types_key)) {
    const Array* a = v->as_array();
    if (!a || a->elem_type != ValueType::i32)
      return malformed_file(types_key + ": expected an array of i32, found " + kind_of(*v));
    const auto t = a->as<int32_t>();
    if (t.size() != a->count) return malformed_file(types_key + ": array data is truncated");
    f.token_types.assign(t.begin(), t.end());
  }

  for (const IdKey& k : kIdKeys) {
    INFER_ASSIGN_OR_RETURN(auto id, read_id(md, key_of(k.name)));
    if (id) f.*k.field = id;
  }
  for (const FlagKey& k : kFlagKeys) {
    INFER_ASSIGN_OR_RETURN(auto flag, read_flag(md, key_of(k.name)));
    f.*k.field = flag;
  }
  if (const std::string* arch = md.get_string("general.architecture")) {
    INFER_ASSIGN_OR_RETURN(f.declared_vocab_size, read_id(md, *arch + ".vocab_size"));
  }
  if (const std::string* name = md.get_string("general.name")) f.model_name = *name;

  const std::string merges_key = key_of("merges");
  if (const Value* v = md.find(merges_key)) {
    if (!v->as_array() || v->as_array()->elem_type != ValueType::string)
      return malformed_file(merges_key + ": expected an array of strings, found " + kind_of(*v));
    f.merges = v->as_array()->strings;
  }
  const std::string pre_key = key_of("pre");
  if (const Value* v = md.find(pre_key)) {
    if (!v->as_string()) return malformed_file(pre_key + ": expected a string, found " + kind_of(*v));
    f.pre = *v->as_string();
  }
  return f;
}

}  // namespace infer
