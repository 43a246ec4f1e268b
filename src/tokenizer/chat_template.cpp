#include "tokenizer/chat_template.hpp"

#include <array>
#include <optional>

#include "tokenizer/jinja/json.hpp"

namespace infer {

namespace {

constexpr std::array<ChatFormat, 8> kFormats = {
    ChatFormat::chatml,     ChatFormat::gemma,      ChatFormat::llama2,            ChatFormat::llama3,
    ChatFormat::mistral_v3, ChatFormat::mistral_v7, ChatFormat::mistral_v7_tekken, ChatFormat::zephyr,
};

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

// Python's str.strip() / Jinja's trim on ASCII whitespace.
std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(ws);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(ws) + 1 - begin);
}

std::string unsupported_template_message(std::string_view what) {
  return std::string(what) + "; choose a format by name (infer-chat: --chat-template NAME), one of: " +
         chat_format_name_list();
}

std::string end_of_turn_of(ChatFormat format) {
  switch (format) {
    case ChatFormat::chatml: return "<|im_end|>";
    case ChatFormat::gemma: return "<end_of_turn>";
    case ChatFormat::llama3: return "<|eot_id|>";
    case ChatFormat::llama2:
    case ChatFormat::mistral_v3:
    case ChatFormat::mistral_v7:
    case ChatFormat::mistral_v7_tekken:
    case ChatFormat::zephyr: return "</s>";
  }
  return "";
}

// Formats whose official template raises unless user and assistant alternate, user first.
bool needs_alternation(ChatFormat format) {
  return format == ChatFormat::gemma || format == ChatFormat::llama2 || format == ChatFormat::mistral_v3;
}

Status check_roles(std::span<const ChatMessage> messages, ChatFormat format) {
  size_t turn = 0;  // index among the non-system messages
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const std::string where = "chat message " + std::to_string(i) + ": ";
    if (role == "system") {
      if (i != 0) return invalid_argument(where + "a system message may only come first");
      continue;
    }
    if (role != "user" && role != "assistant")
      return invalid_argument(where + "role '" + role + "' is not one of system, user, assistant");
    if (needs_alternation(format) && (role == "user") != (turn % 2 == 0))
      return invalid_argument(where + "the " + chat_format_name(format) +
                              " format needs user and assistant turns to alternate, starting with user");
    ++turn;
  }
  return Status::ok();
}

void render_chatml(std::string& out, std::span<const ChatMessage> m, bool gen, const std::string& default_system) {
  if (!m.empty() && m[0].role != "system" && !default_system.empty())
    out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  for (const ChatMessage& msg : m) out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
}

// Gemma 3's template: the system message (kept as is) and "\n\n" open the first turn; every
// message's content is trimmed.
void render_gemma(std::string& out, std::span<const ChatMessage> m, bool gen) {
  std::string prefix;
  if (!m.empty() && m[0].role == "system") {
    prefix = m[0].content + "\n\n";
    m = m.subspan(1);
  }
  for (size_t i = 0; i < m.size(); ++i) {
    out += "<start_of_turn>";
    out += m[i].role == "assistant" ? "model" : m[i].role;
    out += "\n";
    if (i == 0) out += prefix;
    out += trim(m[i].content);
    out += "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
}

// Meta's Llama 2 chat template: the system block joins the first user message before strip().
void render_llama2(std::string& out, std::span<const ChatMessage> m) {
  std::string system;
  bool has_system = false;
  if (!m.empty() && m[0].role == "system") {
    system = m[0].content;
    has_system = true;
    m = m.subspan(1);
  }
  for (size_t i = 0; i < m.size(); ++i) {
    std::string content = i == 0 && has_system ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + m[i].content : m[i].content;
    if (m[i].role == "user") {
      if (i != 0) out += "<s>";  // the first BOS is the tokenizer's
      out += "[INST] ";
      out += trim(content);
      out += " [/INST]";
    } else {
      out += " ";
      out += trim(content);
      out += " </s>";
    }
  }
}

void render_llama3(std::string& out, std::span<const ChatMessage> m, bool gen) {
  for (const ChatMessage& msg : m) {
    out += "<|start_header_id|>" + msg.role + "<|end_header_id|>\n\n";
    out += trim(msg.content);
    out += "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// Mistral 7B v0.3's template: the system message goes into the *last* user message (when the
// conversation ends with an assistant message it appears nowhere, as in the original).
void render_mistral_v3(std::string& out, std::span<const ChatMessage> m) {
  std::string system;
  bool has_system = false;
  if (!m.empty() && m[0].role == "system") {
    system = m[0].content;
    has_system = true;
    m = m.subspan(1);
  }
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i].role == "user") {
      out += "[INST] ";
      if (i + 1 == m.size() && has_system) out += system + "\n\n";
      out += m[i].content + "[/INST]";
    } else {
      out += " ";
      out += trim(m[i].content);
      out += "</s>";
    }
  }
}

void render_mistral_v7(std::string& out, std::span<const ChatMessage> m, bool tekken) {
  const char* space = tekken ? "" : " ";
  for (const ChatMessage& msg : m) {
    if (msg.role == "system") out += std::string("[SYSTEM_PROMPT]") + space + msg.content + "[/SYSTEM_PROMPT]";
    else if (msg.role == "user") out += std::string("[INST]") + space + msg.content + "[/INST]";
    else out += space + msg.content + "</s>";
  }
}

void render_zephyr(std::string& out, std::span<const ChatMessage> m, bool gen, const std::string& end) {
  for (const ChatMessage& msg : m) out += "<|" + msg.role + "|>\n" + msg.content + end + "\n";
  if (gen) out += "<|assistant|>\n";
}

// Reads the Jinja string literal whose opening quote is at text[open]; nullopt when unterminated.
std::optional<std::string> read_string_literal(std::string_view text, size_t open) {
  const char quote = text[open];
  std::string value;
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == quote) return value;
    if (c != '\\' || i + 1 == text.size()) {
      value += c;
      continue;
    }
    const char e = text[++i];
    switch (e) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case '\\': case '\'': case '"': value += e; break;
      default: value += '\\'; value += e; break;
    }
  }
  return std::nullopt;
}

}  // namespace

const char* chat_format_name(ChatFormat format) noexcept {
  switch (format) {
    case ChatFormat::chatml: return "chatml";
    case ChatFormat::gemma: return "gemma";
    case ChatFormat::llama2: return "llama2";
    case ChatFormat::llama3: return "llama3";
    case ChatFormat::mistral_v3: return "mistral-v3";
    case ChatFormat::mistral_v7: return "mistral-v7";
    case ChatFormat::mistral_v7_tekken: return "mistral-v7-tekken";
    case ChatFormat::zephyr: return "zephyr";
  }
  return "?";
}

std::span<const ChatFormat> chat_formats() noexcept { return kFormats; }

std::string chat_format_name_list() {
  std::string names;
  for (ChatFormat f : kFormats) {
    if (!names.empty()) names += ", ";
    names += chat_format_name(f);
  }
  return names;
}

std::string chatml_default_system_message(std::string_view jinja) {
  constexpr std::string_view head = "<|im_start|>system\n";
  constexpr std::string_view tail = "<|im_end|>";
  for (size_t at = 0; at < jinja.size(); ++at) {
    if (jinja[at] != '\'' && jinja[at] != '"') continue;
    // A literal that opens with the system header: the escaped "\n" is two characters in the text.
    const std::string_view rest = jinja.substr(at + 1);
    if (!rest.starts_with("<|im_start|>system\\n") && !rest.starts_with(head)) continue;
    auto literal = read_string_literal(jinja, at);
    if (!literal) return {};
    const size_t end = literal->find(tail);
    if (literal->starts_with(head) && end != std::string::npos && end > head.size())
      return literal->substr(head.size(), end - head.size());
    at += literal->size();  // a bare header ('<|im_start|>system\n' + messages[0]...): keep looking
  }
  return {};
}

ChatTemplate::ChatTemplate(ChatFormat format, std::string end_of_turn, std::string default_system)
    : format_(format), end_of_turn_(std::move(end_of_turn)), default_system_(std::move(default_system)) {}

Result<ChatTemplate> ChatTemplate::from_name(std::string_view name) {
  for (ChatFormat f : kFormats)
    if (name == chat_format_name(f)) return ChatTemplate(f, end_of_turn_of(f), "");
  return invalid_argument("unknown chat template '" + std::string(name) + "'; the known ones are: " +
                          chat_format_name_list());
}

std::optional<ChatTemplate> ChatTemplate::recognise(std::string_view t) {
  auto make = [](ChatFormat f) { return ChatTemplate(f, end_of_turn_of(f), ""); };
  if (contains(t, "<|im_start|>")) {
    if (contains(t, "<|im_sep|>") || contains(t, "<end_of_utterance>")) return std::nullopt;  // Phi-4, SmolVLM
    return ChatTemplate(ChatFormat::chatml, end_of_turn_of(ChatFormat::chatml), chatml_default_system_message(t));
  }
  if (t.starts_with("mistral") || contains(t, "[INST]")) {
    if (contains(t, "[SYSTEM_PROMPT]"))
      return make(contains(t, "[SYSTEM_PROMPT] ") || contains(t, "[INST] ") ? ChatFormat::mistral_v7
                                                                              : ChatFormat::mistral_v7_tekken);
    if (contains(t, "<<SYS>>")) return make(ChatFormat::llama2);
    if (contains(t, "' [INST] '") || contains(t, "\" [INST] \"")) return std::nullopt;  // Mistral v1
    if (contains(t, "'[INST]'") || contains(t, "\"[INST]\"")) return std::nullopt;      // Mistral v3-tekken
    if (contains(t, "[AVAILABLE_TOOLS]") || contains(t, "system_message")) return make(ChatFormat::mistral_v3);
    return std::nullopt;
  }
  if (contains(t, "<start_of_turn>")) return make(ChatFormat::gemma);
  if (contains(t, "<|start_header_id|>") && contains(t, "<|end_header_id|>")) return make(ChatFormat::llama3);
  if (contains(t, "<|user|>") && contains(t, "<|assistant|>") && !contains(t, "<|end|>")) {
    // HuggingFaceH4's Zephyr ends turns with eos_token ("</s>"); StableLM Zephyr spells <|endoftext|>.
    if (contains(t, "eos_token") || contains(t, "</s>")) return make(ChatFormat::zephyr);
    if (contains(t, "<|endoftext|>")) return ChatTemplate(ChatFormat::zephyr, "<|endoftext|>", "");
  }
  return std::nullopt;
}

Result<ChatTemplate> ChatTemplate::from_jinja(std::string_view text, std::string bos_token, std::string eos_token) {
  auto parsed = jinja::Template::parse(text);
  if (!parsed.ok()) return parsed.status().with_context("chat template");
  ChatTemplate t(ChatFormat::chatml, "", "");
  t.jinja_ = std::make_shared<const jinja::Template>(std::move(parsed).value());
  t.bos_token_ = std::move(bos_token);
  t.eos_token_ = std::move(eos_token);
  // The end of turn: what the template writes right after an assistant message's content.
  constexpr std::string_view kProbe = "INFER_PROBE_ANSWER";
  const std::vector<ChatMessage> probe = {{"user", "Hello"}, {"assistant", std::string(kProbe)}};
  t.end_of_turn_ = t.eos_token_;
  if (auto out = t.render(probe, false); out.ok()) {
    const size_t at = out->find(kProbe);
    if (at != std::string::npos) {
      const size_t begin = at + kProbe.size();
      const size_t end = out->find_first_of(" \t\n\r", begin);
      std::string marker = out->substr(begin, end == std::string::npos ? std::string::npos : end - begin);
      if (!marker.empty()) t.end_of_turn_ = std::move(marker);
    }
  }
  return t;
}

Result<ChatTemplate> ChatTemplate::for_model(const Metadata& metadata, std::string_view jinja) {
  const std::string* file_template = metadata.get_string("tokenizer.chat_template");
  if (!jinja.empty() || file_template) {
    // The texts of the BOS and EOS tokens, as transformers passes bos_token and eos_token.
    auto token_text = [&](const char* key) -> std::string {
      const Array* tokens = metadata.get_array("tokenizer.ggml.tokens");
      const std::optional<int64_t> id = metadata.get_integer(key);
      if (!tokens || !id || *id < 0 || static_cast<uint64_t>(*id) >= tokens->strings.size()) return "";
      return tokens->strings[static_cast<size_t>(*id)];
    };
    return from_jinja(jinja.empty() ? std::string_view(*file_template) : jinja, token_text("tokenizer.ggml.bos_token_id"),
                      token_text("tokenizer.ggml.eos_token_id"));
  }
  const std::string* arch = metadata.get_string("general.architecture");
  if (arch && (*arch == "gemma" || *arch == "gemma2" || *arch == "gemma3")) return from_name("gemma");
  return not_found(unsupported_template_message(
      "the model has no chat template (tokenizer.chat_template) and its architecture '" + (arch ? *arch : std::string("?")) +
      "' has no known default"));
}

Result<std::string> ChatTemplate::render_jinja(jinja::Dict variables) const {
  // What transformers passes: the special tokens and the caller's keywords, then messages,
  // tools, documents and add_generation_prompt.
  jinja::Dict all;
  all.set(jinja::Value("bos_token"), jinja::Value(bos_token_));
  all.set(jinja::Value("eos_token"), jinja::Value(eos_token_));
  all.set(jinja::Value("tools"), jinja::Value::none());
  all.set(jinja::Value("documents"), jinja::Value::none());
  all.set(jinja::Value("add_generation_prompt"), jinja::Value(false));
  for (const auto& [k, v] : extra_.entries()) all.set(k, v);
  for (const auto& [k, v] : variables.entries()) all.set(k, v);
  jinja::RenderOptions options;
  options.now = now_;
  auto out = jinja_->render(all, options);
  if (!out.ok()) return out.status().with_context("chat template");
  return out;
}

Result<std::string> ChatTemplate::render_json(std::string_view conversation) const {
  jinja::Value doc;
  try {
    doc = jinja::json_parse(conversation);
  } catch (const jinja::Error& e) {
    return invalid_argument(std::string("conversation: ") + e.what());
  }
  if (!doc.is_dict()) return invalid_argument("conversation: not a JSON object");
  const jinja::Value* messages = doc.as_dict().find_str("messages");
  if (!messages || !messages->is_list()) return invalid_argument("conversation: no \"messages\" list");
  if (is_jinja()) return render_jinja(doc.as_dict());
  std::vector<ChatMessage> chat;
  for (size_t i = 0; i < messages->as_list().items.size(); ++i) {
    const jinja::Value& m = messages->as_list().items[i];
    const jinja::Value* role = m.is_dict() ? m.as_dict().find_str("role") : nullptr;
    const jinja::Value* content = m.is_dict() ? m.as_dict().find_str("content") : nullptr;
    if (!role || !role->is_string() || !content || !content->is_string())
      return invalid_argument("conversation: message " + std::to_string(i) + " needs a string role and content");
    chat.push_back({role->as_string(), content->as_string()});
  }
  const jinja::Value* gen = doc.as_dict().find_str("add_generation_prompt");
  return render(chat, gen && gen->truthy());
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (is_jinja()) {
    std::vector<jinja::Value> list;
    for (const ChatMessage& m : messages) {
      jinja::Dict d;
      d.set(jinja::Value("role"), jinja::Value(m.role));
      d.set(jinja::Value("content"), jinja::Value(m.content));
      list.push_back(jinja::Value::dict(std::move(d)));
    }
    jinja::Dict variables;
    variables.set(jinja::Value("messages"), jinja::Value::list(std::move(list)));
    variables.set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
    return render_jinja(std::move(variables));
  }
  if (Status s = check_roles(messages, format_); !s.is_ok()) return s;
  std::string out;
  switch (format_) {
    case ChatFormat::chatml: render_chatml(out, messages, add_generation_prompt, default_system_); break;
    case ChatFormat::gemma: render_gemma(out, messages, add_generation_prompt); break;
    case ChatFormat::llama2: render_llama2(out, messages); break;
    case ChatFormat::llama3: render_llama3(out, messages, add_generation_prompt); break;
    case ChatFormat::mistral_v3: render_mistral_v3(out, messages); break;
    case ChatFormat::mistral_v7: render_mistral_v7(out, messages, false); break;
    case ChatFormat::mistral_v7_tekken: render_mistral_v7(out, messages, true); break;
    case ChatFormat::zephyr: render_zephyr(out, messages, add_generation_prompt, end_of_turn_); break;
  }
  return out;
}

}  // namespace infer
