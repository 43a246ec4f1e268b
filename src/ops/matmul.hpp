// The linear layer: y = x · Wᵀ over every row of a step (weights stream once per call, whatever
// the number of rows). W: a weight [n_in, n_out] of any computable type, as the backend prepared
// it; x: [n_in, rows]; y: [n_out, rows], not overlapping x. A row's result depends only on that
// row and W (batch invariance), never on the other rows or the thread count.
#pragma once

#include "backend/backend.hpp"

namespace infer::ops {

Status matmul(Backend& be, const TensorView& w, const TensorView& x, const TensorView& y);

}  // namespace infer::ops
