// The C boundary's shared parts (capi/boundary.hpp): error slots and struct_size checks.
#include "boundary.hpp"

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace infer::capi {

using infer::Status;

namespace {

constexpr const char* kLostMessage = "out of memory (the error message could not be stored)";

struct ErrorSlot {
  uint64_t serial = 0;
  std::string message;
  bool lost = false;  // storing the message failed: report that instead of a stale one

  void set(std::string_view a, std::string_view b = {}) noexcept {
    try {
      message.assign(a);
      message.append(b);
      lost = false;
    } catch (...) {
      lost = true;
    }
  }
  const char* c_str() const noexcept { return lost ? kLostMessage : message.c_str(); }
};

thread_local ErrorSlot t_last_error;
thread_local std::unordered_map<const infer_engine*, ErrorSlot> t_engine_errors;

std::atomic<uint64_t> g_next_serial{1};

// Serials of the engines alive now: a thread's slots of destroyed engines are dropped when its
// table grows, so a thread that outlives many engines does not keep their messages forever.
std::mutex& live_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<uint64_t>& live_serials() {
  static auto* s = new std::unordered_set<uint64_t>;  // never destroyed: threads may fail during exit
  return *s;
}

void prune_engine_errors() {
  std::lock_guard lock(live_mutex());
  const auto& live = live_serials();
  std::erase_if(t_engine_errors, [&](const auto& kv) { return !live.contains(kv.second.serial); });
}

}  // namespace

infer_status fail(const infer_engine* engine, infer_status code, std::string_view a, std::string_view b) noexcept {
  if (a.empty() && b.empty()) a = infer_status_name(code);  // a message is never empty
  if (!engine) {
    t_last_error.set(a, b);
    return code;
  }
  try {
    if (t_engine_errors.size() >= 16 && !t_engine_errors.contains(engine)) prune_engine_errors();
    ErrorSlot& slot = t_engine_errors[engine];
    slot.serial = engine->serial;
    slot.set(a, b);
  } catch (...) {
    t_last_error.set(kLostMessage);
  }
  return code;
}

infer_status fail(const infer_engine* engine, const Status& s) noexcept {
  return fail(engine, static_cast<infer_status>(s.code()), s.message());
}


void register_engine(infer_engine& engine) {
  engine.serial = g_next_serial.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(live_mutex());
  live_serials().insert(engine.serial);
}

void unregister_engine(const infer_engine* engine) noexcept {
  t_engine_errors.erase(engine);
  try {
    std::lock_guard lock(live_mutex());
    live_serials().erase(engine->serial);
  } catch (...) {
    // The serial stays listed: other threads' slots of this engine stay (never shown) until they exit.
  }
}

size_t struct_size_of(const void* p) {
  size_t size;
  std::memcpy(&size, p, sizeof size);
  return size;
}

Status check_input_struct(const void* p, size_t known, std::string_view fn, std::string_view name) {
  const size_t size = struct_size_of(p);
  if (size < sizeof(size_t) || size > kMaxStructSize)
    return invalid(fn, std::string(name) + ".struct_size is " + std::to_string(size) + " (set it with the struct's init function)");
  // A caller newer than this library may pass a larger struct, but only if it left every field
  // this library does not know at zero (its default).
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (size_t i = known; i < size; ++i)
    if (bytes[i] != 0)
      return invalid(fn, std::string(name) + ".struct_size is " + std::to_string(size) + ", larger than this library's " +
                             std::to_string(known) + ", and byte " + std::to_string(i) +
                             " is not zero: a field this library does not know is set");
  return Status::ok();
}

Status check_output_struct(const void* p, std::string_view fn, std::string_view name) {
  const size_t size = struct_size_of(p);
  if (size < sizeof(size_t) || size > kMaxStructSize)
    return invalid(fn, std::string(name) + ".struct_size is " + std::to_string(size) + " (set it to sizeof(" +
                           std::string(name) + ") before the call)");
  return Status::ok();
}

}  // namespace infer::capi

extern "C" {

const char* infer_last_error(void) { return infer::capi::t_last_error.c_str(); }

const char* infer_engine_error(const infer_engine* engine) {
  if (!engine) return infer_last_error();
  auto it = infer::capi::t_engine_errors.find(engine);
  if (it == infer::capi::t_engine_errors.end() || it->second.serial != engine->serial) return "";
  return it->second.c_str();
}

}  // extern "C"
