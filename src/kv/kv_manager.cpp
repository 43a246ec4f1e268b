#include "kv/kv_manager.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace infer {

namespace {

// The chain's parent key of block 0 (any fixed odd constant; the fingerprint is mixed in per block).
constexpr uint64_t kSeedKey = 0x6a09e667f3bcc909ull;

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
constexpr uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Folds one value into a running hash: rotate-xor then the finalizer (order-dependent).
constexpr uint64_t fold(uint64_t h, uint64_t v) noexcept {
  return mix64(((h << 23) | (h >> 41)) ^ (v + 0x9e3779b97f4a7c15ull));
}

}  // namespace

Result<KvCacheManager> KvCacheManager::create(const KvCacheConfig& config, uint64_t fingerprint, bool prefix_cache) {
  auto cache = KvCache::create(config);
  if (!cache.ok()) return cache.status();
  KvCacheManager m;
  m.cache_ = std::move(cache).value();
  const int n_window_layers = config.n_window_layers();
  m.has_window_ = n_window_layers > 0;
  m.has_full_ = config.n_layer > n_window_layers;
  // Windowed blocks are dropped as the window passes, so a cached prefix could not be complete
  // for those layers: a model with any windowed layer computes every prompt.
  m.prefix_cache_ = prefix_cache && !m.has_window_;
  m.fingerprint_ = fingerprint;
  const KvView& v = m.cache_.view();
  // view().n_blocks is the full-attention pool (0 without full layers), n_window_blocks the
  // windowed pool (KvCache::n_blocks() would name the windowed pool for an all-windowed model).
  m.blocks_.resize(static_cast<size_t>(v.n_blocks));
  m.free_.reserve(static_cast<size_t>(v.n_blocks));
  for (int64_t b = v.n_blocks - 1; b >= 0; --b) m.free_.push_back(static_cast<int32_t>(b));  // 0 taken first
  if (m.prefix_cache_) m.index_.reserve(static_cast<size_t>(v.n_blocks));
  m.n_window_ = v.n_window_blocks;
  m.window_free_.reserve(static_cast<size_t>(m.n_window_));
  for (int64_t b = m.n_window_ - 1; b >= 0; --b) m.window_free_.push_back(static_cast<int32_t>(b));
  return m;
}

// Key of a block = fold over (parent key, fingerprint, its block_size token ids). A 64-bit chained
// hash without the tokens stored beside it: two different prefixes colliding would share K/V.
// vLLM ran with the same scheme (Python's 64-bit hash) for years; the odds for n cached blocks are
// about n^2 / 2^65, negligible for pools of millions of blocks.
uint64_t KvCacheManager::block_key(uint64_t parent, std::span<const int32_t> block_tokens) const noexcept {
  uint64_t h = fold(parent, fingerprint_);
  for (int32_t t : block_tokens) h = fold(h, static_cast<uint32_t>(t));
  return h;
}

int64_t KvCacheManager::match_prefix(KvSequence& seq, std::span<const int32_t> tokens) {
  assert(seq.kv.blocks.empty() && seq.kv.window_blocks.empty() && seq.kv.n_tokens == 0 && "match_prefix on an empty sequence");
  counters_.prefix_queries += 1;
  counters_.prefix_query_tokens += static_cast<int64_t>(tokens.size());
  if (!prefix_cache_ || tokens.empty()) return 0;
  const int64_t bs = block_size();
  // The last token is always computed: its logits pick the next token.
  const int64_t max_blocks = std::min<int64_t>((static_cast<int64_t>(tokens.size()) - 1) / bs, INT32_MAX / bs);
  uint64_t key = kSeedKey;
  int64_t hits = 0;
  for (; hits < max_blocks; ++hits) {
    key = block_key(key, tokens.subspan(static_cast<size_t>(hits * bs), static_cast<size_t>(bs)));
    auto it = index_.find(key);
    if (it == index_.end()) break;
    const int32_t b = it->second;
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.refs == 0) lru_remove(b);
    blk.refs += 1;
    seq.kv.blocks.push_back(b);
    seq.block_keys.push_back(key);
  }
  seq.kv.n_tokens = static_cast<int32_t>(hits * bs);
  seq.cached_tokens = hits * bs;
  counters_.prefix_hit_tokens += hits * bs;
  return hits * bs;
}

int64_t KvCacheManager::passed_window_blocks(const SequenceKv& seq) const noexcept {
  if (!has_window_) return 0;
  const int64_t first_position = static_cast<int64_t>(seq.n_tokens) - cache_.config().sliding_window + 1;
  if (first_position <= 0) return 0;
  const int64_t first_block = std::min<int64_t>(first_position / block_size(), static_cast<int64_t>(seq.window_blocks.size()));
  int64_t n = 0;
  for (int64_t i = 0; i < first_block; ++i) n += seq.window_blocks[static_cast<size_t>(i)] >= 0;
  return n;
}

int64_t KvCacheManager::extra_full_blocks(const SequenceKv& seq, int64_t n) const noexcept {
  if (!has_full_) return 0;
  const int64_t bs = block_size();
  return std::max<int64_t>(0, (seq.n_tokens + n + bs - 1) / bs - static_cast<int64_t>(seq.blocks.size()));
}

int64_t KvCacheManager::extra_window_blocks(const SequenceKv& seq, int64_t n) const noexcept {
  if (!has_window_) return 0;
  const int64_t bs = block_size();
  return std::max<int64_t>(0, (seq.n_tokens + n + bs - 1) / bs - static_cast<int64_t>(seq.window_blocks.size()));
}

bool KvCacheManager::can_append(const KvSequence& seq, int64_t n) const noexcept {
  assert(n >= 0);
  if (static_cast<int64_t>(seq.kv.n_tokens) + n > INT32_MAX) return false;
  if (extra_full_blocks(seq.kv, n) > static_cast<int64_t>(free_.size()) + n_cached_) return false;
  return extra_window_blocks(seq.kv, n) <= static_cast<int64_t>(window_free_.size()) + passed_window_blocks(seq.kv);
}

bool KvCacheManager::append(KvSequence& seq, int64_t n) {
  if (!can_append(seq, n)) return false;
  if (has_window_) {
    // As KvCache::append: blocks the next query (at n_tokens) no longer sees go back first.
    const int64_t first_position = static_cast<int64_t>(seq.kv.n_tokens) - cache_.config().sliding_window + 1;
    const int64_t first_block = first_position > 0 ? first_position / block_size() : 0;
    for (int64_t i = 0; i < first_block && i < static_cast<int64_t>(seq.kv.window_blocks.size()); ++i) {
      int32_t& b = seq.kv.window_blocks[static_cast<size_t>(i)];
      if (b < 0) continue;
      window_free_.push_back(b);
      b = -1;
    }
  }
  const int64_t extra_full = extra_full_blocks(seq.kv, n);
  const int64_t extra_window = extra_window_blocks(seq.kv, n);
  for (int64_t i = 0; i < extra_full; ++i) {
    const int32_t b = take_block();
    blocks_[static_cast<size_t>(b)].refs = 1;
    seq.kv.blocks.push_back(b);
  }
  for (int64_t i = 0; i < extra_window; ++i) {
    seq.kv.window_blocks.push_back(window_free_.back());
    window_free_.pop_back();
  }
  seq.kv.n_tokens += static_cast<int32_t>(n);
  return true;
}

int32_t KvCacheManager::take_block() {
  if (!free_.empty()) {
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  assert(lru_head_ >= 0 && "take_block with nothing free or cached");
  const int32_t b = lru_head_;
  lru_remove(b);
  Block& blk = blocks_[static_cast<size_t>(b)];
  index_.erase(blk.key);
  blk.registered = false;
  blk.key = 0;
  counters_.evictions += 1;
  return b;
}

void KvCacheManager::commit_full_blocks(KvSequence& seq, std::span<const int32_t> tokens) {
  if (!prefix_cache_) return;
  const int64_t bs = block_size();
  const int64_t n_full = seq.kv.n_tokens / bs;
  assert(static_cast<int64_t>(tokens.size()) >= n_full * bs && "commit_full_blocks needs the tokens of every full block");
  for (int64_t j = static_cast<int64_t>(seq.block_keys.size()); j < n_full; ++j) {
    const uint64_t parent = j == 0 ? kSeedKey : seq.block_keys[static_cast<size_t>(j - 1)];
    const uint64_t key = block_key(parent, tokens.subspan(static_cast<size_t>(j * bs), static_cast<size_t>(bs)));
    const int32_t b = seq.kv.blocks[static_cast<size_t>(j)];
    // Another block already holds this content: this one stays private (freed on release).
    if (auto [it, inserted] = index_.try_emplace(key, b); inserted) {
      Block& blk = blocks_[static_cast<size_t>(b)];
      assert(!blk.registered && blk.refs == 1);
      blk.registered = true;
      blk.key = key;
    }
    seq.block_keys.push_back(key);
  }
}

void KvCacheManager::release(KvSequence& seq) {
  // Tail first, each pushed at the most recently used end: a chain's later blocks are evicted
  // before its earlier ones, which every extension of the prefix needs.
  for (auto it = seq.kv.blocks.rbegin(); it != seq.kv.blocks.rend(); ++it) {
    Block& blk = blocks_[static_cast<size_t>(*it)];
    assert(blk.refs > 0);
    if (--blk.refs > 0) continue;
    if (blk.registered)
      lru_push_back(*it);
    else
      free_.push_back(*it);
  }
  for (auto it = seq.kv.window_blocks.rbegin(); it != seq.kv.window_blocks.rend(); ++it)
    if (*it >= 0) window_free_.push_back(*it);
  seq.kv.blocks.clear();
  seq.kv.window_blocks.clear();
  seq.kv.n_tokens = 0;
  seq.block_keys.clear();
  seq.cached_tokens = 0;
}

void KvCacheManager::lru_push_back(int32_t b) noexcept {
  Block& blk = blocks_[static_cast<size_t>(b)];
  blk.lru_prev = lru_tail_;
  blk.lru_next = -1;
  if (lru_tail_ >= 0)
    blocks_[static_cast<size_t>(lru_tail_)].lru_next = b;
  else
    lru_head_ = b;
  lru_tail_ = b;
  n_cached_ += 1;
}

void KvCacheManager::lru_remove(int32_t b) noexcept {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.lru_prev >= 0)
    blocks_[static_cast<size_t>(blk.lru_prev)].lru_next = blk.lru_next;
  else
    lru_head_ = blk.lru_next;
  if (blk.lru_next >= 0)
    blocks_[static_cast<size_t>(blk.lru_next)].lru_prev = blk.lru_prev;
  else
    lru_tail_ = blk.lru_prev;
  blk.lru_prev = blk.lru_next = -1;
  n_cached_ -= 1;
}

KvManagerStats KvCacheManager::stats() const noexcept {
  KvManagerStats s = counters_;
  s.total_blocks = static_cast<int64_t>(blocks_.size());
  s.cached_blocks = n_cached_;
  s.free_blocks = static_cast<int64_t>(free_.size());
  s.used_blocks = s.total_blocks - s.cached_blocks - s.free_blocks;
  s.window_blocks = n_window_;
  s.window_free_blocks = static_cast<int64_t>(window_free_.size());
  return s;
}

std::string KvCacheManager::check(std::span<const KvSequence* const> live) const {
  const auto id = [](int64_t b) { return std::to_string(b); };
  const int64_t n = static_cast<int64_t>(blocks_.size());
  const int64_t bs = block_size();

  // Live tables: references per block, no block twice in one table.
  std::vector<int32_t> refs(static_cast<size_t>(n), 0);
  std::vector<int32_t> window_owners(static_cast<size_t>(n_window_), 0);
  std::vector<int64_t> seen(static_cast<size_t>(n), -1), window_seen(static_cast<size_t>(n_window_), -1);
  for (size_t s = 0; s < live.size(); ++s) {
    const KvSequence& q = *live[s];
    const std::string who = "sequence " + std::to_string(s);
    const int64_t want = (q.kv.n_tokens + bs - 1) / bs;
    if (q.kv.n_tokens < 0) return who + ": negative length";
    if (static_cast<int64_t>(q.kv.blocks.size()) != (has_full_ ? want : 0))
      return who + ": " + std::to_string(q.kv.blocks.size()) + " full-pool blocks for " + std::to_string(q.kv.n_tokens) + " positions";
    if (static_cast<int64_t>(q.kv.window_blocks.size()) != (has_window_ ? want : 0))
      return who + ": " + std::to_string(q.kv.window_blocks.size()) + " windowed blocks for " + std::to_string(q.kv.n_tokens) + " positions";
    if (!prefix_cache_ && !q.block_keys.empty()) return who + ": block keys without prefix caching";
    if (static_cast<int64_t>(q.block_keys.size()) > q.kv.n_tokens / bs) return who + ": a key for a block not full";
    for (size_t i = 0; i < q.kv.blocks.size(); ++i) {
      const int32_t b = q.kv.blocks[i];
      if (b < 0 || b >= n) return who + ": block id " + id(b) + " out of range";
      if (seen[static_cast<size_t>(b)] == static_cast<int64_t>(s)) return who + ": block " + id(b) + " twice in its table";
      seen[static_cast<size_t>(b)] = static_cast<int64_t>(s);
      refs[static_cast<size_t>(b)] += 1;
      const Block& blk = blocks_[static_cast<size_t>(b)];
      if (i < q.block_keys.size() && blk.registered && blk.key != q.block_keys[i])
        return who + ": block " + id(b) + " registered under another key than the sequence's";
    }
    for (int32_t b : q.kv.window_blocks) {
      if (b < 0) continue;
      if (b >= n_window_) return who + ": windowed block id " + id(b) + " out of range";
      if (window_seen[static_cast<size_t>(b)] == static_cast<int64_t>(s)) return who + ": windowed block " + id(b) + " twice in its table";
      window_seen[static_cast<size_t>(b)] = static_cast<int64_t>(s);
      window_owners[static_cast<size_t>(b)] += 1;
    }
  }

  // Free list: unreferenced, unregistered, each block once.
  std::vector<uint8_t> in_free(static_cast<size_t>(n), 0), in_lru(static_cast<size_t>(n), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= n) return "free list: block id " + id(b) + " out of range";
    if (in_free[static_cast<size_t>(b)]) return "free list: block " + id(b) + " twice";
    in_free[static_cast<size_t>(b)] = 1;
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.refs != 0) return "free list: block " + id(b) + " has " + std::to_string(blk.refs) + " references";
    if (blk.registered) return "free list: block " + id(b) + " is registered";
  }

  // LRU list: links agree both ways, members unreferenced and registered, length n_cached_.
  int64_t length = 0;
  int32_t prev = -1;
  for (int32_t b = lru_head_; b >= 0; b = blocks_[static_cast<size_t>(b)].lru_next) {
    if (b >= n) return "LRU list: block id " + id(b) + " out of range";
    if (in_lru[static_cast<size_t>(b)]) return "LRU list: block " + id(b) + " twice (a cycle)";
    in_lru[static_cast<size_t>(b)] = 1;
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.lru_prev != prev) return "LRU list: block " + id(b) + "'s back link is wrong";
    if (blk.refs != 0) return "LRU list: block " + id(b) + " has " + std::to_string(blk.refs) + " references";
    if (!blk.registered) return "LRU list: block " + id(b) + " is not registered";
    prev = b;
    ++length;
  }
  if (prev != lru_tail_) return "LRU list: the tail is not the last block";
  if (length != n_cached_) return "LRU list: " + std::to_string(length) + " blocks, counted " + std::to_string(n_cached_);

  // Every block exactly one of used / cached / free, with the count the live tables give.
  int64_t registered = 0;
  for (int64_t b = 0; b < n; ++b) {
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.refs != refs[static_cast<size_t>(b)])
      return "block " + id(b) + ": " + std::to_string(blk.refs) + " references, held by " +
             std::to_string(refs[static_cast<size_t>(b)]) + " live tables";
    const int states = (blk.refs > 0) + in_lru[static_cast<size_t>(b)] + in_free[static_cast<size_t>(b)];
    if (states != 1) return "block " + id(b) + " is " + std::to_string(states) + " of used / cached / free";
    if (blk.registered) {
      ++registered;
      auto it = index_.find(blk.key);
      if (it == index_.end() || it->second != b) return "block " + id(b) + " is registered but not indexed under its key";
    }
  }
  for (const auto& [key, b] : index_) {
    if (b < 0 || b >= n) return "index: block id " + id(b) + " out of range";
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (!blk.registered || blk.key != key) return "index: block " + id(b) + " does not hold its key";
  }
  if (registered != static_cast<int64_t>(index_.size())) return "index: size differs from the registered blocks";
  if (!prefix_cache_ && !index_.empty()) return "index: entries without prefix caching";

  // Windowed pool: each block free or held by exactly one live sequence.
  std::vector<uint8_t> window_in_free(static_cast<size_t>(n_window_), 0);
  for (int32_t b : window_free_) {
    if (b < 0 || b >= n_window_) return "windowed free list: block id " + id(b) + " out of range";
    if (window_in_free[static_cast<size_t>(b)]) return "windowed free list: block " + id(b) + " twice";
    window_in_free[static_cast<size_t>(b)] = 1;
  }
  for (int64_t b = 0; b < n_window_; ++b) {
    const int owners = window_owners[static_cast<size_t>(b)] + window_in_free[static_cast<size_t>(b)];
    if (owners != 1) return "windowed block " + id(b) + " is free or held " + std::to_string(owners) + " times, not once";
  }
  return "";
}

}  // namespace infer
