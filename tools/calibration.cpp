#include "calibration.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "cli_common.hpp"
#include "infer/engine.hpp"
#include "quant/imatrix.hpp"

namespace infer::tools {
namespace {

// Chunks done on stderr: a bar redrawn in place on a terminal, else a line every 10%.
class ChunkProgress {
 public:
  ChunkProgress(const char* tool, int64_t total) : tool_(tool), total_(std::max<int64_t>(total, 1)), tty_(isatty(STDERR_FILENO) != 0) {}
  void done(int64_t chunks, double ppl) {
    const auto percent = static_cast<int>(chunks * 100 / total_);
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = percent * kWidth / 100;
      std::fprintf(stderr, "\r\033[K%s: [%s%s] %3d%% chunk %lld/%lld, PPL %.4f", tool_,
                   std::string(static_cast<size_t>(filled), '#').c_str(), std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(),
                   percent, static_cast<long long>(chunks), static_cast<long long>(total_), ppl);
      if (chunks >= total_) std::fprintf(stderr, "\n");
    } else if (percent / 10 > shown_ / 10) {
      std::fprintf(stderr, "%s: %d%% (%lld of %lld chunks), PPL %.4f\n", tool_, percent / 10 * 10, static_cast<long long>(chunks),
                   static_cast<long long>(total_), ppl);
      shown_ = percent;
    }
    std::fflush(stderr);
  }

 private:
  const char* tool_;
  int64_t total_;
  bool tty_;
  int shown_ = 0;
};

}  // namespace

Result<Imatrix> compute_imatrix(const CalibrationOptions& o) {
  if (o.n_ctx < 16) return invalid_argument("a context of " + std::to_string(o.n_ctx) + " tokens: at least 16 are needed (products of fewer rows are not collected)");
  const std::string text = cli::read_text_file(o.tool, o.text_path);

  quant::ImatrixCollector collector(quant::ImatrixCollector::Options{o.process_output, 16});
  Status observed = Status::ok();  // the first error of the collector, if any
  EngineConfig config;
  config.threads = o.threads;
  config.max_sequences = 1;
  config.max_context = o.n_ctx + 1;
  config.kv_cache_tokens = o.n_ctx + 1;
  config.max_batch_tokens = std::min<int64_t>(o.n_ctx, 512);
  config.prefix_cache = false;
  config.on_matmul = [&](const MatmulInput& in) {
    if (!observed.is_ok() || !collector.wants(in.weight, in.rows)) return;
    observed = collector.add(in.weight, in.data, in.cols, in.rows, in.row_stride);
    if (observed.is_ok() && o.observe) observed = o.observe(in);
  };
  auto created = Engine::create(o.model, config);
  if (!created.ok()) return created.status();
  Engine& engine = **created;
  const ModelDescription model = engine.model();

  auto enc = engine.tokenize(text, /*add_special=*/true, /*parse_special=*/false);
  if (!enc.ok()) return enc.status();
  const std::vector<int32_t> tokens = std::move(enc).value();
  if (static_cast<int64_t>(tokens.size()) < 2 * o.n_ctx)
    return invalid_argument(o.text_path + " has " + std::to_string(tokens.size()) + " tokens; a context of " + std::to_string(o.n_ctx) +
                            " needs at least " + std::to_string(2 * o.n_ctx));
  int64_t n_chunk = static_cast<int64_t>(tokens.size()) / o.n_ctx;
  if (o.max_chunks > 0) n_chunk = std::min(n_chunk, o.max_chunks);
  // Each chunk starts with BOS when the model adds one (as tokenizing an empty text shows).
  auto bos_only = engine.tokenize("", /*add_special=*/true, /*parse_special=*/false);
  const bool add_bos = model.bos >= 0 && bos_only.ok() && !bos_only->empty();
  const int64_t first = o.n_ctx / 2;

  std::fprintf(stderr, "%s: %lld chunks of %lld tokens from %s\n", o.tool, static_cast<long long>(n_chunk),
               static_cast<long long>(o.n_ctx), o.text_path.c_str());
  ChunkProgress progress(o.tool, n_chunk);
  double nll = 0;
  int64_t count = 0;
  for (int64_t c = 0; c < n_chunk; ++c) {
    Request r;
    const auto begin = tokens.begin() + static_cast<ptrdiff_t>(c * o.n_ctx);
    r.prompt_ids.assign(begin, begin + static_cast<ptrdiff_t>(o.n_ctx));
    if (add_bos) r.prompt_ids[0] = model.bos;
    r.params.max_tokens = 0;
    r.score.from = first + 1;  // rows first .. n_ctx - 2 predict tokens first + 1 .. n_ctx - 1
    auto done = engine.generate(std::move(r));
    if (!done.ok()) return done.status();
    if (!done->status.is_ok()) return done->status;
    if (!observed.is_ok()) return observed;
    for (const TokenLogprobs& lp : done->prompt_logprobs) nll -= lp.logprob;
    count += static_cast<int64_t>(done->prompt_logprobs.size());
    progress.done(c + 1, std::exp(nll / static_cast<double>(std::max<int64_t>(count, 1))));
  }
  std::fprintf(stderr, "%s: final estimate: PPL = %.4f over %lld scored tokens\n", o.tool,
               std::exp(nll / static_cast<double>(std::max<int64_t>(count, 1))), static_cast<long long>(count));
  return collector.result(static_cast<int32_t>(o.n_ctx), {o.text_path});
}

}  // namespace infer::tools
