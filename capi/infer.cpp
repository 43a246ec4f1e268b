// The C ABI over the public C++ API (infer::Engine). Every entry point runs what can throw inside
// guarded(), which turns any exception into a status and a message: nothing throws into C.
// boundary.hpp holds the engine handle, the error slots and the struct_size checks.
#include "infer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boundary.hpp"
#include "infer/engine.hpp"
#include "infer/log.hpp"
#include "infer/status.hpp"

static_assert(static_cast<int>(infer::StatusCode::ok) == INFER_OK &&
                  static_cast<int>(infer::StatusCode::invalid_argument) == INFER_ERR_INVALID_ARGUMENT &&
                  static_cast<int>(infer::StatusCode::not_found) == INFER_ERR_NOT_FOUND &&
                  static_cast<int>(infer::StatusCode::io_error) == INFER_ERR_IO &&
                  static_cast<int>(infer::StatusCode::malformed_file) == INFER_ERR_MALFORMED_FILE &&
                  static_cast<int>(infer::StatusCode::unsupported) == INFER_ERR_UNSUPPORTED &&
                  static_cast<int>(infer::StatusCode::out_of_memory) == INFER_ERR_OUT_OF_MEMORY &&
                  static_cast<int>(infer::StatusCode::out_of_range) == INFER_ERR_OUT_OF_RANGE &&
                  static_cast<int>(infer::StatusCode::overloaded) == INFER_ERR_OVERLOADED &&
                  static_cast<int>(infer::StatusCode::cancelled) == INFER_ERR_CANCELLED &&
                  static_cast<int>(infer::StatusCode::deadline_exceeded) == INFER_ERR_DEADLINE &&
                  static_cast<int>(infer::StatusCode::internal) == INFER_ERR_INTERNAL,
              "C and C++ status codes must stay numerically equal");
static_assert(static_cast<int>(infer::FinishReason::none) == INFER_FINISH_NONE &&
                  static_cast<int>(infer::FinishReason::stop) == INFER_FINISH_STOP &&
                  static_cast<int>(infer::FinishReason::length) == INFER_FINISH_LENGTH &&
                  static_cast<int>(infer::FinishReason::context) == INFER_FINISH_CONTEXT &&
                  static_cast<int>(infer::FinishReason::cancelled) == INFER_FINISH_CANCELLED &&
                  static_cast<int>(infer::FinishReason::deadline) == INFER_FINISH_DEADLINE &&
                  static_cast<int>(infer::FinishReason::error) == INFER_FINISH_ERROR,
              "C and C++ finish reasons must stay numerically equal");
static_assert(static_cast<int>(infer::WeightType::keep) == INFER_WEIGHT_KEEP &&
                  static_cast<int>(infer::WeightType::q8_0) == INFER_WEIGHT_Q8_0 &&
                  static_cast<int>(infer::WeightType::q4_0) == INFER_WEIGHT_Q4_0 &&
                  static_cast<int>(infer::WeightType::int8) == INFER_WEIGHT_INT8 &&
                  static_cast<int>(infer::WeightType::fp8) == INFER_WEIGHT_FP8 &&
                  static_cast<int>(infer::WeightType::fp8_tensor) == INFER_WEIGHT_FP8_TENSOR &&
                  static_cast<int>(infer::WeightType::int4) == INFER_WEIGHT_INT4 &&
                  static_cast<int>(infer::WeightType::fp8_dynamic) == INFER_WEIGHT_FP8_DYNAMIC &&
                  static_cast<int>(infer::WeightType::w8a16) == INFER_WEIGHT_W8A16,
              "C and C++ weight types must stay numerically equal");


struct infer_delta {
  infer::Delta delta;
};

namespace {

// Log-probabilities flattened for the C accessors: entry i's alternatives are
// top[top_begin[i], top_begin[i + 1]).
struct FlatLogprobs {
  std::vector<infer_token_logprob> chosen, top;
  std::vector<size_t> top_begin;

  explicit FlatLogprobs(const std::vector<infer::TokenLogprobs>& in) {
    if (in.empty()) return;
    chosen.reserve(in.size());
    top_begin.reserve(in.size() + 1);
    for (const infer::TokenLogprobs& t : in) {
      chosen.push_back({t.token, static_cast<decltype(infer_token_logprob::logprob)>(t.logprob)});
      top_begin.push_back(top.size());
      for (const infer::TokenLogprob& a : t.top)
        top.push_back({a.token, static_cast<decltype(infer_token_logprob::logprob)>(a.logprob)});
    }
    top_begin.push_back(top.size());
  }
  const infer_token_logprob* all(size_t* n) const {
    if (n) *n = chosen.size();
    return chosen.empty() ? nullptr : chosen.data();
  }
  const infer_token_logprob* alternatives(size_t i, size_t* n) const {
    const size_t count = i < chosen.size() ? top_begin[i + 1] - top_begin[i] : 0;
    if (n) *n = count;
    return count ? top.data() + top_begin[i] : nullptr;
  }
};

}  // namespace

struct infer_result {
  infer::Completion completion;
  FlatLogprobs logprobs, prompt_logprobs;  // built once, at wait

  explicit infer_result(infer::Completion c)
      : completion(std::move(c)), logprobs(completion.logprobs), prompt_logprobs(completion.prompt_logprobs) {}
};

namespace {

using infer::Status;
using namespace infer::capi;

struct FieldSpan {
  size_t offset, size, align;
};

// True when the fields listed, after struct_size, are every field of a struct of `total` bytes
// aligned to `align`: each starts where the previous one ends (plus its alignment) and the last
// one ends the struct. A field added to a struct but not to its list below fails to compile.
template <size_t N>
constexpr bool lists_every_field(const FieldSpan (&fields)[N], size_t total, size_t align) {
  size_t end = sizeof(size_t);
  for (const FieldSpan& f : fields) {
    if (f.offset != (end + f.align - 1) / f.align * f.align) return false;
    end = f.offset + f.size;
  }
  return (end + align - 1) / align * align == total;
}

#define INFER_SPAN(T, f) FieldSpan{offsetof(T, f), sizeof(T::f), alignof(decltype(T::f))},
#define INFER_READ(T, f)                                           \
  if (offsetof(T, f) + sizeof(T::f) <= size)                       \
    std::memcpy(&full.f, reinterpret_cast<const char*>(in) + offsetof(T, f), sizeof(T::f));
#define INFER_WRITE(T, f)                                          \
  if (offsetof(T, f) + sizeof(T::f) <= size)                       \
    std::memcpy(reinterpret_cast<char*>(out) + offsetof(T, f), &full.f, sizeof(T::f));

#define INFER_ENGINE_PARAMS_FIELDS(X, T)                                                                     \
  X(T, model_path) X(T, n_threads) X(T, max_batch_tokens) X(T, max_sequences) X(T, max_waiting)             \
  X(T, batch_wait_ms) X(T, kv_cache_bytes) X(T, kv_cache_tokens) X(T, block_size) X(T, kv_type)             \
  X(T, weight_type) X(T, max_context) X(T, prefix_cache) X(T, price_per_hour) X(T, metrics_window)          \
  X(T, chat_template) X(T, on_load_progress) X(T, progress_user_data) X(T, priority_preemption)             \
  X(T, chat_template_text) X(T, chat_template_variables) X(T, device)

#define INFER_REQUEST_PARAMS_FIELDS(X, T)                                                                    \
  X(T, prompt) X(T, prompt_tokens) X(T, n_prompt_tokens) X(T, messages) X(T, n_messages) X(T, add_special)  \
  X(T, parse_special) X(T, max_tokens) X(T, temperature) X(T, top_k) X(T, top_p) X(T, min_p)                \
  X(T, repeat_penalty) X(T, repeat_last_n) X(T, frequency_penalty) X(T, presence_penalty) X(T, stop)        \
  X(T, n_stop) X(T, seed) X(T, ignore_eos) X(T, logprobs) X(T, top_logprobs) X(T, prompt_logprobs_from)     \
  X(T, prompt_top_logprobs) X(T, prompt_logits) X(T, priority) X(T, timeout_ms) X(T, on_token)              \
  X(T, user_data) X(T, detached)

#define INFER_METRICS_FIELDS(X, T)                                                                           \
  X(T, queue_ms) X(T, ttft_ms) X(T, tpot_ms) X(T, e2e_ms) X(T, prompt_tokens) X(T, cached_tokens)           \
  X(T, generated_tokens) X(T, preemptions)

#define INFER_STATS_FIELDS(X, T)                                                                             \
  X(T, uptime_s) X(T, running) X(T, waiting) X(T, requests_finished) X(T, requests_cancelled)               \
  X(T, requests_failed) X(T, requests_rejected) X(T, prompt_tokens) X(T, computed_prompt_tokens)            \
  X(T, cached_prompt_tokens) X(T, generated_tokens) X(T, prompt_tokens_per_s) X(T, generated_tokens_per_s)  \
  X(T, prefix_hit_rate) X(T, preemptions) X(T, steps) X(T, kv_blocks_total) X(T, kv_blocks_used)            \
  X(T, kv_blocks_cached) X(T, kv_blocks_free) X(T, tokenize_ms) X(T, schedule_ms) X(T, forward_ms)          \
  X(T, sample_ms) X(T, detokenize_ms) X(T, ttft_ms) X(T, tpot_ms) X(T, e2e_ms) X(T, queue_ms)               \
  X(T, cost_per_million_tokens) X(T, n_threads)

#define INFER_MODEL_INFO_FIELDS(X, T)                                                                        \
  X(T, architecture) X(T, name) X(T, chat_template) X(T, n_vocab) X(T, n_ctx) X(T, n_ctx_train) X(T, n_embd) \
  X(T, n_layer) X(T, n_head) X(T, n_head_kv) X(T, n_params) X(T, size_bytes) X(T, bos) X(T, eos) X(T, eot)    \
  X(T, file_type) X(T, default_temperature) X(T, default_top_k) X(T, default_top_p)

#define INFER_CHECK_FIELD_LIST(LIST, T)                                                  \
  static_assert([] {                                                                     \
    constexpr FieldSpan spans[] = {LIST(INFER_SPAN, T)};                                 \
    return lists_every_field(spans, sizeof(T), alignof(T));                              \
  }(), "the field list of " #T " must name every field of the struct, in order");

INFER_CHECK_FIELD_LIST(INFER_ENGINE_PARAMS_FIELDS, infer_engine_params)
INFER_CHECK_FIELD_LIST(INFER_REQUEST_PARAMS_FIELDS, infer_request_params)
INFER_CHECK_FIELD_LIST(INFER_METRICS_FIELDS, infer_request_metrics)
INFER_CHECK_FIELD_LIST(INFER_STATS_FIELDS, infer_engine_stats)
INFER_CHECK_FIELD_LIST(INFER_MODEL_INFO_FIELDS, infer_model_info)

// Writes `full` into the caller's struct up to its struct_size; fields past this library's
// struct (a newer caller's) are zeroed, the value they have when unknown.
#define INFER_WRITE_OUTPUT(LIST, T)                                                      \
  do {                                                                                   \
    const size_t size = struct_size_of(out);                                             \
    LIST(INFER_WRITE, T)                                                                 \
    if (size > sizeof(T)) std::memset(reinterpret_cast<char*>(out) + sizeof(T), 0, size - sizeof(T)); \
  } while (0)

// ---- Conversions ---------------------------------------------------------------------------

Status to_engine_config(const infer_engine_params* in, infer::EngineConfig& config, std::string& model_path) {
  constexpr std::string_view fn = "infer_engine_create";
  if (Status s = check_input_struct(in, sizeof(infer_engine_params), fn, "infer_engine_params"); !s.is_ok()) return s;
  infer_engine_params full;
  infer_engine_params_init(&full);
  const size_t size = struct_size_of(in);
  INFER_ENGINE_PARAMS_FIELDS(INFER_READ, infer_engine_params)

  if (!full.model_path) return invalid(fn, "params.model_path is NULL");
  if (full.n_threads < 0) return invalid(fn, "params.n_threads is " + std::to_string(full.n_threads) + " (0 = all cores)");
  if (full.kv_type < INFER_KV_F16 || full.kv_type > INFER_KV_FP8)
    return invalid(fn, "params.kv_type is " + std::to_string(full.kv_type) + ", not an infer_kv_type");
  if (full.weight_type < INFER_WEIGHT_KEEP || full.weight_type > INFER_WEIGHT_W8A16)
    return invalid(fn, "params.weight_type is " + std::to_string(full.weight_type) + ", not an infer_weight_type");
  model_path = full.model_path;
  config.threads = full.n_threads;
  config.max_batch_tokens = full.max_batch_tokens;
  config.max_sequences = full.max_sequences;
  config.max_waiting = full.max_waiting;
  config.batch_wait_ms = full.batch_wait_ms;
  config.kv_cache_bytes = full.kv_cache_bytes;
  config.kv_cache_tokens = full.kv_cache_tokens;
  config.block_size = full.block_size;
  config.kv_type = static_cast<infer::KvType>(full.kv_type);
  config.weight_type = static_cast<infer::WeightType>(full.weight_type);
  config.max_context = full.max_context;
  config.prefix_cache = full.prefix_cache != 0;
  config.priority_preemption = full.priority_preemption != 0;
  config.price_per_hour = full.price_per_hour;
  config.metrics_window = full.metrics_window;
  config.chat_template = full.chat_template ? full.chat_template : "";
  config.chat_template_text = full.chat_template_text ? full.chat_template_text : "";
  config.chat_template_variables = full.chat_template_variables ? full.chat_template_variables : "";
  if (full.device) config.device = full.device;
  if (full.on_load_progress)
    config.on_load_progress = [cb = full.on_load_progress, user = full.progress_user_data](double fraction) {
      cb(static_cast<float>(fraction), user);
    };
  return Status::ok();
}

Status to_messages(const infer_chat_message* messages, size_t n, std::string_view fn, std::vector<infer::ChatMessage>& out) {
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!messages[i].role || !messages[i].content)
      return invalid(fn, "messages[" + std::to_string(i) + "]." + (messages[i].role ? "content" : "role") + " is NULL");
    out.push_back({messages[i].role, messages[i].content});
  }
  return Status::ok();
}

// The callback's bridge: captured by value in Request::on_event, so the request holds everything
// it needs after infer_engine_submit returns. `text` is the NUL-terminated copy the event lends.
struct TokenBridge {
  infer_token_callback callback;
  void* user_data;
  infer::Engine* engine;
  std::string text;

  void operator()(const infer::StreamEvent& ev) {
    text.assign(ev.text);
    infer_token_event e{};
    e.id = ev.id;
    e.token = ev.token;
    e.text = text.c_str();
    e.text_len = text.size();
    e.finished = ev.finished ? 1 : 0;
    e.reason = static_cast<infer_finish_reason>(ev.reason);
    e.logprob = ev.logprobs ? ev.logprobs->logprob : 0;
    // The engine turns a cancel from its own worker into INFER_FINISH_CANCELLED within one step;
    // after the final event there is nothing left to cancel.
    if (callback(&e, user_data) != 0 && !ev.finished) engine->cancel(ev.id);
  }
};

Status to_request(const infer_request_params* in, infer::Engine* engine, std::string_view fn, infer::Request& r) {
  if (Status s = check_input_struct(in, sizeof(infer_request_params), fn, "infer_request_params"); !s.is_ok()) return s;
  infer_request_params full;
  infer_request_params_init(&full);
  const size_t size = struct_size_of(in);
  INFER_REQUEST_PARAMS_FIELDS(INFER_READ, infer_request_params)

  const int kinds = (full.prompt != nullptr) + (full.n_prompt_tokens > 0) + (full.n_messages > 0);
  if (kinds != 1)
    return invalid(fn, "give exactly one prompt: prompt (text), prompt_tokens with n_prompt_tokens > 0, or messages "
                       "with n_messages > 0 (" + std::to_string(kinds) + " given)");
  if (full.n_prompt_tokens > 0 && !full.prompt_tokens)
    return invalid(fn, "params.prompt_tokens is NULL but n_prompt_tokens is " + std::to_string(full.n_prompt_tokens));
  if (full.n_messages > 0 && !full.messages)
    return invalid(fn, "params.messages is NULL but n_messages is " + std::to_string(full.n_messages));
  if (full.n_stop > 0 && !full.stop) return invalid(fn, "params.stop is NULL but n_stop is " + std::to_string(full.n_stop));

  if (full.prompt) r.prompt = full.prompt;
  if (full.n_prompt_tokens > 0) r.prompt_ids.assign(full.prompt_tokens, full.prompt_tokens + full.n_prompt_tokens);
  if (full.n_messages > 0)
    if (Status s = to_messages(full.messages, full.n_messages, fn, r.messages); !s.is_ok()) return s;
  r.add_special = full.add_special != 0;
  r.parse_special = full.parse_special != 0;

  infer::GenerationParams& g = r.params;
  g.max_tokens = full.max_tokens;
  g.temperature = full.temperature;
  g.top_k = full.top_k;
  g.top_p = full.top_p;
  g.min_p = full.min_p;
  g.repeat_penalty = full.repeat_penalty;
  g.repeat_last_n = full.repeat_last_n;
  g.frequency_penalty = full.frequency_penalty;
  g.presence_penalty = full.presence_penalty;
  g.seed = full.seed;
  g.ignore_eos = full.ignore_eos != 0;
  g.logprobs = full.logprobs != 0;
  g.top_logprobs = full.top_logprobs;
  g.stop.reserve(full.n_stop);
  for (size_t i = 0; i < full.n_stop; ++i) {
    if (!full.stop[i]) return invalid(fn, "params.stop[" + std::to_string(i) + "] is NULL");
    g.stop.emplace_back(full.stop[i]);
  }
  r.score.from = full.prompt_logprobs_from;
  r.score.top_logprobs = full.prompt_top_logprobs;
  r.score.logits = full.prompt_logits != 0;
  r.priority = full.priority;
  r.timeout_ms = full.timeout_ms;
  r.detached = full.detached != 0;
  if (full.on_token) r.on_event = TokenBridge{full.on_token, full.user_data, engine, {}};
  return Status::ok();
}

// The two-call size protocol of infer.h: the length always, the text (with its NUL) only if it fits.
Status copy_text_out(const std::string& text, char* buf, size_t capacity, size_t* len, std::string_view fn) {
  *len = text.size();
  if (text.size() >= capacity)
    return infer::out_of_range(std::string(fn) + ": the text needs " + std::to_string(text.size() + 1) +
                               " bytes with its NUL; the buffer has " + std::to_string(capacity));
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  return Status::ok();
}

const std::vector<std::string>* chat_template_list() noexcept {
  try {
    static const std::vector<std::string> names = infer::chat_template_names();
    return &names;
  } catch (...) {
    return nullptr;  // the static is initialized again on the next call
  }
}

// The caller's struct_size bytes of a defaults-filled struct of `ours` bytes: the common prefix
// (append-only fields: the same layout in both), zeros past ours; then the caller's size.
void copy_defaults(void* out, const void* full, size_t ours, size_t struct_size) {
  std::memcpy(out, full, std::min(ours, struct_size));
  if (struct_size > ours) std::memset(static_cast<char*>(out) + ours, 0, struct_size - ours);
  std::memcpy(out, &struct_size, sizeof struct_size);
}

void fill_engine_defaults(infer_engine_params& full) {
  infer_engine_params* params = &full;
  const infer::EngineConfig d;
  std::memset(params, 0, sizeof *params);  // padding too: a struct compared or hashed bytewise stays stable
  params->struct_size = sizeof *params;
  params->n_threads = d.threads;
  params->max_batch_tokens = d.max_batch_tokens;
  params->max_sequences = d.max_sequences;
  params->max_waiting = d.max_waiting;
  params->batch_wait_ms = d.batch_wait_ms;
  params->kv_cache_bytes = d.kv_cache_bytes;
  params->kv_cache_tokens = d.kv_cache_tokens;
  params->block_size = d.block_size;
  params->kv_type = static_cast<int32_t>(d.kv_type);
  params->weight_type = static_cast<int32_t>(d.weight_type);
  params->max_context = d.max_context;
  params->prefix_cache = d.prefix_cache ? 1 : 0;
  params->priority_preemption = d.priority_preemption ? 1 : 0;
  params->price_per_hour = d.price_per_hour;
  params->metrics_window = d.metrics_window;
}

void fill_request_defaults(infer_request_params& full) {
  infer_request_params* params = &full;
  const infer::Request d;
  std::memset(params, 0, sizeof *params);
  params->struct_size = sizeof *params;
  params->add_special = d.add_special ? 1 : 0;
  params->parse_special = d.parse_special ? 1 : 0;
  params->max_tokens = d.params.max_tokens;
  params->temperature = d.params.temperature;
  params->top_k = d.params.top_k;
  params->top_p = d.params.top_p;
  params->min_p = d.params.min_p;
  params->repeat_penalty = d.params.repeat_penalty;
  params->repeat_last_n = d.params.repeat_last_n;
  params->frequency_penalty = d.params.frequency_penalty;
  params->presence_penalty = d.params.presence_penalty;
  params->seed = d.params.seed;
  params->ignore_eos = d.params.ignore_eos ? 1 : 0;
  params->logprobs = d.params.logprobs ? 1 : 0;
  params->top_logprobs = d.params.top_logprobs;
  params->prompt_logprobs_from = d.score.from;
  params->prompt_top_logprobs = d.score.top_logprobs;
  params->prompt_logits = d.score.logits ? 1 : 0;
  params->priority = d.priority;
  params->timeout_ms = d.timeout_ms;
  params->detached = d.detached ? 1 : 0;
}

}  // namespace


extern "C" {

const char* infer_version(void) { return INFER_VERSION_STRING; }

int infer_version_number(void) { return INFER_VERSION_NUMBER; }

int infer_cuda_device_count(void) { return infer::cuda_device_count(); }

const char* infer_cpu_isa(void) { return infer::cpu_isa(); }

const char* infer_status_name(infer_status status) {
  switch (status) {
    case INFER_OK: return "INFER_OK";
    case INFER_ERR_INVALID_ARGUMENT: return "INFER_ERR_INVALID_ARGUMENT";
    case INFER_ERR_NOT_FOUND: return "INFER_ERR_NOT_FOUND";
    case INFER_ERR_IO: return "INFER_ERR_IO";
    case INFER_ERR_MALFORMED_FILE: return "INFER_ERR_MALFORMED_FILE";
    case INFER_ERR_UNSUPPORTED: return "INFER_ERR_UNSUPPORTED";
    case INFER_ERR_OUT_OF_MEMORY: return "INFER_ERR_OUT_OF_MEMORY";
    case INFER_ERR_OUT_OF_RANGE: return "INFER_ERR_OUT_OF_RANGE";
    case INFER_ERR_OVERLOADED: return "INFER_ERR_OVERLOADED";
    case INFER_ERR_CANCELLED: return "INFER_ERR_CANCELLED";
    case INFER_ERR_DEADLINE: return "INFER_ERR_DEADLINE";
    case INFER_ERR_INTERNAL: return "INFER_ERR_INTERNAL";
  }
  return "INFER_ERR_UNKNOWN";
}

void infer_log_set_callback(infer_log_callback callback, void* user_data) {
  // The C callback and its user data travel as the C++ sink's user data. set_log_sink swaps the
  // pair under the lock that every sink call holds, so once it returns no call can still be
  // using the previous route and it can be freed.
  struct Route {
    infer_log_callback callback;
    void* user_data;
  };
  static std::mutex mutex;
  static Route* current = nullptr;
  std::lock_guard lock(mutex);
  Route* next = callback ? new (std::nothrow) Route{callback, user_data} : nullptr;
  if (callback && !next) return;  // out of memory: keep the previous sink
  if (next) {
    infer::set_log_sink(
        [](infer::LogLevel level, const char* message, void* data) {
          auto* r = static_cast<Route*>(data);
          r->callback(static_cast<infer_log_level>(level), message, r->user_data);
        },
        next);
  } else {
    infer::set_log_sink(nullptr, nullptr);
  }
  delete current;
  current = next;
}

infer_status infer_log_set_level(infer_log_level level) {
  if (level < INFER_LOG_DEBUG || level > INFER_LOG_ERROR)
    return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_log_set_level: not an infer_log_level");
  infer::set_log_level(static_cast<infer::LogLevel>(level));
  return INFER_OK;
}

// ---- Engine --------------------------------------------------------------------------------

void infer_engine_params_init_sized(infer_engine_params* params, size_t struct_size) {
  if (!params || struct_size < sizeof(size_t)) return;
  infer_engine_params full;
  fill_engine_defaults(full);
  copy_defaults(params, &full, sizeof full, struct_size);
}

void infer_request_params_init_sized(infer_request_params* params, size_t struct_size) {
  if (!params || struct_size < sizeof(size_t)) return;
  infer_request_params full;
  fill_request_defaults(full);
  copy_defaults(params, &full, sizeof full, struct_size);
}

infer_status infer_engine_create(const infer_engine_params* params, infer_engine** out) {
  if (out) *out = nullptr;
  return guarded(nullptr, [&]() -> Status {
    if (!params) return invalid("infer_engine_create", "params is NULL");
    if (!out) return invalid("infer_engine_create", "out is NULL");
    infer::EngineConfig config;
    std::string model_path;
    if (Status s = to_engine_config(params, config, model_path); !s.is_ok()) return s;
    auto engine = infer::Engine::create(model_path, config);
    if (!engine.ok()) return engine.status();
    auto handle = std::make_unique<infer_engine>();
    handle->engine = std::move(engine).value();
    handle->model = handle->engine->model();
    register_engine(*handle);
    *out = handle.release();
    return Status::ok();
  });
}

void infer_engine_destroy(infer_engine* engine) {
  if (!engine) return;
  unregister_engine(engine);
  delete engine;  // ~Engine cancels what is in flight and joins the worker; it does not throw
}

infer_status infer_engine_shutdown(infer_engine* engine, int finish_in_flight) {
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_shutdown: engine is NULL");
  return guarded(engine, [&]() -> Status {
    engine->engine->shutdown(finish_in_flight != 0);
    return Status::ok();
  });
}

// ---- Requests ------------------------------------------------------------------------------

const char* infer_finish_reason_name(infer_finish_reason reason) {
  switch (reason) {
    case INFER_FINISH_NONE: return "none";
    case INFER_FINISH_STOP: return "stop";
    case INFER_FINISH_LENGTH: return "length";
    case INFER_FINISH_CONTEXT: return "context";
    case INFER_FINISH_CANCELLED: return "cancelled";
    case INFER_FINISH_DEADLINE: return "deadline";
    case INFER_FINISH_ERROR: return "error";
  }
  return "unknown";
}


infer_status infer_engine_submit(infer_engine* engine, const infer_request_params* params, infer_request_id* out) {
  if (out) *out = 0;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_submit: engine is NULL");
  return guarded(engine, [&]() -> Status {
    if (!params) return invalid("infer_engine_submit", "params is NULL");
    if (!out) return invalid("infer_engine_submit", "out is NULL");
    infer::Request request;
    if (Status s = to_request(params, engine->engine.get(), "infer_engine_submit", request); !s.is_ok()) return s;
    auto id = engine->engine->submit(std::move(request));
    if (!id.ok()) return id.status();
    *out = *id;
    return Status::ok();
  });
}

infer_status infer_engine_cancel(infer_engine* engine, infer_request_id id) {
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_cancel: engine is NULL");
  return guarded(engine, [&] { return engine->engine->cancel(id); });
}

infer_status infer_engine_read(infer_engine* engine, infer_request_id id, double timeout_ms, infer_delta** out) {
  if (out) *out = nullptr;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_read: engine is NULL");
  return guarded(engine, [&]() -> Status {
    if (!out) return invalid("infer_engine_read", "out is NULL");
    if (std::isnan(timeout_ms)) return invalid("infer_engine_read", "timeout_ms is NaN");
    // Past ~30 years a wait is forever; converting such a duration to the clock's would overflow.
    if (timeout_ms > 1e12) timeout_ms = -1;
    auto delta = engine->engine->read(id, timeout_ms);
    if (!delta.ok()) return delta.status();
    *out = new infer_delta{std::move(delta).value()};
    return Status::ok();
  });
}

const char* infer_delta_text(const infer_delta* delta, size_t* len) {
  if (len) *len = delta ? delta->delta.text.size() : 0;
  return delta ? delta->delta.text.c_str() : nullptr;
}

const int32_t* infer_delta_tokens(const infer_delta* delta, size_t* n) {
  const size_t count = delta ? delta->delta.ids.size() : 0;
  if (n) *n = count;
  return count ? delta->delta.ids.data() : nullptr;
}

int infer_delta_finished(const infer_delta* delta) { return delta && delta->delta.finished ? 1 : 0; }

infer_finish_reason infer_delta_finish_reason(const infer_delta* delta) {
  return delta ? static_cast<infer_finish_reason>(delta->delta.reason) : INFER_FINISH_NONE;
}

void infer_delta_destroy(infer_delta* delta) { delete delta; }

infer_status infer_engine_wait(infer_engine* engine, infer_request_id id, infer_result** out) {
  if (out) *out = nullptr;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_wait: engine is NULL");
  return guarded(engine, [&]() -> Status {
    if (!out) return invalid("infer_engine_wait", "out is NULL");
    auto done = engine->engine->wait(id);
    if (!done.ok()) return done.status();
    *out = new infer_result(std::move(done).value());
    return Status::ok();
  });
}

infer_status infer_engine_generate(infer_engine* engine, const infer_request_params* params, infer_result** out) {
  if (out) *out = nullptr;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_generate: engine is NULL");
  return guarded(engine, [&]() -> Status {
    constexpr std::string_view fn = "infer_engine_generate";
    if (!params) return invalid(fn, "params is NULL");
    if (!out) return invalid(fn, "out is NULL");
    infer::Request request;
    if (Status s = to_request(params, engine->engine.get(), fn, request); !s.is_ok()) return s;
    // Checked before submitting: a detached request cannot be waited for, and would run unseen.
    if (request.detached) return invalid(fn, "params.detached is set: a detached request cannot be waited for");
    auto done = engine->engine->generate(std::move(request));
    if (!done.ok()) return done.status();
    *out = new infer_result(std::move(done).value());
    return Status::ok();
  });
}

const char* infer_result_text(const infer_result* result, size_t* len) {
  if (len) *len = result ? result->completion.text.size() : 0;
  return result ? result->completion.text.c_str() : nullptr;
}

const int32_t* infer_result_tokens(const infer_result* result) {
  return result && !result->completion.ids.empty() ? result->completion.ids.data() : nullptr;
}

size_t infer_result_n_tokens(const infer_result* result) { return result ? result->completion.ids.size() : 0; }

infer_finish_reason infer_result_finish_reason(const infer_result* result) {
  return result ? static_cast<infer_finish_reason>(result->completion.reason) : INFER_FINISH_NONE;
}

infer_status infer_result_status(const infer_result* result) {
  return result ? static_cast<infer_status>(result->completion.status.code()) : INFER_ERR_INVALID_ARGUMENT;
}

const char* infer_result_error(const infer_result* result) {
  return result ? result->completion.status.message().c_str() : "";
}

infer_status infer_result_metrics(const infer_result* result, infer_request_metrics* out) {
  return guarded(nullptr, [&]() -> Status {
    if (!result) return invalid("infer_result_metrics", "result is NULL");
    if (!out) return invalid("infer_result_metrics", "out is NULL");
    if (Status s = check_output_struct(out, "infer_result_metrics", "infer_request_metrics"); !s.is_ok()) return s;
    const infer::RequestMetrics& m = result->completion.metrics;
    infer_request_metrics full{};
    full.queue_ms = m.queue_ms;
    full.ttft_ms = m.ttft_ms;
    full.tpot_ms = m.tpot_ms;
    full.e2e_ms = m.e2e_ms;
    full.prompt_tokens = m.prompt_tokens;
    full.cached_tokens = m.cached_tokens;
    full.generated_tokens = m.generated_tokens;
    full.preemptions = m.preemptions;
    INFER_WRITE_OUTPUT(INFER_METRICS_FIELDS, infer_request_metrics);
    return Status::ok();
  });
}

const infer_token_logprob* infer_result_logprobs(const infer_result* result, size_t* n) {
  if (!result) {
    if (n) *n = 0;
    return nullptr;
  }
  return result->logprobs.all(n);
}

const infer_token_logprob* infer_result_top_logprobs(const infer_result* result, size_t i, size_t* n) {
  if (!result) {
    if (n) *n = 0;
    return nullptr;
  }
  return result->logprobs.alternatives(i, n);
}

const infer_token_logprob* infer_result_prompt_logprobs(const infer_result* result, size_t* n) {
  if (!result) {
    if (n) *n = 0;
    return nullptr;
  }
  return result->prompt_logprobs.all(n);
}

const infer_token_logprob* infer_result_prompt_top_logprobs(const infer_result* result, size_t i, size_t* n) {
  if (!result) {
    if (n) *n = 0;
    return nullptr;
  }
  return result->prompt_logprobs.alternatives(i, n);
}

const float* infer_result_prompt_logits(const infer_result* result, size_t* n_rows, size_t* n_vocab) {
  const size_t rows = result ? result->completion.prompt_logprobs.size() : 0;
  const size_t floats = result ? result->completion.prompt_logits.size() : 0;
  const bool any = rows > 0 && floats > 0;
  if (n_rows) *n_rows = any ? rows : 0;
  if (n_vocab) *n_vocab = any ? floats / rows : 0;
  return any ? result->completion.prompt_logits.data() : nullptr;
}

void infer_result_destroy(infer_result* result) { delete result; }

// ---- Statistics and the model ----------------------------------------------------------------

infer_status infer_engine_get_stats(infer_engine* engine, infer_engine_stats* out) {
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_get_stats: engine is NULL");
  return guarded(engine, [&]() -> Status {
    if (!out) return invalid("infer_engine_get_stats", "out is NULL");
    if (Status s = check_output_struct(out, "infer_engine_get_stats", "infer_engine_stats"); !s.is_ok()) return s;
    const infer::EngineStats st = engine->engine->stats();
    auto latency = [](const infer::LatencySummary& l) { return infer_latency{l.p50, l.p95, l.p99, l.mean, l.count}; };
    infer_engine_stats full{};
    full.uptime_s = st.uptime_s;
    full.running = st.running;
    full.waiting = st.waiting;
    full.requests_finished = st.requests_finished;
    full.requests_cancelled = st.requests_cancelled;
    full.requests_failed = st.requests_failed;
    full.requests_rejected = st.requests_rejected;
    full.prompt_tokens = st.prompt_tokens;
    full.computed_prompt_tokens = st.computed_prompt_tokens;
    full.cached_prompt_tokens = st.cached_prompt_tokens;
    full.generated_tokens = st.generated_tokens;
    full.prompt_tokens_per_s = st.prompt_tokens_per_s;
    full.generated_tokens_per_s = st.generated_tokens_per_s;
    full.prefix_hit_rate = st.prefix_hit_rate;
    full.preemptions = st.preemptions;
    full.steps = st.steps;
    full.kv_blocks_total = st.kv_blocks_total;
    full.kv_blocks_used = st.kv_blocks_used;
    full.kv_blocks_cached = st.kv_blocks_cached;
    full.kv_blocks_free = st.kv_blocks_free;
    full.tokenize_ms = st.tokenize_ms;
    full.schedule_ms = st.schedule_ms;
    full.forward_ms = st.forward_ms;
    full.sample_ms = st.sample_ms;
    full.detokenize_ms = st.detokenize_ms;
    full.ttft_ms = latency(st.ttft_ms);
    full.tpot_ms = latency(st.tpot_ms);
    full.e2e_ms = latency(st.e2e_ms);
    full.queue_ms = latency(st.queue_ms);
    full.cost_per_million_tokens = st.cost_per_million_tokens;
    full.n_threads = st.threads;
    INFER_WRITE_OUTPUT(INFER_STATS_FIELDS, infer_engine_stats);
    return Status::ok();
  });
}

infer_status infer_engine_model_info(infer_engine* engine, infer_model_info* out) {
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_model_info: engine is NULL");
  return guarded(engine, [&]() -> Status {
    if (!out) return invalid("infer_engine_model_info", "out is NULL");
    if (Status s = check_output_struct(out, "infer_engine_model_info", "infer_model_info"); !s.is_ok()) return s;
    const infer::ModelDescription& d = engine->model;
    infer_model_info full{};
    full.architecture = d.architecture.c_str();
    full.name = d.name.c_str();
    full.chat_template = d.chat_template.c_str();
    full.n_vocab = d.n_vocab;
    full.n_ctx = d.n_ctx;
    full.n_ctx_train = d.n_ctx_train;
    full.n_embd = d.n_embd;
    full.n_layer = d.n_layer;
    full.n_head = d.n_head;
    full.n_head_kv = d.n_head_kv;
    full.n_params = d.n_params;
    full.size_bytes = d.size_bytes;
    full.bos = d.bos;
    full.eos = d.eos;
    full.eot = d.eot;
    full.file_type = d.file_type.c_str();
    full.default_temperature = d.default_temperature;
    full.default_top_k = d.default_top_k;
    full.default_top_p = d.default_top_p;
    INFER_WRITE_OUTPUT(INFER_MODEL_INFO_FIELDS, infer_model_info);
    return Status::ok();
  });
}

// ---- Text ----------------------------------------------------------------------------------

infer_status infer_engine_tokenize(infer_engine* engine, const char* text, size_t len, int add_special, int parse_special,
                                   int32_t* tokens, size_t capacity, size_t* n_tokens) {
  if (n_tokens) *n_tokens = 0;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_tokenize: engine is NULL");
  return guarded(engine, [&]() -> Status {
    constexpr std::string_view fn = "infer_engine_tokenize";
    if (!text) return invalid(fn, "text is NULL");
    if (!n_tokens) return invalid(fn, "n_tokens is NULL");
    if (!tokens && capacity > 0) return invalid(fn, "tokens is NULL but capacity is " + std::to_string(capacity));
    auto ids = engine->engine->tokenize(std::string_view(text, len), add_special != 0, parse_special != 0);
    if (!ids.ok()) return ids.status();
    *n_tokens = ids->size();
    if (ids->size() > capacity)
      return infer::out_of_range(std::string(fn) + ": the text has " + std::to_string(ids->size()) +
                                 " tokens; the buffer holds " + std::to_string(capacity));
    std::copy(ids->begin(), ids->end(), tokens);
    return Status::ok();
  });
}

infer_status infer_engine_detokenize(infer_engine* engine, const int32_t* tokens, size_t n, int render_special, char* buf,
                                     size_t capacity, size_t* len) {
  if (len) *len = 0;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_detokenize: engine is NULL");
  return guarded(engine, [&]() -> Status {
    constexpr std::string_view fn = "infer_engine_detokenize";
    if (!tokens && n > 0) return invalid(fn, "tokens is NULL but n is " + std::to_string(n));
    if (!len) return invalid(fn, "len is NULL");
    if (!buf && capacity > 0) return invalid(fn, "buf is NULL but capacity is " + std::to_string(capacity));
    const std::vector<int32_t> ids(tokens, tokens + n);
    auto text = engine->engine->detokenize(ids, render_special != 0);
    if (!text.ok()) return text.status();
    return copy_text_out(*text, buf, capacity, len, fn);
  });
}

infer_status infer_engine_apply_chat_template(infer_engine* engine, const infer_chat_message* messages, size_t n,
                                              int add_generation_prompt, char* buf, size_t capacity, size_t* len) {
  if (len) *len = 0;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_apply_chat_template: engine is NULL");
  return guarded(engine, [&]() -> Status {
    constexpr std::string_view fn = "infer_engine_apply_chat_template";
    if (!messages && n > 0) return invalid(fn, "messages is NULL but n is " + std::to_string(n));
    if (!len) return invalid(fn, "len is NULL");
    if (!buf && capacity > 0) return invalid(fn, "buf is NULL but capacity is " + std::to_string(capacity));
    std::vector<infer::ChatMessage> conversation;
    if (Status s = to_messages(messages, n, fn, conversation); !s.is_ok()) return s;
    auto text = engine->engine->render_chat(conversation, add_generation_prompt != 0);
    if (!text.ok()) return text.status();
    return copy_text_out(*text, buf, capacity, len, fn);
  });
}

infer_status infer_engine_apply_chat_template_json(infer_engine* engine, const char* conversation_json, char* buf,
                                                   size_t capacity, size_t* len) {
  if (len) *len = 0;
  if (!engine) return fail(nullptr, INFER_ERR_INVALID_ARGUMENT, "infer_engine_apply_chat_template_json: engine is NULL");
  return guarded(engine, [&]() -> Status {
    constexpr std::string_view fn = "infer_engine_apply_chat_template_json";
    if (!conversation_json) return invalid(fn, "conversation_json is NULL");
    if (!len) return invalid(fn, "len is NULL");
    if (!buf && capacity > 0) return invalid(fn, "buf is NULL but capacity is " + std::to_string(capacity));
    auto text = engine->engine->render_chat_json(conversation_json);
    if (!text.ok()) return text.status();
    return copy_text_out(*text, buf, capacity, len, fn);
  });
}

const char* infer_chat_template_name(size_t i) {
  const std::vector<std::string>* names = chat_template_list();
  return names && i < names->size() ? (*names)[i].c_str() : nullptr;
}

}  // extern "C"
