// Chat templates against the model families' published formats: every expected string below is
// written by hand from the official Jinja template (minus the leading BOS, which the tokenizer
// adds), never produced by the renderer itself.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "chat_template_texts.hpp"
#include "tokenizer/chat_template.hpp"

using namespace infer;

namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you?"},
};

std::string render(const char* name, const std::vector<ChatMessage>& chat, bool add_generation_prompt) {
  auto tmpl = ChatTemplate::from_name(name);
  REQUIRE(tmpl.ok());
  auto text = tmpl->render(chat, add_generation_prompt);
  INFO(text.status().to_string());
  REQUIRE(text.ok());
  return *text;
}

ChatFormat detect(const char* jinja) {
  auto tmpl = ChatTemplate::from_template_text(jinja);
  INFO(tmpl.status().to_string());
  REQUIRE(tmpl.ok());
  return tmpl->format();
}

}  // namespace

TEST_CASE("each format renders system, user, assistant, user as its official template does", "[chat]") {
  struct Case {
    const char* name;
    std::string without_prompt, prompt;  // the rendering, and what add_generation_prompt appends
  };
  const std::vector<Case> cases = {
      {"chatml",
       "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
       "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n",
       "<|im_start|>assistant\n"},
      {"gemma",
       "<start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
       "<start_of_turn>user\nWho are you?<end_of_turn>\n",
       "<start_of_turn>model\n"},
      {"llama2", "[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] Who are you? [/INST]",
       ""},
      {"llama3",
       "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>",
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"mistral-v3", "[INST] Hello[/INST] Hi there</s>[INST] You are a helpful assistant.\n\nWho are you?[/INST]", ""},
      {"mistral-v7",
       "[SYSTEM_PROMPT] You are a helpful assistant.[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you?[/INST]", ""},
      {"mistral-v7-tekken",
       "[SYSTEM_PROMPT]You are a helpful assistant.[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are you?[/INST]", ""},
      {"zephyr",
       "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi there</s>\n<|user|>\nWho are you?</s>\n",
       "<|assistant|>\n"},
  };
  REQUIRE(cases.size() == chat_formats().size());
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(render(c.name, kConversation, false) == c.without_prompt);
    CHECK(render(c.name, kConversation, true) == c.without_prompt + c.prompt);
  }
}

TEST_CASE("formats whose templates trim content trim it, the others keep it as it is", "[chat]") {
  const std::vector<ChatMessage> chat = {{"user", "  Hello \n"}, {"assistant", " Hi "}, {"user", "Bye "}};
  CHECK(render("gemma", chat, false) ==
        "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n");
  CHECK(render("llama3", chat, false) ==
        "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>");
  CHECK(render("llama2", chat, false) == "[INST] Hello [/INST] Hi </s><s>[INST] Bye [/INST]");
  // Mistral v3 trims the assistant's answers only.
  CHECK(render("mistral-v3", chat, false) == "[INST]   Hello \n[/INST] Hi</s>[INST] Bye [/INST]");
  CHECK(render("chatml", chat, false) ==
        "<|im_start|>user\n  Hello \n<|im_end|>\n<|im_start|>assistant\n Hi <|im_end|>\n<|im_start|>user\nBye <|im_end|>\n");
}

TEST_CASE("without a system message: Gemma and Llama 2 open with the user turn", "[chat]") {
  const std::vector<ChatMessage> chat = {{"user", "Hello"}};
  CHECK(render("gemma", chat, true) == "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
  CHECK(render("llama2", chat, true) == "[INST] Hello [/INST]");
  CHECK(render("mistral-v3", chat, true) == "[INST] Hello[/INST]");
}

TEST_CASE("the end-of-turn marker of each format", "[chat]") {
  auto eot = [](const char* name) { return ChatTemplate::from_name(name)->end_of_turn(); };
  CHECK(eot("chatml") == "<|im_end|>");
  CHECK(eot("gemma") == "<end_of_turn>");
  CHECK(eot("llama3") == "<|eot_id|>");
  CHECK(eot("llama2") == "</s>");
  CHECK(eot("mistral-v7") == "</s>");
  CHECK(eot("zephyr") == "</s>");
}

TEST_CASE("formats are recognised from the published template texts", "[chat]") {
  CHECK(detect(chat_texts::kChatmlOpenHermes) == ChatFormat::chatml);
  CHECK(detect(chat_texts::kSmolLM2) == ChatFormat::chatml);
  CHECK(detect(chat_texts::kQwen25Head) == ChatFormat::chatml);
  CHECK(detect(chat_texts::kGemma) == ChatFormat::gemma);
  CHECK(detect(chat_texts::kGemma3) == ChatFormat::gemma);
  CHECK(detect(chat_texts::kLlama2) == ChatFormat::llama2);
  CHECK(detect(chat_texts::kLlama3) == ChatFormat::llama3);
  CHECK(detect(chat_texts::kMistralV3) == ChatFormat::mistral_v3);
  CHECK(detect(chat_texts::kMistralV7) == ChatFormat::mistral_v7);
  CHECK(detect(chat_texts::kMistralV7Tekken) == ChatFormat::mistral_v7_tekken);
  CHECK(detect(chat_texts::kZephyr) == ChatFormat::zephyr);
}

TEST_CASE("an unknown template is an unsupported error that lists the format names", "[chat]") {
  for (const char* text : {chat_texts::kPhi3, chat_texts::kMistralV3Tekken, "", "{{ messages }}"}) {
    auto tmpl = ChatTemplate::from_template_text(text);
    REQUIRE_FALSE(tmpl.ok());
    CHECK(tmpl.status().code() == StatusCode::unsupported);
    CHECK_THAT(tmpl.status().message(), Catch::Contains("chatml, gemma, llama2, llama3"));
  }
  auto named = ChatTemplate::from_name("vicuna");
  REQUIRE_FALSE(named.ok());
  CHECK(named.status().code() == StatusCode::invalid_argument);
  CHECK_THAT(named.status().message(), Catch::Contains("'vicuna'") && Catch::Contains("mistral-v7-tekken"));
}

TEST_CASE("invalid role sequences are errors that name the message", "[chat]") {
  auto error = [](const char* name, const std::vector<ChatMessage>& chat) {
    auto text = ChatTemplate::from_name(name)->render(chat, true);
    REQUIRE_FALSE(text.ok());
    CHECK(text.status().code() == StatusCode::invalid_argument);
    return text.status().message();
  };
  for (const char* name : {"chatml", "gemma", "llama2", "llama3", "mistral-v3", "mistral-v7", "zephyr"}) {
    INFO(name);
    CHECK_THAT(error(name, {{"user", "a"}, {"system", "b"}}), Catch::Contains("message 1") && Catch::Contains("first"));
    CHECK_THAT(error(name, {{"user", "a"}, {"tool", "b"}}), Catch::Contains("role 'tool'"));
  }
  // Formats whose templates raise on it need user / assistant alternation, user first.
  for (const char* name : {"gemma", "llama2", "mistral-v3"}) {
    INFO(name);
    CHECK_THAT(error(name, {{"user", "a"}, {"user", "b"}}), Catch::Contains("message 1") && Catch::Contains("alternate"));
    CHECK_THAT(error(name, {{"system", "s"}, {"assistant", "a"}}), Catch::Contains("message 1"));
  }
  // ChatML has no such rule.
  CHECK(render("chatml", {{"user", "a"}, {"user", "b"}}, false) == "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n");
}

TEST_CASE("SmolLM2's template adds its default system message when the conversation has none", "[chat]") {
  auto tmpl = ChatTemplate::from_template_text(chat_texts::kSmolLM2);
  REQUIRE(tmpl.ok());
  CHECK(tmpl->default_system_message() == "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  const std::vector<ChatMessage> chat = {{"user", "Hi"}};
  CHECK(*tmpl->render(chat, true) ==
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Hi"}};
  CHECK(*tmpl->render(with_system, false) == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");

  // The same literal with Jinja escapes instead of newlines; Qwen 2.5's after a bare header.
  CHECK(chatml_default_system_message(R"({{ '<|im_start|>system\nIt\'s me<|im_end|>\n' }})") == "It's me");
  CHECK(chatml_default_system_message(chat_texts::kQwen25Head) ==
        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  // No literal (or one never closed): no default.
  CHECK(chatml_default_system_message(chat_texts::kChatmlOpenHermes).empty());
  CHECK(chatml_default_system_message("{{ '<|im_start|>system\nunterminated").empty());
  CHECK(ChatTemplate::from_name("chatml")->default_system_message().empty());
}

TEST_CASE("for_model: the file's template, else the architecture's family, else a clear error", "[chat]") {
  Metadata with_template;
  with_template.set("general.architecture", "llama");
  with_template.set("tokenizer.chat_template", chat_texts::kLlama3);
  CHECK(ChatTemplate::for_model(with_template)->format() == ChatFormat::llama3);

  for (const char* arch : {"gemma", "gemma2", "gemma3"}) {
    Metadata gemma;
    gemma.set("general.architecture", arch);
    auto tmpl = ChatTemplate::for_model(gemma);
    REQUIRE(tmpl.ok());
    CHECK(tmpl->format() == ChatFormat::gemma);
  }

  Metadata none;
  none.set("general.architecture", "llama");
  auto tmpl = ChatTemplate::for_model(none);
  REQUIRE_FALSE(tmpl.ok());
  CHECK_THAT(tmpl.status().message(),
             Catch::Contains("no chat template") && Catch::Contains("--chat-template") && Catch::Contains("chatml"));
}
