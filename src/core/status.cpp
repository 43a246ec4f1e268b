#include "infer/status.hpp"

namespace infer {

const char* status_code_name(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid_argument";
    case StatusCode::not_found: return "not_found";
    case StatusCode::io_error: return "io_error";
    case StatusCode::malformed_file: return "malformed_file";
    case StatusCode::unsupported: return "unsupported";
    case StatusCode::out_of_memory: return "out_of_memory";
    case StatusCode::out_of_range: return "out_of_range";
    case StatusCode::overloaded: return "overloaded";
    case StatusCode::cancelled: return "cancelled";
    case StatusCode::deadline_exceeded: return "deadline_exceeded";
    case StatusCode::internal: return "internal";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace infer
