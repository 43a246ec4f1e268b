// infer-chat: the reference chat client, over the public Engine API only. Each turn submits the
// whole conversation as Request::messages (the engine renders it with the chat template and
// reuses the KV of the earlier turns through its prefix cache), streams the answer with read(),
// and keeps the answer in the conversation. Ctrl-C cancels the answer being generated; at the
// prompt it exits. docs/chat.md describes it; see the usage text below.
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "infer/engine.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-chat";
constexpr const char* kUsageHead =
    "usage: infer-chat -m MODEL [-p TEXT]... [options]\n"
    "       infer-chat -m MODEL --render FILE [--chat-template-file TEMPLATE]\n"
    "  -p TEXT              a user turn (repeatable: each gets an answer); without -p the user turns\n"
    "                       are read from stdin, one per line\n"
    "  --system TEXT        system message\n"
    "  --chat-template NAME format to use instead of the model's (--chat-template-list names them)\n"
    "  --chat-template-list print the format names and exit\n"
    "  --chat-template-file FILE    a Jinja chat template to use instead of the model's\n"
    "  --chat-template-kwargs JSON  extra template variables ({\"enable_thinking\": false})\n"
    "  --render FILE        print the conversation of FILE ({\"messages\": [...], \"add_generation_prompt\":\n"
    "                       true, ...}) as the template renders it, and nothing else; then exit\n"
    "  --show-prompt        print the rendered conversation to stderr before each answer\n"
    "  --echo               print each user turn (\"> TEXT\") to stdout before its answer (a transcript)\n"
    "  --json               print each turn as one JSON object on stdout (text, ids, finish_reason,\n"
    "                       metrics) instead of streaming the answer\n"
    "  -n N                 tokens per answer at most (default -1: until end of turn or context)\n"
    "  -c N                 context size in tokens (default: the model's, at most 4096)\n"
    "  -b N                 prompt tokens per forward step (default 512)\n"
    "  -t N                 compute threads (default: all cores)\n";
constexpr const char* kUsageTail =
    "  --kv-type T          KV cache element type: f16 (default), f32, bf16, q8_0, fp8\n"
    "  --weight-type T      keep (default), q8_0, q4_0, int8 (W8A8), w8a16, fp8, fp8-tensor, fp8-dynamic or\n"
    "                       int4: quantize float weight matrices at load\n"
    "  --device D           cpu (default), cuda or cuda:N: where the model computes\n"
    "A line (or -p turn) that starts with / is a command: /reset, /system TEXT, /stats, /help,\n"
    "/quit (// sends a turn that starts with /). Ctrl-C cancels the answer being generated; at the\n"
    "prompt it exits.\n";
constexpr const char* kCommands =
    "commands:\n"
    "  /reset          start a new conversation (the system message stays)\n"
    "  /system TEXT    set the system message (empty: none) and start a new conversation\n"
    "  /stats          the last turn's TTFT, tokens/s and cached prompt tokens; the KV blocks\n"
    "  /help           this list\n"
    "  /quit           exit (as does the end of input, or Ctrl-C at the prompt)\n"
    "  //TEXT          a user turn that starts with /TEXT\n"
    "Ctrl-C while an answer streams cancels it; the partial answer stays in the conversation.\n";

const std::string kUsageText = std::string(kUsageHead) + cli::kSamplingUsage + kUsageTail;
const char* const kUsage = kUsageText.c_str();

struct Options {
  std::string model, system, chat_template, chat_template_file, chat_template_kwargs, render;
  std::vector<std::string> turns;
  int64_t n_ctx = 0, n_batch = 512;
  int threads = 0;
  GenerationParams sampling;
  bool show_prompt = false, echo = false, json = false;
  KvType kv_type = KvType::f16;
  WeightType weight_type = WeightType::keep;
  std::string device = "cpu";
};

Options parse(int argc, char** argv) {
  Options o;
  cli::set_sampling_defaults(o.sampling);
  o.sampling.max_tokens = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return cli::flag_value(kTool, kUsage, argc, argv, i); };
    auto integer = [&](long long lo, long long hi) { return cli::parse_int(kTool, kUsage, a, next(), lo, hi); };
    if (cli::parse_sampling_flag(kTool, kUsage, argc, argv, i, o.sampling)) continue;
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "-p" || a == "--prompt") o.turns.push_back(next());
    else if (a == "--system") o.system = next();
    else if (a == "--chat-template") o.chat_template = next();
    else if (a == "--chat-template-file") o.chat_template_file = next();
    else if (a == "--chat-template-kwargs") o.chat_template_kwargs = next();
    else if (a == "--render") o.render = next();
    else if (a == "--chat-template-list") {
      for (const std::string& name : chat_template_names()) std::printf("%s\n", name.c_str());
      std::exit(0);
    } else if (a == "--show-prompt") o.show_prompt = true;
    else if (a == "--echo") o.echo = true;
    else if (a == "--json") o.json = true;
    else if (a == "-n" || a == "--n-predict") o.sampling.max_tokens = integer(-1, 1 << 30);
    else if (a == "-c" || a == "--ctx-size") o.n_ctx = integer(1, 1 << 24);
    else if (a == "-b" || a == "--batch-size") o.n_batch = integer(1, 1 << 16);
    else if (a == "-t" || a == "--threads") o.threads = static_cast<int>(integer(1, 1024));
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "--weight-type") o.weight_type = cli::parse_weight_type(kTool, kUsage, next());
    else if (a == "--device") o.device = cli::parse_device_name(kTool, kUsage, next());
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  if (!o.chat_template.empty() && !o.chat_template_file.empty())
    cli::usage_error(kTool, "give --chat-template or --chat-template-file, not both", kUsage);
  o.model = cli::model_or_default(kTool, o.model, kUsage);
  return o;
}

// Set by SIGINT (Ctrl-C); the main thread polls it while an answer streams and at the prompt.
volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

// The handler runs on the main thread only: SIGINT stays blocked in every thread the engine
// starts (they inherit the mask in force during Engine::create). Without SA_RESTART, a blocking
// wait on stdin returns EINTR.
void install_sigint_handler() {
  struct sigaction current {};
  sigaction(SIGINT, nullptr, &current);
  if (current.sa_handler == SIG_IGN) return;  // started with Ctrl-C ignored (a background job)
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

void set_sigint_blocked(bool blocked) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &set, nullptr);
}

enum class Input { line, end, interrupted };

// The next user turn: the scripted ones in order, else a line of stdin (a "> " prompt on a
// terminal, empty lines skipped). Waiting on stdin ends early, race-free, when SIGINT arrives.
class TurnSource {
 public:
  explicit TurnSource(const std::vector<std::string>& scripted) : scripted_(scripted), interactive_(isatty(STDIN_FILENO)) {}
  bool interactive() const { return interactive_ && scripted_.empty(); }

  Input next(std::string& turn) {
    if (!scripted_.empty()) {
      if (g_interrupted) return Input::interrupted;
      if (index_ == scripted_.size()) return Input::end;
      turn = scripted_[index_++];
      return Input::line;
    }
    while (true) {
      if (interactive_) cli::emit("> ");
      const Input in = read_line(turn);
      if (in != Input::line) return in;
      if (!turn.empty() && turn.back() == '\r') turn.pop_back();
      if (!turn.empty()) return Input::line;
    }
  }

 private:
  Input read_line(std::string& line) {
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Input::line;
      }
      if (eof_) {
        if (buffer_.empty()) return Input::end;
        line = std::move(buffer_);
        buffer_.clear();
        return Input::line;
      }
      // SIGINT is blocked between the check of the flag and the wait, and unblocked atomically
      // by ppoll: a Ctrl-C in between is not lost.
      sigset_t sigint, old;
      sigemptyset(&sigint);
      sigaddset(&sigint, SIGINT);
      pthread_sigmask(SIG_BLOCK, &sigint, &old);
      if (g_interrupted) {
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        return Input::interrupted;
      }
      sigset_t during = old;
      sigdelset(&during, SIGINT);
      pollfd pfd{STDIN_FILENO, POLLIN, 0};
      const int ready = ppoll(&pfd, 1, nullptr, &during);
      const int poll_errno = errno;
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      if (ready < 0) {
        if (poll_errno == EINTR) continue;
        cli::fail(kTool, std::string("stdin: ") + std::strerror(poll_errno));
      }
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0) {
        if (errno == EINTR) continue;
        cli::fail(kTool, std::string("stdin: ") + std::strerror(errno));
      }
      if (n == 0) eof_ = true;
      else buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  const std::vector<std::string>& scripted_;
  bool interactive_;
  size_t index_ = 0;
  std::string buffer_;
  bool eof_ = false;
};

// The per-turn stderr line's name of how an answer ended: "eog" for the end of turn (or another
// end-of-generation token), as the earlier infer-chat and llama.cpp's references name it.
const char* finish_name(FinishReason r) { return r == FinishReason::stop ? "eog" : finish_reason_name(r); }

std::string completion_json(int turn, const Completion& c) {
  const RequestMetrics& m = c.metrics;
  std::string out = "{\"turn\": " + std::to_string(turn) + ", \"text\": " + cli::json_quote(c.text) + ", \"ids\": [";
  for (size_t i = 0; i < c.ids.size(); ++i) out += (i ? ", " : "") + std::to_string(c.ids[i]);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "], \"finish_reason\": \"%s\", \"metrics\": {\"prompt_tokens\": %lld, \"cached_tokens\": %lld, "
                "\"generated_tokens\": %lld, \"queue_ms\": %.3f, \"ttft_ms\": %.3f, \"tpot_ms\": %.3f, \"e2e_ms\": %.3f}}\n",
                finish_reason_name(c.reason), static_cast<long long>(m.prompt_tokens), static_cast<long long>(m.cached_tokens),
                static_cast<long long>(m.generated_tokens), m.queue_ms, m.ttft_ms, m.tpot_ms, m.e2e_ms);
  return out + buf;
}

void print_stats(const Engine& engine, int turn, const RequestMetrics* last) {
  std::string line = std::string(kTool) + ": /stats: ";
  char buf[512];
  if (last) {
    std::snprintf(buf, sizeof buf,
                  "turn %d: TTFT %.1f ms, %.2f tokens/s, prompt %lld tokens (%lld cached prompt tokens), answer %lld tokens | ",
                  turn, last->ttft_ms, last->tpot_ms > 0 ? 1000.0 / last->tpot_ms : 0.0, static_cast<long long>(last->prompt_tokens),
                  static_cast<long long>(last->cached_tokens), static_cast<long long>(last->generated_tokens));
    line += buf;
  } else {
    line += "no turn yet | ";
  }
  const EngineStats st = engine.stats();
  std::snprintf(buf, sizeof buf,
                "all turns: prompt %lld tokens (%lld cached), generated %lld | KV blocks: %lld in use, %lld cached, %lld free, "
                "%lld in all\n",
                static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.cached_prompt_tokens),
                static_cast<long long>(st.generated_tokens), static_cast<long long>(st.kv_blocks_used),
                static_cast<long long>(st.kv_blocks_cached), static_cast<long long>(st.kv_blocks_free),
                static_cast<long long>(st.kv_blocks_total));
  std::fputs((line + buf).c_str(), stderr);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.chat_template.empty()) {
    const std::vector<std::string> names = chat_template_names();
    if (std::find(names.begin(), names.end(), o.chat_template) == names.end()) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      cli::fail(kTool, "unknown chat template '" + o.chat_template + "'; the known ones are: " + known);
    }
  }

  EngineConfig config = cli::one_sequence_config({}, o.threads, o.n_ctx, o.n_batch, o.kv_type);
  config.weight_type = o.weight_type;
  config.device = o.device;
  config.chat_template = o.chat_template;
  if (!o.chat_template_file.empty()) config.chat_template_text = cli::read_text_file(kTool, o.chat_template_file);
  config.chat_template_variables = o.chat_template_kwargs;
  if (!o.render.empty()) {
    // --render: the rendered prompt alone on stdout; errors in one line on stderr.
    const std::string conversation = cli::read_text_file(kTool, o.render);
    auto created = Engine::create(o.model, config);
    if (!created.ok()) cli::fail(kTool, cli::one_line(created.status().message()));
    auto text = (*created)->render_chat_json(conversation);
    if (!text.ok()) cli::fail(kTool, cli::one_line(o.render + ": " + text.status().message()));
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  config.on_load_progress = cli::load_progress_bar(kTool);
  // The engine's threads start with SIGINT blocked, so that Ctrl-C always reaches the main thread
  // (a Ctrl-C while the model loads ends the program once create returns).
  set_sigint_blocked(true);
  auto created = Engine::create(o.model, config);
  set_sigint_blocked(false);
  if (!created.ok()) {
    if (config.on_load_progress) std::fputs("\r\033[K", stderr);  // the unfinished bar
    cli::fail(kTool, created.status().message());
  }
  install_sigint_handler();
  Engine& engine = **created;
  const ModelDescription model = engine.model();
  if (model.chat_template.empty()) {
    // Why there is none, with the names to choose from.
    auto why = engine.render_chat({{"user", "x"}});
    cli::fail(kTool, why.ok() ? o.model + ": no chat template (choose one with --chat-template)" : why.status().message());
  }

  std::string system = o.system;
  std::vector<ChatMessage> messages;
  auto restart = [&] {
    messages.clear();
    if (!system.empty()) messages.push_back({"system", system});
  };
  restart();
  TurnSource source(o.turns);
  RequestMetrics last;
  int turn = 0;
  std::string user;
  for (;;) {
    const Input in = source.next(user);
    if (in == Input::end) break;
    if (in == Input::interrupted) {
      if (source.interactive()) cli::emit("\n");
      break;
    }
    if (user.starts_with("/") && !user.starts_with("//")) {
      const size_t space = user.find(' ');
      const std::string command = user.substr(0, space);
      const std::string arg = space == std::string::npos ? "" : user.substr(space + 1);
      if (command == "/quit" || command == "/exit") break;
      if (command == "/reset") {
        restart();
        std::fprintf(stderr, "%s: a new conversation\n", kTool);
      } else if (command == "/system") {
        system = arg;
        restart();
        std::fprintf(stderr, "%s: %s; a new conversation\n", kTool, system.empty() ? "no system message" : "system message set");
      } else if (command == "/stats") {
        print_stats(engine, turn, turn > 0 ? &last : nullptr);
      } else if (command == "/help") {
        std::fputs(kCommands, stderr);
      } else {
        std::fprintf(stderr, "%s: unknown command %s (/help lists them)\n", kTool, command.c_str());
      }
      continue;
    }
    if (user.starts_with("//")) user.erase(0, 1);

    ++turn;
    messages.push_back({"user", user});
    if (o.echo) cli::emit("> " + user + "\n");
    if (o.show_prompt) {
      auto rendered = engine.render_chat(messages, /*add_generation_prompt=*/true);
      if (!rendered.ok()) cli::fail(kTool, rendered.status().message());
      std::fputs(rendered->c_str(), stderr);
    }
    Request request;
    request.messages = messages;
    request.params = o.sampling;
    auto id = engine.submit(std::move(request));
    if (!id.ok()) {
      if (id.status().code() != StatusCode::out_of_range) cli::fail(kTool, id.status().message());
      // The conversation no longer fits: say by how much.
      auto rendered = engine.render_chat(messages, true);
      auto ids = rendered.ok() ? engine.tokenize(*rendered) : Result<std::vector<int32_t>>(rendered.status());
      cli::fail(kTool, "context full: the conversation has " + (ids.ok() ? std::to_string(ids->size()) : std::string("too many")) +
                           " tokens; the context holds " + std::to_string(model.n_ctx) + " (raise -c)");
    }
    // Stream the answer; a Ctrl-C cancels it (within one engine step).
    bool cancelling = false;
    for (;;) {
      auto delta = engine.read(*id, 50.0);
      if (!delta.ok()) cli::fail(kTool, delta.status().message());
      if (!o.json) cli::emit(delta->text);
      if (delta->finished) break;
      if (g_interrupted && !cancelling) {
        g_interrupted = 0;
        cancelling = true;
        if (Status s = engine.cancel(*id); !s.is_ok()) cli::fail(kTool, s.message());
      }
    }
    auto done = engine.wait(*id);
    if (!done.ok()) cli::fail(kTool, done.status().message());
    const Completion& c = *done;
    if (o.json) cli::emit(completion_json(turn, c));
    else cli::emit("\n");
    if (c.reason == FinishReason::error) cli::fail(kTool, c.status.message());
    // The answer as generated (a cancelled one as far as it got) joins the conversation.
    messages.push_back({"assistant", c.text});
    last = c.metrics;
    std::fprintf(stderr, "%s: turn %d: prompt %lld tokens (%lld from the cache, %lld evaluated), answer %lld tokens, finish: %s\n",
                 kTool, turn, static_cast<long long>(c.metrics.prompt_tokens), static_cast<long long>(c.metrics.cached_tokens),
                 static_cast<long long>(c.metrics.prompt_tokens - c.metrics.cached_tokens),
                 static_cast<long long>(c.metrics.generated_tokens), finish_name(c.reason));
    if (c.reason == FinishReason::context)
      cli::fail(kTool, "context full after " + std::to_string(c.metrics.prompt_tokens + c.metrics.generated_tokens) +
                           " tokens (raise -c)");
  }
  return 0;
}
