// infer-generate: continues a prompt and streams the generated text (not the prompt) to stdout.
// Timings go to stderr. See the usage text below.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "core/timer.hpp"
#include "sample/stop_strings.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-generate";
constexpr const char* kUsageHead =
    "usage: infer-generate -m MODEL (-p PROMPT | -f PROMPT_FILE) [options]\n"
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

const std::string kUsageText = std::string(kUsageHead) + cli::kSamplingUsage + kUsageTail;
const char* const kUsage = kUsageText.c_str();

struct Options {
  std::string model, prompt;
  int64_t n_predict = -1, n_ctx = 0, n_batch = 512;
  int threads = 0;
  SamplingParams sampling;
  std::vector<std::string> stops;
  bool ids = false, parse_special = true, ignore_eos = false;
  int top_probs = 0;
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
    else if (a == "--no-parse-special") o.parse_special = false;
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  o.model = cli::model_or_default(kTool, o.model, kUsage);
  if (!have_prompt) cli::usage_error(kTool, "a prompt is required (-p or -f)", kUsage);
  if (Status s = o.sampling.validate(); !s.is_ok()) cli::usage_error(kTool, s.message(), kUsage);
  return o;
}

void emit(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  cli::LoadedModel m = cli::load(kTool, o.model);

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
