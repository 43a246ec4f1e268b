#include "quant/imatrix.hpp"

#include <algorithm>
#include <cmath>

namespace infer::quant {

bool ImatrixCollector::wants(std::string_view weight, int64_t rows) const {
  if (rows < options_.min_rows) return false;
  return weight.starts_with("blk.") || (options_.process_output && weight == "output.weight");
}

Status ImatrixCollector::add(std::string_view weight, const float* x, int64_t cols, int64_t rows, int64_t row_stride) {
  if (!wants(weight, rows)) return Status::ok();
  if (cols <= 0 || row_stride < cols) return invalid_argument("imatrix: " + std::string(weight) + ": bad input shape");
  auto it = entries_.find(weight);
  if (it == entries_.end()) {
    it = entries_.emplace(std::string(weight), ImatrixEntry{}).first;
    it->second.sums.assign(static_cast<size_t>(cols), 0.0f);
    it->second.counts.assign(1, 0);
  }
  ImatrixEntry& e = it->second;
  if (e.sums.size() != static_cast<size_t>(cols))
    return invalid_argument("imatrix: " + std::string(weight) + ": " + std::to_string(cols) + " columns, earlier " +
                            std::to_string(e.sums.size()));
  // Row after row, in F32: llama.cpp's order of the additions.
  float* acc = e.sums.data();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * row_stride;
    for (int64_t j = 0; j < cols; ++j) acc[j] += row[j] * row[j];
  }
  e.counts[0] += rows;
  for (float v : e.sums)
    if (!std::isfinite(v)) return invalid_argument("imatrix: non-finite values in " + std::string(weight));
  return Status::ok();
}

Imatrix ImatrixCollector::result(int32_t chunk_size, std::vector<std::string> datasets) const {
  Imatrix m;
  int64_t max_count = 0;
  for (const auto& [name, e] : entries_) {
    m.entries.emplace(name, e);
    for (int64_t c : e.counts) max_count = std::max(max_count, c);
  }
  m.datasets = std::move(datasets);
  m.chunk_size = chunk_size;
  m.chunk_count = chunk_size > 0 ? static_cast<int32_t>(max_count / chunk_size) : 0;
  return m;
}

std::map<std::string, std::vector<float>> importance(const Imatrix& imatrix) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, e] : imatrix.entries) {
    std::vector<float>& w = out[name];
    w.resize(e.sums.size());
    if (imatrix.legacy) {
      const int64_t ncall = e.counts.empty() ? 0 : e.counts[0];
      for (size_t i = 0; i < w.size(); ++i) w[i] = ncall > 0 ? e.sums[i] / static_cast<float>(ncall) : e.sums[i];
      continue;
    }
    if (e.counts.empty()) continue;
    const size_t cols = e.sums.size() / e.counts.size();
    for (size_t m = 0; m < e.counts.size(); ++m) {
      const auto count = static_cast<float>(e.counts[m]);
      for (size_t i = 0; i < cols; ++i) w[m * cols + i] = count > 0.0f ? e.sums[m * cols + i] / count : 1.0f;
    }
  }
  return out;
}

}  // namespace infer::quant
