// RMS normalization: y = x / sqrt(mean(x²) + eps) * w, over each run of len(w) consecutive
// elements of a row (len(w) == cols: the whole row; len(w) == head size: each head, as the
// per-head Q/K norms of Gemma 3 and Qwen3). The sum of squares accumulates in double, as ggml's.
#pragma once

#include "backend/backend.hpp"

namespace infer::ops {

// x, y: [cols, rows] (y may be x); w: F32 [n] with n dividing cols.
Status rms_norm(Backend& be, const TensorView& x, const TensorView& w, const TensorView& y, float eps);

}  // namespace infer::ops
