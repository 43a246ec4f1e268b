// The log sink: where libinfer's diagnostics go. By default, lines at or above `warn` go to
// stderr; a host replaces the sink to route them into its own logging.
#pragma once

#include "infer/export.h"

namespace infer {

enum class LogLevel : int { debug = 0, info = 1, warn = 2, error = 3 };

// Called once per message, from whichever thread logs, possibly several at once: the sink must
// be thread-safe and return quickly. `message` has no trailing newline and is only borrowed for
// the duration of the call.
using LogSink = void (*)(LogLevel level, const char* message, void* user_data);

// Replaces the sink (nullptr restores the stderr default). Thread-safe.
INFER_API void set_log_sink(LogSink sink, void* user_data) noexcept;
// Messages below `level` are dropped before formatting. Default: warn. Thread-safe.
INFER_API void set_log_level(LogLevel level) noexcept;
INFER_API LogLevel log_level() noexcept;

}  // namespace infer
