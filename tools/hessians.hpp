// GPTQ's second moments H = Σ x xᵀ of the inputs of a model's per-layer weight products over a
// calibration run (tools/calibration.hpp feeds it through EngineConfig::on_matmul), by weight
// name; q/k/v share one input, collected once as "blk.N.attn_q.weight" (gate and up share theirs
// too but are collected each: Phi-3 fuses them into ffn_up alone). Each product's XᵀX is one F32
// matmul (the library's kernels, every core), added to a double accumulator.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "infer/engine.hpp"
#include "infer/status.hpp"

namespace infer::tools {

struct Hessian {
  int64_t n = 0;              // columns
  int64_t rows = 0;           // calibration rows summed
  std::vector<double> sum;    // n x n, row major: Σ x xᵀ
};

// The key a weight's input is collected under ("blk.3.attn_k.weight" -> "blk.3.attn_q.weight"), or
// "" for a weight GPTQ does not collect (the output layer, anything not per layer).
std::string hessian_key(const std::string& weight);

class HessianCollector {
 public:
  explicit HessianCollector(int threads) : pool_(std::make_unique<ThreadPool>(threads)) {}
  // One product's input rows (the calibration run's observer). invalid_argument when the column
  // count differs from the key's earlier products.
  Status add(const MatmulInput& in);
  std::map<std::string, Hessian>& result() { return hessians_; }

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::map<std::string, Hessian> hessians_;
  std::vector<float> xt_, xtx_;
};

}  // namespace infer::tools
