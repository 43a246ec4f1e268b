#include "model/model.hpp"

#include "model/gemma3.hpp"
#include "model/llama.hpp"

namespace infer {

KvCacheConfig Model::kv_config(uint64_t budget_bytes, int block_size, DType kv_type) const {
  KvCacheConfig c;
  c.n_layer = info().n_layer;
  c.n_kv_heads = info().n_kv_heads;
  c.head_dim = info().head_dim;
  c.block_size = block_size;
  c.kv_type = kv_type;
  c.budget_bytes = budget_bytes;
  c.sliding_window = info().sliding_window;
  c.window_layers = info().window_layers;
  return c;
}

Result<std::unique_ptr<Model>> load_model(std::shared_ptr<const ModelFile> file, const LoadOptions& options) {
  if (options.weight_type && *options.weight_type != DType::q8_0 && *options.weight_type != DType::q4_0)
    return invalid_argument("weight_type " + std::string(dtype_name(*options.weight_type)) + ": load-time quantization writes Q8_0 or Q4_0");
  const std::string* arch = file->metadata().get_string("general.architecture");
  if (!arch) return malformed_file(file->path() + ": missing metadata key general.architecture");
  if (*arch == "llama") return load_llama(std::move(file), options);
  if (*arch == "gemma3") return load_gemma3(std::move(file), options);
  return unsupported(file->path() + ": unsupported architecture '" + *arch + "' (supported: llama, gemma3)");
}

}  // namespace infer
