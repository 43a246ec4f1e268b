// infer-generate: continues a prompt and streams the generated text (not the prompt) to stdout;
// timings go to stderr. With --prompts, runs every line of a file as one request of one engine.
// Both run through the public Engine API only. See the usage text below.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "infer/engine.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-generate";
constexpr const char* kUsageHead =
    "usage: infer-generate -m MODEL (-p PROMPT | -f PROMPT_FILE | --prompts FILE) [options]\n"
    "  --prompts FILE       each line of FILE is one prompt (plain text, or a JSON string when it\n"
    "                       starts with '\"', for prompts with newlines); all run at once in one\n"
    "                       engine (continuous batching); prints one JSON object per line, in input\n"
    "                       order; --stats adds the engine's statistics on stderr. The engine's knobs\n"
    "                       (with --prompts; --weight-type, --device also without):\n"
    ;
constexpr const char* kUsageMiddle =
    "  -n N                 tokens to generate (default -1: until end of generation or context)\n"
    "  -c N                 context size in tokens (default: the model's, at most 4096)\n"
    "  -b N                 prompt tokens per forward step (default 512)\n"
    "  -t N                 compute threads (default: all cores)\n";
constexpr const char* kUsageTail =
    "  --stop STR           stop when STR is generated (repeatable; STR is not printed)\n"
    "  --ids                print the generated token ids on one line instead of text\n"
    "  --top-probs N        for each generated token, print the N (at most 20) most likely ids and\n"
    "                       their log probabilities to stderr (\"top: ID:LOGP ...\")\n"
    "  --ignore-eos         keep generating past end-of-generation tokens (benchmarks)\n"
    "  --no-parse-special   treat special-token text in the prompt as plain text\n"
    "  --kv-type T          KV cache element type: f16 (default), f32, bf16, q8_0, fp8\n";

const std::string kUsageText = std::string(kUsageHead) + cli::kEngineUsage + kUsageMiddle + cli::kSamplingUsage + kUsageTail;
const char* const kUsage = kUsageText.c_str();

struct Options {
  std::string model, prompt;
  int64_t n_predict = -1, n_ctx = 0, n_batch = 512;
  int threads = 0;
  GenerationParams sampling;
  std::vector<std::string> stops;
  bool ids = false, parse_special = true, ignore_eos = false;
  int top_probs = 0;
  std::string prompts_file;
  EngineConfig engine;  // --weight-type and --device also apply to a single prompt
  bool stats = false;
  KvType kv_type = KvType::f16;
};

// One generated token's most likely alternatives as a stderr line ("top: ID:LOGP ...").
void print_top(const TokenLogprobs& lp) {
  std::string line = "top:";
  char buf[64];
  for (const TokenLogprob& t : lp.top) {
    std::snprintf(buf, sizeof buf, " %d:%.5f", t.token, static_cast<double>(t.logprob));
    line += buf;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

Options parse(int argc, char** argv) {
  Options o;
  cli::set_sampling_defaults(o.sampling);
  bool have_prompt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return cli::flag_value(kTool, kUsage, argc, argv, i); };
    auto integer = [&](long long lo, long long hi) { return cli::parse_int(kTool, kUsage, a, next(), lo, hi); };
    if (cli::parse_sampling_flag(kTool, kUsage, argc, argv, i, o.sampling)) continue;
    if (cli::parse_engine_flag(kTool, kUsage, argc, argv, i, o.engine)) continue;
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "-p" || a == "--prompt") { o.prompt = next(); have_prompt = true; }
    else if (a == "-f" || a == "--file") { o.prompt = cli::read_text_file(kTool, next()); have_prompt = true; }
    else if (a == "-n" || a == "--n-predict") o.n_predict = integer(-1, 1 << 30);
    else if (a == "-c" || a == "--ctx-size") o.n_ctx = integer(1, 1 << 24);
    else if (a == "-b" || a == "--batch-size") o.n_batch = integer(1, 1 << 16);
    else if (a == "-t" || a == "--threads") o.threads = static_cast<int>(integer(1, 1024));
    else if (a == "--stop") o.stops.push_back(next());
    else if (a == "--ids") o.ids = true;
    else if (a == "--top-probs") o.top_probs = static_cast<int>(cli::parse_int(kTool, kUsage, a, next(), 1, 20));
    else if (a == "--ignore-eos") o.ignore_eos = true;
    else if (a == "--prompts") { o.prompts_file = next(); have_prompt = true; }
    else if (a == "--stats") o.stats = true;
    else if (a == "--no-parse-special") o.parse_special = false;
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  o.model = cli::model_or_default(kTool, o.model, kUsage);
  if (!have_prompt) cli::usage_error(kTool, "a prompt is required (-p, -f or --prompts)", kUsage);
  o.sampling.max_tokens = o.n_predict;
  o.sampling.stop = o.stops;
  o.sampling.ignore_eos = o.ignore_eos;
  return o;
}

using cli::emit;

}  // namespace

// --prompts: every line one request, all submitted at once to one Engine.
int run_prompts(const Options& o) {
  std::vector<std::string> prompts;
  {
    const std::string all = cli::read_text_file(kTool, o.prompts_file);
    size_t start = 0;
    while (start < all.size()) {
      size_t end = all.find('\n', start);
      if (end == std::string::npos) end = all.size();
      std::string line = all.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty() && line.front() == '"') {
        auto text = cli::json_unquote(line);
        if (!text.ok()) cli::fail(kTool, o.prompts_file + ": line " + std::to_string(prompts.size() + 1) + ": " + text.status().message());
        line = std::move(text).value();
      }
      if (!line.empty()) prompts.push_back(std::move(line));
      start = end + 1;
    }
  }
  if (prompts.empty()) cli::fail(kTool, o.prompts_file + ": no prompts");
  EngineConfig config = o.engine;
  config.threads = o.threads;
  config.kv_type = o.kv_type;
  config.max_context = o.n_ctx;
  config.max_waiting = std::max<int>(config.max_waiting, static_cast<int>(prompts.size()));
  auto engine = Engine::create(o.model, config);
  if (!engine.ok()) cli::fail(kTool, engine.status().message());
  const GenerationParams& gp = o.sampling;
  std::vector<Result<RequestId>> ids;
  for (const std::string& p : prompts) {
    Request r;
    r.prompt = p;
    r.params = gp;
    ids.push_back((*engine)->submit(std::move(r)));
  }
  int status = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string line = "{\"index\": " + std::to_string(i);
    if (!ids[i].ok()) {
      line += ", \"error\": " + cli::json_quote(ids[i].status().message()) + ", \"finish_reason\": \"error\"}\n";
      emit(line);
      status = 1;
      continue;
    }
    auto done = (*engine)->wait(*ids[i]);
    if (!done.ok()) cli::fail(kTool, done.status().message());
    const Completion& c = *done;
    char num[256];
    line += ", \"text\": " + cli::json_quote(c.text) + ", \"ids\": [";
    for (size_t k = 0; k < c.ids.size(); ++k) line += (k ? ", " : "") + std::to_string(c.ids[k]);
    std::snprintf(num, sizeof num, "], \"prompt_tokens\": %lld, \"cached_tokens\": %lld, \"ttft_ms\": %.3f, \"tpot_ms\": %.3f, ",
                  static_cast<long long>(c.metrics.prompt_tokens), static_cast<long long>(c.metrics.cached_tokens), c.metrics.ttft_ms,
                  c.metrics.tpot_ms);
    line += num;
    line += "\"finish_reason\": \"" + std::string(finish_reason_name(c.reason)) + "\"";
    if (!c.status.is_ok()) {
      line += ", \"error\": " + cli::json_quote(c.status.message());
      status = 1;
    }
    emit(line + "}\n");
  }
  const EngineStats st = (*engine)->stats();
  std::fprintf(stderr,
               "%s: %zu requests | prompt %lld tokens (%lld from the prefix cache), generated %lld tokens in %.1f s: "
               "%.2f tokens/s | TTFT p50 %.1f ms, p95 %.1f ms | TPOT p50 %.2f ms | preemptions %lld\n",
               kTool, prompts.size(), static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.cached_prompt_tokens),
               static_cast<long long>(st.generated_tokens), st.uptime_s, st.generated_tokens_per_s, st.ttft_ms.p50, st.ttft_ms.p95,
               st.tpot_ms.p50, static_cast<long long>(st.preemptions));
  if (o.stats)
    std::fprintf(stderr, "%s: steps %lld | time: tokenize %.1f ms, schedule %.1f ms, forward %.1f ms, sample %.1f ms, "
                 "detokenize %.1f ms | KV blocks %lld total, %lld cached, %lld free\n",
                 kTool, static_cast<long long>(st.steps), st.tokenize_ms, st.schedule_ms, st.forward_ms, st.sample_ms,
                 st.detokenize_ms, static_cast<long long>(st.kv_blocks_total), static_cast<long long>(st.kv_blocks_cached),
                 static_cast<long long>(st.kv_blocks_free));
  return status;
}

// -p / -f: one request on a one-sequence engine whose KV pool holds the context, streamed.
int run_one(const Options& o) {
  EngineConfig config = cli::one_sequence_config(o.engine, o.threads, o.n_ctx, o.n_batch, o.kv_type);
  const auto load_start = std::chrono::steady_clock::now();
  auto created = Engine::create(o.model, config);
  if (!created.ok()) cli::fail(kTool, created.status().message());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  Engine& engine = **created;

  Request request;
  request.prompt = o.prompt;
  request.parse_special = o.parse_special;
  request.params = o.sampling;
  request.params.logprobs = o.top_probs > 0;
  request.params.top_logprobs = o.top_probs;
  // Called on the engine's worker, one token at a time, in order.
  request.on_event = [&o](const StreamEvent& ev) {
    if (ev.logprobs) print_top(*ev.logprobs);
    if (!o.ids) emit(ev.text);
  };
  auto id = engine.submit(std::move(request));
  if (!id.ok()) {
    const Status& s = id.status();
    if (s.code() == StatusCode::out_of_range) cli::fail(kTool, s.message() + " (raise -c)");
    cli::fail(kTool, s.message());
  }
  auto done = engine.wait(*id);
  if (!done.ok()) cli::fail(kTool, done.status().message());
  const Completion& c = *done;
  if (!c.status.is_ok()) cli::fail(kTool, c.status.message());
  if (o.ids) {
    std::string line;
    for (size_t i = 0; i < c.ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(c.ids[i]);
    }
    emit(line + "\n");
  }
  // The time to the first token covers the prompt; generation is the time after it.
  const RequestMetrics& m = c.metrics;
  const double prompt_ms = m.ttft_ms > 0 ? m.ttft_ms : m.e2e_ms;
  const double gen_ms = m.generated_tokens > 0 ? m.e2e_ms - m.ttft_ms : 0.0;
  const int64_t after_first = std::max<int64_t>(0, m.generated_tokens - 1);
  std::fprintf(stderr,
               "\n%s: load %.1f ms | prompt %lld tokens, %.1f ms, %.2f tokens/s | generated %lld tokens, %.1f ms, "
               "%.2f tokens/s, %.2f ms per token | finish: %s\n",
               kTool, load_ms, static_cast<long long>(m.prompt_tokens), prompt_ms,
               prompt_ms > 0 ? 1000.0 * static_cast<double>(m.prompt_tokens) / prompt_ms : 0.0,
               static_cast<long long>(m.generated_tokens), gen_ms,
               gen_ms > 0 ? 1000.0 * static_cast<double>(after_first) / gen_ms : 0.0, m.tpot_ms, finish_reason_name(c.reason));
  return 0;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  return o.prompts_file.empty() ? run_one(o) : run_prompts(o);
}
