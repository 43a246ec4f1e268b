// GPTQ (Frantar et al., 2023) for INT4 groups, INT8 rows and FP8 rows: each weight row quantized column by
// column, each column's rounding error spread over the columns not yet quantized through the
// inverse of the input's second-moment matrix H = Σ x xᵀ over a calibration, so that the layer's
// output on that calibration moves as little as it can, not each weight.
//
// For a row w (n columns) and U the upper Cholesky factor of (H + λI)⁻¹ (Uᵀ U = (H + λI)⁻¹, λ = 1%
// of H's mean diagonal; a column whose diagonal is 0 never saw an input: its H entry becomes 1 and
// its weight 0):
//
//   for j = 0 .. n - 1:
//     at the first column of each group, the group's scale and zero point are chosen from the
//     row's current values w[j .. j + G) by the INT4 quantizer's search (quant/int4_groups.hpp),
//     weighted by `importance`;
//     q_j = clamp(round(w_j / d) + z, 0, 15);  e = (w_j - d (q_j - z)) / U[j][j]
//     w_k -= e U[j][k]  for k > j
//
// in double. For INT8 rows (quant/int8_rows.hpp) the row's scale is fixed before the loop: s =
// max|w| / 127 over the row's live columns as it comes in (the per-channel observer's; a dead
// column's weight never meets an input and becomes 0); each column's code is clamp(round(w_j / s),
// ±127) of its compensated value. FP8 rows (quant/fp8_rows.hpp) alike: s = max|w| / 448 over the
// live columns (or the matrix's scale, given), each column's code e4m3(w_j / s) (nearest, ties to
// even, saturating) of its compensated value, its value s e4m3(code).
//
// Rows are independent (any thread count gives the same bytes); groups in column order. With a
// diagonal H nothing is spread and the result is the plain quantizer's (quantize_row_i4's with the
// same importance, quantize_row_i8_row's).
//
// Activation order (GPTQ's act-order with static groups; compressed-tensors' actorder "weight"):
// the columns are quantized by decreasing H diagonal, the inputs that carry the most first, while
// the groups keep their columns (no group index is stored). Each group's scale and zero point are
// then chosen before the loop, from the row's values as they come in, and U is the factor of H
// with its rows and columns in that order.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/status.hpp"
#include "quant/int4_groups.hpp"

namespace infer::quant {

// U for H (n x n, row major, symmetric; only the lower triangle is read): n x n row major, zero
// below the diagonal. `dead` gets the columns whose diagonal was 0. Errors (failed_precondition)
// when H + λI is not positive definite even with λ raised a hundredfold.
Result<std::vector<double>> gptq_factor(const std::vector<double>& h, int64_t n, std::vector<bool>& dead);

// One row of n floats quantized as above into n / o.group blocks at dst (o.group, symmetric,
// importance, scale precision as quantize_row_i4 takes them).
void gptq_quantize_row(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                       const I4QuantOptions& o, void* dst) noexcept;

// Activation order: the columns by decreasing H diagonal (the dead ones, whose diagonal is 0, last),
// ties by index. order[t] is the column quantized t-th.
std::vector<int64_t> gptq_act_order(const std::vector<double>& h, int64_t n);
// U for H taken in `order` (a permutation of 0 .. n - 1): row and column t of the permuted H are
// H's order[t]. `dead` is indexed by H's columns.
Result<std::vector<double>> gptq_factor(const std::vector<double>& h, int64_t n, std::vector<bool>& dead,
                                        const std::vector<int64_t>& order);
// One row as gptq_quantize_row, in activation order with static groups: u from the gptq_factor
// above with the same order.
void gptq_quantize_row_ordered(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                               const std::vector<int64_t>& order, const I4QuantOptions& o, void* dst) noexcept;

// One row of n floats (n a multiple of 32) quantized as above into an i8_row row at dst.
void gptq_quantize_row_i8(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                          void* dst) noexcept;
// One row of n floats (n a multiple of group) quantized as above into INT8 group blocks at dst
// (quant/int8_groups.hpp): at each group's first column its scale is chosen from the row's current
// values w[j .. j + group) (max|w| / 127, rounded to p), as the INT4 groups' are.
void gptq_quantize_row_i8_groups(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                                 int64_t group, ScalePrecision p, void* dst) noexcept;
// One row of n floats (n a multiple of 32) quantized as above into an f8_row row at dst, with the
// matrix's scale `tensor_scale` (FP8 per tensor) or, when it is 0, the row's own (per channel).
void gptq_quantize_row_f8(const float* w, int64_t n, const std::vector<double>& u, const std::vector<bool>& dead,
                          float tensor_scale, void* dst) noexcept;

}  // namespace infer::quant
