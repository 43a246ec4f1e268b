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
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/status_macros.hpp"
#include "core/thread_pool.hpp"
#include "core/timer.hpp"
#include "format/model_file.hpp"
#include "kv/kv_manager.hpp"
#include "model/batch.hpp"
#include "model/model.hpp"
#include "sample/sampler.hpp"
#include "sample/stop_strings.hpp"
#include "sched/scheduler.hpp"
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
    SchedSequence sched;
    Request request;
    std::optional<Sampler> sampler;
    std::optional<StopMatcher> stop;
    std::optional<IncrementalDetokenizer> detok;
    int64_t prompt_len = 0;
    int64_t max_new = 0;       // generated tokens allowed
    Clock::time_point submitted, first_scheduled, first_token, finished_at;
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
  std::optional<Scheduler> scheduler;
  std::unique_ptr<ThreadPool> pool;
  int64_t max_context = 0;
  int64_t pool_tokens = 0;     // positions the full-attention pool holds
  Clock::time_point started;

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
  std::vector<float> logits_;
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
  void take_incoming();
  void finish(Seq* s, FinishReason reason, Status status);
  void emit_token(Seq* s, int32_t token, const std::string& text, bool finished, FinishReason reason);
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
    for (Impl::Seq* s : im.live_) live.push_back(&s->sched.kv);
    const std::string r = im.kv->check(live);
    return r.empty() ? Status::ok() : internal_error(r);
  }
  im.check_requested_ = true;
  im.check_done_ = false;
  im.work_.notify_one();
  im.check_cv_.wait(lock, [&] { return im.check_done_; });
  return im.check_result_.empty() ? Status::ok() : internal_error(im.check_result_);
}

Engine::~Engine() {
  if (impl_) shutdown(false);
}

Result<std::unique_ptr<Engine>> Engine::create(const std::string& model_path, const EngineConfig& config) {
  if (config.max_batch_tokens <= 0 || config.max_sequences <= 0 || config.max_waiting < 0 || config.block_size <= 0 ||
      config.batch_wait_ms < 0 || config.max_context < 0 || config.metrics_window <= 0 || config.price_per_hour < 0)
    return invalid_argument("EngineConfig: max_batch_tokens, max_sequences and block_size must be positive; "
                            "max_waiting, batch_wait_ms, max_context and price_per_hour not negative");
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  auto file = ModelFile::open(model_path);
  if (!file.ok()) return file.status();
  impl->file = std::make_shared<const ModelFile>(std::move(file).value());
  auto tok = load_tokenizer(*impl->file);
  if (!tok.ok()) return tok.status();
  impl->tokenizer = std::move(tok).value();
  LoadOptions load;
  if (config.weight_type == WeightType::q8_0) load.weight_type = DType::q8_0;
  else if (config.weight_type == WeightType::q4_0) load.weight_type = DType::q4_0;
  else if (config.weight_type != WeightType::keep) return invalid_argument("EngineConfig: unknown weight_type");
  auto model = load_model(impl->file, load);
  if (!model.ok()) return model.status();
  impl->model = std::move(model).value();
  const ModelInfo& info = impl->model->info();
  if (info.n_vocab != impl->tokenizer->vocab_size())
    return malformed_file(model_path + ": vocabulary size mismatch between the tokenizer (" +
                          std::to_string(impl->tokenizer->vocab_size()) + ") and the model (" + std::to_string(info.n_vocab) + ")");
  const int64_t model_ctx = std::min<int64_t>(info.n_ctx_train > 0 ? info.n_ctx_train : 4096, 4096);
  impl->max_context = config.max_context > 0 ? config.max_context : model_ctx;

  KvCacheConfig kvc = impl->model->kv_config(config.kv_cache_bytes, config.block_size, config.kv_f32 ? DType::f32 : DType::f16);
  kvc.max_sequences = config.max_sequences;
  kvc.max_step_tokens = static_cast<int>(std::min<int64_t>(config.max_batch_tokens, INT32_MAX));
  auto kv = KvCacheManager::create(kvc, info.fingerprint, config.prefix_cache);
  if (!kv.ok()) return kv.status().with_context("EngineConfig.kv_cache_bytes");
  impl->kv.emplace(std::move(kv).value());
  // A sequence's length is bounded by the full-attention pool; a model whose layers are all
  // windowed keeps only a window per sequence, so only max_context bounds it.
  impl->pool_tokens = impl->kv->stats().total_blocks > 0 ? impl->kv->stats().total_blocks * config.block_size : impl->max_context;
  impl->scheduler.emplace(SchedulerConfig{config.max_batch_tokens, config.max_sequences}, *impl->kv);
  impl->pool = std::make_unique<ThreadPool>(config.threads);
  impl->logits_.resize(static_cast<size_t>(config.max_sequences) * static_cast<size_t>(info.n_vocab));
  impl->started = Clock::now();
  Impl* raw = impl.get();
  impl->worker_ = std::thread([raw] { raw->worker_main(); });
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<std::vector<int32_t>> Engine::tokenize(std::string_view text) const {
  return impl_->tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/true);
}

ModelDescription Engine::model() const {
  const ModelInfo& info = impl_->model->info();
  return {info.architecture, info.name, info.n_vocab, impl_->max_context};
}

Result<RequestId> Engine::submit(Request request) {
  Impl& im = *impl_;
  const GenerationParams& p = request.params;
  const SamplingParams sp = to_sampling(p);
  if (Status s = sp.validate(); !s.is_ok()) return s;
  if (p.max_tokens < -1) return invalid_argument("max_tokens must be -1 (no limit) or at least 0");
  if (request.timeout_ms < 0) return invalid_argument("timeout_ms must not be negative");
  auto stop = StopMatcher::create(p.stop);
  if (!stop.ok()) return stop.status();

  auto seq = std::make_unique<Impl::Seq>();
  seq->submitted = Clock::now();
  if (request.prompt_ids.empty()) {
    if (request.prompt.empty()) return invalid_argument("the prompt is empty (neither text nor token ids)");
    Timer t;
    auto ids = im.tokenizer->encode(request.prompt, /*add_special=*/true, /*parse_special=*/true);
    if (!ids.ok()) return ids.status();
    seq->sched.tokens = std::move(ids).value();
    std::lock_guard lock(im.mutex_);
    im.counters_.tokenize_ms += t.elapsed_ms();
  } else {
    seq->sched.tokens = request.prompt_ids;
  }
  const int64_t n_vocab = im.model->info().n_vocab;
  for (int32_t t : seq->sched.tokens)
    if (t < 0 || t >= n_vocab)
      return invalid_argument("prompt token id " + std::to_string(t) + " outside the vocabulary (" + std::to_string(n_vocab) + ")");
  seq->prompt_len = static_cast<int64_t>(seq->sched.tokens.size());
  if (seq->prompt_len == 0) return invalid_argument("the prompt is empty (no tokens)");
  if (seq->prompt_len >= im.max_context)
    return out_of_range("the prompt has " + std::to_string(seq->prompt_len) + " tokens; max_context is " +
                        std::to_string(im.max_context));
  if (seq->prompt_len + 1 > im.pool_tokens)
    return out_of_range("the prompt has " + std::to_string(seq->prompt_len) + " tokens; the KV cache holds " +
                        std::to_string(im.pool_tokens) + " (raise kv_cache_bytes)");
  seq->max_new = p.max_tokens < 0 ? im.max_context : p.max_tokens;
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
  st.uptime_s = std::chrono::duration<double>(Clock::now() - im.started).count();
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
  for (Seq* s : fresh) {
    s->sched.owner = s;
    scheduler->enqueue(&s->sched);
    live_.push_back(s);
  }
}

void Engine::Impl::emit_token(Seq* s, int32_t token, const std::string& text, bool finished, FinishReason reason) {
  s->text += text;
  if (token >= 0) s->ids.push_back(token);
  if (s->request.on_event) {
    StreamEvent ev;
    ev.id = s->sched.id;
    ev.token = token;
    ev.text = text;
    ev.finished = finished;
    ev.reason = reason;
    s->request.on_event(ev);
  }
}

void Engine::Impl::finish(Seq* s, FinishReason reason, Status status) {
  s->finished_at = Clock::now();
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
  const auto now = Clock::now();
  std::vector<Seq*> late;
  for (Seq* s : live_)
    if (s->deadline && now >= *s->deadline) late.push_back(s);
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
  if (plan_.entries.empty()) {
    std::lock_guard lock(mutex_);
    counters_.schedule_ms += t_schedule.elapsed_ms();
    counters_.preemptions = scheduler->preemptions();
    return false;
  }
  // The batch: each entry's rows, the last one wanting logits when the chunk ends the known tokens.
  batch_.clear();
  const auto now = Clock::now();
  for (size_t i = 0; i < plan_.entries.size(); ++i) {
    const StepEntry& e = plan_.entries[i];
    batch_.sequences.push_back(BatchSequence(e.seq->kv.kv));
    for (int64_t p = e.first; p < e.first + e.n; ++p)
      batch_.add(e.seq->tokens[static_cast<size_t>(p)], static_cast<int32_t>(p), static_cast<int32_t>(i),
                 e.wants_logits && p + 1 == e.first + e.n);
  }
  for (Seq* s : live_)
    if (s->sched.running && !s->scheduled_once) {
      s->scheduled_once = true;
      s->first_scheduled = now;
    }
  const double schedule_ms = t_schedule.elapsed_ms();

  Timer t_forward;
  const Status fs = model->forward(batch_, kv->view(), logits_.data(), *pool);
  const double forward_ms = t_forward.elapsed_ms();
  int64_t prompt_rows = 0;
  for (const StepEntry& e : plan_.entries) e.seq->n_computed += e.n;
  if (!fs.is_ok()) {
    for (const StepEntry& e : plan_.entries) finish(static_cast<Seq*>(e.seq->owner), FinishReason::error, fs);
    return true;
  }
  if (kv->prefix_cache())
    for (const StepEntry& e : plan_.entries) kv->commit_full_blocks(e.seq->kv, e.seq->tokens);

  // Sample the rows that want logits, in entry order (the order of the logits).
  double sample_ms = 0, detok_ms = 0;
  int64_t generated = 0;
  size_t logit_row = 0;
  std::vector<std::pair<Seq*, FinishReason>> ended;
  for (const StepEntry& e : plan_.entries) {
    Seq* s = static_cast<Seq*>(e.seq->owner);
    const int64_t prompt_part = std::max<int64_t>(0, std::min(e.first + e.n, s->prompt_len) - e.first);
    prompt_rows += prompt_part;
    if (!e.wants_logits) continue;
    const std::span<const float> row(logits_.data() + logit_row * static_cast<size_t>(model->info().n_vocab),
                                     static_cast<size_t>(model->info().n_vocab));
    ++logit_row;
    if (s->max_new == 0) {
      ended.push_back({s, FinishReason::length});
      continue;
    }
    Timer t_sample;
    const int32_t tok = s->sampler->sample(row, s->sched.tokens);
    sample_ms += t_sample.elapsed_ms();
    if (s->ids.empty()) s->first_token = Clock::now();
    if (!s->request.params.ignore_eos && tokenizer->is_eog(tok)) {
      ended.push_back({s, FinishReason::stop});
      continue;
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
      s->changed.notify_all();
    }
    emit_token(s, tok, out.text, false, FinishReason::none);
    if (out.stopped) ended.push_back({s, FinishReason::stop});
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
  for (auto [s, reason] : ended) finish(s, reason, Status::ok());
  return true;
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
          const auto until = incoming_.front()->submitted + std::chrono::duration_cast<Clock::duration>(
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
    take_incoming();
    {
      std::unique_lock lock(mutex_);
      if (check_requested_) {
        std::vector<const KvSequence*> live;
        for (Seq* s : live_) live.push_back(&s->sched.kv);
        check_result_ = kv->check(live);
        check_requested_ = false;
        check_done_ = true;
        check_cv_.notify_all();
      }
    }
    check_deadlines_and_cancels();
    const bool progressed = step();
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
