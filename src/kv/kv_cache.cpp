#include "kv/kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "core/checked_math.hpp"

namespace infer {

std::vector<KvCacheSpec> kv_cache_groups(int n_layer, const std::vector<uint8_t>& window_layers, int sliding_window) {
  KvCacheSpec full, window;
  window.sliding_window = sliding_window;
  for (int l = 0; l < n_layer; ++l) {
    const bool w = sliding_window > 0 && static_cast<size_t>(l) < window_layers.size() && window_layers[static_cast<size_t>(l)] != 0;
    (w ? window : full).layers.push_back(l);
  }
  std::vector<KvCacheSpec> groups;
  if (!full.layers.empty()) groups.push_back(std::move(full));
  if (!window.layers.empty()) groups.push_back(std::move(window));
  return groups;
}

int64_t KvCacheConfig::window_blocks_per_sequence(int window) const noexcept {
  // Positions [p - window + 1, p + step - 1] for a step starting at p, over any block alignment.
  const int64_t span = static_cast<int64_t>(window) - 1 + std::max(1, max_step_tokens);
  return (span + block_size - 1) / block_size + 1;
}

std::vector<KvCacheSpec> KvCacheConfig::resolved_groups() const {
  if (!groups.empty()) return groups;
  return kv_cache_groups(n_layer, {}, 0);
}

namespace {

// Bytes of one block of a group of n_layers layers (K and V); nullopt on overflow.
std::optional<uint64_t> block_bytes(const KvCacheConfig& c, size_t n_layers) {
  const auto row = dtype_row_bytes(c.kv_type, static_cast<uint64_t>(c.head_dim));
  if (!row) return std::nullopt;  // a head size the type's blocks do not divide
  return checked_mul(2ull * static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(c.n_kv_heads),
                     static_cast<uint64_t>(c.block_size) * *row);
}

// The most blocks a windowed group can need at once: max_sequences windows (never more than
// INT32_MAX block ids).
int64_t window_cap(const KvCacheConfig& c, const KvCacheSpec& g) {
  return std::min<int64_t>(INT32_MAX, static_cast<int64_t>(c.max_sequences) * c.window_blocks_per_sequence(g.sliding_window));
}

// Blocks per group. Windowed groups get what max_sequences windows need (never more blocks than a
// full-attention pool, since a sequence never holds more windowed than full blocks), the
// full-attention groups the rest, one count for all of them. A model without full-attention
// layers splits the whole budget evenly between its windowed groups.
std::vector<int64_t> plan_pools(const KvCacheConfig& c, const std::vector<KvCacheSpec>& groups,
                                const std::vector<uint64_t>& bytes) {
  uint64_t full = 0, window = 0, capped = 0;
  int64_t max_cap = 0;
  bool capped_overflows = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].windowed()) {
      full += bytes[g];
      continue;
    }
    window += bytes[g];
    const int64_t cap = window_cap(c, groups[g]);
    max_cap = std::max(max_cap, cap);
    const auto b = checked_mul(static_cast<uint64_t>(cap), bytes[g]);
    const auto sum = b ? checked_add(capped, *b) : std::nullopt;
    capped_overflows |= !sum;
    capped = sum.value_or(0);
  }
  const uint64_t budget = c.budget_bytes;
  int64_t n_full = 0, n_window = -1;  // -1: windowed groups get their caps
  if (full == 0) {
    n_window = static_cast<int64_t>(budget / window);
  } else if (window == 0) {
    n_full = static_cast<int64_t>(budget / full);
  } else if (!capped_overflows && capped < budget && (budget - capped) / full >= static_cast<uint64_t>(max_cap)) {
    n_full = static_cast<int64_t>((budget - capped) / full);
  } else {
    n_full = n_window = static_cast<int64_t>(budget / (full + window));
  }
  std::vector<int64_t> n(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    n[g] = !groups[g].windowed() ? n_full : n_window >= 0 ? n_window : window_cap(c, groups[g]);
  return n;
}

}  // namespace

KvRotation kv_rotation(const KvCacheConfig& c) noexcept {
  if (!c.rotate || c.kv_type != DType::q8_0 || c.head_dim % 64 != 0) return {};
  int k = 64;
  while (k < kMaxKvRotation && c.head_dim % (2 * k) == 0) k *= 2;
  return {k, 64};
}

Result<KvCache> KvCache::create(const KvCacheConfig& config, const KvAllocator& allocate) {
  const KvCacheConfig& c = config;
  if (c.n_layer <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 || c.block_size <= 0)
    return invalid_argument("KV cache: layers, heads, head size and block size must be positive");
  if (c.kv_type != DType::f16 && c.kv_type != DType::f32 && c.kv_type != DType::bf16 && c.kv_type != DType::q8_0 &&
      c.kv_type != DType::f8_e4m3)
    return invalid_argument("KV cache: type must be f16, f32, bf16, q8_0 or f8_e4m3, not " + std::string(dtype_name(c.kv_type)));
  if (!dtype_row_bytes(c.kv_type, static_cast<uint64_t>(c.head_dim)))
    return invalid_argument("KV cache: " + std::string(dtype_name(c.kv_type)) + " needs a head size that is a multiple of " +
                            std::to_string(dtype_traits(c.kv_type)->block_size) + ", not " + std::to_string(c.head_dim));
  if (c.max_sequences <= 0 || c.max_step_tokens <= 0)
    return invalid_argument("KV cache: sequence and step limits must be positive");
  KvCacheConfig resolved = c;
  resolved.groups = c.resolved_groups();
  const std::vector<KvCacheSpec>& groups = resolved.groups;
  if (groups.size() > static_cast<size_t>(kMaxKvGroups))
    return invalid_argument("KV cache: " + std::to_string(groups.size()) + " cache groups, at most " + std::to_string(kMaxKvGroups));
  std::vector<int> group_of(static_cast<size_t>(c.n_layer), -1);
  std::vector<uint64_t> bytes;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].sliding_window < 0) return invalid_argument("KV cache: a negative sliding window");
    if (groups[g].layers.empty()) return invalid_argument("KV cache: cache group " + std::to_string(g) + " has no layer");
    for (int32_t l : groups[g].layers) {
      if (l < 0 || l >= c.n_layer) return invalid_argument("KV cache: layer " + std::to_string(l) + " out of range");
      if (group_of[static_cast<size_t>(l)] >= 0) return invalid_argument("KV cache: layer " + std::to_string(l) + " in two groups");
      group_of[static_cast<size_t>(l)] = static_cast<int>(g);
    }
    auto b = block_bytes(c, groups[g].layers.size());
    if (!b) return out_of_range("KV cache: block size overflows");
    bytes.push_back(*b);
  }
  for (int l = 0; l < c.n_layer; ++l)
    if (group_of[static_cast<size_t>(l)] < 0) return invalid_argument("KV cache: layer " + std::to_string(l) + " in no group");

  const std::vector<int64_t> n = plan_pools(c, groups, bytes);
  uint64_t total = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (n[g] == 0) {
      uint64_t all = 0;
      for (uint64_t b : bytes) all += b;
      return out_of_range("KV cache: a budget of " + std::to_string(c.budget_bytes) + " bytes holds no block of " +
                          std::to_string(all) + " bytes");
    }
    if (n[g] > INT32_MAX) return out_of_range("KV cache: too many blocks");
    total += static_cast<uint64_t>(n[g]) * bytes[g];  // <= budget_bytes
  }

  KvCache kv;
  auto storage = allocate ? allocate(static_cast<size_t>(total)) : AlignedBuffer::zeros(static_cast<size_t>(total));
  if (!storage.ok()) return storage.status().with_context("KV cache");
  kv.storage_ = std::move(storage).value();
  kv.block_bytes_ = bytes;
  KvView& v = kv.view_;
  v.n_kv_heads = c.n_kv_heads;
  v.head_dim = c.head_dim;
  v.block_size = c.block_size;
  v.kv_type = c.kv_type;
  v.row_bytes = *dtype_row_bytes(c.kv_type, static_cast<uint64_t>(c.head_dim));
  const KvRotation rotation = kv_rotation(c);
  v.k_rotation = rotation.k;
  v.v_rotation = rotation.v;
  v.n_groups = static_cast<int>(groups.size());
  v.layer_group.resize(static_cast<size_t>(c.n_layer));
  v.layer_slot.resize(static_cast<size_t>(c.n_layer));
  uint8_t* base = kv.storage_.data();
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint64_t pool = static_cast<uint64_t>(n[g]) * bytes[g];
    KvGroupView& gv = v.groups[g];
    gv.sliding_window = groups[g].sliding_window;
    gv.n_layers = static_cast<int>(groups[g].layers.size());
    gv.n_blocks = n[g];
    gv.k_base = base;
    gv.v_base = base + pool / 2;
    base += pool;
    for (size_t s = 0; s < groups[g].layers.size(); ++s) {
      v.layer_group[static_cast<size_t>(groups[g].layers[s])] = static_cast<uint8_t>(g);
      v.layer_slot[static_cast<size_t>(groups[g].layers[s])] = static_cast<int32_t>(s);
    }
  }
  kv.config_ = std::move(resolved);
  return kv;
}

uint64_t KvCache::budget_for_tokens(const KvCacheConfig& c, int64_t n_tokens) {
  const int64_t blocks = (n_tokens + c.block_size - 1) / c.block_size;
  uint64_t total = 0;
  for (const KvCacheSpec& g : c.resolved_groups()) {
    const uint64_t bytes = block_bytes(c, g.layers.size()).value_or(0);
    const int64_t n = g.windowed() ? std::min<int64_t>(blocks, window_cap(c, g)) : blocks;
    total += static_cast<uint64_t>(n) * bytes;
  }
  return total;
}

void KvCache::copy_block(int g, int32_t from, int32_t to) noexcept {
  const KvGroupView& gv = view_.groups[static_cast<size_t>(g)];
  const uint64_t per_slot = bytes_per_block(g) / 2 / static_cast<uint64_t>(gv.n_layers);  // one layer's K (or V) of a block
  for (int s = 0; s < gv.n_layers; ++s) {
    const uint64_t row = static_cast<uint64_t>(s) * static_cast<uint64_t>(gv.n_blocks);
    for (uint8_t* base : {gv.k_base, gv.v_base})
      std::memmove(base + (row + static_cast<uint64_t>(to)) * per_slot, base + (row + static_cast<uint64_t>(from)) * per_slot, per_slot);
  }
}

}  // namespace infer
