// Shared pieces of the command-line tools: loading a model with its tokenizer, argument parsing
// helpers, one-line error exits (status 1 for bad input, 2 for usage errors), and the decoding
// loop of infer-generate and infer-chat (Decoder, generate).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/function_ref.hpp"
#include "core/thread_pool.hpp"

#include "format/model_file.hpp"
#include "infer/engine.hpp"
#include "model/model.hpp"
#include "sample/sampler.hpp"
#include "tokenizer/tokenizer.hpp"

namespace infer::cli {

[[noreturn]] inline void fail(const char* tool, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", tool, message.c_str());
  std::exit(1);
}

[[noreturn]] inline void usage_error(const char* tool, const std::string& message, const char* usage) {
  std::fprintf(stderr, "%s: %s\n%s", tool, message.c_str(), usage);
  std::exit(2);
}

// Numbers from the command line, with the flag named in the error.
long long parse_int(const char* tool, const char* usage, const std::string& flag, const char* text, long long lo, long long hi);
double parse_double(const char* tool, const char* usage, const std::string& flag, const char* text, double lo, double hi);

// The sampling flags shared by infer-generate and infer-chat (kSamplingUsage lists them), with
// infer-generate's defaults (set_sampling_defaults). parse_sampling_flag consumes argv[i] (and its
// value, advancing i) when it is one of them and returns true; false leaves i alone.
inline constexpr const char* kSamplingUsage =
    "  --temp T             temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K            (default 40; 0 = off)\n"
    "  --top-p P            (default 0.95; 1 = off)\n"
    "  --min-p P            (default 0.05; 0 = off)\n"
    "  --repeat-penalty R   (default 1.0 = off)   --repeat-last-n N (default 64)\n"
    "  --frequency-penalty F, --presence-penalty F   (default 0 = off)\n"
    "  --seed S             random seed (default 42)\n";
void set_sampling_defaults(SamplingParams& params);
bool parse_sampling_flag(const char* tool, const char* usage, int argc, char** argv, int& i, SamplingParams& params);

// The Engine's knobs (infer-generate --prompts, infer-bench-serving): parse_engine_flag consumes
// argv[i] (and its value) when it is one of kEngineUsage's flags and returns true.
inline constexpr const char* kEngineUsage =
    "  --max-batch-tokens N rows of one engine step: decodes + prompt chunks (default 512)\n"
    "  --max-sequences N    sequences running at once (default 16)\n"
    "  --kv-cache-mb N      KV block pool in MiB (default 256)\n"
    "  --block-size N       tokens per KV block (default 16)\n"
    "  --no-prefix-cache    do not reuse the KV of shared prompt prefixes\n"
    "  --batch-wait-ms T    an idle engine waits this long to gather a batch (default 0)\n"
    "  --max-waiting N      queued requests at most before submit fails (default 1024)\n"
    "  --price-per-hour P   machine price, for the cost per million generated tokens (default 0)\n"
    "  --weight-type T      keep (default), q8_0 or q4_0: quantize float weight matrices at load\n";
bool parse_engine_flag(const char* tool, const char* usage, int argc, char** argv, int& i, EngineConfig& config);

// Reads a whole file (prompt files, evaluation texts).
std::string read_text_file(const char* tool, const std::string& path);

struct LoadedModel {
  std::shared_ptr<const ModelFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  double load_ms = 0;
};

// "--kv-type" values: f16 or f32 (a usage error otherwise).
DType parse_kv_type(const char* tool, const char* usage, const std::string& text);

// A KV cache with exactly enough blocks for one sequence of n_ctx tokens (exits on error).
KvCache make_kv_cache(const char* tool, const Model& model, int64_t n_ctx, DType kv_type, int64_t n_batch = 512);

// Opens the file, builds the model and its tokenizer; exits with status 1 and one line on error.
LoadedModel load(const char* tool, const std::string& path, bool with_model = true, const LoadOptions& options = {});
// --weight-type: keep (nullopt), q8_0 or q4_0; a usage error otherwise.
std::optional<DType> parse_weight_type(const char* tool, const char* usage, const std::string& text);
// The engine's name for it.
inline WeightType engine_weight_type(std::optional<DType> t) {
  return !t ? WeightType::keep : *t == DType::q8_0 ? WeightType::q8_0 : WeightType::q4_0;
}

// The model a tool uses when given no -m: $INFER_MODEL, else the default model where
// scripts/fetch-model installs it (SmolLM2-135M-Instruct under
// ${LIBINFER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/libinfer}/pypi/smollm2); "" when neither exists.
std::string default_model_path();
// `path`, or the default model when it is empty; a usage error naming scripts/fetch-model when
// there is none.
std::string model_or_default(const char* tool, const std::string& path, const char* usage);

// The context size when -c is not given: the model's training context, at most 4096.
int64_t default_context(const ModelInfo& info);

// One sequence on one model: the tokens in its KV cache, evaluated in steps of n_batch rows, and
// the logits after the last of them. Exits (status 1, one line) on a model error.
class Decoder {
 public:
  // Borrows `model`, which must outlive the decoder. threads <= 0: all cores.
  Decoder(const char* tool, Model& model, int64_t n_ctx, DType kv_type, int threads, int64_t n_batch);

  int64_t n_ctx() const noexcept { return n_ctx_; }
  // The tokens whose keys and values are in the cache, in position order.
  const std::vector<int32_t>& tokens() const noexcept { return tokens_; }
  // Logits after the last evaluated token (one per vocabulary entry).
  std::span<const float> logits() const noexcept { return logits_; }

  // Appends `tokens` and evaluates them. False, and nothing changed, when the context cannot hold
  // them: a full context is an expected outcome.
  [[nodiscard]] bool eval(std::span<const int32_t> tokens);
  // Keeps the first n cached tokens (n <= tokens().size()); the next eval continues from there.
  // Returns how many were kept: n, or 0 when a sliding-window layer had already dropped what
  // position n would see (the cache then starts over).
  [[nodiscard]] size_t truncate(size_t n);

 private:
  const char* tool_;
  Model& model_;
  int64_t n_ctx_, n_batch_;
  KvCache kv_;
  SequenceKv seq_;
  ThreadPool pool_;
  Batch batch_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
};

struct GenerateLimits {
  int64_t max_tokens = -1;   // < 0: until another limit
  bool stop_at_eog = true;   // end at any end-of-generation token (not kept)
  int32_t stop_token = -1;   // also end at this token (not kept); -1: none
};

enum class Finish { eog, length, stop, context };
const char* finish_name(Finish finish) noexcept;

struct Generated {
  std::vector<int32_t> ids;  // the kept tokens; all but the last are in the decoder's cache
  Finish finish = Finish::length;
  double ms = 0;
};

// Samples tokens after what the decoder has evaluated, passing each kept one to on_token, until
// an end token, max_tokens, on_token returning false (Finish::stop) or the context's end. The
// sampler's history is the decoder's tokens.
Generated generate(Decoder& decoder, Sampler& sampler, const Tokenizer& tokenizer, const GenerateLimits& limits,
                   FunctionRef<bool(int32_t)> on_token);

}  // namespace infer::cli
