#include "core/log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

namespace infer {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
  }
  return "?";
}

void stderr_sink(LogLevel level, const char* message, void*) {
  std::fprintf(stderr, "libinfer %s: %s\n", level_name(level), message);
}

struct SinkState {
  std::mutex mutex;  // guards sink + user_data as a pair
  LogSink sink = stderr_sink;
  void* user_data = nullptr;
};

SinkState& sink_state() {
  static SinkState state;
  return state;
}

std::atomic<int> g_min_level{static_cast<int>(LogLevel::warn)};

}  // namespace

void set_log_sink(LogSink sink, void* user_data) noexcept {
  auto& s = sink_state();
  std::lock_guard lock(s.mutex);
  s.sink = sink ? sink : stderr_sink;
  s.user_data = sink ? user_data : nullptr;
}

void set_log_level(LogLevel level) noexcept { g_min_level.store(static_cast<int>(level)); }

LogLevel log_level() noexcept { return static_cast<LogLevel>(g_min_level.load()); }

bool log_enabled(LogLevel level) noexcept { return static_cast<int>(level) >= g_min_level.load(); }

void log_message(LogLevel level, const char* format, ...) noexcept {
  if (!log_enabled(level)) return;
  char small[512];
  std::va_list args;
  va_start(args, format);
  std::va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(small, sizeof small, format, args);
  va_end(args);
  std::string big;
  const char* text = small;
  if (n >= static_cast<int>(sizeof small)) {
    try {
      big.resize(static_cast<size_t>(n) + 1);
      std::vsnprintf(big.data(), big.size(), format, copy);
      text = big.c_str();
    } catch (...) {
      // keep the truncated text rather than lose the message
    }
  }
  va_end(copy);
  if (n < 0) text = format;
  auto& s = sink_state();
  // The sink is called under the lock so that replacing it never races with a call in flight.
  std::lock_guard lock(s.mutex);
  s.sink(level, text, s.user_data);
}

}  // namespace infer
