// Chat templates: a conversation (system / user / assistant turns) rendered to exactly the text a
// model was trained on, without a Jinja engine. The known formats are recognised from the Jinja
// text a GGUF file carries in tokenizer.chat_template (as llama.cpp's llm_chat_detect_template
// does) and rendered in C++. docs/chat.md describes each format.
//
//   auto tmpl = ChatTemplate::for_model(file.metadata());      // or from_name("chatml")
//   std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hi"}};
//   auto text = tmpl->render(chat, /*add_generation_prompt=*/true);
//   auto ids = tokenizer.encode(*text, /*add_special=*/true, /*parse_special=*/true);
//
// BOS convention: the rendered text never starts with the BOS token the template begins with
// (Gemma's "<bos>", Llama 3's "<|begin_of_text|>", Llama 2 / Mistral's "<s>"): encoding with
// add_special = true adds it, exactly once, when the model asks for it (tokenizer.add_bos()).
// A BOS *inside* the history (Llama 2's "<s>[INST]" of later turns) is part of the text and
// becomes the token through parse_special = true.
//
// Generation of an assistant turn ends at end_of_turn() (its token id: the single token of
// tokenizer.encode(end_of_turn(), false, true)) or at any end-of-generation token.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "format/metadata.hpp"
#include "infer/chat_message.hpp"
#include "infer/status.hpp"

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
  // Recognises the format of a Jinja chat template by the markers it contains. A ChatML template
  // that inserts a default system message when the conversation has none (SmolLM2, Qwen 2.5)
  // keeps that message (default_system_message()) when its literal can be read from the text;
  // otherwise the template renders without one. An unrecognised template is an `unsupported`
  // error that lists the format names to choose from instead.
  static Result<ChatTemplate> from_template_text(std::string_view jinja);
  // A format by its name; `invalid_argument` listing the names for any other. No default system
  // message.
  static Result<ChatTemplate> from_name(std::string_view name);
  // The template of a model file: tokenizer.chat_template when present; without one, the format
  // of the architecture's family (gemma, gemma2, gemma3 → gemma). Anything else is a `not_found`
  // error asking for a format by name (llama.cpp would silently fall back to chatml here).
  static Result<ChatTemplate> for_model(const Metadata& metadata);

  ChatFormat format() const noexcept { return format_; }
  const char* name() const noexcept { return chat_format_name(format_); }
  // The text that ends a turn: "<|im_end|>", "<end_of_turn>", "<|eot_id|>", "</s>".
  const std::string& end_of_turn() const noexcept { return end_of_turn_; }
  // The system message rendered when the conversation starts without one; empty when none.
  const std::string& default_system_message() const noexcept { return default_system_; }

  // The conversation as the model's template renders it, without the leading BOS (see above).
  // add_generation_prompt appends the header of an assistant turn (formats whose assistant turn
  // has no header — llama2, mistral — append nothing).
  // Roles are checked: each is system, user or assistant; a system message only comes first;
  // gemma, llama2 and mistral-v3 (whose templates raise on it) need user and assistant turns to
  // alternate starting with user. Violations are `invalid_argument` errors naming the message.
  Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  ChatTemplate(ChatFormat format, std::string end_of_turn, std::string default_system);

  ChatFormat format_;
  std::string end_of_turn_;
  std::string default_system_;
};

// The system message literal of a ChatML template that inserts one by default (the quoted
// '<|im_start|>system\n...<|im_end|>' string; Jinja escapes undone); empty when there is none.
std::string chatml_default_system_message(std::string_view jinja);

}  // namespace infer
