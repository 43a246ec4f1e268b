// Internal helpers for propagating Status / Result. Not part of the public headers.
#pragma once

#include "infer/status.hpp"

#define INFER_CONCAT_INNER_(a, b) a##b
#define INFER_CONCAT_(a, b) INFER_CONCAT_INNER_(a, b)

// Evaluates an expression yielding a Status; returns it from the enclosing function if failed.
#define INFER_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::infer::Status infer_status_ = (expr);         \
    if (!infer_status_.is_ok()) return infer_status_; \
  } while (0)

// `INFER_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result or returns its Status.
#define INFER_ASSIGN_OR_RETURN(lhs, expr) \
  INFER_ASSIGN_OR_RETURN_IMPL_(INFER_CONCAT_(infer_result_, __LINE__), lhs, expr)
#define INFER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
