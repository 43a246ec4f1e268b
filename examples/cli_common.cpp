#include "cli_common.hpp"

#include <algorithm>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>

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

LoadedModel load(const char* tool, const std::string& path, bool with_model) {
  Timer timer;
  LoadedModel m;
  auto file = ModelFile::open(path);
  if (!file.ok()) fail(tool, file.status().message());
  m.file = std::make_shared<const ModelFile>(std::move(file).value());
  auto tok = load_tokenizer(*m.file);
  if (!tok.ok()) fail(tool, tok.status().message());
  m.tokenizer = std::move(tok).value();
  if (with_model) {
    auto model = load_model(m.file);
    if (!model.ok()) fail(tool, model.status().message());
    m.model = std::move(model).value();
    if (m.model->info().n_vocab != m.tokenizer->vocab_size())
      fail(tool, path + ": vocabulary size mismatch between the tokenizer (" + std::to_string(m.tokenizer->vocab_size()) +
                     ") and the model (" + std::to_string(m.model->info().n_vocab) + ")");
  }
  m.load_ms = timer.elapsed_ms();
  return m;
}

}  // namespace infer::cli
