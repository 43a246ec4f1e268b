// Monotonic time for measurements (steady_clock: never jumps with wall-clock changes).
#pragma once

#include <chrono>
#include <cstdint>

namespace infer {

inline int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Timer {
 public:
  Timer() : start_ns_(monotonic_ns()) {}
  void reset() { start_ns_ = monotonic_ns(); }
  int64_t elapsed_ns() const { return monotonic_ns() - start_ns_; }
  double elapsed_ms() const { return static_cast<double>(elapsed_ns()) * 1e-6; }
  double elapsed_s() const { return static_cast<double>(elapsed_ns()) * 1e-9; }

 private:
  int64_t start_ns_;
};

}  // namespace infer
