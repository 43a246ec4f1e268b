#include "model/model.hpp"

#include "core/status_macros.hpp"
#include "core/weight_type.hpp"
#include "model/decoder.hpp"
#include "model/families.hpp"

namespace infer {

KvCacheConfig Model::kv_config(uint64_t budget_bytes, int block_size, DType kv_type) const {
  KvCacheConfig c;
  c.n_layer = info().n_layer;
  c.n_kv_heads = info().n_kv_heads;
  c.head_dim = info().head_dim;
  c.block_size = block_size;
  c.kv_type = kv_type;
  c.budget_bytes = budget_bytes;
  c.groups = kv_cache_groups(info().n_layer, info().window_layers, info().sliding_window);
  return c;
}

Status Model::forward(const Batch& batch, const KvView& kv, float* logits, ThreadPool& pool) {
  CpuBackend backend(pool);
  return forward(batch, kv, logits, backend);
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const Family& f : families()) names.emplace_back(f.arch);
  return names;
}

Result<std::unique_ptr<Model>> load_model(std::shared_ptr<const ModelFile> file, const LoadOptions& options) {
  if (options.weight_type && !weight_type_of(*options.weight_type))
    return invalid_argument("weight_type " + std::string(dtype_name(*options.weight_type)) + ": load-time quantization writes Q8_0, Q4_0, I8_ROW or F8E4M3_ROW / _TENSOR");
  const std::string* arch = file->metadata().get_string("general.architecture");
  if (!arch) return malformed_file(file->path() + ": missing metadata key general.architecture");
  for (const Family& family : families()) {
    if (*arch != family.arch) continue;
    INFER_ASSIGN_OR_RETURN(DecoderSpec spec, family.describe(*file));
    auto model = std::make_unique<Decoder>(std::move(file), std::move(spec));
    INFER_RETURN_IF_ERROR(model->bind(options));
    return std::unique_ptr<Model>(std::move(model));
  }
  std::string list;
  for (const Family& family : families()) list += std::string(list.empty() ? "" : ", ") + family.arch;
  return unsupported(file->path() + ": unsupported architecture '" + *arch + "' (supported: " + list + ")");
}

}  // namespace infer
