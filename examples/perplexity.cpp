// infer-perplexity: perplexity of a text, computed exactly as llama.cpp's llama-perplexity does:
// the text is tokenized once with BOS, split into consecutive chunks of CTX tokens whose first
// token is replaced by BOS, and only the second half of each chunk is scored. Prints the running
// estimate per chunk and a final line "PPL = <value> +/- <stderr>".
//
// With --kl-divergence-base FILE (a file written by `llama-perplexity --kl-divergence-base`), the
// tokens come from that file and each scored position is compared with the base model's
// distribution: mean KL divergence, top-1 agreement, and both perplexities.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "cli_common.hpp"
#include "core/thread_pool.hpp"
#include "core/timer.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-perplexity";
constexpr const char* kUsage =
    "usage: infer-perplexity -m MODEL -f TEXT_FILE [-c CTX] [-t THREADS] [-b BATCH] [--chunks N]\n"
    "       infer-perplexity -m MODEL --kl-divergence-base FILE [-t THREADS]\n"
    "  -c CTX       tokens per chunk (default 512)\n"
    "  --chunks N   score at most N chunks (default: all)\n"
    "  --kv-type    f16|f32 (default f16)\n"
    "  --weight-type keep|q8_0|q4_0   quantize float weight matrices at load (default keep)\n";

struct Options {
  std::string model, text_file, kld_base;
  int64_t n_ctx = 512, n_batch = 2048, max_chunks = -1;
  int threads = 0;
  DType kv_type = DType::f16;
  LoadOptions load;
};

// log-softmax of the target, as llama.cpp computes it (float exp, double sum).
double nll_of(const float* logits, int64_t n_vocab, int32_t target) {
  float max = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(logits[i] - max);
  return -(static_cast<double>(logits[target] - max) - std::log(sum));
}

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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) cli::usage_error(kTool, a + " needs a value", kUsage);
      return argv[++i];
    };
    if (a == "-m" || a == "--model") o.model = next();
    else if (a == "-f" || a == "--file") o.text_file = next();
    else if (a == "-c" || a == "--ctx-size") o.n_ctx = cli::parse_int(kTool, kUsage, a, next(), 8, 1 << 20);
    else if (a == "-b" || a == "--batch-size") o.n_batch = cli::parse_int(kTool, kUsage, a, next(), 1, 1 << 20);
    else if (a == "-t" || a == "--threads") o.threads = static_cast<int>(cli::parse_int(kTool, kUsage, a, next(), 1, 1024));
    else if (a == "--chunks") o.max_chunks = cli::parse_int(kTool, kUsage, a, next(), 1, 1 << 30);
    else if (a == "--kl-divergence-base") o.kld_base = next();
    else if (a == "--kv-type") o.kv_type = cli::parse_kv_type(kTool, kUsage, next());
    else if (a == "--weight-type") o.load.weight_type = cli::parse_weight_type(kTool, kUsage, next());
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  o.model = cli::model_or_default(kTool, o.model, kUsage);
  if (o.text_file.empty() == o.kld_base.empty()) cli::usage_error(kTool, "give either -f TEXT_FILE or --kl-divergence-base FILE", kUsage);

  cli::LoadedModel m = cli::load(kTool, o.model, true, o.load);
  const int64_t n_vocab = m.model->info().n_vocab;

  std::vector<int32_t> tokens;
  KldBase base;
  int64_t n_ctx = o.n_ctx, n_chunk = 0;
  if (!o.kld_base.empty()) {
    base = open_kld_base(o.kld_base);
    if (base.n_vocab != n_vocab)
      cli::fail(kTool, o.kld_base + ": vocabulary of " + std::to_string(base.n_vocab) + " tokens, the model has " + std::to_string(n_vocab));
    tokens = base.tokens;
    n_ctx = base.n_ctx;
    n_chunk = base.n_chunk;
  } else {
    auto enc = m.tokenizer->encode(cli::read_text_file(kTool, o.text_file), true, false);
    if (!enc.ok()) cli::fail(kTool, enc.status().message());
    tokens = std::move(enc).value();
    if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
      cli::fail(kTool, "the text has " + std::to_string(tokens.size()) + " tokens; a context of " + std::to_string(n_ctx) +
                           " needs at least " + std::to_string(2 * n_ctx));
    n_chunk = static_cast<int64_t>(tokens.size()) / n_ctx;
  }
  if (o.max_chunks > 0) n_chunk = std::min(n_chunk, o.max_chunks);
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) cli::fail(kTool, "token id " + std::to_string(t) + " outside the vocabulary");

  auto kv = cli::make_kv_cache(kTool, *m.model, n_ctx, o.kv_type, o.n_batch);
  ThreadPool pool(o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));

  const int64_t first = n_ctx / 2;
  const int32_t bos = m.tokenizer->bos_id();
  const bool add_bos = m.tokenizer->add_bos() && bos >= 0;
  std::vector<float> logits(static_cast<size_t>(n_ctx - first) * static_cast<size_t>(n_vocab));
  std::vector<uint16_t> base_row(static_cast<size_t>(base.n_vocab > 0 ? base.nv() : 0));
  double nll = 0, nll2 = 0, base_nll = 0, kld_sum = 0, kld2_sum = 0;
  int64_t count = 0, same_top = 0;
  Batch batch;
  SequenceKv seq;
  Timer timer;
  std::fprintf(stderr, "%s: %lld chunks of %lld tokens, scoring the last %lld of each\n", kTool, static_cast<long long>(n_chunk),
               static_cast<long long>(n_ctx), static_cast<long long>(n_ctx - first - 1));
  for (int64_t c = 0; c < n_chunk; ++c) {
    const int64_t start = c * n_ctx;
    kv.release(seq);
    int64_t out_row = 0;
    for (int64_t bstart = 0; bstart < n_ctx; bstart += o.n_batch) {
      const int64_t bend = std::min(n_ctx, bstart + o.n_batch);
      if (!kv.append(seq, bend - bstart)) cli::fail(kTool, "KV cache full");
      batch.clear();
      batch.sequences.push_back(BatchSequence(seq));
      for (int64_t j = bstart; j < bend; ++j) {
        const int32_t tok = (j == 0 && add_bos) ? bos : tokens[static_cast<size_t>(start + j)];
        batch.add(tok, static_cast<int32_t>(j), 0, j >= first);
      }
      if (Status s = m.model->forward(batch, kv.view(), logits.data() + out_row * n_vocab, pool); !s.is_ok())
        cli::fail(kTool, s.message());
      out_row += batch.logit_rows();
    }
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + (j - first) * n_vocab;
      const int32_t target = tokens[static_cast<size_t>(start + j + 1)];
      const double v = nll_of(row, n_vocab, target);
      nll += v;
      nll2 += v * v;
      if (!o.kld_base.empty()) {
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
    std::printf("[%lld]%.4lf,", static_cast<long long>(c + 1), std::exp(nll / static_cast<double>(count)));
    std::fflush(stdout);
  }
  std::printf("\n");
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
  std::fprintf(stderr, "%s: %lld tokens scored in %.1f s\n", kTool, static_cast<long long>(count), timer.elapsed_s());
  return 0;
}
