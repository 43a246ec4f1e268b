// infer-perplexity: perplexity of a text, computed exactly as llama.cpp's llama-perplexity does:
// the text is tokenized once with BOS, split into consecutive chunks of CTX tokens whose first
// token is replaced by BOS, and only the second half of each chunk is scored. Prints the running
// estimate per chunk and a final line "PPL = <value> +/- <stderr>".
//
// With --kl-divergence-base FILE (a file written by `llama-perplexity --kl-divergence-base`), the
// tokens come from that file and each scored position is compared with the base model's
// distribution: mean KL divergence, top-1 agreement, and both perplexities.
//
// With --kl-base BASE_MODEL, both models run here on the same chunks (the base with the default
// F16 cache and its weights as stored; --kv-type and --weight-type apply to MODEL), and each
// scored position compares the full distributions in float64: per chunk and in total, both
// perplexities, their difference, the mean, median, p99 and largest KL divergence KL(base || model)
// and the top-1 agreement.
//
// Each chunk is one request to the Engine (public API only): its tokens as prompt_ids, nothing
// generated, the second half scored (Request::score: the log-probability of each scored token,
// and with --kl-divergence-base the logits rows too), the prefix cache off.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <vector>

#include "cli_common.hpp"
#include "infer/engine.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-perplexity";
constexpr const char* kUsage =
    "usage: infer-perplexity -m MODEL -f TEXT_FILE [-c CTX] [-t THREADS] [-b BATCH] [--chunks N]\n"
    "       infer-perplexity -m MODEL --kl-divergence-base FILE [-t THREADS]\n"
    "       infer-perplexity -m MODEL --kl-base BASE_MODEL -f TEXT_FILE [-c CTX] [-t THREADS] [--chunks N]\n"
    "  --kl-base BASE_MODEL  run BASE_MODEL too and compare each scored distribution with its\n"
    "               (KL divergence, top-1 agreement, perplexity difference; per chunk and in total)\n"
    "  -c CTX       tokens per chunk (default 512)\n"
    "  --chunks N   score at most N chunks (default: all)\n"
    "  --kv-type    f16 (default), f32, bf16, q8_0, fp8\n"
    "  --weight-type keep|q8_0|q4_0|int8|w8a16|fp8|fp8-tensor|fp8-dynamic|int4   quantize float weight matrices at load (default keep)\n"
    "  --device D   cpu (default), cuda or cuda:N: where the models compute\n";

struct Options {
  std::string model, text_file, kld_base, kl_base_model;
  int64_t n_ctx = 512, n_batch = 2048, max_chunks = -1;
  int threads = 0;
  KvType kv_type = KvType::f16;
  WeightType weight_type = WeightType::keep;
  std::string device = "cpu";
};

// Base distributions from llama-perplexity --kl-divergence-base:
//   "_logits_" i32:n_ctx i32:n_vocab i32:n_chunk i32:tokens[n_chunk*n_ctx]
//   then per chunk, per scored position: f32 scale, f32 min_log_prob, u16 q[n_vocab] (padded to
//   nv = 2*((n_vocab+1)/2) + 4 u16 in all); log p_i = min_log_prob + scale * q_i.
struct KldBase {
  int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::vector<int32_t> tokens;
  std::ifstream in;
  int64_t nv() const { return 2 * ((n_vocab + 1) / 2) + 4; }
};

void read_exact(std::ifstream& in, void* dst, size_t n, const std::string& path) {
  in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  if (!in) cli::fail(kTool, path + ": truncated KL-divergence base file");
}

KldBase open_kld_base(const std::string& path) {
  KldBase b;
  b.in.open(path, std::ios::binary);
  if (!b.in) cli::fail(kTool, path + ": cannot open");
  char magic[8];
  read_exact(b.in, magic, 8, path);
  if (std::memcmp(magic, "_logits_", 8) != 0) cli::fail(kTool, path + ": not a llama-perplexity KL-divergence base file");
  read_exact(b.in, &b.n_ctx, 4, path);
  read_exact(b.in, &b.n_vocab, 4, path);
  read_exact(b.in, &b.n_chunk, 4, path);
  if (b.n_ctx < 4 || b.n_ctx > (1 << 20) || b.n_vocab < 2 || b.n_vocab > (1 << 24) || b.n_chunk < 1 || b.n_chunk > (1 << 20))
    cli::fail(kTool, path + ": implausible header (n_ctx " + std::to_string(b.n_ctx) + ", n_vocab " + std::to_string(b.n_vocab) +
                         ", n_chunk " + std::to_string(b.n_chunk) + ")");
  b.tokens.resize(static_cast<size_t>(b.n_chunk) * static_cast<size_t>(b.n_ctx));
  read_exact(b.in, b.tokens.data(), b.tokens.size() * 4, path);
  return b;
}

// log p_i of a row of logits, in float64.
std::vector<double> log_softmax(const float* row, int64_t n) {
  const float max = *std::max_element(row, row + n);
  double z = 0;
  for (int64_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(row[i] - max));
  const double log_z = std::log(z);
  std::vector<double> lp(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) lp[static_cast<size_t>(i)] = static_cast<double>(row[i] - max) - log_z;
  return lp;
}

// The p-quantile of sorted values (nearest rank).
double quantile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto k = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size()))) - (p > 0 ? 1 : 0);
  return sorted[std::min(k, sorted.size() - 1)];
}

void print_comparison_header() {
  std::printf("%-6s %12s %12s %14s %12s %12s %9s\n", "chunk", "PPL", "base PPL", "ln(PPL/base)", "mean KLD", "p99 KLD", "same top");
}

// The model against a base model, position by position: KL(base || model) over the whole
// vocabulary in float64, top-1 agreement, and both models' negative log-likelihoods.
struct ModelComparison {
  std::vector<double> kl;  // every scored position's
  double nll = 0, base_nll = 0;
  int64_t same_top = 0;

  void add_chunk(int64_t c, const Completion& model, const Completion& base, int64_t n_vocab) {
    const size_t n = model.prompt_logprobs.size(), from = kl.size();
    double chunk_nll = 0, chunk_base_nll = 0;
    int64_t chunk_same = 0;
    for (size_t k = 0; k < n; ++k) {
      const auto lp = log_softmax(model.prompt_logits.data() + k * static_cast<size_t>(n_vocab), n_vocab);
      const auto lb = log_softmax(base.prompt_logits.data() + k * static_cast<size_t>(n_vocab), n_vocab);
      double d = 0;
      for (size_t i = 0; i < lp.size(); ++i) d += std::exp(lb[i]) * (lb[i] - lp[i]);
      kl.push_back(std::max(0.0, d));
      chunk_same += std::max_element(lp.begin(), lp.end()) - lp.begin() == std::max_element(lb.begin(), lb.end()) - lb.begin();
      chunk_nll -= static_cast<double>(model.prompt_logprobs[k].logprob);
      chunk_base_nll -= static_cast<double>(base.prompt_logprobs[k].logprob);
    }
    nll += chunk_nll;
    base_nll += chunk_base_nll;
    same_top += chunk_same;
    std::vector<double> chunk_kl(kl.begin() + static_cast<ptrdiff_t>(from), kl.end());
    std::sort(chunk_kl.begin(), chunk_kl.end());
    const double dn = static_cast<double>(n);
    std::printf("%-6lld %12.4f %12.4f %14.6f %12.6f %12.6f %8.2f%%\n", static_cast<long long>(c + 1), std::exp(chunk_nll / dn),
                std::exp(chunk_base_nll / dn), (chunk_nll - chunk_base_nll) / dn,
                std::accumulate(chunk_kl.begin(), chunk_kl.end(), 0.0) / dn, quantile(chunk_kl, 0.99),
                100.0 * static_cast<double>(chunk_same) / dn);
  }

  void print_totals() const {
    const double n = static_cast<double>(kl.size());
    std::vector<double> sorted = kl;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0, sum2 = 0;
    for (double v : kl) sum += v, sum2 += v * v;
    const double mean = sum / n, err = n > 1 ? std::sqrt(std::max(0.0, sum2 / n - mean * mean) / (n - 1)) : 0;
    const double ppl = std::exp(nll / n), base_ppl = std::exp(base_nll / n);
    std::printf("base PPL = %.4f\n", base_ppl);
    std::printf("PPL - base PPL = %+.4f (%+.3f%%)\n", ppl - base_ppl, 100.0 * (ppl / base_ppl - 1.0));
    std::printf("mean KLD = %.6f +/- %.6f\n", mean, err);
    std::printf("median KLD = %.6f, p99 KLD = %.6f, max KLD = %.6f\n", quantile(sorted, 0.5), quantile(sorted, 0.99),
                sorted.empty() ? 0.0 : sorted.back());
    std::printf("same top = %.2f%% (%lld of %lld)\n", 100.0 * static_cast<double>(same_top) / n, static_cast<long long>(same_top),
                static_cast<long long>(kl.size()));
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return cli::flag_value(kTool, kUsage, argc, argv, i); };
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "-f" || a == "--file") o.text_file = next();
    else if (a == "-c" || a == "--ctx-size") o.n_ctx = cli::parse_int(kTool, kUsage, a, next(), 8, 1 << 20);
    else if (a == "-b" || a == "--batch-size") o.n_batch = cli::parse_int(kTool, kUsage, a, next(), 1, 1 << 20);
    else if (a == "-t" || a == "--threads") o.threads = static_cast<int>(cli::parse_int(kTool, kUsage, a, next(), 1, 1024));
    else if (a == "--chunks") o.max_chunks = cli::parse_int(kTool, kUsage, a, next(), 1, 1 << 30);
    else if (a == "--kl-divergence-base") o.kld_base = next();
    else if (a == "--kl-base") o.kl_base_model = next();
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "--weight-type") o.weight_type = cli::parse_weight_type(kTool, kUsage, next());
    else if (a == "--device") o.device = cli::parse_device_name(kTool, kUsage, next());
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  o.model = cli::model_or_default(kTool, o.model, kUsage);
  if (o.text_file.empty() == o.kld_base.empty()) cli::usage_error(kTool, "give either -f TEXT_FILE or --kl-divergence-base FILE", kUsage);
  if (!o.kl_base_model.empty() && !o.kld_base.empty())
    cli::usage_error(kTool, "--kl-base compares with a model on a text (-f); --kl-divergence-base with a file", kUsage);

  // The chunk length comes from -c or the base file's header; the engine's context and KV pool
  // hold one chunk.
  KldBase base;
  int64_t n_ctx = o.n_ctx;
  std::string text;
  if (!o.kld_base.empty()) {
    base = open_kld_base(o.kld_base);
    n_ctx = base.n_ctx;
  } else {
    text = cli::read_text_file(kTool, o.text_file);
  }
  // A text shorter than two chunks is refused once tokenized, before anything runs: its pool need
  // not hold a whole chunk (a token covers at least one byte; BOS and a leading space add two).
  const int64_t pool_tokens = o.kld_base.empty() ? std::min<int64_t>(n_ctx, static_cast<int64_t>(text.size()) / 2 + 2) : n_ctx;
  EngineConfig config;
  config.threads = o.threads;
  config.max_sequences = 1;
  config.max_context = n_ctx + 1;
  config.kv_cache_tokens = pool_tokens;
  config.max_batch_tokens = o.n_batch;
  config.kv_type = o.kv_type;
  config.weight_type = o.weight_type;
  config.device = o.device;
  config.prefix_cache = false;
  auto created = Engine::create(o.model, config);
  if (!created.ok()) cli::fail(kTool, created.status().message());
  Engine& engine = **created;
  const ModelDescription model = engine.model();
  const int64_t n_vocab = model.n_vocab;
  std::unique_ptr<Engine> base_engine;
  if (!o.kl_base_model.empty()) {
    EngineConfig bc = config;
    bc.kv_type = KvType::f16;
    bc.weight_type = WeightType::keep;
    auto b = Engine::create(o.kl_base_model, bc);
    if (!b.ok()) cli::fail(kTool, b.status().message());
    base_engine = std::move(b).value();
    if (base_engine->model().n_vocab != n_vocab)
      cli::fail(kTool, o.kl_base_model + ": vocabulary of " + std::to_string(base_engine->model().n_vocab) + " tokens, " + o.model +
                           " has " + std::to_string(n_vocab));
  }

  std::vector<int32_t> tokens;
  int64_t n_chunk = 0;
  if (!o.kld_base.empty()) {
    if (base.n_vocab != n_vocab)
      cli::fail(kTool, o.kld_base + ": vocabulary of " + std::to_string(base.n_vocab) + " tokens, the model has " + std::to_string(n_vocab));
    tokens = base.tokens;
    n_chunk = base.n_chunk;
  } else {
    auto enc = engine.tokenize(text, /*add_special=*/true, /*parse_special=*/false);
    if (!enc.ok()) cli::fail(kTool, enc.status().message());
    tokens = std::move(enc).value();
    if (base_engine) {
      const auto base_tokens = base_engine->tokenize(text, /*add_special=*/true, /*parse_special=*/false);
      if (!base_tokens.ok() || *base_tokens != tokens) cli::fail(kTool, o.kl_base_model + " tokenizes the text differently from " + o.model);
    }
    if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
      cli::fail(kTool, "the text has " + std::to_string(tokens.size()) + " tokens; a context of " + std::to_string(n_ctx) +
                           " needs at least " + std::to_string(2 * n_ctx));
    n_chunk = static_cast<int64_t>(tokens.size()) / n_ctx;
  }
  if (o.max_chunks > 0) n_chunk = std::min(n_chunk, o.max_chunks);
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) cli::fail(kTool, "token id " + std::to_string(t) + " outside the vocabulary");

  const int64_t first = n_ctx / 2;
  // Each chunk starts with BOS when the model adds one (as tokenizing an empty text shows).
  auto bos_only = engine.tokenize("", /*add_special=*/true, /*parse_special=*/false);
  const bool add_bos = model.bos >= 0 && bos_only.ok() && !bos_only->empty();
  std::vector<uint16_t> base_row(static_cast<size_t>(base.n_vocab > 0 ? base.nv() : 0));
  double nll = 0, nll2 = 0, base_nll = 0, kld_sum = 0, kld2_sum = 0;
  int64_t count = 0, same_top = 0;
  const auto started = std::chrono::steady_clock::now();
  std::fprintf(stderr, "%s: %lld chunks of %lld tokens, scoring the last %lld of each\n", kTool, static_cast<long long>(n_chunk),
               static_cast<long long>(n_ctx), static_cast<long long>(n_ctx - first - 1));
  const bool want_logits = !o.kld_base.empty() || base_engine;
  auto submit_to = [&](Engine& e, int64_t c) {
    Request r;
    const auto begin = tokens.begin() + static_cast<ptrdiff_t>(c * n_ctx);
    r.prompt_ids.assign(begin, begin + static_cast<ptrdiff_t>(n_ctx));
    if (add_bos) r.prompt_ids[0] = model.bos;
    r.params.max_tokens = 0;
    // Row j predicts token j + 1: rows first .. n_ctx - 2 score tokens first + 1 .. n_ctx - 1.
    r.score.from = first + 1;
    r.score.logits = want_logits;
    auto id = e.submit(std::move(r));
    if (!id.ok()) cli::fail(kTool, id.status().message());
    return *id;
  };
  auto finish = [&](Engine& e, RequestId id, int64_t c) {
    auto done = e.wait(id);
    if (!done.ok()) cli::fail(kTool, done.status().message());
    if (!done->status.is_ok()) cli::fail(kTool, done->status.message());
    if (static_cast<int64_t>(done->prompt_logprobs.size()) != n_ctx - first - 1)
      cli::fail(kTool, "the engine scored " + std::to_string(done->prompt_logprobs.size()) + " tokens of chunk " + std::to_string(c + 1));
    return std::move(done).value();
  };
  // Against a base model: every position's KL divergence, for the percentiles.
  ModelComparison cmp;
  if (base_engine) print_comparison_header();
  // One chunk queued behind the one running, so that the engine never waits for this loop (the
  // base model's engine runs its chunk at the same time).
  RequestId next = n_chunk > 0 ? submit_to(engine, 0) : 0;
  RequestId next_base = n_chunk > 0 && base_engine ? submit_to(*base_engine, 0) : 0;
  for (int64_t c = 0; c < n_chunk; ++c) {
    const RequestId id = next, base_id = next_base;
    if (c + 1 < n_chunk) {
      next = submit_to(engine, c + 1);
      if (base_engine) next_base = submit_to(*base_engine, c + 1);
    }
    const Completion chunk = finish(engine, id, c);
    if (base_engine) {
      const Completion base_chunk = finish(*base_engine, base_id, c);
      cmp.add_chunk(c, chunk, base_chunk, n_vocab);
    }
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const int64_t k = j - first;
      const double v = -static_cast<double>(chunk.prompt_logprobs[static_cast<size_t>(k)].logprob);
      nll += v;
      nll2 += v * v;
      if (!o.kld_base.empty()) {
        const int32_t target = tokens[static_cast<size_t>(c * n_ctx + j + 1)];
        const float* row = chunk.prompt_logits.data() + k * n_vocab;
        read_exact(base.in, base_row.data(), base_row.size() * 2, o.kld_base);
        float scale, min_lp;
        std::memcpy(&scale, base_row.data(), 4);
        std::memcpy(&min_lp, base_row.data() + 2, 4);
        const uint16_t* q = base_row.data() + 4;
        float max = row[0];
        int64_t top = 0, base_top = 0;
        for (int64_t i = 1; i < n_vocab; ++i)
          if (row[i] > max) { max = row[i]; top = i; }
        double z = 0;
        for (int64_t i = 0; i < n_vocab; ++i) z += std::exp(static_cast<double>(row[i] - max));
        const double log_z = std::log(z);
        double kl = 0, best = -1e300;
        for (int64_t i = 0; i < n_vocab; ++i) {
          const double lp_base = min_lp + static_cast<double>(scale) * q[i];
          if (lp_base > best) { best = lp_base; base_top = i; }
          // As llama-perplexity: tokens the base gives log p <= -16 are left out of the sum (their
          // 16-bit stored log-probabilities are too coarse to compare; with a 262k vocabulary
          // they would add ~0.15 of quantization noise).
          if (lp_base <= -16.0) continue;
          const double lp = static_cast<double>(row[i] - max) - log_z;
          kl += std::exp(lp_base) * (lp_base - lp);
        }
        base_nll -= min_lp + static_cast<double>(scale) * q[target];
        kld_sum += kl;
        kld2_sum += kl * kl;
        same_top += top == base_top;
      }
      ++count;
    }
    if (!base_engine) std::printf("[%lld]%.4lf,", static_cast<long long>(c + 1), std::exp(nll / static_cast<double>(count)));
    std::fflush(stdout);
  }
  if (!base_engine) std::printf("\n");
  const double n = static_cast<double>(count);
  const double mean = nll / n;
  double var = nll2 / n - mean * mean;
  const double ppl = std::exp(mean);
  const double err = var > 0 ? std::sqrt(var / (n - 1)) * ppl : 0.0;
  std::printf("PPL = %.4lf +/- %.5lf\n", ppl, err);
  if (!o.kld_base.empty()) {
    const double kl_mean = kld_sum / n;
    const double kl_err = std::sqrt(std::max(0.0, kld2_sum / n - kl_mean * kl_mean) / (n - 1));
    std::printf("base PPL = %.4lf\n", std::exp(base_nll / n));
    std::printf("mean KLD = %.6f +/- %.6f\n", kl_mean, kl_err);
    std::printf("same top = %.2f%% (%lld of %lld)\n", 100.0 * static_cast<double>(same_top) / n, static_cast<long long>(same_top),
                static_cast<long long>(count));
  }
  if (base_engine) cmp.print_totals();
  std::fprintf(stderr, "%s: %lld tokens scored in %.1f s\n", kTool, static_cast<long long>(count),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return 0;
}
