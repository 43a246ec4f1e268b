#include "model/forward_util.hpp"

#include <string>

namespace infer {

Status check_batch(const Batch& b, const KvView& kv, int n_layer, int64_t n_vocab) {
  const size_t n = b.tokens.size();
  if (b.positions.size() != n || b.seq.size() != n || b.wants_logits.size() != n)
    return invalid_argument("batch: per-row arrays differ in length");
  if (!kv.layer_group.empty() && (kv.layer_group.size() != static_cast<size_t>(n_layer) || kv.layer_slot.size() != kv.layer_group.size()))
    return invalid_argument("batch: KV cache layers do not match the model");
  if (kv.n_groups <= 0 || kv.n_groups > kMaxKvGroups) return invalid_argument("batch: KV cache has no cache group");
  for (uint8_t g : kv.layer_group)
    if (g >= kv.n_groups) return invalid_argument("batch: KV cache layer in no cache group");
  for (size_t r = 0; r < n; ++r)
    if (b.tokens[r] < 0 || b.tokens[r] >= n_vocab)
      return invalid_argument("batch: token id " + std::to_string(b.tokens[r]) + " outside the vocabulary (" +
                              std::to_string(n_vocab) + ")");
  return Status::ok();
}

uint64_t model_fingerprint(const ModelFile& f, std::optional<DType> weight_type) {
  auto fnv1a = [](const uint8_t* p, uint64_t n, uint64_t h) {
    for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  };
  const uint64_t h = fnv1a(f.file().data(), f.data_offset(), 1469598103934665603ull);
  // The weights' identity: the file (its header and size) and the type matrices were converted to.
  const uint64_t ids[2] = {f.file_size(), weight_type ? 1 + static_cast<uint64_t>(*weight_type) : 0};
  return fnv1a(reinterpret_cast<const uint8_t*>(ids), sizeof ids, h);
}

}  // namespace infer
