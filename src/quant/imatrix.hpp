// Importance matrices: what llama.cpp's llama-imatrix collects and llama-quantize weighs the
// rounding error with.
//
// For every weight matrix W that a forward pass multiplies (y = x · Wᵀ), the collector adds, per
// input column j, x[r][j]² over the rows r it sees (in F32, row after row, in the order the rows
// come: the same sums as llama.cpp when the activations are the same), and counts the rows.
// llama.cpp's rules for which products count:
//
//   - only weights named "blk.*" (the per-layer matrices), and "output.weight" when asked;
//   - only products of at least 16 rows (llama.cpp skips smaller batches: decode steps);
//   - a non-finite sum is an error.
//
// The quantizer's importance of column j is sums[j] / count (importance()).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/imatrix.hpp"
#include "infer/status.hpp"

namespace infer::quant {

class ImatrixCollector {
 public:
  struct Options {
    bool process_output = false;  // also collect output.weight (llama-imatrix --process-output)
    int64_t min_rows = 16;        // products with fewer rows are skipped (llama.cpp's rule)
  };
  ImatrixCollector() = default;
  explicit ImatrixCollector(Options options) : options_(options) {}

  // Whether a product with `weight` of `rows` rows is collected.
  bool wants(std::string_view weight, int64_t rows) const;
  // Adds one product's input rows (row r, column c at x[r * row_stride + c]). invalid_argument when
  // the column count differs from the weight's earlier products, or a sum stops being finite.
  Status add(std::string_view weight, const float* x, int64_t cols, int64_t rows, int64_t row_stride);

  // The collected sums with their metadata: chunk_count = the largest count / chunk_size, as
  // llama-imatrix records it.
  Imatrix result(int32_t chunk_size, std::vector<std::string> datasets) const;

 private:
  Options options_;
  std::map<std::string, ImatrixEntry, std::less<>> entries_;
};

// The per-column importance llama-quantize gives the quantizer, per weight name: sums / count for
// each stacked matrix (1 where a matrix saw no rows); for a legacy file sums / ncall.
std::map<std::string, std::vector<float>> importance(const Imatrix& imatrix);

}  // namespace infer::quant
