// infer-bench: prompt processing and generation throughput, measured as llama.cpp's llama-bench
// measures them, through the public Engine API only. See the usage text below.
//
//   ppP  a prompt of P token ids on an empty context: the model's BOS (what it puts before any
//        text), then ids of a fixed pseudo-random sequence; no token is sampled (max_tokens 0).
//   tgN  N tokens generated greedily from an empty context, past end-of-generation tokens: the
//        BOS, then N forward steps of one row (the first on the BOS), as llama-bench's N decodes.
//
// A run's time is its request's time in the engine's steps: from its first scheduling to its end
// (RequestMetrics::e2e_ms - queue_ms), so the submitting thread's wake-ups are not in it. Each
// test has one warm-up run (the whole prompt; one generated token), then REPS timed runs; the
// prefix cache is off, so no run reuses an earlier one's KV. tokens/s of a run = (P + N) / time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "infer.h"
#include "infer/engine.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-bench";
constexpr const char* kUsage =
    "usage: infer-bench [-m MODEL] [-p 512] [-n 128] [-t THREADS] [-r REPS] [-b 512] [--kv-type T]\n"
    "                   [--weight-type T] [--device D] [--json]\n"
    "Prompt processing (ppP: a prompt of P tokens) and generation (tgN: N tokens generated) from an\n"
    "empty context, greedy, as llama.cpp's llama-bench measures them: one warm-up run, then REPS\n"
    "timed runs of each test; tokens/s as mean and standard deviation over the runs.\n"
    "  -m MODEL             GGUF file or Hugging Face model directory (default: $INFER_MODEL, else scripts/fetch-model's)\n"
    "  -p N                 prompt tokens (default 512; 0 skips the test)\n"
    "  -n N                 generated tokens (default 128; 0 skips the test)\n"
    "  -t N                 compute threads (default: all cores)\n"
    "  -r N                 timed runs of each test (default 5)\n"
    "  -b N                 prompt tokens per forward step (default 512, llama-bench's n_ubatch)\n"
    "  --kv-type T          KV cache element type: f16 (default), f32, bf16, q8_0, fp8 (llama-bench's -ctk/-ctv)\n"
    "  --weight-type T      keep (default), q8_0, q4_0, int8, w8a16, fp8, fp8-tensor, fp8-dynamic or int4:\n"
    "                       quantize float weight matrices at load\n"
    "  --device D           cpu (default), cuda or cuda:N: where the model computes\n"
    "  --json               a JSON array of the tests with llama-bench's field names (its -o json)\n"
    "Environment: INFER_PROFILE=1 adds the time per op on stderr at the end.\n";

struct Options {
  std::string model;
  int64_t n_prompt = 512, n_gen = 128, n_batch = 512;
  int threads = 0;
  int reps = 5;
  bool json = false;
  KvType kv_type = KvType::f16;
  WeightType weight_type = WeightType::keep;
  std::string device = "cpu";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return cli::flag_value(kTool, kUsage, argc, argv, i); };
    auto integer = [&](long long lo, long long hi) { return cli::parse_int(kTool, kUsage, a, next(), lo, hi); };
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "-p" || a == "--n-prompt") o.n_prompt = integer(0, 1 << 20);
    else if (a == "-n" || a == "--n-gen") o.n_gen = integer(0, 1 << 20);
    else if (a == "-t" || a == "--threads") o.threads = static_cast<int>(integer(1, 1024));
    else if (a == "-r" || a == "--repetitions") o.reps = static_cast<int>(integer(1, 1000));
    else if (a == "-b" || a == "--batch-size") o.n_batch = integer(1, 1 << 16);
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "--weight-type") o.weight_type = cli::parse_weight_type(kTool, kUsage, next());
    else if (a == "--device") o.device = cli::parse_device_name(kTool, kUsage, next());
    else if (a == "--json") o.json = true;
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  o.model = cli::model_or_default(kTool, o.model, kUsage);
  if (o.n_prompt == 0 && o.n_gen == 0) cli::usage_error(kTool, "nothing to measure: -p and -n are both 0", kUsage);
  return o;
}

// SplitMix64: the prompt's ids, the same on every run and machine.
class Ids {
 public:
  int32_t next(int64_t n_vocab) {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<int32_t>((z ^ (z >> 31)) % static_cast<uint64_t>(n_vocab));
  }

 private:
  uint64_t state_ = 42;
};

struct Test {
  int64_t n_prompt = 0, n_gen = 0;
  std::string time;  // when it started, RFC 3339
  std::vector<int64_t> samples_ns;

  std::string name() const { return n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen); }
  std::vector<double> samples_ts() const {
    std::vector<double> ts;
    for (int64_t ns : samples_ns) ts.push_back(1e9 * static_cast<double>(n_prompt + n_gen) / static_cast<double>(ns));
    return ts;
  }
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

// The sample standard deviation (n - 1), as llama-bench's; 0 for fewer than two values.
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

std::vector<double> as_doubles(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%FT%TZ", &tm);
  return buf;
}

// The CPU's model name (llama-bench's cpu_info), "" where /proc/cpuinfo does not say.
std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      const size_t start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "";
}

// "1.1B", "135M": the parameter count in llama-bench's model column.
std::string params_label(int64_t n) {
  char buf[32];
  const double x = static_cast<double>(n);
  if (x >= 1e9) std::snprintf(buf, sizeof buf, "%.1fB", x / 1e9);
  else if (x >= 1e6) std::snprintf(buf, sizeof buf, "%.0fM", x / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0fK", x / 1e3);
  return buf;
}

class Bench {
 public:
  Bench(const Options& o, Engine& engine) : o_(o), engine_(engine), model_(engine.model()) {
    // The model's BOS as it puts one before a text (none for models that add none).
    auto start = engine.tokenize("", /*add_special=*/true, /*parse_special=*/false);
    if (!start.ok()) cli::fail(kTool, start.status().message());
    Ids ids;
    start_ = start->empty() ? std::vector<int32_t>{ids.next(model_.n_vocab)} : *start;
    prompt_ = start_;
    while (static_cast<int64_t>(prompt_.size()) < o.n_prompt) prompt_.push_back(ids.next(model_.n_vocab));
    prompt_.resize(static_cast<size_t>(o.n_prompt));
  }

  Test prompt_test() {
    Test t{.n_prompt = o_.n_prompt, .n_gen = 0, .time = utc_now(), .samples_ns = {}};
    run(prompt_, 0, t.name());
    for (int r = 0; r < o_.reps; ++r) t.samples_ns.push_back(run(prompt_, 0, t.name()));
    return t;
  }

  Test generation_test() {
    Test t{.n_prompt = 0, .n_gen = o_.n_gen, .time = utc_now(), .samples_ns = {}};
    run(start_, 1, t.name());
    for (int r = 0; r < o_.reps; ++r) t.samples_ns.push_back(run(start_, o_.n_gen, t.name()));
    return t;
  }

  const ModelDescription& model() const { return model_; }

 private:
  // One request: `prompt`, then `n_gen` greedy tokens; its time in the engine's steps, in ns.
  int64_t run(const std::vector<int32_t>& prompt, int64_t n_gen, const std::string& test) {
    Request r;
    r.prompt_ids = prompt;
    r.params.max_tokens = n_gen;
    r.params.temperature = 0.0f;
    r.params.ignore_eos = true;
    auto done = engine_.generate(std::move(r));
    if (!done.ok()) cli::fail(kTool, test + ": " + done.status().message());
    const Completion& c = *done;
    if (!c.status.is_ok()) cli::fail(kTool, test + ": " + c.status.message());
    if (c.metrics.generated_tokens != n_gen || c.metrics.cached_tokens != 0)
      cli::fail(kTool, test + ": generated " + std::to_string(c.metrics.generated_tokens) + " tokens, not " + std::to_string(n_gen) +
                           " (finish: " + finish_reason_name(c.reason) + ")");
    const double ms = c.metrics.e2e_ms - c.metrics.queue_ms;
    return std::max<int64_t>(1, std::llround(ms * 1e6));
  }

  const Options& o_;
  Engine& engine_;
  ModelDescription model_;
  std::vector<int32_t> start_;   // what a context starts with: the BOS (or one id)
  std::vector<int32_t> prompt_;  // the pp prompt
};

std::string model_type(const ModelDescription& d) {
  return d.architecture + " " + params_label(d.n_params) + (d.file_type.empty() ? "" : " " + d.file_type);
}

void print_markdown(const std::vector<Test>& tests, const ModelDescription& d, int threads) {
  char size[32], params[32];
  const double bytes = static_cast<double>(d.size_bytes);
  if (bytes < 1024.0 * 1024 * 1024) std::snprintf(size, sizeof size, "%.2f MiB", bytes / 1024 / 1024);
  else std::snprintf(size, sizeof size, "%.2f GiB", bytes / 1024 / 1024 / 1024);
  const double n = static_cast<double>(d.n_params);
  if (n < 1e9) std::snprintf(params, sizeof params, "%.2f M", n / 1e6);
  else std::snprintf(params, sizeof params, "%.2f B", n / 1e9);
  std::printf("| %-30s | %10s | %10s | %7s | %15s | %20s |\n", "model", "size", "params", "threads", "test", "t/s");
  std::printf("| %s | %s: | %s: | %s: | %s: | %s: |\n", std::string(30, '-').c_str(), std::string(9, '-').c_str(),
              std::string(9, '-').c_str(), std::string(6, '-').c_str(), std::string(14, '-').c_str(), std::string(19, '-').c_str());
  for (const Test& t : tests) {
    char ts[64];
    const std::vector<double> v = t.samples_ts();
    std::snprintf(ts, sizeof ts, "%.2f ± %.2f", mean(v), stddev(v));
    // "±" is two bytes: one more column of padding than printf counts.
    std::printf("| %-30s | %10s | %10s | %7d | %15s | %21s |\n", model_type(d).c_str(), size, params, threads, t.name().c_str(), ts);
  }
  std::printf("\nbuild: libinfer %s, CPU kernels %s\n", infer_version(), infer_cpu_isa());
}

void print_json(const std::vector<Test>& tests, const Options& o, const ModelDescription& d, int threads) {
  const std::string cpu = cpu_name();
  std::string out = "[\n";
  for (size_t i = 0; i < tests.size(); ++i) {
    const Test& t = tests[i];
    const std::vector<double> ns = as_doubles(t.samples_ns), ts = t.samples_ts();
    char buf[512];
    out += "  {\n";
    out += "    \"cpu_info\": " + cli::json_quote(cpu) + ",\n";
    out += std::string("    \"backends\": \"") + (o.device == "cpu" ? "CPU" : "CUDA") + "\",\n";
    out += std::string("    \"cpu_isa\": \"") + infer_cpu_isa() + "\",\n";
    out += "    \"model_filename\": " + cli::json_quote(o.model) + ",\n";
    out += "    \"model_type\": " + cli::json_quote(model_type(d)) + ",\n";
    std::snprintf(buf, sizeof buf,
                  "    \"model_size\": %llu,\n    \"model_n_params\": %lld,\n    \"n_batch\": %lld,\n    \"n_ubatch\": %lld,\n"
                  "    \"n_threads\": %d,\n    \"type_k\": \"%s\",\n    \"type_v\": \"%s\",\n"
                  "    \"n_prompt\": %lld,\n    \"n_gen\": %lld,\n    \"n_depth\": 0,\n",
                  static_cast<unsigned long long>(d.size_bytes), static_cast<long long>(d.n_params), static_cast<long long>(o.n_batch),
                  static_cast<long long>(o.n_batch), threads, kv_type_name(o.kv_type), kv_type_name(o.kv_type),
                  static_cast<long long>(t.n_prompt), static_cast<long long>(t.n_gen));
    out += buf;
    out += "    \"test_time\": " + cli::json_quote(t.time) + ",\n";
    std::snprintf(buf, sizeof buf, "    \"avg_ns\": %lld,\n    \"stddev_ns\": %lld,\n    \"avg_ts\": %.6f,\n    \"stddev_ts\": %.6f,\n",
                  std::llround(mean(ns)), std::llround(stddev(ns)), mean(ts), stddev(ts));
    out += buf;
    out += "    \"samples_ns\": [ ";
    for (size_t k = 0; k < t.samples_ns.size(); ++k) out += (k ? ", " : "") + std::to_string(t.samples_ns[k]);
    out += " ],\n    \"samples_ts\": [ ";
    for (size_t k = 0; k < ts.size(); ++k) {
      std::snprintf(buf, sizeof buf, "%s%.6f", k ? ", " : "", ts[k]);
      out += buf;
    }
    out += " ]\n  }";
    out += i + 1 < tests.size() ? ",\n" : "\n";
  }
  out += "]\n";
  cli::emit(out);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  EngineConfig config;
  config.threads = o.threads;
  config.max_sequences = 1;
  config.max_batch_tokens = o.n_batch;
  config.prefix_cache = false;
  config.kv_type = o.kv_type;
  config.weight_type = o.weight_type;
  config.device = o.device;
  // Room for the longest run: the prompt, or the BOS and the generated tokens.
  config.max_context = std::max(o.n_prompt, o.n_gen + 1);
  config.kv_cache_tokens = config.max_context;
  auto created = Engine::create(o.model, config);
  if (!created.ok()) cli::fail(kTool, created.status().message());
  Engine& engine = **created;

  Bench bench(o, engine);
  std::vector<Test> tests;
  if (o.n_prompt > 0) tests.push_back(bench.prompt_test());
  if (o.n_gen > 0) tests.push_back(bench.generation_test());
  const int threads = engine.stats().threads;
  if (o.json) print_json(tests, o, bench.model(), threads);
  else print_markdown(tests, bench.model(), threads);
  return 0;
}
