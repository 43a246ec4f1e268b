// infer-chat: the reference chat client. Renders the conversation with the model's chat template
// (src/tokenizer/chat_template.hpp), streams each answer to stdout, and keeps the KV cache across
// turns: only the tokens after the common prefix of the new rendering and the cache are evaluated.
// docs/chat.md describes it; see the usage text below.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "sample/stop_strings.hpp"
#include "tokenizer/chat_template.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-chat";
constexpr const char* kUsageHead =
    "usage: infer-chat -m MODEL [-p TEXT]... [options]\n"
    "  -p TEXT              a user turn (repeatable: each gets an answer); without -p the user turns\n"
    "                       are read from stdin, one per line\n"
    "  --system TEXT        system message\n"
    "  --chat-template NAME format to use instead of the model's (--chat-template-list names them)\n"
    "  --chat-template-list print the format names and exit\n"
    "  --show-prompt        print the rendered conversation to stderr before each answer\n"
    "  --echo               print each user turn (\"> TEXT\") to stdout before its answer (a transcript)\n"
    "  -n N                 tokens per answer at most (default -1: until end of turn or context)\n"
    "  -c N                 context size in tokens (default: the model's, at most 4096)\n"
    "  -b N                 prompt tokens per forward step (default 512)\n"
    "  -t N                 compute threads (default: all cores)\n";
constexpr const char* kUsageTail =
    "  --kv-type f16|f32    KV cache element type (default f16)\n"
    "  --weight-type T      keep (default), q8_0 or q4_0: quantize float weight matrices at load\n";

const std::string kUsageText = std::string(kUsageHead) + cli::kSamplingUsage + kUsageTail;
const char* const kUsage = kUsageText.c_str();

struct Options {
  std::string model, system, chat_template;
  std::vector<std::string> turns;
  int64_t n_predict = -1, n_ctx = 0, n_batch = 512;
  int threads = 0;
  SamplingParams sampling;
  bool show_prompt = false, echo = false;
  DType kv_type = DType::f16;
  LoadOptions load;
};

Options parse(int argc, char** argv) {
  Options o;
  cli::set_sampling_defaults(o.sampling);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) cli::usage_error(kTool, a + " needs a value", kUsage);
      return argv[++i];
    };
    auto integer = [&](long long lo, long long hi) { return cli::parse_int(kTool, kUsage, a, next(), lo, hi); };
    if (cli::parse_sampling_flag(kTool, kUsage, argc, argv, i, o.sampling)) continue;
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "-p" || a == "--prompt") o.turns.push_back(next());
    else if (a == "--system") o.system = next();
    else if (a == "--chat-template") o.chat_template = next();
    else if (a == "--chat-template-list") {
      for (ChatFormat f : chat_formats()) std::printf("%s\n", chat_format_name(f));
      std::exit(0);
    } else if (a == "--show-prompt") o.show_prompt = true;
    else if (a == "--echo") o.echo = true;
    else if (a == "-n" || a == "--n-predict") o.n_predict = integer(-1, 1 << 30);
    else if (a == "-c" || a == "--ctx-size") o.n_ctx = integer(1, 1 << 24);
    else if (a == "-b" || a == "--batch-size") o.n_batch = integer(1, 1 << 16);
    else if (a == "-t" || a == "--threads") o.threads = static_cast<int>(integer(1, 1024));
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "--weight-type") o.load.weight_type = cli::parse_weight_type(kTool, kUsage, next());
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  o.model = cli::model_or_default(kTool, o.model, kUsage);
  if (Status s = o.sampling.validate(); !s.is_ok()) cli::usage_error(kTool, s.message(), kUsage);
  return o;
}

void emit(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The next user turn: the scripted ones in order, else a line of stdin (a "> " prompt on a
// terminal); false at the end.
class TurnSource {
 public:
  explicit TurnSource(const std::vector<std::string>& scripted) : scripted_(scripted), interactive_(isatty(STDIN_FILENO)) {}
  bool next(std::string& turn) {
    if (!scripted_.empty()) {
      if (index_ == scripted_.size()) return false;
      turn = scripted_[index_++];
      return true;
    }
    while (true) {
      if (interactive_) emit("> ");
      if (!std::getline(std::cin, turn)) return false;
      if (!turn.empty() && turn.back() == '\r') turn.pop_back();
      if (!turn.empty()) return true;
    }
  }

 private:
  const std::vector<std::string>& scripted_;
  bool interactive_;
  size_t index_ = 0;
};

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  cli::LoadedModel m = cli::load(kTool, o.model, true, o.load);
  const Tokenizer& tok = *m.tokenizer;

  auto chosen = o.chat_template.empty() ? ChatTemplate::for_model(m.file->metadata()) : ChatTemplate::from_name(o.chat_template);
  if (!chosen.ok()) cli::fail(kTool, (o.chat_template.empty() ? o.model + ": " : std::string()) + chosen.status().message());
  const ChatTemplate tmpl = std::move(chosen).value();

  // The end-of-turn marker ends an answer as a token when the vocabulary has it as one, and as a
  // stop string otherwise (a vocabulary without the format's special tokens).
  int32_t end_token = -1;
  if (auto ids = tok.encode(tmpl.end_of_turn(), false, true); ids.ok() && ids->size() == 1 && tok.is_control((*ids)[0]))
    end_token = (*ids)[0];

  const int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : cli::default_context(m.model->info());
  cli::Decoder decoder(kTool, *m.model, n_ctx, o.kv_type, o.threads, o.n_batch);
  Sampler sampler(o.sampling);
  // Answers follow the assistant header: the first piece keeps its leading space, so the text
  // re-encodes to the tokens that were generated.
  IncrementalDetokenizer detok(tok, DecodeOptions{.keep_leading_space = true});

  std::vector<ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  TurnSource source(o.turns);
  std::string user;
  for (int turn = 1; source.next(user); ++turn) {
    messages.push_back({"user", user});
    if (o.echo) emit("> " + user + "\n");
    auto rendered = tmpl.render(messages, /*add_generation_prompt=*/true);
    if (!rendered.ok()) cli::fail(kTool, rendered.status().message());
    if (o.show_prompt) std::fputs(rendered->c_str(), stderr);
    auto encoded = tok.encode(*rendered, /*add_special=*/true, /*parse_special=*/true);
    if (!encoded.ok()) cli::fail(kTool, encoded.status().message());
    const std::vector<int32_t>& ids = *encoded;
    if (static_cast<int64_t>(ids.size()) >= n_ctx)
      cli::fail(kTool, "context full: the conversation has " + std::to_string(ids.size()) + " tokens; the context holds " +
                           std::to_string(n_ctx) + " (raise -c)");

    // Earlier turns re-encode to the cached tokens, normally; from the first difference on the
    // cache is evaluated again. At least one token is evaluated, for its logits.
    size_t reused = common_prefix(ids, decoder.tokens());
    if (reused == ids.size()) --reused;
    reused = decoder.truncate(reused);
    if (!decoder.eval(std::span<const int32_t>(ids).subspan(reused))) cli::fail(kTool, "context full");

    auto stop = StopMatcher::create({tmpl.end_of_turn()});
    if (!stop.ok()) cli::fail(kTool, stop.status().message());
    detok.reset();
    std::string answer;
    const cli::GenerateLimits limits{.max_tokens = o.n_predict, .stop_at_eog = true, .stop_token = end_token};
    const cli::Generated gen = cli::generate(decoder, sampler, tok, limits, [&](int32_t id) {
      auto out = stop->push(detok.push(id));
      emit(out.text);
      answer += out.text;
      return !out.stopped;
    });
    if (gen.finish != cli::Finish::stop) {
      std::string rest = stop->push(detok.flush()).text + stop->flush();
      emit(rest);
      answer += rest;
    }
    emit("\n");
    messages.push_back({"assistant", answer});
    std::fprintf(stderr, "%s: turn %d: prompt %zu tokens (%zu from the cache, %zu evaluated), answer %zu tokens, finish: %s\n",
                 kTool, turn, ids.size(), reused, ids.size() - reused, gen.ids.size(), cli::finish_name(gen.finish));
    if (gen.finish == cli::Finish::context)
      cli::fail(kTool, "context full after " + std::to_string(decoder.tokens().size() + 1) + " tokens (raise -c)");
  }
  return 0;
}
