#include "kv/kv_cache.hpp"

#include <algorithm>
#include <cassert>
#include <string>

#include "core/checked_math.hpp"

namespace infer {

int KvCacheConfig::n_window_layers() const noexcept {
  if (sliding_window <= 0) return 0;
  int n = 0;
  for (uint8_t w : window_layers) n += w != 0;
  return n;
}

int64_t KvCacheConfig::window_blocks_per_sequence() const noexcept {
  // Positions [p - window + 1, p + step - 1] for a step starting at p, over any block alignment.
  const int64_t span = static_cast<int64_t>(sliding_window) - 1 + std::max(1, max_step_tokens);
  return (span + block_size - 1) / block_size + 1;
}

namespace {

// Bytes of one block (K and V of n_layers layers); nullopt on overflow.
std::optional<uint64_t> block_bytes(const KvCacheConfig& c, int n_layers) {
  const uint64_t elem = dtype_traits(c.kv_type)->block_bytes;
  return checked_mul(2ull * static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(c.n_kv_heads),
                     static_cast<uint64_t>(c.block_size) * static_cast<uint64_t>(c.head_dim) * elem);
}

struct Plan {
  int64_t full = 0, window = 0;  // blocks per pool
};

// Splits the budget: the windowed pool gets what max_sequences windows need (never more blocks
// than the full pool, since a sequence never holds more windowed than full blocks), the full
// pool the rest. A model without full layers puts the whole budget in the windowed pool.
Plan plan_pools(uint64_t budget, uint64_t full_bytes, uint64_t window_bytes, int64_t window_cap) {
  Plan p;
  if (window_bytes == 0) {
    p.full = static_cast<int64_t>(budget / full_bytes);
  } else if (full_bytes == 0) {
    p.window = static_cast<int64_t>(budget / window_bytes);
  } else {
    const uint64_t both = full_bytes + window_bytes;
    const uint64_t cap_bytes = static_cast<uint64_t>(window_cap) * window_bytes;
    if (cap_bytes < budget && (budget - cap_bytes) / full_bytes >= static_cast<uint64_t>(window_cap)) {
      p.window = window_cap;
      p.full = static_cast<int64_t>((budget - cap_bytes) / full_bytes);
    } else {
      p.full = p.window = static_cast<int64_t>(budget / both);
    }
  }
  return p;
}

}  // namespace

Result<KvCache> KvCache::create(const KvCacheConfig& c) {
  if (c.n_layer <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 || c.block_size <= 0)
    return invalid_argument("KV cache: layers, heads, head size and block size must be positive");
  if (c.kv_type != DType::f16 && c.kv_type != DType::f32)
    return invalid_argument("KV cache: type must be f16 or f32, not " + std::string(dtype_name(c.kv_type)));
  if (!c.window_layers.empty() && c.window_layers.size() != static_cast<size_t>(c.n_layer))
    return invalid_argument("KV cache: window_layers must name every layer");
  if (c.sliding_window < 0 || c.max_sequences <= 0 || c.max_step_tokens <= 0)
    return invalid_argument("KV cache: sliding window, sequence and step limits must be positive");
  const int n_window = c.n_window_layers();
  const int n_full = c.n_layer - n_window;
  auto full_bytes = block_bytes(c, n_full);
  auto window_bytes = block_bytes(c, n_window);
  if (!full_bytes || !window_bytes) return out_of_range("KV cache: block size overflows");
  const int64_t window_cap =
      n_window > 0 ? std::min<int64_t>(INT32_MAX, static_cast<int64_t>(c.max_sequences) * c.window_blocks_per_sequence()) : 0;
  const Plan plan = plan_pools(c.budget_bytes, *full_bytes, *window_bytes, window_cap);
  if ((n_full > 0 && plan.full == 0) || (n_window > 0 && plan.window == 0))
    return out_of_range("KV cache: a budget of " + std::to_string(c.budget_bytes) + " bytes holds no block of " +
                        std::to_string(*full_bytes + *window_bytes) + " bytes");
  if (plan.full > INT32_MAX || plan.window > INT32_MAX) return out_of_range("KV cache: too many blocks");

  KvCache kv;
  kv.config_ = c;
  kv.n_full_layers_ = n_full;
  kv.n_window_layers_ = n_window;
  kv.n_blocks_ = n_full > 0 ? plan.full : plan.window;
  kv.n_window_blocks_ = n_full > 0 ? plan.window : 0;
  kv.bytes_per_block_ = n_full > 0 ? *full_bytes : *window_bytes;
  kv.bytes_per_window_block_ = n_full > 0 ? *window_bytes : 0;
  const uint64_t full_total = static_cast<uint64_t>(plan.full) * *full_bytes;
  const uint64_t window_total = static_cast<uint64_t>(plan.window) * *window_bytes;
  auto storage = AlignedBuffer::zeros(static_cast<size_t>(full_total + window_total));
  if (!storage.ok()) return storage.status().with_context("KV cache");
  kv.storage_ = std::move(storage).value();
  auto fill = [](std::vector<int32_t>& free, int64_t n) {
    free.reserve(static_cast<size_t>(n));
    for (int64_t b = n - 1; b >= 0; --b) free.push_back(static_cast<int32_t>(b));
  };
  fill(kv.free_, n_full > 0 ? plan.full : plan.window);
  fill(kv.window_free_, n_full > 0 ? plan.window : 0);

  KvView& v = kv.view_;
  v.n_kv_heads = c.n_kv_heads;
  v.head_dim = c.head_dim;
  v.block_size = c.block_size;
  v.kv_type = c.kv_type;
  v.elem_bytes = dtype_traits(c.kv_type)->block_bytes;
  uint8_t* base = kv.storage_.data();
  v.n_blocks = plan.full;
  v.k_base = base;
  v.v_base = base + full_total / 2;
  v.n_window_blocks = plan.window;
  v.window_k_base = base + full_total;
  v.window_v_base = base + full_total + window_total / 2;
  if (n_window > 0) {
    v.sliding_window = c.sliding_window;
    v.windowed.resize(static_cast<size_t>(c.n_layer));
    v.slot.resize(static_cast<size_t>(c.n_layer));
    int next_full = 0, next_window = 0;
    for (int l = 0; l < c.n_layer; ++l) {
      const bool w = c.window_layers[static_cast<size_t>(l)] != 0;
      v.windowed[static_cast<size_t>(l)] = w ? 1 : 0;
      v.slot[static_cast<size_t>(l)] = w ? next_window++ : next_full++;
    }
  }
  return kv;
}

uint64_t KvCache::budget_for_tokens(const KvCacheConfig& c, int64_t n_tokens) {
  const int64_t blocks = (n_tokens + c.block_size - 1) / c.block_size;
  const int n_window = c.n_window_layers();
  const uint64_t full = block_bytes(c, c.n_layer - n_window).value_or(0);
  const uint64_t window = block_bytes(c, n_window).value_or(0);
  const int64_t window_blocks =
      n_window > 0 ? std::min<int64_t>(blocks, static_cast<int64_t>(c.max_sequences) * c.window_blocks_per_sequence()) : 0;
  return static_cast<uint64_t>(blocks) * full + static_cast<uint64_t>(window_blocks) * window;
}

int64_t KvCache::blocks_needed(const SequenceKv& seq, int64_t n_new) const noexcept {
  const int64_t bs = config_.block_size;
  const auto& table = has_full() ? seq.blocks : seq.window_blocks;
  const int64_t have = static_cast<int64_t>(table.size());
  const int64_t need = (seq.n_tokens + n_new + bs - 1) / bs;
  return need > have ? need - have : 0;
}

void KvCache::drop_window_blocks(SequenceKv& seq, int64_t first_position) {
  const int64_t first_block = first_position / config_.block_size;
  for (int64_t i = 0; i < first_block && i < static_cast<int64_t>(seq.window_blocks.size()); ++i) {
    int32_t& b = seq.window_blocks[static_cast<size_t>(i)];
    if (b < 0) continue;
    (has_full() ? window_free_ : free_).push_back(b);
    b = -1;
  }
}

bool KvCache::append(SequenceKv& seq, int64_t n_new) {
  if (has_window()) drop_window_blocks(seq, static_cast<int64_t>(seq.n_tokens) - config_.sliding_window + 1);
  const int64_t bs = config_.block_size;
  const int64_t need = (seq.n_tokens + n_new + bs - 1) / bs;
  const int64_t extra_full = has_full() ? std::max<int64_t>(0, need - static_cast<int64_t>(seq.blocks.size())) : 0;
  const int64_t extra_window =
      has_window() ? std::max<int64_t>(0, need - static_cast<int64_t>(seq.window_blocks.size())) : 0;
  std::vector<int32_t>& window_pool = has_full() ? window_free_ : free_;
  if (extra_full > static_cast<int64_t>(free_.size())) return false;
  if (extra_window > static_cast<int64_t>(window_pool.size())) return false;
  for (int64_t i = 0; i < extra_full; ++i) {
    seq.blocks.push_back(free_.back());
    free_.pop_back();
  }
  for (int64_t i = 0; i < extra_window; ++i) {
    seq.window_blocks.push_back(window_pool.back());
    window_pool.pop_back();
  }
  seq.n_tokens += static_cast<int32_t>(n_new);
  return true;
}

bool KvCache::truncate(SequenceKv& seq, int64_t n_tokens) {
  assert(n_tokens >= 0 && n_tokens <= seq.n_tokens && "truncate only shrinks");
  const int64_t bs = config_.block_size;
  const size_t keep = static_cast<size_t>((n_tokens + bs - 1) / bs);
  if (has_window()) {
    // A query at n_tokens sees positions from n_tokens - window + 1 on: their blocks must remain.
    const int64_t first = std::max<int64_t>(0, n_tokens - config_.sliding_window + 1);
    for (size_t i = static_cast<size_t>(first / bs); i < keep && i < seq.window_blocks.size(); ++i)
      if (seq.window_blocks[i] < 0) return false;
    std::vector<int32_t>& window_pool = has_full() ? window_free_ : free_;
    while (seq.window_blocks.size() > keep) {
      if (seq.window_blocks.back() >= 0) window_pool.push_back(seq.window_blocks.back());
      seq.window_blocks.pop_back();
    }
  }
  while (seq.blocks.size() > keep) {
    free_.push_back(seq.blocks.back());
    seq.blocks.pop_back();
  }
  seq.n_tokens = static_cast<int32_t>(n_tokens);
  return true;
}

void KvCache::release(SequenceKv& seq) {
  for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) free_.push_back(*it);
  std::vector<int32_t>& window_pool = has_full() ? window_free_ : free_;
  for (auto it = seq.window_blocks.rbegin(); it != seq.window_blocks.rend(); ++it)
    if (*it >= 0) window_pool.push_back(*it);
  seq.blocks.clear();
  seq.window_blocks.clear();
  seq.n_tokens = 0;
}

}  // namespace infer
