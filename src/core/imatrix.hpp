// An importance matrix (llama.cpp's imatrix): per weight matrix and input column, the sum of the
// squared activations the matrix saw, and how many rows it saw. Plain data shared by the collector
// and the quantizer (src/quant/imatrix.hpp) and the file formats (src/format/imatrix_file.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace infer {

// One weight matrix (or n_mat stacked expert matrices): cols = sums.size() / counts.size().
struct ImatrixEntry {
  std::vector<float> sums;      // [n_mat][cols]: Σ x² per input column
  std::vector<int64_t> counts;  // [n_mat]: rows seen
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight name, sorted (the files' order)
  std::vector<std::string> datasets;            // the calibration texts' file names
  int32_t chunk_count = 0;                      // chunks the sums cover
  int32_t chunk_size = 0;                       // tokens per chunk (0: unknown, legacy files)
  // Read from a legacy .dat file: sums hold (Σ x² / count) · ncall and counts {ncall}.
  bool legacy = false;
};

}  // namespace infer
