// INFER_PROFILE=1: where the forward steps' time goes, per op kind. Each op's entry point
// (src/ops/*.cpp) holds an OpTimer for the length of its call; with profiling on, the call's wall
// time is added to the process-wide OpProfile under the op's name and a variant (the weight type
// of a matmul), and the engine prints the table to stderr when it is destroyed. With profiling
// off (the variable unset, empty or "0") an OpTimer costs one cached check and nothing else.
//
//   op        variant   calls   total_ns
//   matmul    Q4_0      n       Σ ns of those n calls     (one row per op and variant)
//   rms_norm  ""        ...
//
// Time is wall time on the calling thread (the engine's worker): an op that fans out to the
// thread pool counts until its last task is done. Ops on an asynchronous device would count only
// their launch.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/timer.hpp"

namespace infer {

class OpProfile {
 public:
  using Clock = int64_t (*)();  // nanoseconds, monotonic

  explicit OpProfile(Clock clock = &monotonic_ns) noexcept : clock_(clock) {}

  int64_t now() const { return clock_(); }
  // One call of `op` (its `variant`, "" when it has none) that took `ns`. Thread-safe; a call
  // that finds no memory for a new row is dropped.
  void add(std::string_view op, std::string_view variant, int64_t ns) noexcept;

  struct Row {
    std::string op, variant;
    int64_t calls = 0;
    int64_t total_ns = 0;
  };
  // Every op and variant seen, most total time first (ties: by name).
  std::vector<Row> rows() const;
  // The rows as a markdown table (op, calls, total ms, % of the ops' total, µs per call) under a
  // title line; "" when nothing was recorded.
  std::string table() const;
  void clear();

  // The profile the ops record into when profiling_enabled().
  static OpProfile& global();

 private:
  Clock clock_;
  mutable std::mutex mutex_;
  std::vector<Row> rows_;  // a few dozen at most: looked up linearly
};

// INFER_PROFILE is set to a value other than "" and "0" (read at each call).
bool profile_requested_by_environment() noexcept;

// profile_requested_by_environment(), read once.
inline bool profiling_enabled() noexcept {
  static const bool enabled = profile_requested_by_environment();
  return enabled;
}

// Adds the wall time of its own lifetime to a profile as one call of `op`. `op` and `variant`
// must outlive the timer (string literals, dtype names).
class OpTimer {
 public:
  // Into OpProfile::global() when profiling is on; a no-op otherwise.
  explicit OpTimer(const char* op, std::string_view variant = {}) noexcept
      : OpTimer(profiling_enabled() ? &OpProfile::global() : nullptr, op, variant) {}
  // A matmul's timer, its weight type the variant (named only when profiling is on).
  OpTimer(const char* op, DType weight) noexcept
      : OpTimer(profiling_enabled() ? &OpProfile::global() : nullptr, op, weight) {}
  // Into `profile` (nullptr: a no-op).
  OpTimer(OpProfile* profile, const char* op, std::string_view variant = {}) noexcept
      : profile_(profile), op_(op), variant_(variant), start_(profile ? profile->now() : 0) {}
  OpTimer(OpProfile* profile, const char* op, DType weight) noexcept
      : OpTimer(profile, op, profile ? dtype_name(weight) : std::string_view{}) {}
  ~OpTimer() {
    if (profile_) profile_->add(op_, variant_, profile_->now() - start_);
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpProfile* profile_;
  const char* op_;
  std::string_view variant_;
  int64_t start_;
};

}  // namespace infer
