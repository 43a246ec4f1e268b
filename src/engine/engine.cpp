// The Engine (include/infer/engine.hpp): request lifecycle, the worker loop, streaming, metrics.
//
// Threads: host threads call submit / cancel / read / wait (tokenizing on their own thread);
// one worker thread runs the steps with the compute ThreadPool. Shared state — the request table,
// the incoming queue, each request's pending output — is guarded by mutex_; what only the worker
// touches (the scheduler, the KV manager, each sequence's tokens, sampler and detokenizer) is
// not locked. Callbacks run on the worker with no lock held.
#include "infer/engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "core/log.hpp"
#include "core/profile.hpp"
#include "core/status_macros.hpp"
#include "core/thread_pool.hpp"
#include "core/timer.hpp"
#include "core/weight_type.hpp"
#include "engine/engine_testing.hpp"
#include "engine/kv_block_budget.hpp"
#include "format/file_type.hpp"
#include "format/model_file.hpp"
#include "kv/kv_manager.hpp"
#include "model/batch.hpp"
#include "model/model.hpp"
#include "sample/sampler.hpp"
#include "sample/stop_strings.hpp"
#include "sched/scheduler.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/jinja/json.hpp"
#include "tokenizer/tokenizer.hpp"

namespace infer {

const char* finish_reason_name(FinishReason r) noexcept {
  switch (r) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::context: return "context";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::deadline: return "deadline";
    case FinishReason::error: return "error";
  }
  return "?";
}

const char* kv_type_name(KvType t) noexcept {
  switch (t) {
    case KvType::f16: return "f16";
    case KvType::f32: return "f32";
    case KvType::bf16: return "bf16";
    case KvType::q8_0: return "q8_0";
    case KvType::fp8: return "fp8";
  }
  return "";
}

namespace {
DType kv_dtype(KvType t) {
  switch (t) {
    case KvType::f32: return DType::f32;
    case KvType::bf16: return DType::bf16;
    case KvType::q8_0: return DType::q8_0;
    case KvType::fp8: return DType::f8_e4m3;
    case KvType::f16: break;
  }
  return DType::f16;
}
}  // namespace

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (ChatFormat f : chat_formats()) names.emplace_back(chat_format_name(f));
  return names;
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

SamplingParams to_sampling(const GenerationParams& p) {
  SamplingParams s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repeat_penalty = p.repeat_penalty;
  s.repeat_last_n = p.repeat_last_n;
  s.frequency_penalty = p.frequency_penalty;
  s.presence_penalty = p.presence_penalty;
  s.seed = p.seed;
  return s;
}

constexpr int32_t kMaxTopLogprobs = 20;

// log-softmax of one logits row, as llama.cpp's perplexity computes it (float differences and
// exponentials, a double sum): log p(i) = (logit_i - max) - log_z.
struct LogSoftmax {
  float max = 0;
  double log_z = 0;
  explicit LogSoftmax(std::span<const float> row) {
    max = row[0];
    for (float l : row) max = std::max(max, l);
    double z = 0;
    for (float l : row) z += std::exp(l - max);  // float exp, double sum
    log_z = std::log(z);
  }
  double operator()(float logit) const { return static_cast<double>(logit - max) - log_z; }
};

// The token's log-probability and the row's `top` most likely tokens (most likely first; ties by
// lower id).
TokenLogprobs token_logprobs(std::span<const float> row, int32_t token, int32_t top, std::vector<int32_t>& scratch) {
  const LogSoftmax ls(row);
  TokenLogprobs out;
  out.token = token;
  out.logprob = ls(row[static_cast<size_t>(token)]);
  if (top > 0) {
    scratch.resize(row.size());
    for (size_t i = 0; i < scratch.size(); ++i) scratch[i] = static_cast<int32_t>(i);
    const size_t k = std::min(scratch.size(), static_cast<size_t>(top));
    std::partial_sort(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(k), scratch.end(), [&](int32_t a, int32_t b) {
      const float la = row[static_cast<size_t>(a)], lb = row[static_cast<size_t>(b)];
      return la != lb ? la > lb : a < b;
    });
    out.top.reserve(k);
    for (size_t i = 0; i < k; ++i) out.top.push_back({scratch[i], ls(row[static_cast<size_t>(scratch[i])])});
  }
  return out;
}

// Runs fn, turning any exception into a status: a host never sees one from the engine.
template <class F>
auto guarded(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory");
  } catch (const std::exception& e) {
    return internal_error(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return internal_error("unexpected exception");
  }
}

}  // namespace

LatencySummary summarize_latencies(std::vector<double> v) {
  LatencySummary s;
  s.count = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    // Nearest rank.
    const size_t i = static_cast<size_t>(std::max(0.0, std::ceil(q * static_cast<double>(v.size())) - 1));
    return v[std::min(i, v.size() - 1)];
  };
  s.p50 = at(0.50);
  s.p95 = at(0.95);
  s.p99 = at(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

struct Engine::Impl {
  // One request. The worker owns everything but the fields marked (mutex_).
  struct Seq {
    SchedSequence sched;       // sched.budget_data points at kv
    KvSequence kv;             // the blocks the sequence holds
    Request request;
    std::optional<Sampler> sampler;
    std::optional<StopMatcher> stop;
    std::optional<IncrementalDetokenizer> detok;
    int64_t prompt_len = 0;
    int64_t max_new = 0;       // generated tokens allowed
    int32_t stop_token = -1;   // the chat template's end-of-turn token (messages), else -1
    int64_t score_from = -1;   // first scored prompt token (Request::score), else -1
    std::vector<TokenLogprobs> logprobs, prompt_logprobs;
    std::vector<float> prompt_logits;
    bool callback_failed = false;  // on_event threw: the request ends with an error
    Clock::time_point submitted, first_scheduled, first_token, finished_at;
    Clock::time_point arrived;  // the real clock at submit (batch_wait_ms), whatever the test clock says
    std::optional<Clock::time_point> deadline;
    bool scheduled_once = false;
    std::string text;          // the output so far
    std::vector<int32_t> ids;
    // (mutex_)
    bool done = false;
    bool cancel_requested = false;
    FinishReason reason = FinishReason::none;
    Status status;
    Delta pending;             // output not yet read()
    RequestMetrics metrics;
    std::condition_variable changed;
  };

  EngineConfig config;
  std::shared_ptr<const ModelFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<KvCacheManager> kv;
  std::optional<KvBlockBudget> budget;  // the scheduler's view of kv
  std::optional<Scheduler> scheduler;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Backend> backend;  // over `pool`: the forward steps' activations, weights prepared at load
  int64_t max_context = 0;
  int64_t pool_tokens = 0;     // positions the full-attention pool holds
  Clock::time_point started;
  // The chat template for Request::messages, or why there is none; the token that ends a turn
  // (-1 when the end of turn is not a single control token: it is then a stop string).
  std::optional<ChatTemplate> chat;
  Status chat_status;
  int32_t end_of_turn_token = -1;
  EngineTesting::Hooks hooks;
  Clock::time_point now() const { return hooks.clock ? hooks.clock() : Clock::now(); }

  // Shared state.
  mutable std::mutex mutex_;
  std::condition_variable work_;     // the worker waits for requests
  std::condition_variable idle_;     // shutdown waits for the worker to drain
  std::unordered_map<RequestId, std::unique_ptr<Seq>> requests_;
  std::vector<Seq*> incoming_;
  std::vector<RequestId> cancels_;
  RequestId next_id_ = 1;
  uint64_t next_arrival_ = 0;
  bool accepting_ = true;
  bool stop_worker_ = false;
  bool finish_in_flight_ = true;
  bool worker_idle_ = true;
  int64_t in_flight_ = 0;            // submitted, not yet done
  int64_t queued_ = 0;               // in the scheduler's waiting queue (updated by the worker)
  int64_t running_ = 0;

  // Statistics (mutex_).
  EngineStats counters_;
  std::deque<RequestMetrics> recent_;

  // check_invariants(): a request to the worker and its answer (mutex_).
  bool check_requested_ = false, check_done_ = false;
  std::string check_result_;
  std::condition_variable check_cv_;

  // Worker-only state.
  std::thread worker_;
  StepPlan plan_;
  Batch batch_;
  float* logits_ = nullptr;  // backend->host_output(): the step's logit rows
  std::vector<int32_t> top_scratch_;
  std::vector<Seq*> step_seqs_;      // the requests of the step in progress
  int64_t counters_steps_ = 0;       // forward passes started (the test hook's step number)
  std::vector<Seq*> live_;           // admitted to the scheduler, not finished

  ~Impl() { stop(); }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (!worker_.joinable()) return;
      stop_worker_ = true;
    }
    work_.notify_all();
    worker_.join();
  }

  void worker_main();
  bool step();
  // Ends every request of the failed step that is still live with `status` (the step threw).
  void fail_step(const Status& status) noexcept;
  void take_incoming();
  void finish(Seq* s, FinishReason reason, Status status);
  void emit_token(Seq* s, int32_t token, const std::string& text, bool finished, FinishReason reason,
                  const TokenLogprobs* logprobs = nullptr);
  void check_deadlines_and_cancels();
  // The request read() and wait() may block on (mutex_ held): not_found for an unknown or
  // collected id, invalid_argument for a detached one.
  Result<Seq*> readable_locked(RequestId id) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return not_found("no request " + std::to_string(id));
    if (it->second->request.detached)
      return invalid_argument("request " + std::to_string(id) + " is detached: its output goes to on_event only");
    return it->second.get();
  }
  // Copies the worker's scheduler and KV counts into the shared statistics (mutex_ held): after
  // each step and as a request ends, so that stats() after wait() sees its blocks released.
  void publish_locked() {
    queued_ = scheduler->waiting();
    running_ = scheduler->running();
    const KvManagerStats ks = kv->stats();
    counters_.kv_blocks_total = ks.total_blocks;
    counters_.kv_blocks_used = ks.used_blocks;
    counters_.kv_blocks_cached = ks.cached_blocks;
    counters_.kv_blocks_free = ks.free_blocks;
    counters_.preemptions = scheduler->preemptions();
  }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status Engine::check_invariants() {
  Impl& im = *impl_;
  std::unique_lock lock(im.mutex_);
  if (!im.worker_.joinable()) {
    std::vector<const KvSequence*> live;
    for (Impl::Seq* s : im.live_) live.push_back(&s->kv);
    std::string r = im.kv->check(live);
    if (r.empty()) r = im.scheduler->check();
    return r.empty() ? Status::ok() : internal_error(r);
  }
  im.check_requested_ = true;
  im.check_done_ = false;
  im.work_.notify_one();
  im.check_cv_.wait(lock, [&] { return im.check_done_; });
  return im.check_result_.empty() ? Status::ok() : internal_error(im.check_result_);
}

Engine::~Engine() {
  if (!impl_) return;
  shutdown(false);
  if (profiling_enabled()) {
    // INFER_PROFILE: the ops' table (core/profile.hpp) on stderr, beside this engine's forward
    // time; the profile is the process's, so it is cleared for the next engine.
    const std::string table = OpProfile::global().table();
    OpProfile::global().clear();
    const EngineStats st = stats();
    std::fprintf(stderr, "%sINFER_PROFILE: the engine ran %lld steps, %.3f ms in forward passes\n", table.c_str(),
                 static_cast<long long>(st.steps), st.forward_ms);
  }
}

Result<std::unique_ptr<Engine>> Engine::create(const std::string& model_path, const EngineConfig& config) {
  return EngineTesting::create(model_path, config, {});
}

Result<std::unique_ptr<Engine>> EngineTesting::create(const std::string& model_path, const EngineConfig& config, Hooks hooks) {
  return guarded([&]() -> Result<std::unique_ptr<Engine>> {
    if (config.max_batch_tokens <= 0 || config.max_sequences <= 0 || config.max_waiting < 0 || config.block_size <= 0 ||
        config.batch_wait_ms < 0 || config.max_context < 0 || config.metrics_window <= 0 || config.price_per_hour < 0 ||
        config.kv_cache_tokens < 0 || !std::isfinite(config.batch_wait_ms) || !std::isfinite(config.price_per_hour))
      return invalid_argument("EngineConfig: max_batch_tokens, max_sequences and block_size must be positive; "
                              "max_waiting, batch_wait_ms, max_context, kv_cache_tokens and price_per_hour not negative");
    auto weight_type = weight_dtype(config.weight_type);
    if (!weight_type.ok()) return invalid_argument("EngineConfig: " + weight_type.status().message());
    if (*kv_type_name(config.kv_type) == '\0')
      return invalid_argument("EngineConfig: unknown kv_type " + std::to_string(static_cast<int>(config.kv_type)));
    auto device = parse_device(config.device);
    if (!device.ok()) return invalid_argument("EngineConfig.device: " + device.status().message());
    // A device this build or machine lacks fails before the model loads.
    std::unique_ptr<Backend> cuda_backend;
    if (device->kind == DeviceSpec::Kind::cuda && config.on_matmul)
      return invalid_argument("EngineConfig: on_matmul reads activations in host memory: it needs device cpu");
    if (device->kind == DeviceSpec::Kind::cuda) {
      auto be = make_cuda_backend(device->index);
      if (!be.ok()) return be.status().with_context("EngineConfig.device " + config.device);
      cuda_backend = std::move(be).value();
    }
    auto progress = [&](double f) {
      if (config.on_load_progress) config.on_load_progress(f);
    };
    progress(0.0);
    auto impl = std::make_unique<Engine::Impl>();
    impl->config = config;
    impl->hooks = std::move(hooks);
    auto file = ModelFile::open(model_path);
    if (!file.ok()) return file.status();
    impl->file = std::make_shared<const ModelFile>(std::move(file).value());
    auto tok = load_tokenizer(*impl->file);
    if (!tok.ok()) return tok.status();
    impl->tokenizer = std::move(tok).value();
    // More compute threads than the hardware runs only makes them wait for each other (a thousand
    // took seconds a token): clamp, and say so.
    int threads = config.threads;
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (threads > hw) {
      INFER_LOG_WARN("EngineConfig.threads %d exceeds the %d hardware threads; using %d", threads, hw, hw);
      threads = hw;
    }
    impl->pool = std::make_unique<ThreadPool>(threads);
    if (cuda_backend)
      impl->backend = std::move(cuda_backend);
    else
      impl->backend = std::make_unique<CpuBackend>(*impl->pool);
    if (config.on_matmul)
      impl->backend->set_matmul_observer([observe = config.on_matmul](std::string_view weight, const TensorView& x) {
        observe(MatmulInput{weight, static_cast<const float*>(x.data), x.shape[0], x.rows(),
                            static_cast<int64_t>(x.stride[1] / sizeof(float))});
      });
    LoadOptions load;
    load.backend = impl->backend.get();
    load.weight_type = *weight_type;
    if (const char* rotate = std::getenv("INFER_WEIGHT_ROTATE"); rotate && std::string_view(rotate) == "0") load.rotate_int8 = false;
    // The weights are most of the work: 0.05 to 0.95 of the bar.
    if (config.on_load_progress) load.progress = [&](double f) { progress(0.05 + 0.9 * f); };
    auto model = load_model(impl->file, load);
    if (!model.ok()) return model.status();
    impl->model = std::move(model).value();
    const ModelInfo& info = impl->model->info();
    if (info.n_vocab != impl->tokenizer->vocab_size())
      return malformed_file(model_path + ": vocabulary size mismatch between the tokenizer (" +
                            std::to_string(impl->tokenizer->vocab_size()) + ") and the model (" + std::to_string(info.n_vocab) + ")");
    const int64_t model_ctx = std::min<int64_t>(info.n_ctx_train > 0 ? info.n_ctx_train : 4096, 4096);
    impl->max_context = config.max_context > 0 ? config.max_context : model_ctx;

    // The chat template: the configured format or template text, else the model's. A model
    // without one still serves plain prompts; messages then fail with the reason.
    if (!config.chat_template.empty() && !config.chat_template_text.empty())
      return invalid_argument("EngineConfig: give chat_template or chat_template_text, not both");
    const bool configured = !config.chat_template.empty() || !config.chat_template_text.empty();
    auto chat = config.chat_template.empty() ? ChatTemplate::for_model(impl->file->metadata(), config.chat_template_text)
                                             : ChatTemplate::from_name(config.chat_template);
    if (chat.ok()) {
      impl->chat.emplace(std::move(chat).value());
      if (!config.chat_template_variables.empty()) {
        jinja::Value vars;
        try {
          vars = jinja::json_parse(config.chat_template_variables);
        } catch (const jinja::Error& e) {
          return invalid_argument(std::string("EngineConfig.chat_template_variables: ") + e.what());
        }
        if (!vars.is_dict()) return invalid_argument("EngineConfig.chat_template_variables: not a JSON object");
        impl->chat->set_extra_variables(vars.as_dict());
      }
      if (auto ids = impl->tokenizer->encode(impl->chat->end_of_turn(), false, true);
          ids.ok() && ids->size() == 1 && impl->tokenizer->is_control((*ids)[0]))
        impl->end_of_turn_token = (*ids)[0];
    } else if (configured) {
      return chat.status().with_context(config.chat_template.empty() ? "EngineConfig.chat_template_text" : "EngineConfig.chat_template");
    } else {
      impl->chat_status = chat.status().with_context(model_path);
    }

    KvCacheConfig kvc = impl->model->kv_config(config.kv_cache_bytes, config.block_size, kv_dtype(config.kv_type));
    kvc.max_sequences = config.max_sequences;
    if (const char* rotate = std::getenv("INFER_KV_ROTATE"); rotate && std::string_view(rotate) == "0") kvc.rotate = false;
    kvc.max_step_tokens = static_cast<int>(std::min<int64_t>(config.max_batch_tokens, INT32_MAX));
    if (config.kv_cache_tokens > 0) kvc.budget_bytes = KvCache::budget_for_tokens(kvc, config.kv_cache_tokens);
    // The KV pool lives in the backend's memory, where its kernels read it.
    Backend& be = *impl->backend;
    auto kv = KvCacheManager::create(kvc, info.fingerprint, config.prefix_cache, [&be](size_t n) { return be.allocate_kv(n); });
    if (!kv.ok()) return kv.status().with_context(config.kv_cache_tokens > 0 ? "EngineConfig.kv_cache_tokens" : "EngineConfig.kv_cache_bytes");
    impl->kv.emplace(std::move(kv).value());
    // A sequence's length is bounded by the full-attention pool; a model whose layers are all
    // windowed keeps only a window per sequence, so only max_context bounds it.
    const int64_t capacity = impl->kv->sequence_capacity();
    impl->pool_tokens = capacity == INT64_MAX ? impl->max_context : capacity;
    impl->budget.emplace(*impl->kv);
    SchedulerConfig sc;
    sc.max_batch_tokens = config.max_batch_tokens;
    sc.max_sequences = config.max_sequences;
    sc.priority_preemption = config.priority_preemption;
    sc.prefix_aware_admission = impl->hooks.prefix_aware_admission;
    impl->scheduler.emplace(sc, *impl->budget);
    {
      std::lock_guard lock(impl->mutex_);
      impl->publish_locked();  // stats() shows the pool before the first step
      impl->counters_.threads = impl->pool->size();
    }
    auto logits = impl->backend->host_output(static_cast<size_t>(config.max_sequences) * static_cast<size_t>(info.n_vocab));
    if (!logits.ok()) return logits.status().with_context("the logits buffer");
    impl->logits_ = *logits;
    impl->started = impl->now();
    Engine::Impl* raw = impl.get();
    impl->worker_ = std::thread([raw] { raw->worker_main(); });
    progress(1.0);
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
  });
}

Result<std::vector<int32_t>> Engine::tokenize(std::string_view text) const {
  return tokenize(text, /*add_special=*/true, /*parse_special=*/true);
}

Result<std::vector<int32_t>> Engine::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  return guarded([&]() -> Result<std::vector<int32_t>> { return impl_->tokenizer->encode(text, add_special, parse_special); });
}

Result<std::string> Engine::detokenize(const std::vector<int32_t>& ids, bool render_special) const {
  return guarded([&]() -> Result<std::string> {
    const int64_t n_vocab = impl_->tokenizer->vocab_size();
    for (int32_t t : ids)
      if (t < 0 || t >= n_vocab)
        return invalid_argument("token id " + std::to_string(t) + " outside the vocabulary (" + std::to_string(n_vocab) + ")");
    return impl_->tokenizer->decode(ids, DecodeOptions{.render_special = render_special});
  });
}

Result<std::string> Engine::render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return guarded([&]() -> Result<std::string> {
    if (!impl_->chat) return impl_->chat_status;
    return impl_->chat->render(messages, add_generation_prompt);
  });
}

Result<std::string> Engine::render_chat_json(std::string_view conversation) const {
  return guarded([&]() -> Result<std::string> {
    if (!impl_->chat) return impl_->chat_status;
    return impl_->chat->render_json(conversation);
  });
}

ModelDescription Engine::model() const {
  const Impl& im = *impl_;
  const ModelInfo& info = im.model->info();
  ModelDescription d;
  d.architecture = info.architecture;
  d.name = info.name;
  d.n_vocab = info.n_vocab;
  d.n_ctx = im.max_context;
  d.n_ctx_train = info.n_ctx_train;
  d.n_embd = info.n_embd;
  d.n_layer = info.n_layer;
  d.n_head = info.n_head;
  d.n_head_kv = info.n_kv_heads;
  for (const TensorInfo& t : im.file->tensors()) {
    d.size_bytes += t.nbytes;
    int64_t n = 1;
    for (int k = 0; k < t.n_dims; ++k) n *= t.shape[k];
    d.n_params += n;
  }
  d.bos = im.tokenizer->bos_id();
  d.eos = im.tokenizer->eos_id();
  d.eot = im.tokenizer->eot_id();
  if (im.chat) d.chat_template = im.chat->name();
  d.file_type = file_type_name(*im.file);
  const Metadata& md = im.file->metadata();
  if (auto t = md.get_number("general.sampling.temp"); t && *t >= 0) d.default_temperature = static_cast<float>(*t);
  if (auto k = md.get_integer("general.sampling.top_k"); k && *k >= 0 && *k <= INT32_MAX) d.default_top_k = static_cast<int32_t>(*k);
  if (auto p = md.get_number("general.sampling.top_p"); p && *p >= 0 && *p <= 1) d.default_top_p = static_cast<float>(*p);
  return d;
}

Result<RequestId> Engine::submit(Request request) {
  return guarded([&]() -> Result<RequestId> {
    Impl& im = *impl_;
    const GenerationParams& p = request.params;
    const SamplingParams sp = to_sampling(p);
    if (Status s = sp.validate(); !s.is_ok()) return s;
    if (p.max_tokens < -1) return invalid_argument("max_tokens must be -1 (no limit) or at least 0");
    if (!(request.timeout_ms >= 0) || std::isinf(request.timeout_ms)) return invalid_argument("timeout_ms must be finite and not negative");
    if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
      return invalid_argument("top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "]");
    if (request.score.top_logprobs < 0 || request.score.top_logprobs > kMaxTopLogprobs)
      return invalid_argument("score.top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "]");
    if (request.score.from < -1) return invalid_argument("score.from must be -1 (off) or a prompt position");
    const int kinds = !request.prompt.empty() + !request.prompt_ids.empty() + !request.messages.empty();
    if (kinds > 1) return invalid_argument("give one prompt: text, token ids or messages, not several");
    std::vector<std::string> stops = p.stop;
    auto seq = std::make_unique<Impl::Seq>();
    seq->sched.budget_data = &seq->kv;
    if (!request.messages.empty()) {
      if (!im.chat) return im.chat_status;
      // The answer ends at the template's end of turn: its token, or (a hand-written format in a
      // vocabulary without its markers) its text as a stop string. A Jinja template's end of turn
      // is a guess from its output: only its token is trusted; end-of-generation tokens end it too.
      if (im.end_of_turn_token >= 0) seq->stop_token = im.end_of_turn_token;
      else if (!im.chat->is_jinja()) stops.push_back(im.chat->end_of_turn());
    }
    auto stop = StopMatcher::create(stops);
    if (!stop.ok()) return stop.status();

    seq->submitted = im.now();
    seq->arrived = Clock::now();
    if (!request.messages.empty() || !request.prompt.empty()) {
      Timer t;
      std::string rendered;
      if (!request.messages.empty()) {
        auto text = im.chat->render(request.messages, /*add_generation_prompt=*/true);
        if (!text.ok()) return text.status();
        rendered = std::move(text).value();
      }
      // A chat rendering is tokenized as the template expects: special tokens parsed, the BOS
      // added unless the template wrote it (then it is parsed as the token: never twice).
      const bool chat = !request.messages.empty();
      const bool add_special = chat ? !im.chat->starts_with_bos(rendered) : request.add_special;
      auto ids = im.tokenizer->encode(chat ? rendered : request.prompt, add_special, chat || request.parse_special);
      if (!ids.ok()) return ids.status();
      seq->sched.tokens = std::move(ids).value();
      std::lock_guard lock(im.mutex_);
      im.counters_.tokenize_ms += t.elapsed_ms();
    } else if (!request.prompt_ids.empty()) {
      seq->sched.tokens = request.prompt_ids;
    } else {
      return invalid_argument("the prompt is empty (no text, token ids or messages)");
    }
    const int64_t n_vocab = im.model->info().n_vocab;
    for (int32_t t : seq->sched.tokens)
      if (t < 0 || t >= n_vocab)
        return invalid_argument("prompt token id " + std::to_string(t) + " outside the vocabulary (" + std::to_string(n_vocab) + ")");
    seq->prompt_len = static_cast<int64_t>(seq->sched.tokens.size());
    if (seq->prompt_len == 0) return invalid_argument("the prompt is empty (no tokens)");
    // A request that generates needs a position for its first token beyond the prompt.
    const int64_t needed = seq->prompt_len + (p.max_tokens != 0 ? 1 : 0);
    if (needed > im.max_context)
      return out_of_range("the prompt has " + std::to_string(seq->prompt_len) + " tokens; max_context is " +
                          std::to_string(im.max_context));
    if (needed > im.pool_tokens)
      return out_of_range("the prompt has " + std::to_string(seq->prompt_len) + " tokens; the KV cache holds " +
                          std::to_string(im.pool_tokens) + " (raise kv_cache_bytes)");
    seq->max_new = p.max_tokens < 0 ? im.max_context : p.max_tokens;
    if (request.score.from >= 0) {
      seq->score_from = std::max<int64_t>(1, request.score.from);
      if (seq->score_from < seq->prompt_len) {
        const auto n_scored = static_cast<size_t>(seq->prompt_len - seq->score_from);
        seq->prompt_logprobs.resize(n_scored);
        if (request.score.logits) seq->prompt_logits.resize(n_scored * static_cast<size_t>(n_vocab));
      }
      // The scored rows are computed: the prefix cache may serve only what comes before them.
      seq->sched.cache_limit = seq->score_from;
    }
    seq->sampler.emplace(sp);
    seq->stop.emplace(std::move(stop).value());
    // Generated text continues the prompt: its first piece keeps its leading space.
    seq->detok.emplace(*im.tokenizer, DecodeOptions{.keep_leading_space = true});
    if (request.timeout_ms > 0)
      seq->deadline = seq->submitted + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(request.timeout_ms));
    seq->sched.priority = request.priority;
    seq->request = std::move(request);
    seq->metrics.prompt_tokens = seq->prompt_len;

    RequestId id;
    {
      std::lock_guard lock(im.mutex_);
      if (!im.accepting_) return cancelled("the engine is shutting down");
      if (static_cast<int64_t>(im.incoming_.size()) + im.queued_ >= im.config.max_waiting) {
        ++im.counters_.requests_rejected;
        return overloaded("the engine has " + std::to_string(im.config.max_waiting) + " requests waiting (max_waiting)");
      }
      id = im.next_id_++;
      seq->sched.id = id;
      seq->sched.arrival = im.next_arrival_++;
      Impl::Seq* raw = seq.get();
      im.requests_.emplace(id, std::move(seq));
      im.incoming_.push_back(raw);
      ++im.in_flight_;
    }
    im.work_.notify_one();
    return id;
  });
}

Status Engine::cancel(RequestId id) {
  Impl& im = *impl_;
  {
    std::lock_guard lock(im.mutex_);
    auto it = im.requests_.find(id);
    if (it == im.requests_.end()) return not_found("no request " + std::to_string(id));
    Impl::Seq* s = it->second.get();
    if (s->done || s->cancel_requested) return Status::ok();
    s->cancel_requested = true;
    im.cancels_.push_back(id);
  }
  im.work_.notify_one();
  return Status::ok();
}

Result<Delta> Engine::read(RequestId id, double timeout_ms) {
  Impl& im = *impl_;
  std::unique_lock lock(im.mutex_);
  INFER_ASSIGN_OR_RETURN(Impl::Seq* s, im.readable_locked(id));
  auto ready = [&] { return s->done || !s->pending.ids.empty() || !s->pending.text.empty(); };
  if (timeout_ms < 0) {
    s->changed.wait(lock, ready);
  } else {
    s->changed.wait_for(lock, std::chrono::duration<double, std::milli>(timeout_ms), ready);
  }
  Delta d = std::move(s->pending);
  s->pending = Delta{};
  d.finished = s->done;
  d.reason = s->reason;
  return d;
}

Result<Completion> Engine::wait(RequestId id) {
  Impl& im = *impl_;
  std::unique_lock lock(im.mutex_);
  INFER_ASSIGN_OR_RETURN(Impl::Seq* s, im.readable_locked(id));
  s->changed.wait(lock, [&] { return s->done; });
  Completion c;
  c.id = id;
  c.status = s->status;
  c.reason = s->reason;
  c.text = std::move(s->text);
  c.ids = std::move(s->ids);
  c.metrics = s->metrics;
  c.logprobs = std::move(s->logprobs);
  c.prompt_logprobs = std::move(s->prompt_logprobs);
  c.prompt_logits = std::move(s->prompt_logits);
  im.requests_.erase(id);
  return c;
}

Result<Completion> Engine::generate(Request request) {
  auto id = submit(std::move(request));
  if (!id.ok()) return id.status();
  return wait(*id);
}

void Engine::shutdown(bool finish_in_flight) {
  Impl& im = *impl_;
  {
    std::unique_lock lock(im.mutex_);
    im.accepting_ = false;
    if (!finish_in_flight) {
      for (auto& [id, s] : im.requests_)
        if (!s->done && !s->cancel_requested) {
          s->cancel_requested = true;
          im.cancels_.push_back(id);
        }
    }
    im.work_.notify_one();
    im.idle_.wait(lock, [&] { return im.in_flight_ == 0 || !im.worker_.joinable(); });
  }
  im.stop();
}

EngineStats Engine::stats() const {
  const Impl& im = *impl_;
  std::lock_guard lock(im.mutex_);
  EngineStats st = im.counters_;
  st.uptime_s = std::chrono::duration<double>(im.now() - im.started).count();
  st.running = im.running_;
  st.waiting = im.queued_ + static_cast<int64_t>(im.incoming_.size());
  if (st.uptime_s > 0) {
    st.prompt_tokens_per_s = static_cast<double>(st.computed_prompt_tokens) / st.uptime_s;
    st.generated_tokens_per_s = static_cast<double>(st.generated_tokens) / st.uptime_s;
  }
  st.prefix_hit_rate = st.prompt_tokens > 0 ? static_cast<double>(st.cached_prompt_tokens) / static_cast<double>(st.prompt_tokens) : 0.0;
  std::vector<double> ttft, tpot, e2e, queue;
  for (const RequestMetrics& m : im.recent_) {
    if (m.generated_tokens > 0) ttft.push_back(m.ttft_ms);
    if (m.generated_tokens > 1) tpot.push_back(m.tpot_ms);
    e2e.push_back(m.e2e_ms);
    queue.push_back(m.queue_ms);
  }
  st.ttft_ms = summarize_latencies(std::move(ttft));
  st.tpot_ms = summarize_latencies(std::move(tpot));
  st.e2e_ms = summarize_latencies(std::move(e2e));
  st.queue_ms = summarize_latencies(std::move(queue));
  if (st.generated_tokens > 0)
    st.cost_per_million_tokens = im.config.price_per_hour * (st.uptime_s / 3600.0) / (static_cast<double>(st.generated_tokens) / 1e6);
  return st;
}

void Engine::Impl::take_incoming() {
  std::vector<Seq*> fresh;
  {
    std::lock_guard lock(mutex_);
    fresh.swap(incoming_);
  }
  for (size_t i = 0; i < fresh.size(); ++i) {
    try {
      live_.reserve(live_.size() + 1);
      fresh[i]->sched.owner = fresh[i];
      scheduler->enqueue(&fresh[i]->sched);
      live_.push_back(fresh[i]);
    } catch (...) {
      // Out of memory: the rest wait for the next step, in order.
      std::lock_guard lock(mutex_);
      incoming_.insert(incoming_.begin(), fresh.begin() + static_cast<ptrdiff_t>(i), fresh.end());
      throw;
    }
  }
}

void Engine::Impl::emit_token(Seq* s, int32_t token, const std::string& text, bool finished, FinishReason reason,
                              const TokenLogprobs* logprobs) {
  s->text += text;
  if (token >= 0) s->ids.push_back(token);
  if (s->request.on_event) {
    StreamEvent ev;
    ev.id = s->sched.id;
    ev.token = token;
    ev.text = text;
    ev.finished = finished;
    ev.reason = reason;
    ev.logprobs = logprobs;
    // A host's callback that throws ends its own request (with an error), never the engine.
    try {
      s->request.on_event(ev);
    } catch (...) {
      s->callback_failed = true;
    }
  }
}

void Engine::Impl::finish(Seq* s, FinishReason reason, Status status) {
  s->finished_at = now();
  // What the detokenizer and the stop matcher still hold ends the text (nothing after a stop
  // string).
  std::string rest = s->stop->push(s->detok->flush()).text;
  rest += s->stop->flush();
  if (!rest.empty() && !s->request.detached) {
    std::lock_guard lock(mutex_);
    s->pending.text += rest;
  }
  emit_token(s, -1, rest, true, reason);
  scheduler->remove(&s->sched);
  live_.erase(std::find(live_.begin(), live_.end(), s));
  RequestMetrics& m = s->metrics;
  m.e2e_ms = ms_between(s->submitted, s->finished_at);
  m.queue_ms = s->scheduled_once ? ms_between(s->submitted, s->first_scheduled) : m.e2e_ms;
  m.generated_tokens = static_cast<int64_t>(s->ids.size());
  m.cached_tokens = s->sched.cached_tokens;
  m.preemptions = s->sched.preemptions;
  if (m.generated_tokens > 0) m.ttft_ms = ms_between(s->submitted, s->first_token);
  if (m.generated_tokens > 1)
    m.tpot_ms = ms_between(s->first_token, s->finished_at) / static_cast<double>(m.generated_tokens - 1);
  {
    std::lock_guard lock(mutex_);
    s->done = true;
    s->reason = reason;
    s->status = std::move(status);
    s->pending.finished = true;
    s->pending.reason = reason;
    if (reason == FinishReason::cancelled) ++counters_.requests_cancelled;
    else if (reason == FinishReason::error || reason == FinishReason::deadline) ++counters_.requests_failed;
    else ++counters_.requests_finished;
    counters_.prompt_tokens += m.prompt_tokens;
    counters_.cached_prompt_tokens += m.cached_tokens;
    recent_.push_back(m);
    while (static_cast<int>(recent_.size()) > config.metrics_window) recent_.pop_front();
    --in_flight_;
    publish_locked();
    s->changed.notify_all();
    // Nobody can be waiting on a detached request (read and wait refuse it): forget it now.
    if (s->request.detached) requests_.erase(s->sched.id);
  }
  idle_.notify_all();
}

void Engine::Impl::check_deadlines_and_cancels() {
  std::vector<RequestId> cancels;
  {
    std::lock_guard lock(mutex_);
    cancels.swap(cancels_);
  }
  for (RequestId id : cancels) {
    // Requests are in live_ from take_incoming() until they finish; a finished one is ignored.
    for (Seq* s : live_)
      if (s->sched.id == id) {
        finish(s, FinishReason::cancelled, cancelled("request " + std::to_string(id) + " was cancelled"));
        break;
      }
  }
  const auto t = now();
  std::vector<Seq*> late;
  for (Seq* s : live_)
    if (s->deadline && t >= *s->deadline) late.push_back(s);
  for (Seq* s : late)
    finish(s, FinishReason::deadline, deadline_exceeded("request " + std::to_string(s->sched.id) + " passed its deadline"));
}

bool Engine::Impl::step() {
  Timer t_schedule;
  scheduler->schedule(plan_);
  for (SchedSequence* f : plan_.failed) {
    finish(static_cast<Seq*>(f->owner), FinishReason::error,
           out_of_range("request " + std::to_string(f->id) + " needs more KV cache than the pool holds (" +
                        std::to_string(pool_tokens) + " positions; raise kv_cache_bytes)"));
  }
  for (const StepEntry& e : plan_.entries) step_seqs_.push_back(static_cast<Seq*>(e.seq->owner));
  if (plan_.entries.empty()) {
    std::lock_guard lock(mutex_);
    counters_.schedule_ms += t_schedule.elapsed_ms();
    counters_.preemptions = scheduler->preemptions();
    return false;
  }
  // The batch: each entry's rows. A row wants logits when it ends the known tokens (it samples)
  // or when it predicts a scored prompt token.
  batch_.clear();
  const auto t_now = now();
  for (size_t i = 0; i < plan_.entries.size(); ++i) {
    const StepEntry& e = plan_.entries[i];
    const Seq* s = static_cast<const Seq*>(e.seq->owner);
    batch_.sequences.push_back(BatchSequence(s->kv.kv));
    for (int64_t p = e.first; p < e.first + e.n; ++p) {
      const bool samples = e.wants_logits && p + 1 == e.first + e.n;
      const bool scores = s->score_from >= 0 && p + 1 >= s->score_from && p + 1 < s->prompt_len;
      batch_.add(e.seq->tokens[static_cast<size_t>(p)], static_cast<int32_t>(p), static_cast<int32_t>(i), samples || scores);
    }
  }
  const size_t n_vocab = static_cast<size_t>(model->info().n_vocab);
  const size_t logit_rows = static_cast<size_t>(batch_.logit_rows());
  // Grows only for scored prompts (at most max_batch_tokens rows), once.
  Status fs = Status::ok();
  if (auto out = backend->host_output(logit_rows * n_vocab); out.ok())
    logits_ = *out;
  else
    fs = out.status();
  for (Seq* s : live_)
    if (s->sched.running && !s->scheduled_once) {
      s->scheduled_once = true;
      s->first_scheduled = t_now;
    }
  const double schedule_ms = t_schedule.elapsed_ms();

  Timer t_forward;
  const int64_t step_number = counters_steps_++;
  if (hooks.before_forward) hooks.before_forward(*pool, step_number);
  if (fs.is_ok()) fs = model->forward(batch_, kv->view(), logits_, *backend);
  if (fs.is_ok()) fs = backend->synchronize();
  const double forward_ms = t_forward.elapsed_ms();
  int64_t prompt_rows = 0;
  for (const StepEntry& e : plan_.entries) e.seq->n_computed += e.n;
  if (!fs.is_ok()) {
    for (const StepEntry& e : plan_.entries) finish(static_cast<Seq*>(e.seq->owner), FinishReason::error, fs);
    return true;
  }
  if (kv->prefix_cache())
    for (const StepEntry& e : plan_.entries) kv->commit_full_blocks(static_cast<Seq*>(e.seq->owner)->kv, e.seq->tokens);

  // Rows with logits come in row order: each entry's scored rows, then its sampling row.
  double sample_ms = 0, detok_ms = 0;
  int64_t generated = 0;
  size_t logit_row = 0;
  std::vector<std::pair<Seq*, FinishReason>> ended;
  for (const StepEntry& e : plan_.entries) {
    Seq* s = static_cast<Seq*>(e.seq->owner);
    const int64_t prompt_part = std::max<int64_t>(0, std::min(e.first + e.n, s->prompt_len) - e.first);
    prompt_rows += prompt_part;
    for (int64_t p = e.first; p < e.first + e.n; ++p) {
      if (!(s->score_from >= 0 && p + 1 >= s->score_from && p + 1 < s->prompt_len)) continue;
      const std::span<const float> row(logits_ + logit_row * n_vocab, n_vocab);
      ++logit_row;
      // A preempted request computes these rows again, to the same values.
      const auto k = static_cast<size_t>(p + 1 - s->score_from);
      s->prompt_logprobs[k] = token_logprobs(row, s->sched.tokens[static_cast<size_t>(p + 1)], s->request.score.top_logprobs, top_scratch_);
      if (!s->prompt_logits.empty()) std::copy(row.begin(), row.end(), s->prompt_logits.begin() + static_cast<ptrdiff_t>(k * n_vocab));
    }
    if (!e.wants_logits) continue;
    const std::span<const float> row(logits_ + logit_row * n_vocab, n_vocab);
    ++logit_row;
    if (s->callback_failed) {
      ended.push_back({s, FinishReason::error});
      continue;
    }
    if (s->max_new == 0) {
      ended.push_back({s, FinishReason::length});
      continue;
    }
    Timer t_sample;
    const int32_t tok = s->sampler->sample(row, s->sched.tokens);
    sample_ms += t_sample.elapsed_ms();
    if (s->ids.empty()) s->first_token = now();
    if ((!s->request.params.ignore_eos && tokenizer->is_eog(tok)) || tok == s->stop_token) {
      ended.push_back({s, FinishReason::stop});
      continue;
    }
    const TokenLogprobs* lp = nullptr;
    if (s->request.params.logprobs) {
      s->logprobs.push_back(token_logprobs(row, tok, s->request.params.top_logprobs, top_scratch_));
      lp = &s->logprobs.back();
    }
    ++generated;
    s->sched.tokens.push_back(tok);
    Timer t_detok;
    const StopMatcher::Out out = s->stop->push(s->detok->push(tok));
    detok_ms += t_detok.elapsed_ms();
    if (!s->request.detached) {  // nobody reads a detached request's pending output
      std::lock_guard lock(mutex_);
      s->pending.ids.push_back(tok);
      s->pending.text += out.text;
      if (lp) s->pending.logprobs.push_back(*lp);
      s->changed.notify_all();
    }
    emit_token(s, tok, out.text, false, FinishReason::none, lp);
    if (s->callback_failed) ended.push_back({s, FinishReason::error});
    else if (out.stopped) ended.push_back({s, FinishReason::stop});
    else if (static_cast<int64_t>(s->ids.size()) >= s->max_new) ended.push_back({s, FinishReason::length});
    else if (static_cast<int64_t>(s->sched.tokens.size()) >= max_context) ended.push_back({s, FinishReason::context});
  }
  {
    // Counted before the requests that ended are released, so stats() after their wait() include
    // this step.
    std::lock_guard lock(mutex_);
    counters_.steps += 1;
    counters_.schedule_ms += schedule_ms;
    counters_.forward_ms += forward_ms;
    counters_.sample_ms += sample_ms;
    counters_.detokenize_ms += detok_ms;
    counters_.generated_tokens += generated;
    counters_.computed_prompt_tokens += prompt_rows;
    counters_.preemptions = scheduler->preemptions();
  }
  for (auto [s, reason] : ended)
    finish(s, reason,
           reason == FinishReason::error ? internal_error("request " + std::to_string(s->sched.id) + ": its on_event callback threw")
                                         : Status::ok());
  return true;
}

void Engine::Impl::fail_step(const Status& status) noexcept {
  for (Seq* s : step_seqs_) {
    // Compared, never dereferenced, until known live: an ended request may already be freed.
    if (std::find(live_.begin(), live_.end(), s) == live_.end()) continue;
    try {
      finish(s, FinishReason::error, status);
    } catch (...) {
      // finish() itself failed (no memory for the final event): drop the request's blocks and
      // mark it done so that nobody waits for it forever.
      try {
        scheduler->remove(&s->sched);
        live_.erase(std::find(live_.begin(), live_.end(), s));
        std::lock_guard lock(mutex_);
        s->done = true;
        s->reason = FinishReason::error;
        s->status = status;
        --in_flight_;
        s->changed.notify_all();
        if (s->request.detached) requests_.erase(s->sched.id);
      } catch (...) {
      }
    }
  }
  plan_.clear();
  idle_.notify_all();
}

void Engine::Impl::worker_main() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (live_.empty()) {
        if (incoming_.empty() && cancels_.empty() && !check_requested_) {
          worker_idle_ = true;
          idle_.notify_all();
          work_.wait(lock, [&] { return stop_worker_ || !incoming_.empty() || !cancels_.empty() || check_requested_; });
          if (stop_worker_ && incoming_.empty()) return;
        }
        // Gather a batch: an idle engine holds its first request up to batch_wait_ms (from its
        // submit) while more arrive, unless max_sequences of them are already there.
        if (config.batch_wait_ms > 0 && !stop_worker_ && !incoming_.empty()) {
          const auto until = incoming_.front()->arrived + std::chrono::duration_cast<Clock::duration>(
                                                                std::chrono::duration<double, std::milli>(config.batch_wait_ms));
          work_.wait_until(lock, until, [&] {
            return stop_worker_ || check_requested_ || !cancels_.empty() ||
                   static_cast<int>(incoming_.size()) >= config.max_sequences;
          });
        }
      }
      if (stop_worker_ && live_.empty() && incoming_.empty()) return;
      worker_idle_ = false;
    }
    // Nothing a step throws (a failed allocation, a pool task's exception, a bug) leaves the
    // worker: the step's requests end with the error and the engine goes on serving the rest.
    bool progressed = true;
    step_seqs_.clear();
    try {
      take_incoming();
      {
        std::unique_lock lock(mutex_);
        if (check_requested_) {
          std::vector<const KvSequence*> live;
          for (Seq* s : live_) live.push_back(&s->kv);
          check_result_ = kv->check(live);
          if (check_result_.empty()) check_result_ = scheduler->check();
          check_requested_ = false;
          check_done_ = true;
          check_cv_.notify_all();
        }
      }
      check_deadlines_and_cancels();
      progressed = step();
    } catch (const std::bad_alloc&) {
      fail_step(out_of_memory("out of memory in an engine step"));
    } catch (const std::exception& e) {
      fail_step(internal_error(std::string("an engine step failed: ") + e.what()));
    } catch (...) {
      fail_step(internal_error("an engine step failed"));
    }
    {
      std::lock_guard lock(mutex_);
      publish_locked();
    }
    if (!progressed && !live_.empty()) {
      // Nothing could run (every live request waits for blocks held by none): should not
      // happen; avoid spinning while it is looked into.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace infer
