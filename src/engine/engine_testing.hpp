// Test hooks of the Engine: a controllable clock and a hook before each step's forward pass, so
// that engine tests decide time and inject failures instead of racing the wall clock.
//
//   std::atomic<int64_t> now_us{0};
//   EngineTesting::Hooks hooks;
//   hooks.clock = [&] { return std::chrono::steady_clock::time_point(std::chrono::microseconds(now_us.load())); };
//   hooks.before_forward = [&](ThreadPool&, int64_t step) { now_us += 1000; };   // 1 ms per step
//   auto engine = EngineTesting::create(path, config, hooks);
//
// Not part of the public API: tests include it from src/.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/thread_pool.hpp"
#include "infer/engine.hpp"

namespace infer {

struct EngineTesting {
  struct Hooks {
    // The engine's clock for deadlines and request metrics (the gathering wait of batch_wait_ms
    // keeps the real clock); empty: std::chrono::steady_clock.
    std::function<std::chrono::steady_clock::time_point()> clock;
    // Called on the worker before each step's forward pass, with the engine's compute pool and
    // the step's number (0, 1, ...); may throw, as a failed allocation or a failed pool task
    // would, to test that the engine survives it.
    std::function<void(ThreadPool& pool, int64_t step)> before_forward;
    // false: the scheduler admits a prompt even while another sequence is still computing the
    // full blocks it shares (SchedulerConfig::prefix_aware_admission), to compare with.
    bool prefix_aware_admission = true;
  };
  // Engine::create with hooks.
  static Result<std::unique_ptr<Engine>> create(const std::string& model_path, const EngineConfig& config, Hooks hooks);
};

}  // namespace infer
