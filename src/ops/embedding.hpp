// Embedding gather: out row r = scale * table row tokens[r], converted to F32 (scale 1: as read).
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.hpp"

namespace infer::ops {

// table: a weight [n_embd, n_vocab] of any computable type; tokens inside [0, n_vocab) (checked);
// out: [n_embd, tokens.size()].
Status embed(Backend& be, const TensorView& table, std::span<const int32_t> tokens, const TensorView& out, float scale = 1.0f);

}  // namespace infer::ops
