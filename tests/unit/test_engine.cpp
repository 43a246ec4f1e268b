// The Engine, differentially (as vLLM's tests are): a prompt's greedy tokens must be the same ids
// alone, in a batch of 16 mixed prompts, with its prefill chunked at any size, after being
// preempted, and with its prefix served from the cache; block accounting must balance after any
// mix of submits, cancels, preemptions and finishes; a stress test from 8 threads must end every
// request. The model is a tiny random Llama written to a temporary file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "engine/engine_testing.hpp"
#include "infer/engine.hpp"
#include "infer/log.hpp"
#include "tiny_llama.hpp"

using namespace infer;

namespace {

// A tiny model written to a temporary file (removed at exit).
struct ModelOnDisk {
  std::string path;
  explicit ModelOnDisk(test::TinyLlama spec, const std::string& name) {
    const auto bytes = spec.write();
    path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/infer-engine-test-" + name + "-" +
           std::to_string(::getpid()) + ".gguf";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~ModelOnDisk() { std::remove(path.c_str()); }
};

test::TinyLlama llama_spec() {
  test::TinyLlama spec;
  spec.n_vocab = 64;
  spec.n_ctx = 512;
  spec.seed = 77;
  return spec;
}

// Gemma 3 shape with an 8-position sliding window: 7 layers (0-4 and 6 windowed, 5 global), or
// 2 (both windowed: the model has no full-attention layer at all).
test::TinyLlama gemma_spec(int n_layer) {
  test::TinyLlama spec = llama_spec();
  spec.gemma3 = true;
  spec.sliding_window = 8;
  spec.n_layer = n_layer;
  spec.seed = 78;
  return spec;
}

const std::string& model_path() {
  static const ModelOnDisk model(llama_spec(), "llama");
  return model.path;
}

std::unique_ptr<Engine> make_engine(EngineConfig c = {}, const std::string& path = model_path()) {
  c.threads = c.threads ? c.threads : 2;
  auto e = Engine::create(path, c);
  REQUIRE(e.ok());
  return std::move(e).value();
}

std::vector<int32_t> random_prompt(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> tok(3, 63);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = tok(rng);
  return p;
}

Request greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;  // random weights: run to the limit so that every token is compared
  return r;
}

// 16 prompts of mixed lengths (some sharing a long prefix), 12-24 tokens each to generate.
struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> lengths;
  Workload() {
    std::mt19937 rng(5);
    const auto shared = random_prompt(rng, 40);
    for (int i = 0; i < 16; ++i) {
      auto p = random_prompt(rng, 3 + static_cast<size_t>(rng() % 70));
      if (i % 4 == 0) p.insert(p.begin(), shared.begin(), shared.end());
      prompts.push_back(p);
      lengths.push_back(12 + static_cast<int64_t>(rng() % 13));
    }
  }
};

// Every prompt alone, one after the other, on a fresh engine without prefix caching.
std::vector<std::vector<int32_t>> alone_outputs(const std::string& path) {
  Workload w;
  EngineConfig c;
  c.prefix_cache = false;
  auto e = make_engine(c, path);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    auto done = e->generate(greedy(w.prompts[i], w.lengths[i]));
    REQUIRE(done.ok());
    REQUIRE(done->status.is_ok());
    REQUIRE(done->ids.size() == static_cast<size_t>(w.lengths[i]));
    out.push_back(done->ids);
  }
  return out;
}

const std::vector<std::vector<int32_t>>& reference_outputs() {
  static const std::vector<std::vector<int32_t>> ref = alone_outputs(model_path());
  return ref;
}

// A prompt's greedy ids from a fresh engine, collected with generate().
std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int64_t n) {
  auto e = make_engine();
  auto done = e->generate(greedy(prompt, n));
  REQUIRE(done.ok());
  return done->ids;
}

// All 16 submitted at once; returns each request's ids and the engine's stats.
std::vector<std::vector<int32_t>> run_batched(Engine& e, EngineStats* stats = nullptr) {
  Workload w;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    auto id = e.submit(greedy(w.prompts[i], w.lengths[i]));
    REQUIRE(id.ok());
    ids.push_back(*id);
  }
  std::vector<std::vector<int32_t>> out;
  for (RequestId id : ids) {
    auto done = e.wait(id);
    REQUIRE(done.ok());
    INFO(done->status.message());
    REQUIRE(done->status.is_ok());
    out.push_back(done->ids);
  }
  REQUIRE(e.check_invariants().is_ok());
  if (stats) *stats = e.stats();
  return out;
}

void require_balanced(const EngineStats& s) {
  CHECK(s.kv_blocks_used == 0);
  CHECK(s.kv_blocks_cached + s.kv_blocks_free == s.kv_blocks_total);
}

// A clock the test moves: each forward pass takes exactly `step_ms` of it.
struct TestClock {
  std::atomic<int64_t> now_us{1'000'000};
  EngineTesting::Hooks hooks(int64_t step_us) {
    EngineTesting::Hooks h;
    h.clock = [this] { return std::chrono::steady_clock::time_point(std::chrono::microseconds(now_us.load())); };
    h.before_forward = [this, step_us](ThreadPool&, int64_t) { now_us += step_us; };
    return h;
  }
};

std::unique_ptr<Engine> make_engine_with(EngineConfig c, EngineTesting::Hooks hooks, const std::string& path = model_path()) {
  c.threads = c.threads ? c.threads : 2;
  auto e = EngineTesting::create(path, c, std::move(hooks));
  REQUIRE(e.ok());
  return std::move(e).value();
}

// Holds the worker inside a step's hook until release(): what the test does meanwhile cannot
// race the engine.
struct StepGate {
  std::mutex m;
  std::condition_variable cv;
  bool held = false, open = false;
  int64_t hold_at = 0;
  EngineTesting::Hooks hooks() {
    EngineTesting::Hooks h;
    h.before_forward = [this](ThreadPool&, int64_t step) {
      if (step != hold_at) return;
      std::unique_lock lock(m);
      held = true;
      cv.notify_all();
      cv.wait(lock, [&] { return open; });
    };
    return h;
  }
  void wait_held() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return held; });
  }
  void release() {
    std::lock_guard lock(m);
    open = true;
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("greedy tokens are the same alone and in a batch of 16 mixed prompts", "[engine]") {
  const auto& ref = reference_outputs();
  EngineConfig c;
  c.prefix_cache = false;
  auto e = make_engine(c);
  EngineStats st;
  CHECK(run_batched(*e, &st) == ref);
  CHECK(st.steps > 0);
  require_balanced(e->stats());
}

TEST_CASE("greedy tokens are the same with the prefill chunked at any size", "[engine]") {
  const auto& ref = reference_outputs();
  for (int64_t budget : {1, 3, 7, 33}) {
    INFO("max_batch_tokens " << budget);
    EngineConfig c;
    c.max_batch_tokens = budget;
    c.prefix_cache = false;
    auto e = make_engine(c);
    CHECK(run_batched(*e) == ref);
  }
}

TEST_CASE("greedy tokens are the same after preemption, with a pool that fits one sequence", "[engine]") {
  const auto& ref = reference_outputs();
  // Blocks of 4 positions; the longest request needs 40 + 72 + 24 < 140 positions.
  for (uint64_t blocks : {36, 60}) {
    INFO("pool of " << blocks << " blocks");
    EngineConfig c;
    c.block_size = 4;
    // K and V, 2 layers, 2 KV heads of 8 dims, F16: 2 * 2 * 2 * 4 * 8 * 2 bytes per block.
    c.kv_cache_bytes = blocks * (2 * 2 * 2 * 4 * 8 * 2);
    c.max_batch_tokens = 64;
    auto e = make_engine(c);
    EngineStats st;
    CHECK(run_batched(*e, &st) == ref);
    CHECK(st.preemptions > 0);
    require_balanced(st);
  }
}

TEST_CASE("greedy tokens are the same when the prefix comes from the cache", "[engine][prefix]") {
  const auto& ref = reference_outputs();
  auto e = make_engine();  // prefix caching on
  Workload w;
  // The first pass fills the cache; in the second, prompts sharing the 40-token prefix hit it.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < w.prompts.size(); ++i) {
      auto done = e->generate(greedy(w.prompts[i], w.lengths[i]));
      REQUIRE(done.ok());
      CHECK(done->ids == ref[i]);
      if (pass == 1 && i % 4 == 0) CHECK(done->metrics.cached_tokens >= 32);
      if (pass == 0 && i == 0) CHECK(done->metrics.cached_tokens == 0);
    }
  }
  // Batched, with the cache warm.
  CHECK(run_batched(*e) == ref);
  const EngineStats st = e->stats();
  CHECK(st.cached_prompt_tokens > 0);
  CHECK(st.prefix_hit_rate > 0.0);
  require_balanced(st);
  REQUIRE(e->check_invariants().is_ok());
}

// 16 prompts behind one 50-token system prompt (3 full blocks of 16, then 2 tokens of a 4th),
// each with 3 to 12 tokens of its own: at most 62 tokens, so the 4th block is never full and the
// cache can serve exactly 48 positions of each.
struct SharedPrefixBurst {
  std::vector<std::vector<int32_t>> prompts;
  static constexpr int64_t kCached = 48;
  static constexpr int64_t kGenerate = 6;
  SharedPrefixBurst() {
    std::mt19937 rng(31);
    const auto system = random_prompt(rng, 50);
    for (int i = 0; i < 16; ++i) {
      auto p = system;
      const auto own = random_prompt(rng, 3 + rng() % 10);
      p.insert(p.end(), own.begin(), own.end());
      prompts.push_back(p);
    }
  }
  // Each prompt alone, on an engine without prefix caching.
  std::vector<std::vector<int32_t>> alone() const {
    EngineConfig c;
    c.prefix_cache = false;
    auto e = make_engine(c);
    std::vector<std::vector<int32_t>> out;
    for (const auto& p : prompts) out.push_back(e->generate(greedy(p, kGenerate)).value().ids);
    return out;
  }
};

struct BurstResult {
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> cached;  // each request's cached_tokens
  int hits = 0;                 // requests served a prefix from the cache
  EngineStats stats;
};

// Submits the burst; `between` runs after the first submit (to hold the worker while the others
// arrive), `after` once all are submitted.
BurstResult run_burst(Engine& e, const SharedPrefixBurst& b, const std::function<void()>& between = {},
                      const std::function<void()>& after = {}) {
  std::vector<RequestId> ids;
  for (size_t i = 0; i < b.prompts.size(); ++i) {
    ids.push_back(e.submit(greedy(b.prompts[i], SharedPrefixBurst::kGenerate)).value());
    if (i == 0 && between) between();
  }
  if (after) after();
  BurstResult r;
  for (RequestId id : ids) {
    auto done = e.wait(id).value();
    REQUIRE(done.status.is_ok());
    r.ids.push_back(done.ids);
    r.cached.push_back(done.metrics.cached_tokens);
    r.hits += done.metrics.cached_tokens > 0;
  }
  r.stats = e.stats();
  REQUIRE(e.check_invariants().is_ok());
  return r;
}

TEST_CASE("16 prompts behind one system prompt compute it once: exactly 15 cache hits, same tokens", "[engine][prefix]") {
  const SharedPrefixBurst burst;
  const auto alone = burst.alone();
  int64_t prompt_tokens = 0;
  for (const auto& p : burst.prompts) prompt_tokens += static_cast<int64_t>(p.size());
  auto check_once = [&](const BurstResult& r) {
    CHECK(r.ids == alone);
    CHECK(r.hits == 15);
    CHECK(r.cached[0] == 0);  // the first computes the system prompt ...
    for (size_t i = 1; i < r.cached.size(); ++i) CHECK(r.cached[i] == SharedPrefixBurst::kCached);  // ... once
    CHECK(r.stats.cached_prompt_tokens == 15 * SharedPrefixBurst::kCached);
    CHECK(r.stats.computed_prompt_tokens == prompt_tokens - 15 * SharedPrefixBurst::kCached);
    require_balanced(r.stats);
  };
  SECTION("all 16 in the queue before the first step") {
    EngineConfig c;
    c.batch_wait_ms = 600'000;  // the first step waits for max_sequences = 16 requests
    auto e = make_engine(c);
    check_once(run_burst(*e, burst));
  }
  SECTION("15 arrive while the first is in the middle of its prompt") {
    EngineConfig c;
    c.max_batch_tokens = 16;  // the first computes 16 prompt positions a step
    StepGate gate;
    gate.hold_at = 1;         // held after 16 of its positions, before the next 16
    auto e = make_engine_with(c, gate.hooks());
    check_once(run_burst(*e, burst, [&] { gate.wait_held(); }, [&] { gate.release(); }));
  }
  SECTION("15 arrive while the first computes its last chunk with room to spare") {
    EngineConfig c;
    c.max_batch_tokens = 40;  // 40 + the rest (13-22 rows) of the first: the others could start in step 1
    StepGate gate;
    gate.hold_at = 0;
    auto e = make_engine_with(c, gate.hooks());
    check_once(run_burst(*e, burst, [&] { gate.wait_held(); }, [&] { gate.release(); }));
  }
}

TEST_CASE("without prefix-aware admission, prompts admitted together compute the shared prefix again", "[engine][prefix]") {
  // The same burst, all queued before the first step: 512 rows admit the first 8 (at most 62
  // rows each) in step 0, none of them finding anything cached.
  const SharedPrefixBurst burst;
  EngineConfig c;
  c.batch_wait_ms = 600'000;
  EngineTesting::Hooks hooks;
  hooks.prefix_aware_admission = false;
  auto e = make_engine_with(c, hooks);
  const BurstResult r = run_burst(*e, burst);
  CHECK(r.ids == burst.alone());
  CHECK(r.hits < 15);
  CHECK(r.hits <= 16 - 8);
  CHECK(r.cached[0] == 0);
  CHECK(r.cached[7] == 0);
}

TEST_CASE("priority preemption: a higher-priority request preempts the running one, only when enabled", "[engine]") {
  std::mt19937 rng(41);
  const auto low_prompt = random_prompt(rng, 20), high_prompt = random_prompt(rng, 12);
  const auto ref_low = reference_greedy(low_prompt, 30), ref_high = reference_greedy(high_prompt, 5);
  for (bool on : {false, true}) {
    INFO("priority_preemption " << on);
    EngineConfig c;
    c.max_sequences = 1;
    c.priority_preemption = on;
    StepGate gate;
    gate.hold_at = 5;  // the low-priority request is decoding
    auto e = make_engine_with(c, gate.hooks());
    std::mutex m;
    std::vector<std::string> order;
    auto req = [&](const std::vector<int32_t>& p, int64_t n, int priority, const std::string& name) {
      Request r = greedy(p, n);
      r.priority = priority;
      r.on_event = [&m, &order, name](const StreamEvent& ev) {
        if (!ev.finished) return;
        std::lock_guard lock(m);
        order.push_back(name);
      };
      return r;
    };
    const RequestId low = e->submit(req(low_prompt, 30, 0, "low")).value();
    gate.wait_held();
    const RequestId high = e->submit(req(high_prompt, 5, 3, "high")).value();
    gate.release();
    auto done_low = e->wait(low).value();
    auto done_high = e->wait(high).value();
    CHECK(done_low.ids == ref_low);  // recomputed after its preemption, to the same tokens
    CHECK(done_high.ids == ref_high);
    CHECK(order == (on ? std::vector<std::string>{"high", "low"} : std::vector<std::string>{"low", "high"}));
    CHECK(done_low.metrics.preemptions == (on ? 1 : 0));
    CHECK(e->stats().preemptions == (on ? 1 : 0));
    require_balanced(e->stats());
  }
}

TEST_CASE("sliding-window models: the same tokens alone, batched and chunked", "[engine][window]") {
  for (int n_layer : {7, 2}) {
    INFO(n_layer << " layers");
    const ModelOnDisk model(gemma_spec(n_layer), "gemma" + std::to_string(n_layer));
    const auto ref = alone_outputs(model.path);
    // Prompts of up to 112 tokens cross the 8-position window many times.
    for (int64_t budget : {512, 5}) {
      INFO("max_batch_tokens " << budget);
      EngineConfig c;
      c.max_batch_tokens = budget;
      c.block_size = 4;  // windowed blocks are handed back as the window passes
      auto e = make_engine(c, model.path);
      EngineStats st;
      CHECK(run_batched(*e, &st) == ref);
      require_balanced(st);
    }
  }
}

TEST_CASE("sliding-window models reuse a shared system prompt and a conversation, with the tokens computed without the cache",
          "[engine][window][prefix]") {
  for (int n_layer : {7, 2}) {
    const ModelOnDisk model(gemma_spec(n_layer), "gemma_prefix" + std::to_string(n_layer));
    for (int bs : {4, 16}) {
      INFO(n_layer << " layers, blocks of " << bs);
      EngineConfig off;
      off.block_size = bs;
      off.prefix_cache = false;
      EngineConfig on = off;
      on.prefix_cache = true;
      auto e_off = make_engine(off, model.path);
      auto e_on = make_engine(on, model.path);
      const auto both = [&](const std::vector<int32_t>& prompt) {
        auto a = e_off->generate(greedy(prompt, 12));
        auto b = e_on->generate(greedy(prompt, 12));
        REQUIRE(a.ok());
        REQUIRE(b.ok());
        REQUIRE(a->status.is_ok());
        REQUIRE(b->status.is_ok());
        CHECK(a->metrics.cached_tokens == 0);
        CHECK(b->ids == a->ids);  // bit-identical logits: the same greedy tokens
        return std::pair{b->ids, b->metrics.cached_tokens};
      };
      // A 60-token system prompt (the window of 8 passes it many times) and three user turns.
      std::mt19937 rng(21);
      const auto system = random_prompt(rng, 60);
      for (int i = 0; i < 3; ++i) {
        auto prompt = system;
        const auto user = random_prompt(rng, 5 + 3 * static_cast<size_t>(i));
        prompt.insert(prompt.end(), user.begin(), user.end());
        const auto [ids, cached] = both(prompt);
        // The whole blocks of the system prompt, from the second request on.
        CHECK(cached == (i == 0 ? 0 : 60 / bs * bs));
      }
      // A conversation: each turn's prompt is the last prompt, its answer and a new message. All
      // but the answer's last token were computed (and committed) in the last turn.
      auto prompt = random_prompt(rng, 30);
      int64_t expect = 0;
      for (int turn = 0; turn < 3; ++turn) {
        const auto [ids, cached] = both(prompt);
        CHECK(cached == expect);
        const int64_t computed = static_cast<int64_t>(prompt.size() + ids.size()) - 1;
        expect = computed / bs * bs;
        prompt.insert(prompt.end(), ids.begin(), ids.end());
        const auto more = random_prompt(rng, 7);
        prompt.insert(prompt.end(), more.begin(), more.end());
      }
      REQUIRE(e_on->check_invariants().is_ok());
      const EngineStats st = e_on->stats();
      CHECK(st.cached_prompt_tokens > 0);
      require_balanced(st);
    }
  }
}

TEST_CASE("weights quantized at load: batched output still equals each prompt alone", "[engine]") {
  Workload w;
  for (WeightType t : {WeightType::q8_0, WeightType::q4_0, WeightType::int8, WeightType::fp8, WeightType::fp8_tensor,
                       WeightType::fp8_dynamic, WeightType::int4, WeightType::w8a16}) {
    EngineConfig c;
    c.weight_type = t;
    c.prefix_cache = false;
    auto e = make_engine(c);
    std::vector<std::vector<int32_t>> alone;
    for (size_t i = 0; i < w.prompts.size(); ++i) alone.push_back(e->generate(greedy(w.prompts[i], w.lengths[i])).value().ids);
    CHECK(run_batched(*e) == alone);
    // Quantized weights change the model: its tokens are not the F32 model's (random weights
    // are far from a trained model's, so Q4_0 moves them).
    if (t == WeightType::q4_0) CHECK(alone != reference_outputs());
  }
  EngineConfig bad;
  bad.weight_type = static_cast<WeightType>(9);
  CHECK(Engine::create(model_path(), bad).status().code() == StatusCode::invalid_argument);
}

TEST_CASE("a multi-turn conversation reuses the previous turn's KV", "[engine][prefix]") {
  auto e = make_engine();
  std::mt19937 rng(9);
  auto prompt = random_prompt(rng, 50);
  int64_t cached = 0;
  for (int turn = 0; turn < 3; ++turn) {
    auto done = e->generate(greedy(prompt, 10));
    REQUIRE(done.ok());
    if (turn > 0) CHECK(done->metrics.cached_tokens >= cached);
    cached = static_cast<int64_t>(prompt.size()) / 16 * 16 - 16;
    // The next prompt extends this one with the answer and a new user message.
    prompt.insert(prompt.end(), done->ids.begin(), done->ids.end());
    const auto more = random_prompt(rng, 7);
    prompt.insert(prompt.end(), more.begin(), more.end());
  }
}

TEST_CASE("seeded sampling gives the same tokens alone and batched", "[engine]") {
  Workload w;
  auto sampled = [&](size_t i) {
    Request r = greedy(w.prompts[i], w.lengths[i]);
    r.params.temperature = 0.9f;
    r.params.seed = 1000 + i;
    return r;
  };
  auto e = make_engine();
  std::vector<std::vector<int32_t>> alone;
  for (size_t i = 0; i < 6; ++i) alone.push_back(e->generate(sampled(i)).value().ids);
  std::vector<RequestId> ids;
  for (size_t i = 0; i < 6; ++i) ids.push_back(e->submit(sampled(i)).value());
  for (size_t i = 0; i < 6; ++i) CHECK(e->wait(ids[i]).value().ids == alone[i]);
}

TEST_CASE("streaming: callbacks and read() deliver every token once, then the end", "[engine]") {
  auto e = make_engine();
  std::mt19937 rng(3);
  Request r = greedy(random_prompt(rng, 20), 16);
  std::mutex m;
  std::vector<int32_t> streamed;
  int finals = 0;
  r.on_event = [&](const StreamEvent& ev) {
    std::lock_guard lock(m);
    if (ev.finished) ++finals;
    else streamed.push_back(ev.token);
  };
  auto id = e->submit(r).value();
  std::vector<int32_t> pulled;
  for (;;) {
    auto d = e->read(id, 1000);
    REQUIRE(d.ok());
    pulled.insert(pulled.end(), d->ids.begin(), d->ids.end());
    if (d->finished) {
      CHECK(d->reason == FinishReason::length);
      break;
    }
  }
  auto done = e->wait(id).value();
  std::lock_guard lock(m);
  CHECK(streamed == done.ids);
  CHECK(pulled == done.ids);
  CHECK(finals == 1);
  CHECK(done.metrics.generated_tokens == 16);
  CHECK(done.metrics.ttft_ms > 0);
  CHECK(done.metrics.e2e_ms >= done.metrics.ttft_ms);
}

TEST_CASE("detached requests stream to their callback and are forgotten when they end", "[engine]") {
  auto e = make_engine();
  std::mt19937 rng(13);
  std::mutex m;
  std::condition_variable all_done;
  std::map<RequestId, std::vector<int32_t>> streamed;
  int ended = 0;
  std::vector<RequestId> ids;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 20; ++i) {
    prompts.push_back(random_prompt(rng, 5 + static_cast<size_t>(i)));
    Request r = greedy(prompts.back(), 8);
    r.detached = true;
    r.on_event = [&](const StreamEvent& ev) {
      std::lock_guard lock(m);
      if (ev.finished) {
        if (++ended == 20) all_done.notify_all();
      } else {
        streamed[ev.id].push_back(ev.token);
      }
    };
    ids.push_back(e->submit(std::move(r)).value());
  }
  {
    // A detached request that is surely still running (its first token's callback holds the
    // worker until the checks are done) cannot be read or waited on.
    std::promise<void> checked, running;
    std::shared_future<void> go = checked.get_future().share();
    Request r = greedy(random_prompt(rng, 4), 2);
    r.detached = true;
    r.on_event = [&running, go](const StreamEvent& ev) {
      if (ev.token >= 0 && ev.finished == false && go.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        running.set_value();
        go.wait();
      }
    };
    const RequestId held = e->submit(std::move(r)).value();
    running.get_future().wait();
    CHECK(e->wait(held).status().code() == StatusCode::invalid_argument);
    CHECK(e->read(held, 0).status().code() == StatusCode::invalid_argument);
    checked.set_value();
  }
  {
    std::unique_lock lock(m);
    all_done.wait(lock, [&] { return ended == 20; });
  }
  // Forgotten once ended (the final event comes just before: give the worker its step back).
  e->shutdown();
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(e->wait(ids[i]).status().code() == StatusCode::not_found);
    CHECK(e->cancel(ids[i]).code() == StatusCode::not_found);
    // The same tokens as the prompt gets when collected normally.
    CHECK(streamed[ids[i]] == reference_greedy(prompts[i], 8));
  }
  CHECK(e->stats().requests_finished == 21);  // with the held one
}

TEST_CASE("cancel ends a request within a step, also in the middle of its prompt", "[engine]") {
  EngineConfig c;
  c.max_batch_tokens = 1;  // a 400-token prompt takes 400 steps
  StepGate gate;
  gate.hold_at = 10;
  auto e = make_engine_with(c, gate.hooks());
  std::mt19937 rng(4);
  auto id = e->submit(greedy(random_prompt(rng, 400), 50)).value();
  gate.wait_held();  // in the middle of its prompt
  REQUIRE(e->cancel(id).is_ok());
  gate.release();
  auto done = e->wait(id).value();
  CHECK(done.reason == FinishReason::cancelled);
  CHECK(done.status.code() == StatusCode::cancelled);
  CHECK(done.ids.empty());
  CHECK(e->cancel(id).code() == StatusCode::not_found);  // collected by wait()
  CHECK(e->stats().steps == 11);  // the cancel took effect before the step after the held one
  require_balanced(e->stats());
  REQUIRE(e->check_invariants().is_ok());
}

TEST_CASE("a deadline ends a request with deadline_exceeded, in the step its time runs out", "[engine]") {
  EngineConfig c;
  c.max_batch_tokens = 1;  // one prompt token per step: 1 ms of the test clock each
  TestClock clock;
  auto e = make_engine_with(c, clock.hooks(1000));
  std::mt19937 rng(6);
  Request r = greedy(random_prompt(rng, 200), 100);
  r.timeout_ms = 5;
  auto done = e->generate(r).value();
  CHECK(done.reason == FinishReason::deadline);
  CHECK(done.status.code() == StatusCode::deadline_exceeded);
  CHECK(done.ids.empty());
  CHECK(e->stats().steps == 5);  // checked before each step: the sixth never starts
  CHECK(done.metrics.e2e_ms == 5.0);
  // Without a deadline the same request runs to its length.
  r.timeout_ms = 0;
  r.params.max_tokens = 3;
  auto full = e->generate(r).value();
  CHECK(full.reason == FinishReason::length);
  CHECK(full.metrics.ttft_ms == 200.0);  // 200 prompt steps of 1 ms
  CHECK(full.metrics.tpot_ms == 1.0);
  require_balanced(e->stats());
}

TEST_CASE("batch_wait_ms: an idle engine gathers requests before its first step", "[engine]") {
  std::mt19937 rng(12);
  {
    // Alone, a request waits out the whole gathering time (the wait ends early only when
    // max_sequences requests are there): a lower bound the wait guarantees, not a race.
    EngineConfig c;
    c.batch_wait_ms = 50;
    auto e = make_engine(c);
    auto lone = e->generate(greedy(random_prompt(rng, 10), 2)).value();
    CHECK(lone.metrics.queue_ms >= 50.0);
  }
  // Four submitted together fill max_sequences: the first step takes them all at once (the
  // gathering time is far longer than four submits take).
  EngineConfig c;
  c.batch_wait_ms = 600'000;
  c.max_sequences = 4;
  auto e = make_engine(c);
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(e->submit(greedy(random_prompt(rng, 10), 2)).value());
  for (RequestId id : ids) REQUIRE(e->wait(id).value().status.is_ok());
  CHECK(e->stats().steps == 2);  // one step of 4 prompts, one of 4 decodes
}

TEST_CASE("a step that throws ends only its own requests, and the engine keeps serving", "[engine][failure]") {
  std::mt19937 rng(21);
  const auto first = random_prompt(rng, 30), second = random_prompt(rng, 25), later = random_prompt(rng, 12);
  const auto ref_second = reference_greedy(second, 10), ref_later = reference_greedy(later, 10);
  struct Case {
    const char* what;
    StatusCode code;
    std::function<void(ThreadPool&)> fail;
  };
  const std::vector<Case> cases = {
      {"a failed allocation", StatusCode::out_of_memory, [](ThreadPool&) { throw std::bad_alloc(); }},
      {"a thread-pool task's exception", StatusCode::internal,
       [](ThreadPool& pool) {
         pool.parallel_for(64, [](size_t begin, size_t) {
           if (begin == 0) throw std::runtime_error("injected");
         }, 1);
       }},
  };
  for (const Case& k : cases) {
    INFO(k.what);
    // One sequence at a time: the first request alone is in step 3 when it fails; the second
    // waits in the queue and must not notice.
    EngineConfig c;
    c.max_sequences = 1;
    EngineTesting::Hooks hooks;
    hooks.before_forward = [&k](ThreadPool& pool, int64_t step) {
      if (step == 3) k.fail(pool);
    };
    auto e = make_engine_with(c, hooks);
    const RequestId a = e->submit(greedy(first, 10)).value();
    const RequestId b = e->submit(greedy(second, 10)).value();
    auto done_a = e->wait(a).value();
    CHECK(done_a.reason == FinishReason::error);
    CHECK(done_a.status.code() == k.code);
    CHECK(done_a.ids.size() == 3);  // steps 0-2 (the prompt, two decodes) sampled a token each
    auto done_b = e->wait(b).value();
    INFO(done_b.status.message());
    CHECK(done_b.status.is_ok());
    CHECK(done_b.ids == ref_second);
    CHECK(e->generate(greedy(later, 10)).value().ids == ref_later);
    const EngineStats st = e->stats();
    CHECK(st.requests_failed == 1);
    require_balanced(st);
    REQUIRE(e->check_invariants().is_ok());
  }
}

TEST_CASE("a callback that throws ends its own request with an error, not the engine", "[engine][failure]") {
  auto e = make_engine();
  std::mt19937 rng(22);
  Request r = greedy(random_prompt(rng, 10), 20);
  r.on_event = [](const StreamEvent& ev) {
    if (ev.token >= 0) throw std::runtime_error("host bug");
  };
  auto done = e->generate(r).value();
  CHECK(done.reason == FinishReason::error);
  CHECK(done.status.code() == StatusCode::internal);
  CHECK(done.ids.size() == 1);
  const auto p = random_prompt(rng, 10);
  CHECK(e->generate(greedy(p, 6)).value().ids == reference_greedy(p, 6));
  require_balanced(e->stats());
}

TEST_CASE("a request that outgrows the whole KV pool ends with out_of_range instead of stalling", "[engine]") {
  EngineConfig c;
  c.block_size = 4;
  c.kv_cache_tokens = 64;
  auto e = make_engine(c);
  const int64_t pool = e->stats().kv_blocks_total * 4;
  REQUIRE(pool >= 20);
  REQUIRE(pool < 400);
  std::mt19937 rng(51);
  auto done = e->generate(greedy(random_prompt(rng, 10), 400)).value();  // fits at submit, not as it grows
  CHECK(done.reason == FinishReason::error);
  CHECK(done.status.code() == StatusCode::out_of_range);
  // Every position of the pool was computed; the token sampled at the last one needs one more.
  CHECK(static_cast<int64_t>(done.ids.size()) == pool - 10 + 1);
  require_balanced(e->stats());
  // The engine goes on serving.
  CHECK(e->generate(greedy(random_prompt(rng, 10), 5)).value().status.is_ok());
}

TEST_CASE("bad requests fail at submit with a clear status", "[engine]") {
  EngineConfig c;
  c.max_context = 64;
  c.max_waiting = 2;
  c.max_sequences = 1;
  auto e = make_engine(c);
  CHECK(e->submit(Request{}).status().code() == StatusCode::invalid_argument);  // empty prompt
  Request bad = greedy({1, 2, 999}, 4);
  CHECK(e->submit(bad).status().code() == StatusCode::invalid_argument);  // id outside the vocabulary
  std::mt19937 rng(8);
  CHECK(e->submit(greedy(random_prompt(rng, 64), 4)).status().code() == StatusCode::out_of_range);
  Request temp = greedy({1, 2}, 4);
  temp.params.temperature = -1;
  CHECK(e->submit(temp).status().code() == StatusCode::invalid_argument);
  Request two = greedy({1, 2}, 4);
  two.prompt = "text as well";
  CHECK(e->submit(two).status().code() == StatusCode::invalid_argument);  // two prompts
  Request lp = greedy({1, 2}, 4);
  lp.params.top_logprobs = 21;
  CHECK(e->submit(lp).status().code() == StatusCode::invalid_argument);
}

TEST_CASE("admission control: with max_waiting requests queued, submit fails overloaded", "[engine]") {
  EngineConfig c;
  c.max_waiting = 2;
  c.max_sequences = 1;
  StepGate gate;
  auto e = make_engine_with(c, gate.hooks());
  std::mt19937 rng(8);
  // The first request runs (held in its first step); two more may wait; the rest are refused.
  std::vector<RequestId> ids{e->submit(greedy(random_prompt(rng, 30), 5)).value()};
  gate.wait_held();
  int overloaded = 0;
  for (int i = 0; i < 20; ++i) {
    auto id = e->submit(greedy(random_prompt(rng, 30), 5));
    if (id.ok()) ids.push_back(*id);
    else if (id.status().code() == StatusCode::overloaded) ++overloaded;
  }
  gate.release();
  CHECK(ids.size() == 3);
  CHECK(overloaded == 18);
  for (RequestId id : ids) CHECK(e->wait(id).value().status.is_ok());
  CHECK(e->stats().requests_rejected == 18);
}

TEST_CASE("higher priority is admitted first", "[engine]") {
  EngineConfig c;
  c.max_sequences = 1;
  auto e = make_engine(c);
  std::mt19937 rng(10);
  std::mutex m;
  std::vector<std::string> order;
  bool a_started = false;  // touched by the worker only
  auto req = [&](const std::string& name, int priority, int64_t n) {
    Request r = greedy(random_prompt(rng, 10), n);
    r.priority = priority;
    r.on_event = [&, name](const StreamEvent& ev) {
      if (ev.finished) {
        std::lock_guard lock(m);
        order.push_back(name);
      }
    };
    return r;
  };
  // "a" holds the only sequence slot: its first token's callback (on the worker) says it runs,
  // then waits until both others are queued, so neither is admitted before the scheduler has
  // seen both.
  std::promise<void> a_runs, both_queued;
  std::shared_future<void> queued = both_queued.get_future().share();
  Request first = req("a", 0, 40);
  first.on_event = [&, queued, inner = first.on_event](const StreamEvent& ev) {
    if (ev.token >= 0 && !std::exchange(a_started, true)) {
      a_runs.set_value();
      queued.wait();
    }
    inner(ev);
  };
  auto a = e->submit(std::move(first)).value();
  a_runs.get_future().wait();
  auto low = e->submit(req("low", 0, 5)).value();
  auto high = e->submit(req("high", 5, 5)).value();
  both_queued.set_value();
  for (RequestId id : {a, low, high}) REQUIRE(e->wait(id).ok());
  CHECK(order == std::vector<std::string>{"a", "high", "low"});
}

TEST_CASE("shutdown finishes or cancels what is in flight, and later submits fail", "[engine]") {
  auto e = make_engine();
  std::mt19937 rng(11);
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(e->submit(greedy(random_prompt(rng, 20), 200)).value());
  e->shutdown(/*finish_in_flight=*/false);
  for (RequestId id : ids) {
    auto done = e->wait(id);
    REQUIRE(done.ok());
    CHECK((done->reason == FinishReason::cancelled || done->reason == FinishReason::length));
  }
  CHECK(e->submit(greedy({1, 2, 3}, 4)).status().code() == StatusCode::cancelled);
}

TEST_CASE("stress: 500 requests from 8 threads with cancellations and a small pool all end", "[engine][stress]") {
  EngineConfig c;
  c.block_size = 4;
  c.kv_cache_bytes = 80 * (2 * 2 * 2 * 4 * 8 * 2);  // 80 blocks of 4 positions
  c.max_sequences = 8;
  c.max_batch_tokens = 48;
  c.max_waiting = 100000;
  auto e = make_engine(c);
  // (Catch2's assertions are not thread-safe: the threads count, the test checks afterwards.)
  std::atomic<int> finished{0}, cancelled{0}, failed{0}, submitted{0}, refused{0}, lost{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::vector<RequestId> mine;
      for (int i = 0; i < 500 / 8 + (t < 500 % 8 ? 1 : 0); ++i) {
        Request r = greedy(random_prompt(rng, 1 + rng() % 60), static_cast<int64_t>(rng() % 30));
        r.priority = static_cast<int>(rng() % 3);
        r.params.temperature = (rng() % 2) ? 0.0f : 0.7f;
        auto id = e->submit(std::move(r));
        if (!id.ok()) {
          ++refused;
          continue;
        }
        ++submitted;
        mine.push_back(*id);
        if (rng() % 5 == 0) (void)e->cancel(mine[rng() % mine.size()]);
      }
      for (RequestId id : mine) {
        auto done = e->wait(id);
        if (!done.ok()) {
          ++lost;
          continue;
        }
        if (done->reason == FinishReason::cancelled) ++cancelled;
        else if (done->status.is_ok()) ++finished;
        else ++failed;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(refused == 0);
  CHECK(lost == 0);
  CHECK(submitted == 500);
  CHECK(finished + cancelled + failed == 500);
  CHECK(failed == 0);
  CHECK(cancelled > 0);
  const EngineStats st = e->stats();
  CHECK(st.running == 0);
  CHECK(st.waiting == 0);
  require_balanced(st);
  REQUIRE(e->check_invariants().is_ok());
}

// log-softmax in float64, the reference for the engine's log-probabilities.
std::vector<double> log_softmax64(const float* row, size_t n) {
  double max = row[0];
  for (size_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(row[i]));
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(row[i]) - max);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(row[i]) - max - std::log(z);
  return out;
}

TEST_CASE("prompt scoring: each prompt token's log-probability matches a float64 log-softmax of its logits", "[engine][score]") {
  auto e = make_engine();
  std::mt19937 rng(31);
  const auto prompt = random_prompt(rng, 40);
  Request r = greedy(prompt, 0);
  r.score.from = 10;
  r.score.top_logprobs = 5;
  r.score.logits = true;
  auto done = e->generate(r).value();
  REQUIRE(done.status.is_ok());
  CHECK(done.ids.empty());
  CHECK(done.reason == FinishReason::length);
  const size_t n_vocab = 64;
  REQUIRE(done.prompt_logprobs.size() == 30);
  REQUIRE(done.prompt_logits.size() == 30 * n_vocab);
  for (size_t k = 0; k < 30; ++k) {
    const TokenLogprobs& lp = done.prompt_logprobs[k];
    CHECK(lp.token == prompt[10 + k]);
    const auto ref = log_softmax64(done.prompt_logits.data() + k * n_vocab, n_vocab);
    CHECK(std::abs(lp.logprob - ref[static_cast<size_t>(lp.token)]) < 1e-5);
    REQUIRE(lp.top.size() == 5);
    for (size_t i = 0; i < 5; ++i) {
      CHECK(std::abs(lp.top[i].logprob - ref[static_cast<size_t>(lp.top[i].token)]) < 1e-5);
      if (i > 0) CHECK(lp.top[i - 1].logprob >= lp.top[i].logprob);
    }
    // The top entry is the most likely token of the reference.
    CHECK(ref[static_cast<size_t>(lp.top[0].token)] == *std::max_element(ref.begin(), ref.end()));
  }
  // Scoring is not served from the cache: the same prompt again gives the same numbers, even
  // though its blocks are now cached, and chunked the same.
  EngineConfig c;
  c.max_batch_tokens = 7;
  auto chunked = make_engine(c);
  (void)chunked->generate(greedy(prompt, 1)).value();  // fills the prefix cache
  auto again = chunked->generate(r).value();
  REQUIRE(again.prompt_logprobs.size() == 30);
  for (size_t k = 0; k < 30; ++k) CHECK(again.prompt_logprobs[k].logprob == done.prompt_logprobs[k].logprob);
  CHECK(again.prompt_logits == done.prompt_logits);
}

TEST_CASE("generated tokens' logprobs equal the prompt scores of the same text", "[engine][score]") {
  auto e = make_engine();
  std::mt19937 rng(32);
  const auto prompt = random_prompt(rng, 20);
  Request r = greedy(prompt, 12);
  r.params.logprobs = true;
  r.params.top_logprobs = 3;
  std::vector<double> streamed;
  r.on_event = [&](const StreamEvent& ev) {
    if (ev.logprobs) streamed.push_back(ev.logprobs->logprob);
  };
  auto gen = e->generate(r).value();
  REQUIRE(gen.logprobs.size() == 12);
  std::vector<int32_t> full = prompt;
  full.insert(full.end(), gen.ids.begin(), gen.ids.end());
  Request s = greedy(full, 0);
  s.score.from = static_cast<int64_t>(prompt.size());
  auto scored = e->generate(s).value();
  REQUIRE(scored.prompt_logprobs.size() == 12);
  for (size_t i = 0; i < 12; ++i) {
    CHECK(gen.logprobs[i].token == gen.ids[i]);
    CHECK(gen.logprobs[i].logprob <= 0.0f);
    // Greedy picks the most likely token: the top alternative is the token itself.
    CHECK(gen.logprobs[i].top.at(0).token == gen.ids[i]);
    CHECK(gen.logprobs[i].logprob == scored.prompt_logprobs[i].logprob);
    CHECK(streamed.at(i) == gen.logprobs[i].logprob);
  }
}

TEST_CASE("chat messages render with the template and generate as the rendered text does", "[engine][chat]") {
  EngineConfig c;
  c.chat_template = "chatml";
  auto e = make_engine(c);
  const std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hi"}};
  auto text = e->render_chat(chat);
  REQUIRE(text.ok());
  CHECK(*text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(e->model().chat_template == "chatml");
  Request by_messages;
  by_messages.messages = chat;
  by_messages.params.temperature = 0;
  by_messages.params.max_tokens = 8;
  Request by_text = by_messages;
  by_text.messages.clear();
  by_text.prompt = *text;
  // The tiny vocabulary has no <|im_end|> token: the end of turn is a stop string for both.
  by_text.params.stop = {"<|im_end|>"};
  auto a = e->generate(by_messages).value();
  auto b = e->generate(by_text).value();
  CHECK(a.ids == b.ids);
  CHECK(a.metrics.prompt_tokens == b.metrics.prompt_tokens);
  CHECK(e->render_chat({{"robot", "x"}}).status().code() == StatusCode::invalid_argument);

  // Without a template in the file and none configured, messages fail with the reason.
  auto plain = make_engine();
  CHECK(plain->model().chat_template.empty());
  Request m;
  m.messages = chat;
  CHECK(plain->submit(m).status().code() == StatusCode::not_found);
  CHECK(plain->render_chat(chat).status().code() == StatusCode::not_found);
  EngineConfig bad;
  bad.chat_template = "vicuna";
  CHECK(Engine::create(model_path(), bad).status().code() == StatusCode::invalid_argument);
  const auto names = chat_template_names();
  CHECK(std::find(names.begin(), names.end(), "chatml") != names.end());
}

TEST_CASE("tokenize and detokenize round-trip, with the options submit uses", "[engine]") {
  auto e = make_engine();
  auto with_bos = e->tokenize("hello world", true, true).value();
  auto without = e->tokenize("hello world", false, true).value();
  REQUIRE(!with_bos.empty());
  CHECK(with_bos.front() == e->model().bos);
  CHECK(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()) == without);
  // Generated text is the detokenized ids (this vocabulary's pieces carry no leading space).
  std::mt19937 rng(34);
  auto gen = e->generate(greedy(random_prompt(rng, 8), 10)).value();
  CHECK(e->detokenize(gen.ids).value() == gen.text);
  CHECK(!gen.text.empty());
  CHECK(e->detokenize({1, 9999}).status().code() == StatusCode::invalid_argument);
  // A text prompt is tokenized exactly so.
  Request r;
  r.prompt = "hello world";
  r.params.max_tokens = 0;
  CHECK(e->generate(r).value().metrics.prompt_tokens == static_cast<int64_t>(with_bos.size()));
  r.add_special = false;
  CHECK(e->generate(r).value().metrics.prompt_tokens == static_cast<int64_t>(without.size()));
}

TEST_CASE("kv_type picks the KV element type: f32 blocks take twice the bytes of f16 ones", "[engine]") {
  CHECK(std::string(kv_type_name(KvType::f16)) == "f16");
  CHECK(std::string(kv_type_name(KvType::f32)) == "f32");
  CHECK(std::string(kv_type_name(KvType::bf16)) == "bf16");
  CHECK(std::string(kv_type_name(KvType::q8_0)) == "q8_0");
  CHECK(std::string(kv_type_name(KvType::fp8)) == "fp8");
  CHECK(std::string(kv_type_name(static_cast<KvType>(9))).empty());
  EngineConfig c;
  c.kv_cache_bytes = 1 << 20;
  c.block_size = 16;
  // 2 layers x 2 KV heads x 8 dims (llama_spec): K and V of a 16-position block are
  // 2 * 2 * 2 * 16 * 8 elements, 2048 bytes in F16 and 4096 in F32.
  const int64_t f16_blocks = make_engine(c)->stats().kv_blocks_total;
  CHECK(f16_blocks == (1 << 20) / 2048);
  c.kv_type = KvType::f32;
  auto e = make_engine(c);
  CHECK(e->stats().kv_blocks_total == (1 << 20) / 4096);
  std::mt19937 rng(3);
  auto done = e->generate(greedy(random_prompt(rng, 20), 4));
  REQUIRE(done.ok());
  CHECK(done->status.is_ok());
  CHECK(done->ids.size() == 4);
  c.kv_type = KvType::bf16;
  CHECK(make_engine(c)->stats().kv_blocks_total == f16_blocks);
  // Q8_0 needs whole 32-element blocks per head row: this model's heads have 8 dimensions.
  c.kv_type = KvType::q8_0;
  const auto refused = Engine::create(model_path(), c);
  CHECK(refused.status().code() == StatusCode::invalid_argument);
  CHECK(refused.status().message().find("multiple of 32") != std::string::npos);
  c.kv_type = static_cast<KvType>(9);
  CHECK(Engine::create(model_path(), c).status().code() == StatusCode::invalid_argument);
}

TEST_CASE("bf16, q8_0 and fp8 KV caches: q8_0 takes 17/32 of f16's bytes and fp8 half, and greedy tokens are the same alone, batched, chunked and from the prefix cache",
          "[engine][prefix]") {
  // Heads of 32 dimensions: one Q8_0 block per row (34 bytes against 64 in F16); heads of 64: a
  // rotated Q8_0 cache (kv_rotation).
  for (int head_dim : {32, 64}) {
    test::TinyLlama spec = llama_spec();
    spec.n_embd = 4 * head_dim;
    spec.n_ff = 96;
    spec.seed = 80;
    const ModelOnDisk model(spec, "head" + std::to_string(head_dim));
    for (KvType type : head_dim == 32 ? std::vector<KvType>{KvType::bf16, KvType::q8_0, KvType::fp8} : std::vector<KvType>{KvType::q8_0}) {
      INFO(kv_type_name(type) << " head " << head_dim);
      EngineConfig c;
      c.kv_cache_bytes = 4 << 20;
      c.kv_type = type;
      EngineConfig f16 = c;
      f16.kv_type = KvType::f16;
      const int64_t f16_blocks = make_engine(f16, model.path)->stats().kv_blocks_total;
      CHECK(make_engine(c, model.path)->stats().kv_blocks_total ==
            (type == KvType::q8_0 ? f16_blocks * 32 / 17 : type == KvType::fp8 ? f16_blocks * 2 : f16_blocks));
      // Each prompt alone on a fresh engine without the prefix cache ...
      Workload w;
      std::vector<std::vector<int32_t>> alone;
      {
        EngineConfig a = c;
        a.prefix_cache = false;
        auto e = make_engine(a, model.path);
        for (size_t i = 0; i < w.prompts.size(); ++i) alone.push_back(e->generate(greedy(w.prompts[i], w.lengths[i])).value().ids);
      }
      // ... then all 16 at once, chunked, with the shared prefix computed once and reused.
      for (int64_t budget : {512, 7}) {
        EngineConfig b = c;
        b.max_batch_tokens = budget;
        auto e = make_engine(b, model.path);
        EngineStats st;
        CHECK(run_batched(*e, &st) == alone);
        CHECK(st.cached_prompt_tokens > 0);
      }
    }
  }
}

TEST_CASE("load progress rises to 1 and kv_cache_tokens sizes the pool in positions", "[engine]") {
  EngineConfig c;
  std::vector<double> seen;
  c.on_load_progress = [&](double f) { seen.push_back(f); };
  c.kv_cache_tokens = 64;
  c.block_size = 16;
  c.max_sequences = 1;
  auto e = make_engine(c);
  REQUIRE(seen.size() >= 3);
  CHECK(seen.front() == 0.0);
  CHECK(seen.back() == 1.0);
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  CHECK(e->stats().kv_blocks_total == 4);
  std::mt19937 rng(33);
  CHECK(e->submit(greedy(random_prompt(rng, 63), 1)).ok());
  CHECK(e->submit(greedy(random_prompt(rng, 64), 1)).status().code() == StatusCode::out_of_range);
  CHECK(e->submit(greedy(random_prompt(rng, 64), 0)).ok());  // scoring needs no position beyond the prompt
  const ModelDescription d = e->model();
  CHECK(d.n_layer == 2);
  CHECK(d.n_params > 0);
  CHECK(d.size_bytes > 0);
}

namespace {
struct LogCapture {
  std::mutex mutex;
  std::vector<std::string> warnings;
  static void sink(LogLevel level, const char* message, void* self) {
    auto* c = static_cast<LogCapture*>(self);
    std::lock_guard lock(c->mutex);
    if (level >= LogLevel::warn) c->warnings.emplace_back(message);
  }
};
}  // namespace

TEST_CASE("compute threads beyond the hardware's are clamped to it, with a warning", "[engine]") {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  LogCapture log;
  set_log_sink(&LogCapture::sink, &log);
  EngineConfig c;
  c.threads = hw + 998;
  std::atomic<int> pool_size{0};
  EngineTesting::Hooks hooks;
  hooks.before_forward = [&](ThreadPool& pool, int64_t) { pool_size = pool.size(); };
  auto e = EngineTesting::create(model_path(), c, std::move(hooks));
  set_log_sink(nullptr, nullptr);
  REQUIRE(e.ok());
  auto done = (*e)->generate(greedy({1, 5, 9}, 2));
  REQUIRE(done.ok());
  CHECK(done->status.is_ok());
  CHECK(pool_size == hw);
  std::lock_guard lock(log.mutex);
  REQUIRE(log.warnings.size() == 1);
  CHECK(log.warnings[0].find(std::to_string(hw + 998)) != std::string::npos);
  CHECK(log.warnings[0].find("hardware threads") != std::string::npos);
}

TEST_CASE("decoding past several attention chunks with one KV head: logprobs equal the prompt scores, with 1 or 2 threads",
          "[engine][score]") {
  // One KV head and 2 threads: each generated token's attention is split by context chunk over the
  // threads and folded (the prompt's rows are not); 1 thread computes it whole.
  test::TinyLlama spec = llama_spec();
  spec.n_kv_heads = 1;
  spec.n_ctx = 1536;
  spec.seed = 79;
  const ModelOnDisk model(spec, "one-kv-head");
  std::mt19937 rng(33);
  const auto prompt = random_prompt(rng, 1100);
  std::vector<std::vector<float>> runs;
  for (int threads : {2, 1}) {
    EngineConfig c;
    c.threads = threads;
    auto e = make_engine(c, model.path);
    Request r = greedy(prompt, 8);
    r.params.logprobs = true;
    auto gen = e->generate(r).value();
    REQUIRE(gen.status.is_ok());
    REQUIRE(gen.logprobs.size() == 8);
    std::vector<int32_t> full = prompt;
    full.insert(full.end(), gen.ids.begin(), gen.ids.end());
    Request s = greedy(full, 0);
    s.score.from = static_cast<int64_t>(prompt.size());
    auto scored = e->generate(s).value();
    REQUIRE(scored.prompt_logprobs.size() == 8);
    std::vector<float> lp;
    for (size_t i = 0; i < 8; ++i) {
      INFO(threads << " threads, token " << i);
      CHECK(gen.logprobs[i].logprob == scored.prompt_logprobs[i].logprob);
      lp.push_back(gen.logprobs[i].logprob);
    }
    runs.push_back(lp);
  }
  CHECK(runs[0] == runs[1]);
}
