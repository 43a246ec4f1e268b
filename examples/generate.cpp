// infer-generate: continues a prompt and streams the generated text (not the prompt) to stdout.
// Timings go to stderr. See the usage text below.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "format/metadata.hpp"
#include "infer/engine.hpp"
#include "core/timer.hpp"
#include "sample/stop_strings.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-generate";
constexpr const char* kUsageHead =
    "usage: infer-generate -m MODEL (-p PROMPT | -f PROMPT_FILE | --prompts FILE) [options]\n"
    "  --prompts FILE       each line of FILE is one prompt (plain text, or a JSON string when it\n"
    "                       starts with '\"', for prompts with newlines); all run at once in one\n"
    "                       engine (continuous batching); prints one JSON object per line, in input\n"
    "                       order; --stats adds the engine's statistics on stderr. The engine's knobs\n"
    "                       (with --prompts; --weight-type also without):\n"
    ;
constexpr const char* kUsageMiddle =
    "  -n N                 tokens to generate (default -1: until end of generation or context)\n"
    "  -c N                 context size in tokens (default: the model's, at most 4096)\n"
    "  -b N                 prompt tokens per forward step (default 512)\n"
    "  -t N                 compute threads (default: all cores)\n";
constexpr const char* kUsageTail =
    "  --stop STR           stop when STR is generated (repeatable; STR is not printed)\n"
    "  --ids                print the generated token ids on one line instead of text\n"
    "  --top-probs N        for each generated token, print the N most likely ids and their log\n"
    "                       probabilities to stderr (\"top: ID:LOGP ...\")\n"
    "  --ignore-eos         keep generating past end-of-generation tokens (benchmarks)\n"
    "  --no-parse-special   treat special-token text in the prompt as plain text\n"
    "  --kv-type f16|f32    KV cache element type (default f16)\n";

const std::string kUsageText = std::string(kUsageHead) + cli::kEngineUsage + kUsageMiddle + cli::kSamplingUsage + kUsageTail;
const char* const kUsage = kUsageText.c_str();

struct Options {
  std::string model, prompt;
  int64_t n_predict = -1, n_ctx = 0, n_batch = 512;
  int threads = 0;
  SamplingParams sampling;
  std::vector<std::string> stops;
  bool ids = false, parse_special = true, ignore_eos = false;
  int top_probs = 0;
  std::string prompts_file;
  EngineConfig engine;
  LoadOptions load;  // --weight-type for a single prompt
  bool stats = false;
  DType kv_type = DType::f16;
};

// The n most likely tokens of a logits row, with log-softmax values, as one stderr line.
void print_top(std::span<const float> logits, int n) {
  std::vector<int32_t> idx(logits.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  const size_t k = std::min(idx.size(), static_cast<size_t>(n));
  std::partial_sort(idx.begin(), idx.begin() + static_cast<ptrdiff_t>(k), idx.end(),
                    [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
  const float max = logits[static_cast<size_t>(idx[0])];
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l - max));
  const double log_z = std::log(z);
  std::string line = "top:";
  char buf[64];
  for (size_t i = 0; i < k; ++i) {
    std::snprintf(buf, sizeof buf, " %d:%.5f", idx[i], static_cast<double>(logits[static_cast<size_t>(idx[i])] - max) - log_z);
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
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) cli::usage_error(kTool, a + " needs a value", kUsage);
      return argv[++i];
    };
    auto integer = [&](long long lo, long long hi) { return cli::parse_int(kTool, kUsage, a, next(), lo, hi); };
    if (cli::parse_sampling_flag(kTool, kUsage, argc, argv, i, o.sampling)) continue;
    if (a == "--weight-type") {  // the engine's knob, also for a single prompt
      o.load.weight_type = cli::parse_weight_type(kTool, kUsage, next());
      o.engine.weight_type = cli::engine_weight_type(o.load.weight_type);
      continue;
    }
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
    else if (a == "--top-probs") o.top_probs = static_cast<int>(cli::parse_int(kTool, kUsage, a, next(), 1, 100));
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
  if (Status s = o.sampling.validate(); !s.is_ok()) cli::usage_error(kTool, s.message(), kUsage);
  return o;
}

void emit(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

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
        auto text = json_unquote(line);
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
  config.kv_f32 = o.kv_type == DType::f32;
  config.max_context = o.n_ctx;
  config.max_waiting = std::max<int>(config.max_waiting, static_cast<int>(prompts.size()));
  auto engine = Engine::create(o.model, config);
  if (!engine.ok()) cli::fail(kTool, engine.status().message());
  GenerationParams gp;
  gp.max_tokens = o.n_predict;
  gp.temperature = o.sampling.temperature;
  gp.top_k = o.sampling.top_k;
  gp.top_p = o.sampling.top_p;
  gp.min_p = o.sampling.min_p;
  gp.repeat_penalty = o.sampling.repeat_penalty;
  gp.repeat_last_n = o.sampling.repeat_last_n;
  gp.frequency_penalty = o.sampling.frequency_penalty;
  gp.presence_penalty = o.sampling.presence_penalty;
  gp.seed = o.sampling.seed;
  gp.stop = o.stops;
  gp.ignore_eos = o.ignore_eos;
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
      line += ", \"error\": " + json_quote(ids[i].status().message()) + ", \"finish_reason\": \"error\"}\n";
      emit(line);
      status = 1;
      continue;
    }
    auto done = (*engine)->wait(*ids[i]);
    if (!done.ok()) cli::fail(kTool, done.status().message());
    const Completion& c = *done;
    char num[256];
    line += ", \"text\": " + json_quote(c.text) + ", \"ids\": [";
    for (size_t k = 0; k < c.ids.size(); ++k) line += (k ? ", " : "") + std::to_string(c.ids[k]);
    std::snprintf(num, sizeof num, "], \"prompt_tokens\": %lld, \"cached_tokens\": %lld, \"ttft_ms\": %.3f, \"tpot_ms\": %.3f, ",
                  static_cast<long long>(c.metrics.prompt_tokens), static_cast<long long>(c.metrics.cached_tokens), c.metrics.ttft_ms,
                  c.metrics.tpot_ms);
    line += num;
    line += "\"finish_reason\": \"" + std::string(finish_reason_name(c.reason)) + "\"";
    if (!c.status.is_ok()) {
      line += ", \"error\": " + json_quote(c.status.message());
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

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.prompts_file.empty()) return run_prompts(o);
    cli::LoadedModel m = cli::load(kTool, o.model, true, o.load);

  auto prompt = m.tokenizer->encode(o.prompt, /*add_special=*/true, o.parse_special);
  if (!prompt.ok()) cli::fail(kTool, prompt.status().message());
  const std::vector<int32_t> tokens = std::move(prompt).value();
  if (tokens.empty()) cli::fail(kTool, "the prompt is empty (no tokens)");

  const int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : cli::default_context(m.model->info());
  if (static_cast<int64_t>(tokens.size()) >= n_ctx)
    cli::fail(kTool, "the prompt has " + std::to_string(tokens.size()) + " tokens; the context holds " + std::to_string(n_ctx) +
                         " (raise -c)");
  auto stop = StopMatcher::create(o.stops);
  if (!stop.ok()) cli::usage_error(kTool, stop.status().message(), kUsage);

  cli::Decoder decoder(kTool, *m.model, n_ctx, o.kv_type, o.threads, o.n_batch);
  Sampler sampler(o.sampling);
  // Generated text continues the prompt: its first piece keeps its leading space.
  IncrementalDetokenizer detok(*m.tokenizer, DecodeOptions{.keep_leading_space = true});

  Timer prompt_timer;
  if (!decoder.eval(tokens)) cli::fail(kTool, "KV cache full");
  const double prompt_ms = prompt_timer.elapsed_ms();

  const cli::GenerateLimits limits{.max_tokens = o.n_predict, .stop_at_eog = !o.ignore_eos};
  const cli::Generated gen = cli::generate(decoder, sampler, *m.tokenizer, limits, [&](int32_t tok) {
    if (o.top_probs > 0) print_top(decoder.logits(), o.top_probs);
    if (o.ids) return true;
    auto out = stop->push(detok.push(tok));
    emit(out.text);
    return !out.stopped;
  });
  if (o.ids) {
    std::string line;
    for (size_t i = 0; i < gen.ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(gen.ids[i]);
    }
    emit(line + "\n");
  } else if (gen.finish != cli::Finish::stop) {
    emit(stop->push(detok.flush()).text);
    emit(stop->flush());
  }
  const size_t n_prompt = tokens.size();
  const size_t n_gen = gen.ids.size();
  std::fprintf(stderr,
               "\n%s: load %.1f ms | prompt %zu tokens, %.1f ms, %.2f tokens/s | generated %zu tokens, %.1f ms, "
               "%.2f tokens/s, %.2f ms per token | finish: %s\n",
               kTool, m.load_ms, n_prompt, prompt_ms, prompt_ms > 0 ? 1000.0 * static_cast<double>(n_prompt) / prompt_ms : 0.0,
               n_gen, gen.ms, gen.ms > 0 ? 1000.0 * static_cast<double>(n_gen) / gen.ms : 0.0,
               n_gen == 0 ? 0.0 : gen.ms / static_cast<double>(n_gen), cli::finish_name(gen.finish));
  return 0;
}
