#include "kv/kv_cache.hpp"

#include <cassert>
#include <string>

#include "core/checked_math.hpp"

namespace infer {

Result<KvCache> KvCache::create(const KvCacheConfig& c) {
  if (c.n_layer <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 || c.block_size <= 0)
    return invalid_argument("KV cache: layers, heads, head size and block size must be positive");
  if (c.kv_type != DType::f16 && c.kv_type != DType::f32)
    return invalid_argument("KV cache: type must be f16 or f32, not " + std::string(dtype_name(c.kv_type)));
  const uint64_t elem = dtype_traits(c.kv_type)->block_bytes;
  // K and V, every layer, every head, block_size positions of head_dim elements.
  auto per_block = checked_mul(2ull * static_cast<uint64_t>(c.n_layer) * static_cast<uint64_t>(c.n_kv_heads),
                               static_cast<uint64_t>(c.block_size) * static_cast<uint64_t>(c.head_dim) * elem);
  if (!per_block) return out_of_range("KV cache: block size overflows");
  const uint64_t n_blocks = c.budget_bytes / *per_block;
  if (n_blocks == 0)
    return out_of_range("KV cache: a budget of " + std::to_string(c.budget_bytes) + " bytes holds no block of " +
                        std::to_string(*per_block) + " bytes");
  if (n_blocks > INT32_MAX) return out_of_range("KV cache: too many blocks");

  KvCache kv;
  kv.config_ = c;
  kv.n_blocks_ = static_cast<int64_t>(n_blocks);
  kv.bytes_per_block_ = *per_block;
  auto storage = AlignedBuffer::zeros(static_cast<size_t>(n_blocks * *per_block));
  if (!storage.ok()) return storage.status().with_context("KV cache");
  kv.storage_ = std::move(storage).value();
  kv.free_.reserve(n_blocks);
  for (int64_t b = static_cast<int64_t>(n_blocks) - 1; b >= 0; --b) kv.free_.push_back(static_cast<int32_t>(b));

  KvView& v = kv.view_;
  v.n_kv_heads = c.n_kv_heads;
  v.head_dim = c.head_dim;
  v.block_size = c.block_size;
  v.n_blocks = kv.n_blocks_;
  v.kv_type = c.kv_type;
  v.elem_bytes = elem;
  v.k_base = kv.storage_.data();
  v.v_base = kv.storage_.data() + n_blocks * *per_block / 2;
  return kv;
}

uint64_t KvCache::budget_for_tokens(const KvCacheConfig& c, int64_t n_tokens) {
  const uint64_t blocks = static_cast<uint64_t>((n_tokens + c.block_size - 1) / c.block_size);
  const uint64_t elem = dtype_traits(c.kv_type)->block_bytes;
  return blocks * 2ull * static_cast<uint64_t>(c.n_layer) * static_cast<uint64_t>(c.n_kv_heads) *
         static_cast<uint64_t>(c.block_size) * static_cast<uint64_t>(c.head_dim) * elem;
}

int64_t KvCache::blocks_needed(const SequenceKv& seq, int64_t n_new) const noexcept {
  const int64_t bs = config_.block_size;
  const int64_t have = static_cast<int64_t>(seq.blocks.size());
  const int64_t need = (seq.n_tokens + n_new + bs - 1) / bs;
  return need > have ? need - have : 0;
}

bool KvCache::append(SequenceKv& seq, int64_t n_new) {
  const int64_t extra = blocks_needed(seq, n_new);
  if (extra > free_blocks()) return false;
  for (int64_t i = 0; i < extra; ++i) {
    seq.blocks.push_back(free_.back());
    free_.pop_back();
  }
  seq.n_tokens += static_cast<int32_t>(n_new);
  return true;
}

void KvCache::truncate(SequenceKv& seq, int64_t n_tokens) {
  assert(n_tokens >= 0 && n_tokens <= seq.n_tokens && "truncate only shrinks");
  const size_t keep = static_cast<size_t>((n_tokens + config_.block_size - 1) / config_.block_size);
  while (seq.blocks.size() > keep) {
    free_.push_back(seq.blocks.back());
    seq.blocks.pop_back();
  }
  seq.n_tokens = static_cast<int32_t>(n_tokens);
}

void KvCache::release(SequenceKv& seq) {
  for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) free_.push_back(*it);
  seq.blocks.clear();
  seq.n_tokens = 0;
}

}  // namespace infer
