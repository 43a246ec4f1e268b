// The tokenizer files of a Hugging Face directory → tokenizer.* keys (see hf_directory.hpp).
#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "core/mapped_file.hpp"
#include "core/status_macros.hpp"
#include "format/hf_directory.hpp"
#include "format/json.hpp"
#include "format/sentencepiece_model.hpp"
#include "format/vocab_fields.hpp"

namespace infer::hf {
namespace {

namespace fs = std::filesystem;
using json::Json;

constexpr uint64_t kMaxTokenizerBytes = 512ull << 20;

Result<std::string> read_text(const fs::path& p) {
  auto f = MappedFile::open(p.string(), MapMode::read);
  if (!f.ok()) return f.status();
  if (f->size() > kMaxTokenizerBytes) return out_of_range(p.string() + ": larger than " + std::to_string(kMaxTokenizerBytes) + " bytes");
  return std::string(reinterpret_cast<const char*>(f->data()), static_cast<size_t>(f->size()));
}

Result<std::optional<Json>> read_json_if_present(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::optional<Json>();
  INFER_ASSIGN_OR_RETURN(std::string text, read_text(p));
  INFER_ASSIGN_OR_RETURN(Json doc, json::parse(text, p.string()));
  if (!doc.is_object()) return malformed_file(p.string() + ": not a JSON object");
  return std::optional<Json>(std::move(doc));
}

// A special token in tokenizer_config.json: "text" or {"content": "text", ...}.
std::optional<std::string> token_text(const Json& cfg, const char* key) {
  const Json* v = json::member(cfg, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (const std::string* s = v->is_object() ? json::get_string(*v, "content") : nullptr) return *s;
  return std::nullopt;
}

// The pre-tokenizer of a byte-level BPE tokenizer.json as llama.cpp's tokenizer.ggml.pre name.
// convert_hf_to_gguf.py tells them apart by hashing the tokenization of a test text; here the
// pre-tokenizer's definition itself is matched against the ones those models ship.
constexpr std::string_view kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string pre_signature(const Json& pre) {
  if (!pre.is_object()) return pre.is_null() ? "none" : "?";
  const std::string* type = json::get_string(pre, "type");
  if (!type) return "?";
  if (*type == "Sequence") {
    const Json* items = json::member(pre, "pretokenizers");
    if (!items || !items->is_array()) return "?";
    std::string out;
    for (const Json& p : *items) out += (out.empty() ? "" : "+") + pre_signature(p);
    return out;
  }
  if (*type == "ByteLevel") return json::get_bool(pre, "use_regex").value_or(true) ? "ByteLevel(regex)" : "ByteLevel";
  if (*type == "Digits") return json::get_bool(pre, "individual_digits").value_or(false) ? "Digits(1)" : "Digits";
  if (*type == "Split") {
    const Json* pattern = json::member(pre, "pattern");
    const std::string* regex = pattern ? json::get_string(*pattern, "Regex") : nullptr;
    if (!regex) return "Split(?)";
    if (*regex == kLlama3Regex) return "Split(llama3)";
    if (*regex == kQwen2Regex) return "Split(qwen2)";
    return "Split(?)";
  }
  return *type;
}

Result<std::string> pre_name(const Json& tok, const std::string& where) {
  const Json* pre = json::member(tok, "pre_tokenizer");
  const std::string sig = pre ? pre_signature(*pre) : "none";
  if (sig == "Split(llama3)+ByteLevel") return std::string("llama-bpe");
  if (sig == "Split(qwen2)+ByteLevel") return std::string("qwen2");
  if (sig == "Digits(1)+ByteLevel(regex)") return std::string("smollm");
  if (sig == "ByteLevel(regex)") return std::string("gpt-2");
  return unsupported(where + ": pre-tokenizer " + sig +
                     " is not one libinfer recognises (Llama 3's, Qwen2's, SmolLM's and GPT-2's are)");
}

// tokenizer.json (byte-level BPE) → VocabFields as convert_hf_to_gguf.py's _set_vocab_gpt2.
Result<VocabFields> from_tokenizer_json(const Json& tok, const std::string& where, int64_t config_vocab) {
  const Json* model = json::member(tok, "model");
  if (!model || !model->is_object()) return malformed_file(where + ": model missing or not an object");
  const std::string* type = json::get_string(*model, "type");
  if (!type || *type != "BPE")
    return unsupported(where + ": model type '" + (type ? type->substr(0, 32) : std::string("?")) +
                       "' is not supported (byte-level BPE is; SentencePiece models need their tokenizer.model)");
  const Json* pre = json::member(tok, "pre_tokenizer");
  const bool byte_level = pre && pre_signature(*pre).find("ByteLevel") != std::string::npos;
  const bool spm = !byte_level && json::get_bool(*model, "byte_fallback").value_or(false);
  if (!byte_level && !spm)
    return unsupported(where + ": a BPE tokenizer.json that is neither byte-level nor SentencePiece-style (byte "
                       "fallback) is not supported");
  VocabFields f;
  f.model = spm ? "llama" : "gpt2";
  if (!spm) {
    INFER_ASSIGN_OR_RETURN(f.pre, pre_name(tok, where));
  }
  const Json* vocab = json::member(*model, "vocab");
  if (!vocab || !vocab->is_object()) return malformed_file(where + ": model.vocab missing or not an object");
  constexpr int64_t kMaxVocab = 1 << 24;
  std::vector<std::optional<std::string>> by_id;
  std::vector<int32_t> types;
  auto place = [&](const std::string& text, const Json& id_json, int32_t token_type) -> Status {
    if (!id_json.is_number_unsigned() || id_json.get<uint64_t>() >= static_cast<uint64_t>(kMaxVocab))
      return malformed_file(where + ": token '" + text.substr(0, 64) + "': id is not an integer below 2^24");
    const size_t id = id_json.get<size_t>();
    if (id >= by_id.size()) {
      by_id.resize(id + 1);
      types.resize(id + 1, 1);
    }
    if (by_id[id] && *by_id[id] != text)
      return malformed_file(where + ": id " + std::to_string(id) + " names two tokens");
    by_id[id] = text;
    types[id] = token_type;
    return Status::ok();
  };
  for (const auto& [text, id] : vocab->items()) INFER_RETURN_IF_ERROR(place(text, id, 1));
  if (const Json* added = json::member(tok, "added_tokens"); added && added->is_array())
    for (const Json& a : *added) {
      const std::string* content = json::get_string(a, "content");
      const Json* id = json::member(a, "id");
      if (!content || !id) return malformed_file(where + ": added_tokens entries need content and id");
      // convert: special tokens (and ones that look special) are control, the others user-defined.
      const bool special = json::get_bool(a, "special").value_or(false) || token_looks_special(*content);
      INFER_RETURN_IF_ERROR(place(*content, *id, special ? 3 : 4));
    }
  if (config_vocab > static_cast<int64_t>(by_id.size()) && config_vocab <= kMaxVocab) {
    by_id.resize(static_cast<size_t>(config_vocab));
    types.resize(static_cast<size_t>(config_vocab), 1);
  }
  for (size_t i = 0; i < by_id.size(); ++i) {
    if (by_id[i]) {
      f.tokens.push_back(*by_id[i]);
    } else {  // holes and padding up to the embedding's rows, as convert names them
      f.tokens.push_back("[PAD" + std::to_string(i) + "]");
      types[i] = 4;
    }
  }
  f.token_types = std::move(types);
  const Json* merges = json::member(*model, "merges");
  if (!merges || !merges->is_array()) return malformed_file(where + ": model.merges missing or not an array");
  std::vector<std::string> m;
  m.reserve(merges->size());
  for (const Json& e : *merges) {
    if (e.is_string()) m.push_back(e.get<std::string>());
    else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string())
      m.push_back(e[0].get<std::string>() + " " + e[1].get<std::string>());
    else return malformed_file(where + ": model.merges entries must be \"a b\" or [a, b]");
  }
  if (!spm) {
    f.merges = std::move(m);
    return f;
  }
  // SentencePiece-style BPE (Llama, Gemma): the "llama" vocabulary libsentencepiece runs, which
  // merges the adjacent pair whose result has the highest score. tokenizer.json keeps the merges'
  // order instead of scores, so each piece scores minus the rank of the first merge that makes
  // it: the same merge order. (convert_hf_to_gguf.py's LlamaHfVocab writes -1000 for every piece,
  // which loses the order: a checkpoint that ships its tokenizer.model is read from that instead.)
  std::unordered_map<std::string, size_t> id_of;
  for (size_t i = 0; i < f.tokens.size(); ++i) id_of.emplace(f.tokens[i], i);
  f.scores.assign(f.tokens.size(), 0.0f);
  std::vector<uint8_t> made(f.tokens.size(), 0);
  for (size_t r = 0; r < m.size(); ++r) {
    const size_t space = m[r].find(' ', 1);
    if (space == std::string::npos) return malformed_file(where + ": merge " + std::to_string(r) + " has no space");
    const auto it = id_of.find(m[r].substr(0, space) + m[r].substr(space + 1));
    if (it == id_of.end() || made[it->second]) continue;
    made[it->second] = 1;
    f.scores[it->second] = -static_cast<float>(r);
  }
  const std::string* unk = json::get_string(*model, "unk_token");
  for (size_t i = 0; i < f.tokens.size(); ++i) {
    const std::string& t = f.tokens[i];
    if (f.token_types[i] != 1) continue;
    if (unk && t == *unk) {
      f.token_types[i] = 2;
      f.unk = static_cast<int64_t>(i);
    } else if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>') {
      f.token_types[i] = 6;
    } else if (!made[i] && t.size() > 1) {
      // Never made by a merge: ranked last, as the tokenizer never builds it.
      f.scores[i] = -static_cast<float>(m.size() + i);
    }
  }
  // The dummy prefix: a Prepend("▁") normalizer or a Metaspace pre-tokenizer that prepends.
  bool prefix = false;
  std::vector<const Json*> parts = {json::member(tok, "normalizer"), pre};
  for (size_t i = 0; i < parts.size(); ++i) {
    const Json* p = parts[i];
    if (!p || !p->is_object()) continue;
    const std::string* kind = json::get_string(*p, "type");
    if (!kind) continue;
    if (*kind == "Sequence") {
      for (const char* key : {"normalizers", "pretokenizers"})
        if (const Json* list = json::member(*p, key); list && list->is_array())
          for (const Json& e : *list) parts.push_back(&e);
    } else if (*kind == "Prepend") {
      prefix = true;
    } else if (*kind == "Metaspace") {
      const std::string* scheme = json::get_string(*p, "prepend_scheme");
      prefix = prefix || (scheme ? *scheme != "never" : json::get_bool(*p, "add_prefix_space").value_or(true));
    }
  }
  if (!prefix) f.add_space_prefix = false;
  return f;
}

// What convert_hf_to_gguf.py's _create_vocab_sentencepiece adds to a tokenizer.model's pieces:
// the vocabulary padded (or cut) to config.json's vocab_size with "[PADn]" (unused, score -10000),
// added_tokens.json's tokens (user-defined, -1000), and tokenizer_config.json's
// added_tokens_decoder (control when special or looking special, else user-defined with "▁" as
// spaces; -1000).
Status add_sentencepiece_extras(const fs::path& root, int64_t config_vocab, VocabFields& f) {
  constexpr int64_t kMaxVocab = 1 << 24;
  if (config_vocab > 0 && config_vocab <= kMaxVocab && config_vocab != static_cast<int64_t>(f.tokens.size())) {
    const size_t n = static_cast<size_t>(config_vocab);
    for (size_t i = f.tokens.size(); i < n; ++i) f.tokens.push_back("[PAD" + std::to_string(i) + "]");
    f.tokens.resize(n);
    f.scores.resize(n, -10000.0f);
    f.token_types.resize(n, static_cast<int32_t>(TokenType::unused));
  }
  const int64_t n = static_cast<int64_t>(f.tokens.size());
  auto set = [&](int64_t id, std::string text, TokenType type) {
    if (id < 0 || id >= n) return;  // convert ignores ids out of range
    f.tokens[static_cast<size_t>(id)] = std::move(text);
    f.scores[static_cast<size_t>(id)] = -1000.0f;
    f.token_types[static_cast<size_t>(id)] = static_cast<int32_t>(type);
  };
  INFER_ASSIGN_OR_RETURN(auto added, read_json_if_present(root / "added_tokens.json"));
  if (added)
    for (const auto& [text, id] : added->items())
      if (id.is_number_integer()) set(id.get<int64_t>(), text, TokenType::user_defined);
  INFER_ASSIGN_OR_RETURN(auto tcfg, read_json_if_present(root / "tokenizer_config.json"));
  const Json* decoder = tcfg ? json::member(*tcfg, "added_tokens_decoder") : nullptr;
  if (decoder && decoder->is_object())
    for (const auto& [key, data] : decoder->items()) {
      const std::string* content = json::get_string(data, "content");
      if (!content || key.empty() || key.size() > 9 || !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }))
        continue;
      const int64_t id = std::stoll(key);
      if (json::get_bool(data, "special").value_or(false) || token_looks_special(*content)) {
        set(id, *content, TokenType::control);
      } else {
        std::string text;
        for (size_t i = 0; i < content->size();) {  // user-defined spaces pre-normalized, as convert does
          if (content->compare(i, 3, "\xE2\x96\x81") == 0) {
            text += ' ';
            i += 3;
          } else {
            text += (*content)[i++];
          }
        }
        set(id, std::move(text), TokenType::user_defined);
      }
    }
  return Status::ok();
}

std::optional<int64_t> find_token(const VocabFields& f, const std::string& text) {
  for (size_t i = 0; i < f.tokens.size(); ++i)
    if (f.tokens[i] == text) return static_cast<int64_t>(i);
  return std::nullopt;
}

}  // namespace

Status read_tokenizer(const std::string& dir, Metadata& md) {
  const fs::path root(dir);
  std::error_code ec;
  INFER_ASSIGN_OR_RETURN(auto config, read_json_if_present(root / "config.json"));
  const int64_t config_vocab = config ? json::get_int(*config, "vocab_size").value_or(0) : 0;
  VocabFields f;
  if (fs::is_regular_file(root / "tokenizer.model", ec)) {
    const std::string path = (root / "tokenizer.model").string();
    INFER_ASSIGN_OR_RETURN(std::string bytes, read_text(root / "tokenizer.model"));
    auto model = parse_sentencepiece_model(bytes);
    if (!model.ok()) return model.status().with_context(path);
    auto fields = vocab_fields_from_sentencepiece(*model);
    if (!fields.ok()) return fields.status().with_context(path);
    // (convert's Gemma3Model also forces add_space_prefix false; Gemma 3's tokenizer.model has no
    // dummy prefix, which vocab_fields_from_sentencepiece writes as that same false.)
    f = std::move(fields).value();
    INFER_RETURN_IF_ERROR(add_sentencepiece_extras(root, config_vocab, f));
  } else if (fs::is_regular_file(root / "tokenizer.json", ec)) {
    const fs::path p = root / "tokenizer.json";
    INFER_ASSIGN_OR_RETURN(auto tok, read_json_if_present(p));
    INFER_ASSIGN_OR_RETURN(f, from_tokenizer_json(*tok, p.string(), config_vocab));
  } else {
    return not_found(dir + ": no tokenizer.model or tokenizer.json");
  }

  INFER_ASSIGN_OR_RETURN(auto tcfg, read_json_if_present(root / "tokenizer_config.json"));
  INFER_ASSIGN_OR_RETURN(auto gen, read_json_if_present(root / "generation_config.json"));
  std::optional<std::string> chat_template;
  if (tcfg) {
    struct Role {
      const char* key;
      std::optional<int64_t> VocabFields::*field;
    };
    for (const Role& r : {Role{"bos_token", &VocabFields::bos}, Role{"eos_token", &VocabFields::eos},
                          Role{"unk_token", &VocabFields::unk}, Role{"pad_token", &VocabFields::pad}}) {
      if (auto text = token_text(*tcfg, r.key))
        if (auto id = find_token(f, *text)) f.*r.field = *id;
    }
    if (auto b = json::get_bool(*tcfg, "add_bos_token")) f.add_bos = *b;
    if (auto e = json::get_bool(*tcfg, "add_eos_token")) f.add_eos = *e;
    if (const Json* t = json::member(*tcfg, "chat_template")) {
      if (t->is_string()) {
        chat_template = t->get<std::string>();
      } else if (t->is_array()) {  // [{"name": "default", "template": ...}, ...]
        for (const Json& e : *t)
          if (const std::string* n = json::get_string(e, "name"); n && *n == "default")
            if (const std::string* s = json::get_string(e, "template")) chat_template = *s;
      }
    }
  }
  if (fs::is_regular_file(root / "chat_template.jinja", ec)) {
    INFER_ASSIGN_OR_RETURN(std::string text, read_text(root / "chat_template.jinja"));
    chat_template = std::move(text);
  }
  if (gen) {
    if (!f.eos) {
      const Json* e = json::member(*gen, "eos_token_id");
      if (e && e->is_array() && !e->empty()) e = &(*e)[0];
      if (e && e->is_number_unsigned()) f.eos = e->get<int64_t>();
    }
    if (!f.bos)
      if (auto b = json::get_int(*gen, "bos_token_id")) f.bos = *b;
  }
  f.write_to(md);
  if (chat_template) md.set("tokenizer.chat_template", *chat_template);
  if (gen) {
    if (auto t = json::get_number(*gen, "temperature")) md.set("general.sampling.temp", static_cast<float>(*t));
    if (auto p = json::get_number(*gen, "top_p")) md.set("general.sampling.top_p", static_cast<float>(*p));
    if (auto k = json::get_int(*gen, "top_k")) md.set("general.sampling.top_k", static_cast<int32_t>(*k));
  }
  return Status::ok();
}

}  // namespace infer::hf
