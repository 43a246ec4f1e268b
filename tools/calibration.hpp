// The importance-matrix run shared by infer-imatrix and infer-quantize --calib: the model over a
// calibration text in chunks, as llama-imatrix runs it, every weight product's input rows going to
// the collector through the public Engine's matmul observer (EngineConfig::on_matmul).
//
//   - the text is tokenized with BOS and without parsing special tokens;
//   - it is cut into chunks of n_ctx tokens (at least two are needed), each chunk a fresh sequence
//     whose first token is replaced by BOS when the model adds one;
//   - chunks run one after the other in prompt steps of min(n_ctx, 512) rows (llama.cpp's
//     micro-batch), so each matrix sees the rows in the same order as in llama-imatrix;
//   - the second half of each chunk is scored, for the perplexity llama-imatrix also prints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/imatrix.hpp"
#include "infer/engine.hpp"
#include "infer/status.hpp"

namespace infer::tools {

struct CalibrationOptions {
  std::string model;           // model file
  std::string text_path;       // calibration text (UTF-8)
  int64_t n_ctx = 512;         // tokens per chunk
  int64_t max_chunks = -1;     // chunks at most; -1 = all the text holds
  int threads = 0;             // 0 = all cores
  bool process_output = false; // also collect output.weight
  const char* tool = "";       // the name in progress lines
  // Also sees every product the importance matrix collects (GPTQ's second moments); its first
  // error ends the run.
  std::function<Status(const MatmulInput&)> observe;
};

// The importance matrix of the run (datasets = {text_path}, chunk_size = n_ctx). Progress on
// stderr: a bar on a terminal, else a line per 10%; then the perplexity estimate.
Result<Imatrix> compute_imatrix(const CalibrationOptions& options);

}  // namespace infer::tools
