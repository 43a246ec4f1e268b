// The C boundary's shared parts (capi/): the engine handle, the thread-local error messages, the
// guard that turns exceptions into statuses, and the checks of a caller's struct_size.
//
// Errors live in thread_local slots: one for calls without an engine (infer_last_error) and one
// per engine (infer_engine_error), so that two threads sharing an engine never read each other's
// message. An engine's slots carry its serial number: a slot left by an engine that was destroyed
// on another thread never shows through a new engine allocated at the same address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "infer.h"
#include "infer/engine.hpp"
#include "infer/status.hpp"

struct infer_engine {
  std::unique_ptr<infer::Engine> engine;
  uint64_t serial = 0;            // unique per engine ever created (see the error slots)
  infer::ModelDescription model;  // its strings are what infer_model_info lends for the engine's lifetime
};

namespace infer::capi {

// Leaves a failed call's message where the caller looks for it: on the engine when the call had
// one, else in the thread's last error. Returns `code`.
infer_status fail(const infer_engine* engine, infer_status code, std::string_view a, std::string_view b = {}) noexcept;
infer_status fail(const infer_engine* engine, const Status& s) noexcept;

// A new engine handle gets its serial and joins the live engines; a destroyed one leaves them and
// the calling thread's slot for it is dropped.
void register_engine(infer_engine& engine);
void unregister_engine(const infer_engine* engine) noexcept;

// The boundary: runs body (returning a Status) and turns whatever it throws into a status and a
// message. Every entry point that can fail goes through here.
template <class F>
infer_status guarded(const infer_engine* engine, F&& body) noexcept {
  try {
    const Status s = body();
    return s.is_ok() ? INFER_OK : fail(engine, s);
  } catch (const std::bad_alloc&) {
    return fail(engine, INFER_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(engine, INFER_ERR_INTERNAL, "unexpected exception: ", e.what());
  } catch (...) {
    return fail(engine, INFER_ERR_INTERNAL, "unexpected exception");
  }
}

inline Status invalid(std::string_view fn, std::string_view what) {
  return infer::invalid_argument(std::string(fn) + ": " + std::string(what));
}

// ---- Growing structs -----------------------------------------------------------------------
//
// A caller's struct is read and written field by field: a field takes part only when it lies
// wholly inside the caller's struct_size (offsetof + sizeof), so a caller built against an older,
// smaller struct gets the defaults for the fields it does not have.

// Larger than any struct here will grow to: a struct_size beyond it is an uninitialized struct,
// and scanning or zeroing that far would run off the caller's memory.
inline constexpr size_t kMaxStructSize = 4096;

size_t struct_size_of(const void* p);
// An options struct the library reads: struct_size in range, and any tail past `known` (a newer
// caller's fields) all zero.
Status check_input_struct(const void* p, size_t known, std::string_view fn, std::string_view name);
// A struct the library fills: struct_size in range.
Status check_output_struct(const void* p, std::string_view fn, std::string_view name);

}  // namespace infer::capi
