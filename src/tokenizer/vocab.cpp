#include "tokenizer/vocab.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <span>
#include <string_view>
#include <unordered_map>

#include "core/status_macros.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pretokenizer.hpp"

namespace infer {

namespace {

std::string key_of(std::string_view name) { return "tokenizer.ggml." + std::string(name); }

// Texts by which llama.cpp recognises special tokens that a file does not name by id. A token
// found this way is made a control token even when the file types it otherwise.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

// Tokens that end generation wherever they are (llama.cpp's list; also made control tokens).
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};

bool is_byte_token_text(std::string_view t) { return byte_token_value(t) >= 0; }

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int byte_token_value(std::string_view t) {
  const auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
  };
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>' || hex(t[3]) < 0 || hex(t[4]) < 0) return -1;
  return hex(t[3]) * 16 + hex(t[4]);
}

std::string byte_token_text(uint8_t b) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
}

std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (const char c : text) {
    if (c == ' ') out += kSpaceSymbol;
    else out += c;
  }
  return out;
}

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpaceSymbol.size()) == kSpaceSymbol) {
      out += ' ';
      i += kSpaceSymbol.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string spm_style_piece(const Vocab& vocab, int32_t id, bool render_special) {
  if (!vocab.valid(id)) return {};
  const uint32_t attr = vocab.attr[id];
  const std::string& text = vocab.text[id];
  if (attr & (token_attr::control | token_attr::unknown)) return render_special ? text : std::string();
  if (attr & token_attr::user_defined) return text;
  if (attr & token_attr::normal) return unescape_spaces(text);
  if (attr & token_attr::byte) return std::string(1, static_cast<char>(byte_token_value(text)));
  return {};  // unused and undefined tokens render as nothing, as in llama.cpp
}

bool Vocab::is_eog(int32_t id) const noexcept { return std::binary_search(eog.begin(), eog.end(), id); }


namespace {

// What differs between the tokenizer kinds when the vocabulary is built: llama.cpp's defaults
// and how a byte token is spelled.
struct VocabRules {
  int32_t bos = -1, eos = -1, unk = -1, sep = -1;  // default special ids (-1: none; dropped when out of range)
  bool add_bos = false;                             // default of tokenizer.ggml.add_bos_token
  bool add_space_prefix = false;                    // default of tokenizer.ggml.add_space_prefix
  bool (*is_byte_text)(std::string_view) = is_byte_token_text;  // a byte token's text is well formed
};

// The checks and load-time rules every kind shares (llama.cpp's llama_vocab::impl::load).
Result<Vocab> build_vocab(VocabFields& f, const VocabRules& rules) {
  const size_t n = f.tokens.size();
  if (n == 0) return malformed_file(key_of("tokens") + " is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return out_of_range(key_of("tokens") + " has " + std::to_string(n) + " entries, more than token ids can number");
  const std::string count = std::to_string(n);
  if (!f.scores.empty() && f.scores.size() != n)
    return malformed_file(key_of("scores") + " has " + std::to_string(f.scores.size()) + " entries but " +
                          key_of("tokens") + " has " + count);
  if (!f.token_types.empty() && f.token_types.size() != n)
    return malformed_file(key_of("token_type") + " has " + std::to_string(f.token_types.size()) + " entries but " +
                          key_of("tokens") + " has " + count);
  if (f.declared_vocab_size && *f.declared_vocab_size != static_cast<int64_t>(n))
    return malformed_file("the model's vocab_size is " + std::to_string(*f.declared_vocab_size) + " but " +
                          key_of("tokens") + " has " + count + " entries");

  Vocab v;
  v.text = std::move(f.tokens);
  v.score = f.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(f.scores);
  v.attr.assign(n, token_attr::normal);
  static constexpr uint32_t kAttrOfType[] = {0,
                                             token_attr::normal,
                                             token_attr::unknown,
                                             token_attr::control,
                                             token_attr::user_defined,
                                             token_attr::unused,
                                             token_attr::byte};
  for (size_t i = 0; i < n; ++i) {
    if (!f.token_types.empty()) {
      // llama.cpp quietly treats other values as "undefined"; a converter never writes them.
      const int32_t t = f.token_types[i];
      if (t < static_cast<int32_t>(TokenType::normal) || t > static_cast<int32_t>(TokenType::byte))
        return malformed_file(key_of("token_type") + "[" + std::to_string(i) + "] is " + std::to_string(t) +
                              "; token types are 1 (normal) to 6 (byte)");
      v.attr[i] = kAttrOfType[t];
    }
    // llama.cpp renames empty entries so that every token has a distinct, visible text.
    if (v.text[i].empty()) v.text[i] = "[EMPTY_" + std::to_string(i) + "]";
    if ((v.attr[i] & token_attr::byte) && !rules.is_byte_text(v.text[i]))
      return malformed_file(key_of("tokens") + "[" + std::to_string(i) + "] is a byte token but reads '" + v.text[i] +
                            "', which names no byte");
  }

  // Special ids: llama.cpp's defaults for the kind (dropped when out of range), replaced by the
  // file's keys.
  const auto in_range = [&](int64_t id) { return id >= 0 && id < static_cast<int64_t>(n); };
  v.bos = in_range(rules.bos) ? rules.bos : -1;
  v.eos = in_range(rules.eos) ? rules.eos : -1;
  v.unk = rules.unk;
  v.sep = in_range(rules.sep) ? rules.sep : -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  struct Slot {
    const char* key;
    const std::optional<int64_t>& given;
    int32_t& id;
  };
  // -1 (or its u32 spelling) is how some writers say "none" for a role without a default.
  const auto means_none = [](int64_t id) { return id == -1 || id == 0xFFFFFFFF; };
  const Slot slots[] = {{"bos_token_id", f.bos, v.bos},          {"eos_token_id", f.eos, v.eos},
                        {"eot_token_id", f.eot, v.eot},          {"eom_token_id", f.eom, v.eom},
                        {"unknown_token_id", f.unk, v.unk},      {"padding_token_id", f.pad, v.pad},
                        {"seperator_token_id", f.sep, v.sep},
                        {"fim_pre_token_id", f.fim_pre, fim_pre}, {"fim_suf_token_id", f.fim_suf, fim_suf},
                        {"fim_mid_token_id", f.fim_mid, fim_mid}, {"fim_pad_token_id", f.fim_pad, fim_pad},
                        {"fim_rep_token_id", f.fim_rep, fim_rep}, {"fim_sep_token_id", f.fim_sep, fim_sep}};
  for (const Slot& s : slots) {
    if (!s.given || (s.id < 0 && means_none(*s.given))) continue;
    if (!in_range(*s.given))
      return malformed_file(key_of(s.key) + " is " + std::to_string(*s.given) + ", outside the vocabulary of " + count +
                            " tokens");
    s.id = static_cast<int32_t>(*s.given);
  }
  v.add_bos = f.add_bos.value_or(rules.add_bos);
  v.add_eos = f.add_eos.value_or(false);
  v.add_space_prefix = f.add_space_prefix.value_or(rules.add_space_prefix);
  v.lowercase = f.lowercase.value_or(true);
  v.strip_accents = f.strip_accents.value_or(v.lowercase);

  // Lookup by text; a later duplicate wins, as in llama.cpp's text-to-id map.
  std::unordered_map<std::string_view, int32_t> by_text;
  by_text.reserve(n);
  for (size_t i = 0; i < n; ++i) by_text[v.text[i]] = static_cast<int32_t>(i);
  const auto find = [&](std::string_view t) -> int32_t {
    const auto it = by_text.find(t);
    return it == by_text.end() ? -1 : it->second;
  };

  // Special tokens the file does not name: recognised by their text, and made control tokens.
  const std::pair<int32_t*, std::span<const std::string_view>> roles[] = {
      {&v.eot, kEotTexts},        {&v.eom, kEomTexts},        {&fim_pre, kFimPreTexts}, {&fim_suf, kFimSufTexts},
      {&fim_mid, kFimMidTexts},   {&fim_pad, kFimPadTexts},   {&fim_rep, kFimRepTexts}, {&fim_sep, kFimSepTexts}};
  for (const auto& [id, texts] : roles) {
    if (*id >= 0) continue;
    for (std::string_view t : texts) {
      if (const int32_t found = find(t); found >= 0) {
        *id = found;
        v.attr[found] |= token_attr::control;
        break;
      }
    }
  }
  // Control tokens named "...unused..." are placeholders.
  for (size_t i = 0; i < n; ++i)
    if ((v.attr[i] & token_attr::control) && v.text[i].find("unused") != std::string::npos)
      v.attr[i] |= token_attr::unused;
  for (std::string_view t : kEndOfGenerationTexts) {
    if (const int32_t id = find(t); id >= 0) {
      v.eog.push_back(id);
      v.attr[id] |= token_attr::control;
    }
  }
  for (int32_t id : {fim_pad, fim_rep, fim_sep, v.eos, v.eot, v.eom})
    if (id >= 0) v.eog.push_back(id);
  std::sort(v.eog.begin(), v.eog.end());
  v.eog.erase(std::unique(v.eog.begin(), v.eog.end()), v.eog.end());

  for (size_t i = 0; i < n; ++i)
    if (v.attr[i] & (token_attr::control | token_attr::user_defined | token_attr::unknown))
      v.split_tokens.push_back(static_cast<int32_t>(i));
  std::stable_sort(v.split_tokens.begin(), v.split_tokens.end(),
                   [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });

  // Phi-3's special tokens swallow the whitespace after them (llama.cpp keys this on the name).
  const std::string name = lowercase(f.model_name);
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.split_tokens) v.attr[id] |= token_attr::rstrip;
    if (const int32_t id = find("</s>"); id >= 0) v.attr[id] |= token_attr::rstrip;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
      if (const int32_t id = find(t); id >= 0) v.attr[id] &= ~token_attr::rstrip;
  } else if (f.pre.find("jina-v2-de") != std::string::npos || f.pre.find("jina-v2-es") != std::string::npos ||
             f.pre.find("jina-v2-code") != std::string::npos) {
    // Jina's mask token takes the whitespace before it.
    if (const int32_t id = find("<mask>"); id >= 0) v.attr[id] |= token_attr::lstrip;
  }
  return v;
}

}  // namespace

Result<Vocab> build_sentencepiece_vocab(VocabFields f) {
  return build_vocab(f, VocabRules{.bos = 1, .eos = 2, .unk = 0, .add_bos = true, .add_space_prefix = true});
}

Result<Vocab> build_wordpiece_vocab(VocabFields f) {
  return build_vocab(f, VocabRules{.bos = 101, .unk = 100, .sep = 102, .add_bos = true});
}

Result<Vocab> build_bpe_vocab(VocabFields f) {
  const bool gemma4 = f.model == "gemma4";
  if (gemma4) f.pre = "gemma4";  // llama.cpp sets it for this model, whatever the file says
  const std::string pre_key = key_of("pre");
  const auto spec = find_pre_tokenizer(f.pre);
  if (!spec)
    return unsupported(pre_key + " '" + f.pre + "' is not a supported pre-tokenizer (supported: " +
                       supported_pre_tokenizers() + ")");
  const std::string merges_key = key_of("merges");
  if (!f.merges) return not_found(merges_key + " is missing: a BPE (" + f.model + ") vocabulary needs its merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(f.merges->size());
  for (size_t i = 0; i < f.merges->size(); ++i) {
    const std::string& m = (*f.merges)[i];
    // llama.cpp splits at the first space after the first byte (a part may start with a space).
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos)
      return malformed_file(merges_key + "[" + std::to_string(i) + "] is '" + m +
                            "': expected two parts separated by a space");
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  VocabRules rules{.add_bos = spec->add_bos};
  if (!gemma4) rules.bos = rules.eos = 11;
  if (spec->byte_encode) rules.is_byte_text = is_byte_level_char;
  INFER_ASSIGN_OR_RETURN(Vocab v, build_vocab(f, rules));
  if (spec->always_bos) v.add_bos = true;
  v.merges = std::move(merges);
  v.pre = std::move(f.pre);
  return v;
}

}  // namespace infer
