// Status and Result<T>: how every libinfer call that can fail on its input reports it.
//
// A Status is a code plus a message that names the problem and where it is
// ("model.gguf: tensor 'blk.0.attn_q.weight': data offset 4096 + 8192 bytes runs past the end
// of the data section (10000 bytes)"). A Result<T> holds either a T or a failed Status.
// Expected outcomes that are not errors (a full KV cache) are optionals, not statuses.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "infer/export.h"

namespace infer {

// Values are part of the ABI (the C API returns the same numbers): never renumber.
enum class StatusCode : int {
  ok = 0,
  invalid_argument = 1,   // a caller passed a bad value
  not_found = 2,          // a file, key, tensor or request does not exist
  io_error = 3,           // the operating system refused a read, write or map
  malformed_file = 4,     // a file's content breaks its format
  unsupported = 5,        // valid input that this build cannot handle (yet)
  out_of_memory = 6,      // an allocation failed
  out_of_range = 7,       // a size or count exceeds a limit
  overloaded = 8,         // admission control refused new work
  cancelled = 9,          // the request was cancelled
  deadline_exceeded = 10, // the request ran past its deadline
  internal = 11,          // a bug in libinfer: please report it
};

// A short stable name for a code ("malformed_file").
INFER_API const char* status_code_name(StatusCode code) noexcept;

class INFER_API Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message);

  static Status ok() { return {}; }

  bool is_ok() const noexcept { return code_ == StatusCode::ok; }
  StatusCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "malformed_file: <message>", or "ok".
  std::string to_string() const;

  // Returns a copy whose message is "<context>: <message>".
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::io_error, std::move(m)}; }
inline Status malformed_file(std::string m) { return {StatusCode::malformed_file, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::unsupported, std::move(m)}; }
inline Status out_of_memory(std::string m) { return {StatusCode::out_of_memory, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::out_of_range, std::move(m)}; }
inline Status overloaded(std::string m) { return {StatusCode::overloaded, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::cancelled, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {StatusCode::deadline_exceeded, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::internal, std::move(m)}; }

// Either a value or a failed Status. Constructing it from an ok Status is a bug.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    assert(!std::get<1>(v_).is_ok() && "Result built from an ok Status");
  }

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // The status: ok() when a value is held.
  Status status() const { return ok() ? Status::ok() : std::get<1>(v_); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }

  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace infer
