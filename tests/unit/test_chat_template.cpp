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
  auto tmpl = ChatTemplate::recognise(jinja);
  REQUIRE(tmpl.has_value());
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

TEST_CASE("a template of no hand-written format is not recognised, and an unknown name is an error listing the names", "[chat]") {
  for (const char* text : {chat_texts::kPhi3, chat_texts::kMistralV3Tekken, "", "{{ messages }}"})
    CHECK_FALSE(ChatTemplate::recognise(text).has_value());
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
  auto tmpl = ChatTemplate::recognise(chat_texts::kSmolLM2);
  REQUIRE(tmpl.has_value());
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
  auto from_file = ChatTemplate::for_model(with_template);
  REQUIRE(from_file.ok());
  CHECK(from_file->is_jinja());
  CHECK(std::string(from_file->name()) == "jinja");

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

// --- Jinja templates (the interpreter's agreement with jinja2 is tests/integration/jinja_reference.py;
// these check the wiring around it)

namespace {

Metadata llama3_metadata(const char* chat_template) {
  Metadata m;
  m.set("general.architecture", "llama");
  m.set("tokenizer.chat_template", chat_template);
  m.set("tokenizer.ggml.tokens", Array::of_strings({"<unk>", "<|begin_of_text|>", "<|eot_id|>", "a"}));
  m.set("tokenizer.ggml.bos_token_id", uint32_t{1});
  m.set("tokenizer.ggml.eos_token_id", uint32_t{2});
  return m;
}

}  // namespace

TEST_CASE("a file's Jinja template renders with the vocabulary's BOS and EOS texts, and starts_with_bos sees the BOS", "[chat]") {
  auto tmpl = ChatTemplate::for_model(llama3_metadata("{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}"
                                                      "{% if add_generation_prompt %}assistant:{% endif %}"));
  REQUIRE(tmpl.ok());
  const std::vector<ChatMessage> chat = {{"user", "Hi"}};
  auto text = tmpl->render(chat, true);
  REQUIRE(text.ok());
  // The template writes the BOS itself: the engine then adds none (no double BOS).
  CHECK(*text == "<|begin_of_text|>user:Hi<|eot_id|>assistant:");
  CHECK(tmpl->starts_with_bos(*text));
  CHECK_FALSE(tmpl->starts_with_bos("user:Hi"));
  CHECK(tmpl->bos_token() == "<|begin_of_text|>");
  // The hand-written formats render without it; their text never starts with a BOS.
  CHECK_FALSE(ChatTemplate::from_name("llama3")->starts_with_bos(*ChatTemplate::from_name("llama3")->render(chat, true)));
}

TEST_CASE("the end of turn of a Jinja template is what it writes after an assistant's content, else its EOS", "[chat]") {
  auto eot = [](const char* jinja) {
    auto t = ChatTemplate::from_jinja(jinja, "<s>", "</s>");
    REQUIRE(t.ok());
    return t->end_of_turn();
  };
  CHECK(eot("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}") == "<|im_end|>");
  CHECK(eot("{% for m in messages %}{{ m.content }}<end_of_turn>\n{% endfor %}") == "<end_of_turn>");
  // Nothing after the content: the EOS text.
  CHECK(eot("{% for m in messages %}{{ m.content }}{% endfor %}") == "</s>");
  // A template that raises on the probe conversation: the EOS text.
  CHECK(eot("{{ raise_exception('no') }}") == "</s>");
}

TEST_CASE("Jinja template errors name the line, and raise_exception gives the template's message", "[chat]") {
  auto broken = ChatTemplate::from_jinja("line one\n{% for m in messages %}\n{{ m.content }", "", "");
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.status().code() == StatusCode::invalid_argument);
  CHECK_THAT(broken.status().message(), Catch::StartsWith("chat template: line 3: "));

  auto strict = ChatTemplate::from_jinja("\n{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}ok",
                                         "", "");
  REQUIRE(strict.ok());
  const std::vector<ChatMessage> bad = {{"assistant", "x"}};
  auto text = strict->render(bad, false);
  REQUIRE_FALSE(text.ok());
  CHECK(text.status().code() == StatusCode::invalid_argument);
  CHECK(text.status().message() == "chat template: line 2: raise_exception: Conversation must start with user");
  // A Jinja template decides the roles itself: 'tool' is fine here.
  const std::vector<ChatMessage> tool = {{"user", "x"}, {"tool", "y"}};
  CHECK(*strict->render(tool, false) == "\nok");
}

TEST_CASE("render_json passes every key as a variable, and extra variables and the clock reach the template", "[chat]") {
  auto t = ChatTemplate::from_jinja("{{ messages[0].tool_calls[0].function.name }}|{{ tools|length }}|{{ enable_thinking }}|"
                                    "{{ add_generation_prompt }}|{{ strftime_now('%d %b %Y') }}",
                                    "", "");
  REQUIRE(t.ok());
  std::tm now{};
  now.tm_year = 2025 - 1900;
  now.tm_mon = 6;
  now.tm_mday = 26;
  t->set_now(now);
  jinja::Dict extra;
  extra.set(jinja::Value("enable_thinking"), jinja::Value(false));
  t->set_extra_variables(extra);
  auto text = t->render_json(R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "get_weather"}}]}],
                                 "tools": [{"name": "a"}, {"name": "b"}], "add_generation_prompt": true})");
  REQUIRE(text.ok());
  CHECK(*text == "get_weather|2|False|True|26 Jul 2025");
  // The conversation's own keys win over the extra variables.
  CHECK_THAT(*t->render_json(R"({"messages": [{"role": "user", "tool_calls": [{"function": {"name": "f"}}]}], "tools": [], "enable_thinking": true})"),
             Catch::Contains("|True|False|"));
  CHECK(t->render_json("[1]").status().code() == StatusCode::invalid_argument);
  CHECK(t->render_json("{\"messages\": ").status().code() == StatusCode::invalid_argument);
  // A hand-written format reads role, content and add_generation_prompt.
  CHECK(*ChatTemplate::from_name("chatml")->render_json(R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})") ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}
