// Shared pieces of the command-line tools, over the public API only (as a host would write
// them): argument parsing helpers, one-line error exits (status 1 for bad input, 2 for usage
// errors), the sampling and engine flags, JSON strings, and the default model's location.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include "infer/engine.hpp"

namespace infer::cli {

[[noreturn]] inline void fail(const char* tool, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %s\n", tool, message.c_str());
  std::exit(1);
}

[[noreturn]] inline void usage_error(const char* tool, const std::string& message, const char* usage) {
  std::fprintf(stderr, "%s: %s\n%s", tool, message.c_str(), usage);
  std::exit(2);
}

// Numbers from the command line, with the flag named in the error.
// The value of the flag at argv[i]: argv[i + 1], with i advanced to it; a usage error when the
// command line ends first.
const char* flag_value(const char* tool, const char* usage, int argc, char** argv, int& i);
long long parse_int(const char* tool, const char* usage, const std::string& flag, const char* text, long long lo, long long hi);
double parse_double(const char* tool, const char* usage, const std::string& flag, const char* text, double lo, double hi);

// The sampling flags shared by infer-generate and infer-chat (kSamplingUsage lists them), with
// the tools' defaults (set_sampling_defaults: llama.cpp's, seed 42). parse_sampling_flag consumes
// argv[i] (and its value, advancing i) when it is one of them and returns true; false leaves i alone.
inline constexpr const char* kSamplingUsage =
    "  --temp T             temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K            (default 40; 0 = off)\n"
    "  --top-p P            (default 0.95; 1 = off)\n"
    "  --min-p P            (default 0.05; 0 = off)\n"
    "  --repeat-penalty R   (default 1.0 = off)   --repeat-last-n N (default 64)\n"
    "  --frequency-penalty F, --presence-penalty F   (default 0 = off)\n"
    "  --seed S             random seed (default 42)\n";
void set_sampling_defaults(GenerationParams& params);
bool parse_sampling_flag(const char* tool, const char* usage, int argc, char** argv, int& i, GenerationParams& params);

// The Engine's knobs (infer-generate --prompts, infer-bench-serving): parse_engine_flag consumes
// argv[i] (and its value) when it is one of kEngineUsage's flags and returns true.
inline constexpr const char* kEngineUsage =
    "  --max-batch-tokens N rows of one engine step: decodes + prompt chunks (default 512)\n"
    "  --max-sequences N    sequences running at once (default 16)\n"
    "  --kv-cache-mb N      KV block pool in MiB (default 256)\n"
    "  --block-size N       tokens per KV block (default 16)\n"
    "  --no-prefix-cache    do not reuse the KV of shared prompt prefixes\n"
    "  --priority-preemption  a waiting request preempts running ones of lower priority\n"
    "  --batch-wait-ms T    an idle engine waits this long to gather a batch (default 0)\n"
    "  --max-waiting N      queued requests at most before submit fails (default 1024)\n"
    "  --price-per-hour P   machine price, for the cost per million generated tokens (default 0)\n"
    "  --weight-type T      keep (default), q8_0, q4_0, int8 (W8A8), w8a16 (int8's weights, F32 activations),\n"
    "                       fp8 or fp8-tensor (E4M3 weights, a scale per channel / per matrix), fp8-dynamic\n"
    "                       (W8A8-FP8) or int4 (W4A16, groups of 128): quantize float weight matrices at load\n"
    "  --device D           cpu (default), cuda or cuda:N: where the model computes\n";
bool parse_engine_flag(const char* tool, const char* usage, int argc, char** argv, int& i, EngineConfig& config);

// "--kv-type" values: f16 or f32; a usage error otherwise.
KvType parse_kv_type(const char* tool, const char* usage, const std::string& text);
// "--device" of the tools that take no other engine knob (the text of kEngineUsage's line).
inline constexpr const char* kDeviceUsage = "  --device D           cpu (default), cuda or cuda:N: where the model computes\n";
// "--device" values: cpu, cuda or cuda:N (infer::parse_device); a usage error otherwise. A device
// this build or machine lacks is not a usage error: Engine::create says so (exit 1).
std::string parse_device_name(const char* tool, const char* usage, const std::string& text);
// "--weight-type" values: keep, q8_0, q4_0, int8, w8a16, fp8, fp8-tensor, fp8-dynamic or int4; a usage error otherwise.
WeightType parse_weight_type(const char* tool, const char* usage, const std::string& text);

// The KV pool of a one-sequence tool: the context given with -c, else the longest the engine
// picks without it (the model's, at most 4096).
inline int64_t kv_tokens_for_context(int64_t n_ctx) { return n_ctx > 0 ? n_ctx : 4096; }

// `base` for a tool that runs one sequence at a time (infer-generate -p, infer-chat): a KV pool of
// one context of n_ctx (-c; 0 = the model's) and prompt steps of n_batch (-b) rows.
inline EngineConfig one_sequence_config(EngineConfig base, int threads, int64_t n_ctx, int64_t n_batch, KvType kv_type) {
  base.threads = threads;
  base.max_sequences = 1;
  base.max_context = n_ctx;
  base.kv_cache_tokens = kv_tokens_for_context(n_ctx);
  base.max_batch_tokens = n_batch;
  base.kv_type = kv_type;
  return base;
}

// Reads a whole file (prompt files, evaluation texts); exits with status 1 on error.
std::string read_text_file(const char* tool, const std::string& path);

// A JSON string literal of s (quotes included; control characters and non-UTF-8 bytes escaped).
std::string json_quote(std::string_view s);
// The text a JSON string literal (with its quotes, nothing after them) stands for: escapes
// decoded, \uXXXX surrogate pairs joined into UTF-8. invalid_argument names what is wrong.
Result<std::string> json_unquote(std::string_view literal);

// A message on one line, for a one-line error: its newlines written as "\n".
std::string one_line(std::string_view s);

// Writes text to stdout at once (streamed answers).
void emit(std::string_view text);

// A load progress bar on stderr when it is a terminal (EngineConfig::on_load_progress), else
// an empty function.
std::function<void(double)> load_progress_bar(const char* tool);

// The model a tool uses when given no -m: $INFER_MODEL, else the default model where
// scripts/fetch-model installs it (SmolLM2-135M-Instruct under
// ${LIBINFER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/libinfer}/pypi/smollm2); "" when neither exists.
std::string default_model_path();
// `path`, or the default model when it is empty; a usage error naming scripts/fetch-model when
// there is none.
std::string model_or_default(const char* tool, const std::string& path, const char* usage);

}  // namespace infer::cli
