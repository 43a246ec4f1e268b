// A loaded model: built from a ModelFile, it runs forward passes over batches of rows.
// One file per architecture family implements it (llama.cpp); load_model picks by
// general.architecture.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "format/model_file.hpp"
#include "infer/status.hpp"
#include "kv/kv_cache.hpp"
#include "model/batch.hpp"

namespace infer {

struct ModelInfo {
  std::string architecture;
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // Sliding-window attention: window_layers[l] != 0 for a layer that sees only the last
  // sliding_window positions; empty when every layer sees the whole context.
  int sliding_window = 0;
  std::vector<uint8_t> window_layers;
  uint64_t fingerprint = 0;  // identity of the weights and architecture (prefix-cache key)
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const noexcept = 0;

  // Runs one step: writes every row's K/V into the cache at its position, then, for each row
  // with wants_logits (in row order), n_vocab logits into `logits`. Each row's result is
  // bit-identical whatever else shares the batch.
  virtual Status forward(const Batch& batch, const KvView& kv, float* logits, ThreadPool& pool) = 0;

  // The KV layout this model needs (layers, kv heads, head size, windowed layers).
  KvCacheConfig kv_config(uint64_t budget_bytes, int block_size = 16, DType kv_type = DType::f16) const;
};

struct LoadOptions {
  // Quantize the float (F32, F16, BF16) weight matrices at load: Q8_0 or Q4_0 (every matrix
  // whose rows are whole 32-element blocks, as llama-quantize --pure would); empty: keep the
  // file's types. Norms and already-quantized matrices keep theirs.
  std::optional<DType> weight_type;
  // Hears the fraction of the weights bound (0 to 1) while the model loads; may be empty.
  std::function<void(double)> progress;
};

// Loads the architecture named by the file's general.architecture; unsupported for others.
Result<std::unique_ptr<Model>> load_model(std::shared_ptr<const ModelFile> file, const LoadOptions& options = {});

}  // namespace infer
