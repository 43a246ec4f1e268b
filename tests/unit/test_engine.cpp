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
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <unistd.h>

#include "infer/engine.hpp"
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

TEST_CASE("weights quantized at load: batched output still equals each prompt alone", "[engine]") {
  Workload w;
  for (WeightType t : {WeightType::q8_0, WeightType::q4_0}) {
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
  bad.weight_type = static_cast<WeightType>(7);
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
  auto e = make_engine(c);
  std::mt19937 rng(4);
  auto id = e->submit(greedy(random_prompt(rng, 400), 50)).value();
  while (e->stats().steps == 0) std::this_thread::yield();  // its prefill has begun
  REQUIRE(e->cancel(id).is_ok());
  auto done = e->wait(id).value();
  CHECK(done.reason == FinishReason::cancelled);
  CHECK(done.status.code() == StatusCode::cancelled);
  CHECK(done.ids.empty());
  CHECK(e->cancel(id).code() == StatusCode::not_found);  // collected by wait()
  require_balanced(e->stats());
  REQUIRE(e->check_invariants().is_ok());
}

TEST_CASE("a deadline ends a request with deadline_exceeded", "[engine]") {
  EngineConfig c;
  c.max_batch_tokens = 1;
  auto e = make_engine(c);
  std::mt19937 rng(6);
  Request r = greedy(random_prompt(rng, 200), 100);
  r.timeout_ms = 5;
  auto done = e->generate(r).value();
  CHECK(done.reason == FinishReason::deadline);
  CHECK(done.status.code() == StatusCode::deadline_exceeded);
}

TEST_CASE("batch_wait_ms: an idle engine gathers requests before its first step", "[engine]") {
  EngineConfig c;
  c.batch_wait_ms = 200;
  c.max_sequences = 4;
  auto e = make_engine(c);
  std::mt19937 rng(12);
  // Alone, a request waits out the whole gathering time (the wait ends early only when
  // max_sequences requests are there).
  auto lone = e->generate(greedy(random_prompt(rng, 10), 2)).value();
  CHECK(lone.metrics.queue_ms >= 190.0);
  // Four submitted together fill max_sequences: the first step takes them all at once.
  const int64_t steps_before = e->stats().steps;  // the lone request's steps are all counted
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(e->submit(greedy(random_prompt(rng, 10), 2)).value());
  for (RequestId id : ids) REQUIRE(e->wait(id).value().status.is_ok());
  CHECK(e->stats().steps - steps_before == 2);  // one step of 4 prompts, one of 4 decodes
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
  // Admission control: with one sequence running and max_waiting 2 queued, more are refused.
  int overloaded = 0;
  std::vector<RequestId> ids;
  for (int i = 0; i < 20; ++i) {
    auto id = e->submit(greedy(random_prompt(rng, 30), 30));
    if (id.ok()) ids.push_back(*id);
    else if (id.status().code() == StatusCode::overloaded) ++overloaded;
  }
  CHECK(overloaded > 0);
  for (RequestId id : ids) CHECK(e->wait(id).ok());
  CHECK(e->stats().requests_rejected == overloaded);
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
