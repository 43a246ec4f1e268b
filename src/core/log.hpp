// Internal logging front end; the sink itself is public (include/infer/log.hpp).
#pragma once

#include "infer/log.hpp"

namespace infer {

bool log_enabled(LogLevel level) noexcept;
// printf-style; formats only when the level is enabled.
void log_message(LogLevel level, const char* format, ...) noexcept __attribute__((format(printf, 2, 3)));

}  // namespace infer

#define INFER_LOG(level, ...)                                                        \
  do {                                                                               \
    if (::infer::log_enabled(level)) ::infer::log_message(level, __VA_ARGS__);      \
  } while (0)
#define INFER_LOG_DEBUG(...) INFER_LOG(::infer::LogLevel::debug, __VA_ARGS__)
#define INFER_LOG_INFO(...) INFER_LOG(::infer::LogLevel::info, __VA_ARGS__)
#define INFER_LOG_WARN(...) INFER_LOG(::infer::LogLevel::warn, __VA_ARGS__)
#define INFER_LOG_ERROR(...) INFER_LOG(::infer::LogLevel::error, __VA_ARGS__)
