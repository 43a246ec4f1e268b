// One message of a conversation, as chat templates render it (Engine::render_chat, Request::messages).
#pragma once

#include <string>

namespace infer {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

}  // namespace infer
