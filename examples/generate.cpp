// infer-generate: continues a prompt and streams the generated text (not the prompt) to stdout.
// Timings go to stderr. See the usage text below.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cli_common.hpp"
#include "core/thread_pool.hpp"
#include "core/timer.hpp"
#include "sample/sampler.hpp"
#include "sample/stop_strings.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-generate";
constexpr const char* kUsage =
    "usage: infer-generate -m MODEL (-p PROMPT | -f PROMPT_FILE) [options]\n"
    "  -n N                 tokens to generate (default -1: until end of generation or context)\n"
    "  -c N                 context size in tokens (default: the model's, at most 4096)\n"
    "  -b N                 prompt tokens per forward step (default 512)\n"
    "  -t N                 compute threads (default: all cores)\n"
    "  --temp T             temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K            (default 40; 0 = off)\n"
    "  --top-p P            (default 0.95; 1 = off)\n"
    "  --min-p P            (default 0.05; 0 = off)\n"
    "  --repeat-penalty R   (default 1.0 = off)   --repeat-last-n N (default 64)\n"
    "  --frequency-penalty F, --presence-penalty F   (default 0 = off)\n"
    "  --seed S             random seed (default 42)\n"
    "  --stop STR           stop when STR is generated (repeatable; STR is not printed)\n"
    "  --ids                print the generated token ids on one line instead of text\n"
    "  --ignore-eos         keep generating past end-of-generation tokens (benchmarks)\n"
    "  --no-parse-special   treat special-token text in the prompt as plain text\n"
    "  --kv-type f16|f32    KV cache element type (default f16)\n";

struct Options {
  std::string model, prompt;
  int64_t n_predict = -1, n_ctx = 0, n_batch = 512;
  int threads = 0;
  SamplingParams sampling;
  std::vector<std::string> stops;
  bool ids = false, parse_special = true, ignore_eos = false;
  DType kv_type = DType::f16;
};

Options parse(int argc, char** argv) {
  Options o;
  o.sampling.temperature = 0.8f;
  o.sampling.top_k = 40;
  o.sampling.top_p = 0.95f;
  o.sampling.min_p = 0.05f;
  o.sampling.seed = 42;
  bool have_prompt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) cli::usage_error(kTool, a + " needs a value", kUsage);
      return argv[++i];
    };
    auto num = [&](double lo, double hi) { return cli::parse_double(kTool, kUsage, a, next(), lo, hi); };
    auto integer = [&](long long lo, long long hi) { return cli::parse_int(kTool, kUsage, a, next(), lo, hi); };
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "-p" || a == "--prompt") { o.prompt = next(); have_prompt = true; }
    else if (a == "-f" || a == "--file") { o.prompt = cli::read_text_file(kTool, next()); have_prompt = true; }
    else if (a == "-n" || a == "--n-predict") o.n_predict = integer(-1, 1 << 30);
    else if (a == "-c" || a == "--ctx-size") o.n_ctx = integer(1, 1 << 24);
    else if (a == "-b" || a == "--batch-size") o.n_batch = integer(1, 1 << 16);
    else if (a == "-t" || a == "--threads") o.threads = static_cast<int>(integer(1, 1024));
    else if (a == "--temp") o.sampling.temperature = static_cast<float>(num(0, 100));
    else if (a == "--top-k") o.sampling.top_k = static_cast<int32_t>(integer(0, 1 << 30));
    else if (a == "--top-p") o.sampling.top_p = static_cast<float>(num(0, 1));
    else if (a == "--min-p") o.sampling.min_p = static_cast<float>(num(0, 1));
    else if (a == "--repeat-penalty") o.sampling.repeat_penalty = static_cast<float>(num(0, 100));
    else if (a == "--repeat-last-n") o.sampling.repeat_last_n = static_cast<int32_t>(integer(0, 1 << 20));
    else if (a == "--frequency-penalty") o.sampling.frequency_penalty = static_cast<float>(num(-100, 100));
    else if (a == "--presence-penalty") o.sampling.presence_penalty = static_cast<float>(num(-100, 100));
    else if (a == "--seed") o.sampling.seed = static_cast<uint64_t>(integer(0, INT64_MAX));
    else if (a == "--stop") o.stops.push_back(next());
    else if (a == "--ids") o.ids = true;
    else if (a == "--ignore-eos") o.ignore_eos = true;
    else if (a == "--no-parse-special") o.parse_special = false;
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  if (o.model.empty()) cli::usage_error(kTool, "-m MODEL is required", kUsage);
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
  const ModelInfo& info = m.model->info();

  auto prompt = m.tokenizer->encode(o.prompt, /*add_special=*/true, o.parse_special);
  if (!prompt.ok()) cli::fail(kTool, prompt.status().message());
  std::vector<int32_t> tokens = std::move(prompt).value();
  if (tokens.empty()) cli::fail(kTool, "the prompt is empty (no tokens)");

  const int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(info.n_ctx_train > 0 ? info.n_ctx_train : 4096, 4096);
  if (static_cast<int64_t>(tokens.size()) >= n_ctx)
    cli::fail(kTool, "the prompt has " + std::to_string(tokens.size()) + " tokens; the context holds " + std::to_string(n_ctx) +
                         " (raise -c)");
  auto kv = cli::make_kv_cache(kTool, *m.model, n_ctx, o.kv_type, o.n_batch);
  auto stop = StopMatcher::create(o.stops);
  if (!stop.ok()) cli::usage_error(kTool, stop.status().message(), kUsage);

  ThreadPool pool(o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  Sampler sampler(o.sampling);
  // Generated text continues the prompt: its first piece keeps its leading space.
  IncrementalDetokenizer detok(*m.tokenizer, DecodeOptions{.keep_leading_space = true});
  SequenceKv seq;
  Batch batch;
  std::vector<float> logits(static_cast<size_t>(info.n_vocab));
  std::vector<int32_t> generated;

  // Prompt, in steps of n_batch tokens; only the last row needs logits.
  Timer prompt_timer;
  for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(o.n_batch)) {
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(o.n_batch));
    if (!kv.append(seq, static_cast<int64_t>(end - start))) cli::fail(kTool, "KV cache full");
    batch.clear();
    batch.sequences.push_back(BatchSequence(seq));
    for (size_t t = start; t < end; ++t) batch.add(tokens[t], static_cast<int32_t>(t), 0, t + 1 == tokens.size());
    if (Status s = m.model->forward(batch, kv.view(), logits.data(), pool); !s.is_ok()) cli::fail(kTool, s.message());
  }
  const double prompt_ms = prompt_timer.elapsed_ms();

  Timer gen_timer;
  std::string finish = "length";
  for (int64_t i = 0; o.n_predict < 0 || i < o.n_predict; ++i) {
    const int32_t tok = sampler.sample(logits, tokens);
    if (!o.ignore_eos && m.tokenizer->is_eog(tok)) {
      finish = "eog";
      break;
    }
    generated.push_back(tok);
    tokens.push_back(tok);
    if (!o.ids) {
      auto out = stop->push(detok.push(tok));
      emit(out.text);
      if (out.stopped) {
        finish = "stop";
        break;
      }
    }
    if (static_cast<int64_t>(tokens.size()) >= n_ctx) {
      finish = "context";
      break;
    }
    if (o.n_predict >= 0 && i + 1 == o.n_predict) break;
    if (!kv.append(seq, 1)) cli::fail(kTool, "KV cache full");
    batch.clear();
    batch.sequences.push_back(BatchSequence(seq));
    batch.add(tok, static_cast<int32_t>(tokens.size() - 1), 0, true);
    if (Status s = m.model->forward(batch, kv.view(), logits.data(), pool); !s.is_ok()) cli::fail(kTool, s.message());
  }
  const double gen_ms = gen_timer.elapsed_ms();
  if (o.ids) {
    std::string line;
    for (size_t i = 0; i < generated.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(generated[i]);
    }
    emit(line + "\n");
  } else if (finish != "stop") {
    emit(stop->push(detok.flush()).text);
    emit(stop->flush());
  }
  const size_t n_prompt = tokens.size() - generated.size();
  std::fprintf(stderr,
               "\n%s: load %.1f ms | prompt %zu tokens, %.1f ms, %.2f tokens/s | generated %zu tokens, %.1f ms, "
               "%.2f tokens/s, %.2f ms per token | finish: %s\n",
               kTool, m.load_ms, n_prompt, prompt_ms, prompt_ms > 0 ? 1000.0 * static_cast<double>(n_prompt) / prompt_ms : 0.0,
               generated.size(), gen_ms, gen_ms > 0 ? 1000.0 * static_cast<double>(generated.size()) / gen_ms : 0.0,
               generated.empty() ? 0.0 : gen_ms / static_cast<double>(generated.size()), finish.c_str());
  return 0;
}
