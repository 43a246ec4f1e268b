#include "sample/sampling_params.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace infer {
namespace {

std::string show(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

Status SamplingParams::validate() const {
  // Each test is written so that NaN fails it.
  if (!(std::isfinite(temperature) && temperature >= 0.0f))
    return invalid_argument("temperature must be finite and >= 0 (0 = greedy), got " + show(temperature));
  if (top_k < 0) return invalid_argument("top_k must be >= 0 (0 = off), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    return invalid_argument("top_p must be in (0, 1] (1 = off), got " + show(top_p));
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    return invalid_argument("min_p must be in [0, 1] (0 = off), got " + show(min_p));
  // 1 / repeat_penalty must be finite too: a denormal penalty would push logits to infinity.
  if (!(std::isfinite(repeat_penalty) && repeat_penalty > 0.0f && std::isfinite(1.0f / repeat_penalty)))
    return invalid_argument("repeat_penalty must be finite and > 0 (1 = off), got " + show(repeat_penalty));
  if (repeat_last_n < -1)
    return invalid_argument("repeat_last_n must be >= -1 (0 = off, -1 = whole history), got " +
                            std::to_string(repeat_last_n));
  if (!std::isfinite(frequency_penalty))
    return invalid_argument("frequency_penalty must be finite (0 = off), got " + show(frequency_penalty));
  if (!std::isfinite(presence_penalty))
    return invalid_argument("presence_penalty must be finite (0 = off), got " + show(presence_penalty));
  return Status::ok();
}

}  // namespace infer
