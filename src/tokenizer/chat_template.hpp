// Chat templates: a conversation (system / user / assistant turns) rendered to exactly the text a
// model was trained on. A model file's own template (tokenizer.chat_template, Jinja) is run by
// the interpreter of tokenizer/jinja/ as transformers' apply_chat_template runs it; eight known
// formats are also written out in C++, for files without a template and for --chat-template
// NAME. docs/chat.md describes both.
//
//   auto tmpl = ChatTemplate::for_model(file.metadata());      // or from_name("chatml")
//   std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hi"}};
//   auto text = tmpl->render(chat, /*add_generation_prompt=*/true);
//   auto ids = tokenizer.encode(*text, /*add_special=*/!tmpl->starts_with_bos(*text), /*parse_special=*/true);
//
// BOS convention: a Jinja template renders exactly what transformers renders, its BOS included
// when it writes {{ bos_token }} (Llama 3, Gemma, Mistral); the hand-written formats render
// without the leading BOS. Encode with add_special only when the text does not already start
// with the BOS text (starts_with_bos): then the tokenizer adds it, once, when the model asks
// for it, and a BOS the template wrote becomes the token through parse_special. A BOS *inside*
// the history (Llama 2's "<s>[INST]" of later turns) is text, and becomes the token the same way.
//
// Generation of an assistant turn ends at end_of_turn() (its token id: the single token of
// tokenizer.encode(end_of_turn(), false, true)) or at any end-of-generation token.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "format/metadata.hpp"
#include "infer/chat_message.hpp"
#include "infer/status.hpp"
#include "tokenizer/jinja/template.hpp"

namespace infer {

// The formats rendered; the names (chat_format_name) are what --chat-template accepts.
enum class ChatFormat {
  chatml,             // <|im_start|>role\n...<|im_end|>\n
  gemma,              // Gemma 2 / 3: <start_of_turn>user\n...<end_of_turn>\n, role "model"
  llama2,             // Meta's Llama 2 chat: [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
  llama3,             // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  mistral_v3,         // Mistral 7B v0.3 ("v3"): [INST] ...[/INST] ...</s>, system in the last user turn
  mistral_v7,         // Mistral Large 2411 ("v7"): [SYSTEM_PROMPT] ...[/SYSTEM_PROMPT][INST] ...[/INST] ...</s>
  mistral_v7_tekken,  // Mistral Small 3.x ("v7-tekken"): the same without the spaces
  zephyr,             // <|user|>\n...</s>\n
};

// "chatml", "gemma", "llama2", "llama3", "mistral-v3", "mistral-v7", "mistral-v7-tekken", "zephyr".
const char* chat_format_name(ChatFormat format) noexcept;
// Every format, in the order above.
std::span<const ChatFormat> chat_formats() noexcept;
// "chatml, gemma, ..., zephyr": for error messages and --chat-template-list.
std::string chat_format_name_list();

class ChatTemplate {
 public:
  // A Jinja chat template (the text of tokenizer.chat_template or of a template file), parsed
  // by the interpreter; rendered with bos_token and eos_token as the template's variables of
  // those names. A syntax error, or a construct the interpreter does not implement, is an error
  // naming it and its line.
  static Result<ChatTemplate> from_jinja(std::string_view jinja, std::string bos_token, std::string eos_token);
  // A format by its name; `invalid_argument` listing the names for any other. No default system
  // message.
  static Result<ChatTemplate> from_name(std::string_view name);
  // The template of a model file: tokenizer.chat_template when present (its BOS and EOS texts
  // from the vocabulary); without one, the format of the architecture's family (gemma, gemma2,
  // gemma3 → gemma). Anything else is a `not_found` error asking for a format by name (llama.cpp
  // would silently fall back to chatml here). A non-empty `jinja` replaces the file's template
  // (a template file given by the user), with the file's BOS and EOS texts.
  static Result<ChatTemplate> for_model(const Metadata& metadata, std::string_view jinja = {});

  // One of the formats written out in C++, recognised from a Jinja template by the markers it
  // contains (as llama.cpp's llm_chat_detect_template does); nullopt for any other template.
  // A ChatML template that inserts a default system message when the conversation has none
  // (SmolLM2, Qwen 2.5) keeps that message (default_system_message()) when its literal can be
  // read from the text.
  static std::optional<ChatTemplate> recognise(std::string_view jinja);

  // True when the Jinja template renders; false for a hand-written format.
  bool is_jinja() const noexcept { return jinja_ != nullptr; }
  // The hand-written format (meaningless when is_jinja()).
  ChatFormat format() const noexcept { return format_; }
  // The format's name, or "jinja" for a Jinja template.
  const char* name() const noexcept { return is_jinja() ? "jinja" : chat_format_name(format_); }
  // The text that ends a turn: "<|im_end|>", "<end_of_turn>", "<|eot_id|>", "</s>". For a Jinja
  // template, what it writes right after an assistant message's content (up to whitespace; see
  // docs/chat.md), else its EOS text.
  const std::string& end_of_turn() const noexcept { return end_of_turn_; }
  // The system message rendered when the conversation starts without one; empty when none (and
  // for a Jinja template, which writes its own).
  const std::string& default_system_message() const noexcept { return default_system_; }
  const std::string& bos_token() const noexcept { return bos_token_; }
  // Whether text starts with the BOS text (see the BOS convention above).
  bool starts_with_bos(std::string_view text) const noexcept { return !bos_token_.empty() && text.starts_with(bos_token_); }

  // Variables every rendering of a Jinja template gets besides the conversation (the extra
  // keywords of apply_chat_template, e.g. enable_thinking); a later set replaces them.
  void set_extra_variables(jinja::Dict variables) { extra_ = std::move(variables); }
  // The time strftime_now() formats (tests); unset: the local time now.
  void set_now(std::optional<std::tm> now) { now_ = now; }

  // The conversation as the model's template renders it (see the BOS convention above).
  // add_generation_prompt appends the header of an assistant turn (formats whose assistant turn
  // has no header — llama2, mistral — append nothing).
  // A Jinja template decides itself what it accepts (it raises, as in transformers: the error
  // names raise_exception and its message). The hand-written formats check the roles: each is
  // system, user or assistant; a system message only comes first; gemma, llama2 and mistral-v3
  // (whose templates raise on it) need user and assistant turns to alternate starting with user.
  // Violations are `invalid_argument` errors naming the message.
  Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  // A conversation given as JSON: {"messages": [{"role": ..., "content": ..., ...}, ...],
  // "add_generation_prompt": true, "tools": [...], any other keyword}. A Jinja template sees
  // every key as a variable (messages may carry tool_calls, reasoning_content, ...); a
  // hand-written format reads the role and content of each message and add_generation_prompt.
  Result<std::string> render_json(std::string_view conversation) const;

 private:
  ChatTemplate(ChatFormat format, std::string end_of_turn, std::string default_system);
  Result<std::string> render_jinja(jinja::Dict variables) const;

  ChatFormat format_;
  std::string end_of_turn_;
  std::string default_system_;
  std::shared_ptr<const jinja::Template> jinja_;
  std::string bos_token_, eos_token_;
  jinja::Dict extra_;
  std::optional<std::tm> now_;
};

// The system message literal of a ChatML template that inserts one by default (the quoted
// '<|im_start|>system\n...<|im_end|>' string; Jinja escapes undone); empty when there is none.
std::string chatml_default_system_message(std::string_view jinja);

}  // namespace infer
