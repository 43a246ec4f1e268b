// infer-bench-serving: load against an in-process Engine, reported as one JSON object.
//
//   trace       replays a request trace: Poisson arrivals at --rate requests/s (0: all at once),
//               prompt and output lengths uniform in --prompt-len and --output-len, and a share
//               (--shared-fraction) of the requests starting with a common --shared-prefix-token
//               system prompt.
//   closed      --concurrency C clients, each submitting its next request as soon as the last
//               one ends (aggregate generation throughput at C sequences in flight).
//   prefix      time to first token of a request whose --system-len-token system prompt is cold
//               (never seen) against the same request shape when the system prompt is cached
//               (the engine served it to an earlier request), --reps times each.
//
// Prompts are random token ids (so any model, real or random-weight, takes the same load) and
// every request generates exactly its output length (ignore_eos). Latencies are measured per
// request by the engine (RequestMetrics) and summarized here over all requests of the run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_common.hpp"
#include "infer/engine.hpp"

using namespace infer;

namespace {

constexpr const char* kTool = "infer-bench-serving";
constexpr const char* kUsageHead =
    "usage: infer-bench-serving [-m MODEL] [trace|closed|prefix] [options]\n"
    "  -t N                 compute threads (default: all cores)\n"
    "  --kv-type T          KV cache element type: f16 (default), f32, bf16, q8_0\n"
    "  --requests N         requests in the run (trace, closed; default 64)\n"
    "  --rate R             trace: Poisson arrivals per second (default 0: all at once)\n"
    "  --prompt-len A:B     prompt tokens, uniform in [A, B] (default 32:256; closed: 64:64)\n"
    "  --output-len A:B     generated tokens, uniform in [A, B] (default 32:128; closed: 64:64)\n"
    "  --shared-prefix N    trace: tokens of the common system prompt (default 0)\n"
    "  --shared-fraction F  trace: share of requests that start with it (default 0.5)\n"
    "  --concurrency C      closed: clients (default 4)\n"
    "  --system-len N       prefix: system prompt tokens (default 800)\n"
    "  --user-len N         prefix: tokens after the system prompt (default 16)\n"
    "  --reps N             prefix: cold/cached pairs (default 5)\n"
    "  --seed S             (default 1)\n"
    "  --temp T             sampling temperature (default 0: greedy)\n";

struct Range {
  int64_t lo = 0, hi = 0;
};

struct Options {
  std::string model, mode = "trace";
  EngineConfig engine;
  int64_t requests = 64;
  double rate = 0;
  Range prompt{32, 256}, output{32, 128};
  bool prompt_set = false, output_set = false;
  int64_t shared_prefix = 0;
  double shared_fraction = 0.5;
  int concurrency = 4;
  int64_t system_len = 800, user_len = 16, reps = 5;
  uint64_t seed = 1;
  float temperature = 0.0f;
};

Range parse_range(const std::string& flag, const char* text, const char* usage) {
  const std::string s = text;
  const size_t colon = s.find(':');
  Range r;
  r.lo = cli::parse_int(kTool, usage, flag, s.substr(0, colon).c_str(), 1, 1 << 20);
  r.hi = colon == std::string::npos ? r.lo : cli::parse_int(kTool, usage, flag, s.substr(colon + 1).c_str(), 1, 1 << 20);
  if (r.hi < r.lo) cli::usage_error(kTool, flag + ": A:B needs A <= B", usage);
  return r;
}

Options parse(int argc, char** argv, const char* usage) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return cli::flag_value(kTool, usage, argc, argv, i); };
    auto integer = [&](long long lo, long long hi) { return cli::parse_int(kTool, usage, a, next(), lo, hi); };
    auto number = [&](double lo, double hi) { return cli::parse_double(kTool, usage, a, next(), lo, hi); };
    if (cli::parse_engine_flag(kTool, usage, argc, argv, i, o.engine)) continue;
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "trace" || a == "closed" || a == "prefix") o.mode = a;
    else if (a == "-t" || a == "--threads") o.engine.threads = static_cast<int>(integer(1, 1024));
    else if (a == "--kv-type") o.engine.kv_type = cli::parse_kv_type(kTool, usage, next());
    else if (a == "--requests") o.requests = integer(1, 1 << 20);
    else if (a == "--rate") o.rate = number(0, 1e6);
    else if (a == "--prompt-len") o.prompt = parse_range(a, next(), usage), o.prompt_set = true;
    else if (a == "--output-len") o.output = parse_range(a, next(), usage), o.output_set = true;
    else if (a == "--shared-prefix") o.shared_prefix = integer(0, 1 << 20);
    else if (a == "--shared-fraction") o.shared_fraction = number(0, 1);
    else if (a == "--concurrency") o.concurrency = static_cast<int>(integer(1, 4096));
    else if (a == "--system-len") o.system_len = integer(1, 1 << 20);
    else if (a == "--user-len") o.user_len = integer(1, 1 << 20);
    else if (a == "--reps") o.reps = integer(1, 1000);
    else if (a == "--seed") o.seed = static_cast<uint64_t>(integer(0, INT64_MAX));
    else if (a == "--temp") o.temperature = static_cast<float>(number(0, 100));
    else if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else cli::usage_error(kTool, "unknown argument " + a, usage);
  }
  if (o.mode == "closed") {
    if (!o.prompt_set) o.prompt = {64, 64};
    if (!o.output_set) o.output = {64, 64};
  }
  o.model = cli::model_or_default(kTool, o.model, usage);
  return o;
}

class Load {
 public:
  Load(const Options& o, int64_t n_vocab) : o_(o), rng_(o.seed), n_vocab_(n_vocab) {}

  std::vector<int32_t> tokens(int64_t n) {
    // Ids above the first few (control tokens in every vocabulary here).
    std::uniform_int_distribution<int32_t> id(std::min<int32_t>(3, static_cast<int32_t>(n_vocab_ - 1)),
                                              static_cast<int32_t>(n_vocab_ - 1));
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = id(rng_);
    return t;
  }
  int64_t in(Range r) { return std::uniform_int_distribution<int64_t>(r.lo, r.hi)(rng_); }
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  std::mt19937_64& rng() { return rng_; }

  Request request(std::vector<int32_t> prompt, int64_t output) const {
    Request r;
    r.prompt_ids = std::move(prompt);
    r.params.max_tokens = output;
    r.params.temperature = o_.temperature;
    r.params.ignore_eos = true;
    r.params.seed = 1;
    return r;
  }

 private:
  const Options& o_;
  std::mt19937_64 rng_;
  int64_t n_vocab_;
};

using Clock = std::chrono::steady_clock;

std::string summary_json(const std::vector<double>& v) {
  const LatencySummary s = summarize_latencies(v);
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"p50\": %.3f, \"p95\": %.3f, \"p99\": %.3f, \"mean\": %.3f, \"count\": %lld}", s.p50, s.p95,
                s.p99, s.mean, static_cast<long long>(s.count));
  return buf;
}

// Results of requests run by one engine: per-request metrics and the run's wall time.
struct RunResult {
  std::vector<Completion> done;
  double wall_s = 0;
  int64_t failed = 0;
};

std::string run_json(Engine& engine, const RunResult& r) {
  std::vector<double> ttft, tpot, e2e, queue;
  int64_t generated = 0, prompt = 0, cached = 0, preempted = 0;
  for (const Completion& c : r.done) {
    const RequestMetrics& m = c.metrics;
    if (m.generated_tokens > 0) ttft.push_back(m.ttft_ms);
    if (m.generated_tokens > 1) tpot.push_back(m.tpot_ms);
    e2e.push_back(m.e2e_ms);
    queue.push_back(m.queue_ms);
    generated += m.generated_tokens;
    prompt += m.prompt_tokens;
    cached += m.cached_tokens;
    preempted += m.preemptions;
  }
  const EngineStats st = engine.stats();
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "\"requests\": %zu, \"failed\": %lld, \"wall_s\": %.3f, \"prompt_tokens\": %lld, \"cached_prompt_tokens\": %lld, "
                "\"generated_tokens\": %lld, \"generated_tokens_per_s\": %.3f, \"prompt_tokens_per_s\": %.3f, "
                "\"requests_per_s\": %.4f, \"preemptions\": %lld, \"steps\": %lld, \"forward_ms\": %.1f",
                r.done.size(), static_cast<long long>(r.failed), r.wall_s, static_cast<long long>(prompt),
                static_cast<long long>(cached), static_cast<long long>(generated), static_cast<double>(generated) / r.wall_s,
                static_cast<double>(prompt - cached) / r.wall_s, static_cast<double>(r.done.size()) / r.wall_s,
                static_cast<long long>(preempted), static_cast<long long>(st.steps), st.forward_ms);
  std::string out = buf;
  out += ", \"ttft_ms\": " + summary_json(ttft) + ", \"tpot_ms\": " + summary_json(tpot) + ", \"e2e_ms\": " + summary_json(e2e) +
         ", \"queue_ms\": " + summary_json(queue);
  return out;
}

void collect(Engine& engine, RequestId id, RunResult& r, std::mutex& m) {
  auto done = engine.wait(id);
  std::lock_guard lock(m);
  if (!done.ok() || !done->status.is_ok()) {
    ++r.failed;
    if (done.ok()) std::fprintf(stderr, "%s: request %llu: %s\n", kTool, static_cast<unsigned long long>(id), done->status.message().c_str());
    return;
  }
  r.done.push_back(std::move(done).value());
}

RunResult run_trace(const Options& o, Engine& engine, Load& load) {
  const std::vector<int32_t> shared = load.tokens(o.shared_prefix);
  std::vector<Request> requests;
  std::vector<double> at_s;  // arrival times
  double t = 0;
  std::exponential_distribution<double> gap(o.rate > 0 ? o.rate : 1.0);
  for (int64_t i = 0; i < o.requests; ++i) {
    std::vector<int32_t> prompt = load.tokens(load.in(o.prompt));
    if (o.shared_prefix > 0 && load.uniform() < o.shared_fraction) prompt.insert(prompt.begin(), shared.begin(), shared.end());
    requests.push_back(load.request(std::move(prompt), load.in(o.output)));
    at_s.push_back(t);
    if (o.rate > 0) t += gap(load.rng());
  }
  RunResult r;
  std::mutex m;
  std::vector<std::thread> waiters;
  const auto start = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at_s[i])));
    auto id = engine.submit(std::move(requests[i]));
    if (!id.ok()) cli::fail(kTool, id.status().message());
    waiters.emplace_back([&, id = *id] { collect(engine, id, r, m); });
  }
  for (auto& w : waiters) w.join();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

RunResult run_closed(const Options& o, Engine& engine, Load& load) {
  // The requests are drawn up front, in order; clients take the next one when theirs ends.
  std::vector<Request> requests;
  for (int64_t i = 0; i < o.requests; ++i) requests.push_back(load.request(load.tokens(load.in(o.prompt)), load.in(o.output)));
  RunResult r;
  std::mutex m;
  size_t next = 0;
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < o.concurrency; ++c) {
    clients.emplace_back([&] {
      for (;;) {
        Request req;
        {
          std::lock_guard lock(m);
          if (next == requests.size()) return;
          req = std::move(requests[next++]);
        }
        auto id = engine.submit(std::move(req));
        if (!id.ok()) cli::fail(kTool, id.status().message());
        collect(engine, *id, r, m);
      }
    });
  }
  for (auto& c : clients) c.join();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

std::string run_prefix(const Options& o, Engine& engine, Load& load) {
  std::vector<double> cold, cached;
  int64_t cached_tokens = 0;
  for (int64_t rep = 0; rep < o.reps; ++rep) {
    const std::vector<int32_t> system = load.tokens(o.system_len);  // never seen before: cold
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<int32_t> prompt = system;
      const std::vector<int32_t> user = load.tokens(o.user_len);
      prompt.insert(prompt.end(), user.begin(), user.end());
      auto done = engine.generate(load.request(std::move(prompt), 1));
      if (!done.ok()) cli::fail(kTool, done.status().message());
      if (!done->status.is_ok()) cli::fail(kTool, done->status.message());
      (pass == 0 ? cold : cached).push_back(done->metrics.ttft_ms);
      if (pass == 1) cached_tokens += done->metrics.cached_tokens;
    }
  }
  const double cold_p50 = summarize_latencies(cold).p50, cached_p50 = summarize_latencies(cached).p50;
  char buf[256];
  std::snprintf(buf, sizeof buf, ", \"cached_tokens_mean\": %.1f, \"speedup_p50\": %.2f",
                static_cast<double>(cached_tokens) / static_cast<double>(o.reps), cached_p50 > 0 ? cold_p50 / cached_p50 : 0.0);
  return "\"ttft_cold_ms\": " + summary_json(cold) + ", \"ttft_cached_ms\": " + summary_json(cached) + buf;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage_text = std::string(kUsageHead) + cli::kEngineUsage;
  const Options o = parse(argc, argv, usage_text.c_str());
  EngineConfig config = o.engine;
  config.max_waiting = std::max<int>(config.max_waiting, static_cast<int>(o.requests));
  auto engine = Engine::create(o.model, config);
  if (!engine.ok()) cli::fail(kTool, engine.status().message());
  Engine& e = **engine;
  Load load(o, e.model().n_vocab);

  const EngineConfig& c = config;
  char head[768];
  std::snprintf(head, sizeof head,
                "{\"mode\": \"%s\", \"model\": %s, \"threads\": %d, \"max_batch_tokens\": %lld, \"max_sequences\": %d, "
                "\"kv_cache_mb\": %llu, \"block_size\": %d, \"prefix_cache\": %s, \"batch_wait_ms\": %.1f, ",
                o.mode.c_str(), cli::json_quote(e.model().name.empty() ? o.model : e.model().name).c_str(), c.threads,
                static_cast<long long>(c.max_batch_tokens), c.max_sequences, static_cast<unsigned long long>(c.kv_cache_bytes >> 20),
                c.block_size, c.prefix_cache ? "true" : "false", c.batch_wait_ms);
  std::string out = head;
  char params[512];
  if (o.mode == "prefix") {
    std::snprintf(params, sizeof params, "\"system_len\": %lld, \"user_len\": %lld, \"reps\": %lld, ",
                  static_cast<long long>(o.system_len), static_cast<long long>(o.user_len), static_cast<long long>(o.reps));
    out += params + run_prefix(o, e, load);
  } else {
    std::snprintf(params, sizeof params,
                  "\"prompt_len\": [%lld, %lld], \"output_len\": [%lld, %lld], \"rate\": %.3f, \"concurrency\": %d, "
                  "\"shared_prefix\": %lld, \"shared_fraction\": %.2f, ",
                  static_cast<long long>(o.prompt.lo), static_cast<long long>(o.prompt.hi), static_cast<long long>(o.output.lo),
                  static_cast<long long>(o.output.hi), o.mode == "trace" ? o.rate : 0.0, o.mode == "closed" ? o.concurrency : 0,
                  static_cast<long long>(o.mode == "trace" ? o.shared_prefix : 0), o.shared_fraction);
    out += params;
    const RunResult r = o.mode == "trace" ? run_trace(o, e, load) : run_closed(o, e, load);
    out += run_json(e, r);
    if (r.failed > 0) {
      std::printf("%s}\n", out.c_str());
      return 1;
    }
  }
  std::printf("%s}\n", out.c_str());
  return 0;
}
