// SamplingParams: how one request turns a row of logits into a token. The defaults are
// llama.cpp's command-line defaults; every stage has a value that switches it off.
#pragma once

#include <cstdint>

#include "infer/status.hpp"

namespace infer {

struct SamplingParams {
  // field              default  off / special           meaning
  float temperature = 0.8f;      // 0 = greedy            logits are divided by it before the draw
  int32_t top_k = 40;            // 0 = off               keep the k most likely tokens
  float top_p = 0.95f;           // 1 = off               keep the smallest set with mass >= top_p
  float min_p = 0.05f;           // 0 = off               drop tokens with p < min_p * p_max
  float repeat_penalty = 1.0f;   // 1 = off               divide (logit > 0) / multiply (<= 0) repeated tokens
  int32_t repeat_last_n = 64;    // 0 = off, -1 = all     history window the three penalties look at
  float frequency_penalty = 0.0f;  // 0 = off             subtract count * this from a repeated token
  float presence_penalty = 0.0f;   // 0 = off             subtract this once from a repeated token
  uint64_t seed = 0;             // any value             the same seed and logits give the same tokens

  // Ok, or invalid_argument naming the first field out of range and its value.
  Status validate() const;
};

}  // namespace infer
