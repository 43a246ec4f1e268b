// A loaded model: built from a ModelFile, it runs forward passes over batches of rows on a
// Backend. Every family is the one Decoder (model/decoder.hpp) with its own description; load_model
// picks the family by general.architecture (model/families.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
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
  // `logits` is host memory of logit_rows() * n_vocab floats.
  virtual Status forward(const Batch& batch, const KvView& kv, float* logits, Backend& backend) = 0;
  // The same on a CPU backend over `pool` made for this call (its activation buffers are
  // allocated each call: for tests and one-off runs; the engine keeps one Backend).
  Status forward(const Batch& batch, const KvView& kv, float* logits, ThreadPool& pool);

  // The KV layout this model needs (layers, kv heads, head size, windowed layers).
  KvCacheConfig kv_config(uint64_t budget_bytes, int block_size = 16, DType kv_type = DType::f16) const;
};

struct LoadOptions {
  // Quantize the float (F32, F16, BF16) weight matrices at load: Q8_0 or Q4_0 (every matrix
  // whose rows are whole 32-element blocks, as llama-quantize --pure would); empty: keep the
  // file's types. Norms and already-quantized matrices keep theirs.
  std::optional<DType> weight_type;
  // With weight_type I8_ROW (W8A8), store each matrix rotated on its input columns, W H, and rotate
  // its input online (TensorInfo::input_rotation, quant/int8_rows.hpp's i8_input_rotation): the
  // accuracy of infer-quantize's int8 checkpoints. Off: INFER_WEIGHT_ROTATE=0 (Engine).
  bool rotate_int8 = true;
  // Hears the fraction of the weights bound (0 to 1) while the model loads; may be empty.
  std::function<void(double)> progress;
  // The backend forward() will run on, which prepares each weight matrix for its kernels at load
  // (it must outlive the model); null: the weights are used as mapped (the CPU backend's way).
  Backend* backend = nullptr;
};

// Loads the architecture named by the file's general.architecture; unsupported for others.
// supported_architectures() lists the ones that load.
Result<std::unique_ptr<Model>> load_model(std::shared_ptr<const ModelFile> file, const LoadOptions& options = {});
std::vector<std::string> supported_architectures();

}  // namespace infer
