// The Engine: libinfer's public C++ API for serving many requests at once in-process.
//
// An Engine owns a model file, its tokenizer, a paged KV cache with automatic prefix caching, a
// continuous-batching scheduler and one worker thread that runs the steps (docs/engine.md).
// Every method is thread-safe; any number of host threads may submit, read, wait and cancel.
//
//   auto engine = infer::Engine::create("model.gguf", infer::EngineConfig{});
//   infer::Request req;
//   req.prompt = "Once upon a time";
//   req.params.max_tokens = 64;
//   auto done = (*engine)->generate(std::move(req));        // blocking convenience
//   // or: id = submit(...); then on_event callbacks, read(id) for deltas, wait(id) for the end
//
// Requests run through the step of ARCHITECTURE.md: each step packs the decode rows of running
// sequences and chunks of waiting prompts under max_batch_tokens, runs one forward pass over all
// of them, samples, streams the text deltas and retires finished sequences. A row's result never
// depends on its batch, so greedy output is the same alone, batched, chunked, preempted or served
// from the prefix cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "infer/chat_message.hpp"
#include "infer/export.h"
#include "infer/status.hpp"
#include "infer/weight_type.hpp"

namespace infer {

// The element type of the KV cache (values as infer_kv_type in infer.h): f16 as llama.cpp's default;
// f32 twice its bytes (for accuracy checks); bf16 as many; q8_0 about half (32-element blocks with
// an F16 scale, as llama.cpp's q8_0 cache; the head size must be a multiple of 32; with heads of a
// multiple of 64, K and V are stored rotated by a Walsh-Hadamard transform, as llama.cpp does,
// which the attention undoes and which halves the loss against f16 or better; INFER_KV_ROTATE=0
// in the environment turns it off); fp8 half: one
// E4M3 (e4m3fn) number per element, unscaled, saturating at ±448, as vLLM's fp8 cache without
// calibrated scales (kv_scale 1).
enum class KvType : int { f16 = 0, f32 = 1, bf16 = 2, q8_0 = 3, fp8 = 4 };
// "f16", "f32", "bf16", "q8_0", "fp8"; "" for a value that is not a KvType.
INFER_API const char* kv_type_name(KvType t) noexcept;

// Where an engine computes (EngineConfig::device): the CPU, or CUDA GPU `index`.
struct DeviceSpec {
  enum class Kind : int { cpu = 0, cuda = 1 };
  Kind kind = Kind::cpu;
  int index = 0;  // the GPU's ordinal (cuda only)
};
// The device `text` names: "cpu", "cuda" (GPU 0) or "cuda:N" (N a decimal ordinal, 0 to 1023).
// invalid_argument naming the accepted forms otherwise. Says nothing about whether this build or
// machine has that device: Engine::create checks that.
INFER_API Result<DeviceSpec> parse_device(std::string_view text);
// CUDA devices this process can use: 0 when the library was built without CUDA
// (-DINFER_CUDA=OFF), or when there is no GPU or no driver.
INFER_API int cuda_device_count() noexcept;
// The instruction set the CPU kernels of this process run: "scalar", "avx2", "avxvnni" (AVX2 with
// AVX-VNNI) or "avx512" — the best the CPU has, lowered by INFER_CPU_ISA. A static string.
INFER_API const char* cpu_isa() noexcept;
// The input of one weight matrix multiplication of a forward step (EngineConfig::on_matmul): the
// rows x that the product x · Wᵀ reads, in F32 before any conversion for the kernel. Row r,
// column c is data[r * row_stride + c]; valid during the callback only.
struct MatmulInput {
  std::string_view weight;     // W's tensor name in the model file: "blk.3.attn_q.weight", "output.weight"
  const float* data = nullptr;
  int64_t cols = 0;            // W's input size
  int64_t rows = 0;            // the step's rows that reach this product (the output matrix sees
                               // only the rows that sample)
  int64_t row_stride = 0;      // floats from one row to the next (>= cols)
};

// The knobs (docs/tuning.md explains how to choose each).
struct EngineConfig {
  int threads = 0;                     // compute threads; 0 = all cores
  // "cpu", "cuda" or "cuda:N" (parse_device). A CUDA device in a build without CUDA, or one this
  // machine does not have, makes Engine::create fail with unsupported.
  std::string device = "cpu";
  int64_t max_batch_tokens = 512;      // rows of one step: decodes + prefill chunks
  int max_sequences = 16;              // running sequences at most
  int max_waiting = 1024;              // queued requests at most; submit fails "overloaded" beyond
  double batch_wait_ms = 0.0;          // an idle engine waits this long for more requests to batch
  uint64_t kv_cache_bytes = 256ull << 20;  // KV block pool, allocated once
  int block_size = 16;                 // tokens per KV block
  KvType kv_type = KvType::f16;        // K/V element type (see KvType)
  WeightType weight_type = WeightType::keep;  // quantize F32/F16/BF16 weight matrices at load
  int64_t max_context = 0;             // longest sequence (prompt + output); 0 = the model's, at most 4096
  int64_t kv_cache_tokens = 0;         // > 0: size the pool to hold this many positions (all sequences
                                       // together) instead of kv_cache_bytes
  bool prefix_cache = true;            // reuse the KV of identical prompt prefixes across requests
  bool priority_preemption = false;    // a waiting request that finds no KV blocks or sequence slot
                                       // preempts running ones of lower Request::priority
  double price_per_hour = 0.0;         // machine cost, for stats().cost_per_million_tokens
  int metrics_window = 1000;           // finished requests the latency percentiles look at
  std::string chat_template;           // chat format for messages (a name of chat_formats()); "" = the model's
  std::string chat_template_text;      // a Jinja chat template used instead of the model's ("" = none);
                                       // not together with chat_template
  std::string chat_template_variables; // a JSON object: extra variables of every Jinja rendering
                                       // ({"enable_thinking": false}); "" = none
  // Called on the thread that runs create() as the model loads, with the fraction done (0 to 1,
  // rising, 1 last); may be empty.
  std::function<void(double fraction)> on_load_progress;
  // Called on the worker thread before every weight matrix multiplication of every step, with its
  // input rows (importance matrices: infer-imatrix, docs/quantization.md); must return quickly and
  // must not call the engine. Steps run one at a time, in order; rows of one step are in batch
  // order. Empty (the default) costs nothing. Host memory: with a CUDA device, Engine::create
  // refuses it (invalid_argument).
  std::function<void(const MatmulInput& input)> on_matmul;
};

// The chat formats a conversation can be rendered in ("chatml", "gemma", ...): what
// EngineConfig::chat_template accepts.
INFER_API std::vector<std::string> chat_template_names();

// How to generate (defaults: llama.cpp's sampling defaults).
struct GenerationParams {
  int64_t max_tokens = 256;            // generated tokens at most; -1 = until end or context
  float temperature = 0.8f;            // 0 = greedy
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;       // stop strings (not part of the output)
  bool ignore_eos = false;             // keep going past end-of-generation tokens
  // Log-probabilities of the generated tokens (as OpenAI's logprobs / top_logprobs): each token's
  // log-probability under the model's distribution (log-softmax of the logits, before penalties,
  // temperature and truncation) and its top_logprobs most likely alternatives (0 to 20).
  bool logprobs = false;
  int32_t top_logprobs = 0;
};

// Scoring a prompt (perplexity, evaluation): the log-probability of each prompt token given the
// tokens before it, for tokens [from, n) of the prompt. Such a prompt is computed in full (no
// prefix-cache reuse of the scored part).
struct PromptScoring {
  int64_t from = -1;                   // first scored prompt token; -1 = off; values < 1 mean 1
  int32_t top_logprobs = 0;            // alternatives per scored token (0 to 20)
  bool logits = false;                 // also the raw logits (n_vocab floats) that predict each scored token
};

// Log-probabilities are doubles: summed over a text (perplexity) they keep their precision.
struct TokenLogprob {
  int32_t token = -1;
  double logprob = 0;
};

// One token's log-probability and, when asked, its most likely alternatives (most likely first).
struct TokenLogprobs {
  int32_t token = -1;
  double logprob = 0;
  std::vector<TokenLogprob> top;
};

enum class FinishReason : int {
  none = 0,    // still running
  stop,        // an end-of-generation token or a stop string
  length,      // max_tokens
  context,     // the sequence reached max_context
  cancelled,   // cancel()
  deadline,    // timeout_ms passed
  error,       // see Completion::status
};
INFER_API const char* finish_reason_name(FinishReason r) noexcept;

using RequestId = uint64_t;

// What streams out: each generated token with the text it completes (possibly empty while a
// UTF-8 character is unfinished), and a last event with finished = true.
struct StreamEvent {
  RequestId id = 0;
  int32_t token = -1;          // -1 on the final event
  std::string_view text;       // valid during the callback only
  bool finished = false;
  FinishReason reason = FinishReason::none;
  const TokenLogprobs* logprobs = nullptr;  // with GenerationParams::logprobs; valid during the callback
};

struct Request {
  std::string prompt;                  // text; tokenized with the model's BOS and special tokens
  std::vector<int32_t> prompt_ids;     // or token ids (used as they are when not empty)
  // Or a conversation, rendered with the chat template (EngineConfig::chat_template, else the
  // model's) and an assistant header; the answer then also ends at the template's end of turn.
  std::vector<ChatMessage> messages;
  bool add_special = true;             // text prompts: add BOS (as the model asks)
  bool parse_special = true;           // text prompts: special-token text becomes special tokens
  PromptScoring score;
  GenerationParams params;
  int priority = 0;                    // higher runs first (and is preempted last)
  double timeout_ms = 0.0;             // deadline from submit; 0 = none
  // Called on the engine's worker thread for every token and at the end; must return quickly
  // and must not call wait() or generate() (submit, cancel and read are fine).
  std::function<void(const StreamEvent&)> on_event;
  // Fire and forget: the output goes to on_event only, and the engine forgets the request as soon
  // as it ends (its final event has been delivered). read() and wait() refuse a detached request
  // (invalid_argument); cancel() works until it ends. Without it, every request stays in the
  // engine until wait() collects it.
  bool detached = false;
};

struct RequestMetrics {
  double queue_ms = 0;        // submit -> first scheduled
  double ttft_ms = 0;         // submit -> first generated token
  double tpot_ms = 0;         // mean time per output token after the first
  double e2e_ms = 0;          // submit -> finished
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
};

struct Completion {
  RequestId id = 0;
  Status status;              // ok, cancelled, deadline_exceeded, or the error that ended it
  FinishReason reason = FinishReason::none;
  std::string text;
  std::vector<int32_t> ids;
  RequestMetrics metrics;
  std::vector<TokenLogprobs> logprobs;         // one per generated token, with GenerationParams::logprobs
  std::vector<TokenLogprobs> prompt_logprobs;  // prompt tokens [score.from, n), with Request::score
  std::vector<float> prompt_logits;            // with score.logits: one row of n_vocab floats per scored token
};

// New output of a request since the previous read().
struct Delta {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<TokenLogprobs> logprobs;  // with GenerationParams::logprobs
  bool finished = false;
  FinishReason reason = FinishReason::none;
};

struct LatencySummary {
  double p50 = 0, p95 = 0, p99 = 0, mean = 0;
  int64_t count = 0;
};

// p50 / p95 / p99 (nearest rank), mean and count of a set of latencies (as stats() computes them).
INFER_API LatencySummary summarize_latencies(std::vector<double> ms);

struct EngineStats {
  double uptime_s = 0;
  int64_t running = 0, waiting = 0;
  int64_t requests_finished = 0, requests_cancelled = 0, requests_failed = 0, requests_rejected = 0;
  int64_t prompt_tokens = 0, computed_prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  double prompt_tokens_per_s = 0, generated_tokens_per_s = 0;  // over the uptime
  double prefix_hit_rate = 0;                                  // cached / looked-up prompt tokens
  int64_t preemptions = 0, steps = 0;
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0, kv_blocks_free = 0;  // every cache group's
  // Where the time went (ms, summed): tokenize runs on the submitting threads, the rest on the worker.
  double tokenize_ms = 0, schedule_ms = 0, forward_ms = 0, sample_ms = 0, detokenize_ms = 0;
  LatencySummary ttft_ms, tpot_ms, e2e_ms, queue_ms;  // over the last metrics_window requests
  double cost_per_million_tokens = 0;                  // price_per_hour * uptime / generated tokens
  int threads = 0;  // compute threads in use: EngineConfig::threads (0: all cores) clamped to the hardware's
};

struct ModelDescription {
  std::string architecture, name;
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;            // the longest sequence the engine accepts (max_context)
  int64_t n_ctx_train = 0;      // the context the model was trained with (0 when the file does not say)
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0;
  int64_t n_params = 0;         // weights in the file's tensors
  uint64_t size_bytes = 0;      // bytes of the file's tensor data
  int32_t bos = -1, eos = -1, eot = -1;  // special token ids; -1 when the vocabulary has none
  std::string chat_template;    // the chat format used for messages: a name of chat_template_names(), or
                                // "jinja" for a Jinja template (the model's or chat_template_text); ""
                                // when there is none
  // The file's weight type as llama.cpp names it ("Q4_0", "Q4_K - Medium", "F16", "all F32"): its
  // general.file_type, else guessed from its tensors ("(guessed) Q8_0"). Not changed by
  // EngineConfig::weight_type.
  std::string file_type;
  // The model's own sampling defaults: a Hugging Face directory's generation_config.json, or a
  // GGUF's general.sampling.temp / top_k / top_p. -1 when the model sets none. GenerationParams'
  // defaults do not change: a host that wants the model's sampling copies these into its params.
  float default_temperature = -1.0f;
  int32_t default_top_k = -1;
  float default_top_p = -1.0f;
};

class INFER_API Engine {
 public:
  // Loads the model (a GGUF file, or a Hugging Face model directory: docs/huggingface.md) and
  // plans the KV pool; the worker starts at once.
  static Result<std::unique_ptr<Engine>> create(const std::string& model_path, const EngineConfig& config = {});
  ~Engine();  // cancels what is in flight, then stops the worker
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request and returns at once. invalid_argument (bad parameters, empty prompt, ids
  // outside the vocabulary), out_of_range (prompt longer than max_context or than the KV pool can
  // ever hold), overloaded (max_waiting requests already queued), cancelled (after shutdown).
  Result<RequestId> submit(Request request);
  // Ends the request within one step (also in the middle of its prompt). not_found for an
  // unknown or already collected id; ok for one that already finished.
  Status cancel(RequestId id);
  // The output produced since the last read, waiting up to timeout_ms (< 0: forever) for some.
  // A request that has ended stays readable until wait() collects it.
  Result<Delta> read(RequestId id, double timeout_ms = -1);
  // Blocks until the request ends and returns everything it produced; the id is then forgotten.
  Result<Completion> wait(RequestId id);
  // submit + wait.
  Result<Completion> generate(Request request);
  // Stops accepting requests; finishes (finish_in_flight) or cancels what is queued and running,
  // and returns when the worker is idle. Later submits fail with `cancelled`.
  void shutdown(bool finish_in_flight = true);

  EngineStats stats() const;
  ModelDescription model() const;
  // Token ids of a text as submit would tokenize it (BOS and special tokens included).
  Result<std::vector<int32_t>> tokenize(std::string_view text) const;
  Result<std::vector<int32_t>> tokenize(std::string_view text, bool add_special, bool parse_special) const;
  // The text of token ids (special tokens rendered as their text when render_special); ids
  // outside the vocabulary are invalid_argument.
  Result<std::string> detokenize(const std::vector<int32_t>& ids, bool render_special = false) const;
  // A conversation as the chat template renders it (what submit tokenizes for Request::messages),
  // exactly as transformers' apply_chat_template renders a Jinja template (its BOS included when
  // it writes one: submit then adds none). invalid_argument for roles or an order the template
  // refuses (a Jinja template's raise_exception: its message) and for a template error naming its
  // line, not_found when the model has no template and EngineConfig names none.
  Result<std::string> render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // The same for a conversation given as JSON: {"messages": [...], "add_generation_prompt": true,
  // "tools": [...], any other keyword}; a Jinja template sees every key as a variable (messages
  // with tool_calls, enable_thinking, ...).
  Result<std::string> render_chat_json(std::string_view conversation) const;

  // Diagnostics (tests, debugging): between two steps, checks the KV-cache manager's
  // bookkeeping against the live requests — reference counts, the prefix index and its LRU list,
  // free lists — and the scheduler's queues. internal() naming the first violation, else ok.
  Status check_invariants();

 private:
  friend struct EngineTesting;  // tests/: a controllable clock and a step hook (src/engine/engine_testing.hpp)
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer
