// The C ABI over the C++ library. Every entry point is noexcept; anything that can throw is
// wrapped so that no exception crosses into C.
#include "infer.h"

#include <mutex>
#include <new>

#include "infer/log.hpp"
#include "infer/status.hpp"

static_assert(static_cast<int>(infer::StatusCode::internal) == INFER_ERR_INTERNAL,
              "C and C++ status codes must stay numerically equal");

extern "C" {

const char* infer_version(void) { return INFER_VERSION_STRING; }

int infer_version_number(void) { return INFER_VERSION_NUMBER; }

const char* infer_status_name(infer_status status) {
  switch (status) {
    case INFER_OK: return "INFER_OK";
    case INFER_ERR_INVALID_ARGUMENT: return "INFER_ERR_INVALID_ARGUMENT";
    case INFER_ERR_NOT_FOUND: return "INFER_ERR_NOT_FOUND";
    case INFER_ERR_IO: return "INFER_ERR_IO";
    case INFER_ERR_MALFORMED_FILE: return "INFER_ERR_MALFORMED_FILE";
    case INFER_ERR_UNSUPPORTED: return "INFER_ERR_UNSUPPORTED";
    case INFER_ERR_OUT_OF_MEMORY: return "INFER_ERR_OUT_OF_MEMORY";
    case INFER_ERR_OUT_OF_RANGE: return "INFER_ERR_OUT_OF_RANGE";
    case INFER_ERR_OVERLOADED: return "INFER_ERR_OVERLOADED";
    case INFER_ERR_CANCELLED: return "INFER_ERR_CANCELLED";
    case INFER_ERR_DEADLINE: return "INFER_ERR_DEADLINE";
    case INFER_ERR_INTERNAL: return "INFER_ERR_INTERNAL";
  }
  return "INFER_ERR_UNKNOWN";
}

void infer_log_set_callback(infer_log_callback callback, void* user_data) {
  // The C callback and its user data travel as the C++ sink's user data. set_log_sink swaps the
  // pair under the lock that every sink call holds, so once it returns no call can still be
  // using the previous route and it can be freed.
  struct Route {
    infer_log_callback callback;
    void* user_data;
  };
  static std::mutex mutex;
  static Route* current = nullptr;
  std::lock_guard lock(mutex);
  Route* next = callback ? new (std::nothrow) Route{callback, user_data} : nullptr;
  if (callback && !next) return;  // out of memory: keep the previous sink
  if (next) {
    infer::set_log_sink(
        [](infer::LogLevel level, const char* message, void* data) {
          auto* r = static_cast<Route*>(data);
          r->callback(static_cast<infer_log_level>(level), message, r->user_data);
        },
        next);
  } else {
    infer::set_log_sink(nullptr, nullptr);
  }
  delete current;
  current = next;
}

infer_status infer_log_set_level(infer_log_level level) {
  if (level < INFER_LOG_DEBUG || level > INFER_LOG_ERROR) return INFER_ERR_INVALID_ARGUMENT;
  infer::set_log_level(static_cast<infer::LogLevel>(level));
  return INFER_OK;
}

}  // extern "C"
