#include "kv/kv_manager.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "core/block_hash.hpp"

namespace infer {

namespace {

// The chain's parent key of block 0 (any fixed odd constant; the fingerprint is mixed in per block).
constexpr uint64_t kSeedKey = 0x6a09e667f3bcc909ull;

}  // namespace

Result<KvCacheManager> KvCacheManager::create(const KvCacheConfig& config, uint64_t fingerprint, bool prefix_cache,
                                              const KvAllocator& allocate) {
  auto cache = KvCache::create(config, allocate);
  if (!cache.ok()) return cache.status();
  KvCacheManager m;
  m.cache_ = std::move(cache).value();
  m.prefix_cache_ = prefix_cache;
  m.fingerprint_ = fingerprint;
  m.n_groups_ = m.cache_.n_groups();
  for (int gi = 0; gi < m.n_groups_; ++gi) {
    Group& g = m.groups_[static_cast<size_t>(gi)];
    const int64_t n = m.cache_.n_blocks(gi);
    g.window = m.cache_.spec(gi).sliding_window;
    g.blocks.resize(static_cast<size_t>(n));
    g.free.reserve(static_cast<size_t>(n));
    for (int64_t b = n - 1; b >= 0; --b) g.free.push_back(static_cast<int32_t>(b));  // 0 taken first
    if (prefix_cache) g.index.reserve(static_cast<size_t>(n));
  }
  return m;
}

int64_t KvCacheManager::sequence_capacity() const noexcept {
  int64_t cap = INT64_MAX;
  for (int gi = 0; gi < n_groups_; ++gi)
    if (groups_[static_cast<size_t>(gi)].window == 0) cap = std::min(cap, cache_.n_blocks(gi) * block_size());
  return cap;
}

// Key of a block = fold over (parent key, fingerprint, its block_size token ids). A 64-bit chained
// hash without the tokens stored beside it: two different prefixes colliding would share K/V.
// vLLM ran with the same scheme (Python's 64-bit hash) for years; the odds for n cached blocks are
// about n^2 / 2^65, negligible for pools of millions of blocks.
uint64_t KvCacheManager::block_key(uint64_t parent, std::span<const int32_t> block_tokens) const noexcept {
  return chain_block_hash(parent, fingerprint_, block_tokens);
}

int64_t KvCacheManager::first_needed_block(const Group& g, int64_t pos) const noexcept {
  if (g.window == 0) return 0;
  const int64_t first_position = pos - g.window + 1;
  return first_position > 0 ? first_position / block_size() : 0;
}

int64_t KvCacheManager::passed_blocks(const Group& g, const std::vector<int32_t>& table, int64_t n_tokens) const noexcept {
  if (g.window == 0) return 0;
  const int64_t first = std::min<int64_t>(first_needed_block(g, n_tokens), static_cast<int64_t>(table.size()));
  int64_t n = 0;
  for (int64_t i = 0; i < first; ++i) {
    const int32_t b = table[static_cast<size_t>(i)];
    n += b >= 0 && g.blocks[static_cast<size_t>(b)].refs == 1;  // a shared block stays in use
  }
  return n;
}

int64_t KvCacheManager::extra_blocks(const std::vector<int32_t>& table, int64_t n_tokens) const noexcept {
  const int64_t bs = block_size();
  return std::max<int64_t>(0, (n_tokens + bs - 1) / bs - static_cast<int64_t>(table.size()));
}

int64_t KvCacheManager::match_prefix(KvSequence& seq, std::span<const int32_t> tokens) {
  assert(seq.kv.n_tokens == 0 && seq.block_keys.empty() && "match_prefix on an empty sequence");
  counters_.prefix_queries += 1;
  counters_.prefix_query_tokens += static_cast<int64_t>(tokens.size());
  if (!prefix_cache_ || tokens.empty()) return 0;
  const int64_t bs = block_size();
  // The last token is always computed: its logits pick the next token.
  int64_t limit = std::min<int64_t>((static_cast<int64_t>(tokens.size()) - 1) / bs, INT32_MAX / bs);
  // The candidates' keys, as far as every full-attention group holds the whole prefix.
  keys_.clear();
  uint64_t key = kSeedKey;
  for (int64_t i = 0; i < limit; ++i) {
    key = block_key(key, tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs)));
    bool cached = true;
    for (int gi = 0; gi < n_groups_ && cached; ++gi) {
      const Group& g = groups_[static_cast<size_t>(gi)];
      cached = g.window > 0 || g.index.contains(key);
    }
    if (!cached) {
      limit = i;
      break;
    }
    keys_.push_back(key);
  }
  // A windowed group accepts a prefix of n blocks when it holds the blocks a query at n * bs
  // sees: [first_needed_block(n * bs), n), whatever it dropped before them.
  accepted_.assign(static_cast<size_t>(limit + 1), 1);
  for (int gi = 0; gi < n_groups_; ++gi) {
    const Group& g = groups_[static_cast<size_t>(gi)];
    if (g.window == 0) continue;
    int64_t run = 0;  // cached blocks in a row ending at block i
    for (int64_t i = 0; i < limit; ++i) {
      run = g.index.contains(keys_[static_cast<size_t>(i)]) ? run + 1 : 0;
      const int64_t n = i + 1;
      if (run < n - first_needed_block(g, n * bs)) accepted_[static_cast<size_t>(n)] = 0;
    }
  }
  int64_t hits = limit;
  while (hits > 0 && !accepted_[static_cast<size_t>(hits)]) --hits;

  for (int gi = 0; gi < n_groups_; ++gi) {
    Group& g = groups_[static_cast<size_t>(gi)];
    std::vector<int32_t>& table = seq.kv.tables[static_cast<size_t>(gi)];
    const int64_t first = first_needed_block(g, hits * bs);
    for (int64_t i = 0; i < hits; ++i) {
      if (i < first) {
        table.push_back(-1);
        continue;
      }
      const int32_t b = g.index.find(keys_[static_cast<size_t>(i)])->second;
      Block& blk = g.blocks[static_cast<size_t>(b)];
      if (blk.refs == 0) lru_remove(g, b);
      blk.refs += 1;
      table.push_back(b);
    }
  }
  seq.block_keys.assign(keys_.begin(), keys_.begin() + static_cast<ptrdiff_t>(hits));
  seq.kv.n_tokens = static_cast<int32_t>(hits * bs);
  seq.cached_tokens = hits * bs;
  counters_.prefix_hit_tokens += hits * bs;
  return hits * bs;
}

bool KvCacheManager::can_append(const KvSequence& seq, int64_t n) const noexcept {
  assert(n >= 0);
  const int64_t n_tokens = seq.kv.n_tokens;
  if (n_tokens + n > INT32_MAX) return false;
  for (int gi = 0; gi < n_groups_; ++gi) {
    const Group& g = groups_[static_cast<size_t>(gi)];
    const std::vector<int32_t>& table = seq.kv.tables[static_cast<size_t>(gi)];
    const int64_t extra = extra_blocks(table, n_tokens + n);
    if (extra > 0 && extra > g.available() + passed_blocks(g, table, n_tokens)) return false;
  }
  return true;
}

bool KvCacheManager::append(KvSequence& seq, int64_t n) {
  if (!can_append(seq, n)) return false;
  const int64_t n_tokens = seq.kv.n_tokens;
  for (int gi = 0; gi < n_groups_; ++gi) {
    Group& g = groups_[static_cast<size_t>(gi)];
    std::vector<int32_t>& table = seq.kv.tables[static_cast<size_t>(gi)];
    // Blocks the next query (at n_tokens) no longer sees go back first.
    const int64_t first = std::min<int64_t>(first_needed_block(g, n_tokens), static_cast<int64_t>(table.size()));
    for (int64_t i = 0; i < first; ++i) {
      int32_t& b = table[static_cast<size_t>(i)];
      if (b < 0) continue;
      unref(g, b);
      b = -1;
    }
    for (int64_t i = 0, extra = extra_blocks(table, n_tokens + n); i < extra; ++i) table.push_back(take_block(g));
  }
  seq.kv.n_tokens = static_cast<int32_t>(n_tokens + n);
  return true;
}

bool KvCacheManager::truncate(KvSequence& seq, int64_t n_tokens) {
  assert(n_tokens >= 0 && n_tokens <= seq.kv.n_tokens && "truncate only shrinks");
  const int64_t bs = block_size();
  const int64_t keep = (n_tokens + bs - 1) / bs;
  const bool partial = n_tokens % bs != 0;  // the last kept block's later slots are written again
  for (int gi = 0; gi < n_groups_; ++gi) {
    const Group& g = groups_[static_cast<size_t>(gi)];
    const std::vector<int32_t>& table = seq.kv.tables[static_cast<size_t>(gi)];
    // A query at n_tokens sees positions from n_tokens - window + 1 on: their blocks must remain.
    for (int64_t i = first_needed_block(g, n_tokens); i < keep; ++i)
      if (table[static_cast<size_t>(i)] < 0) return false;
    if (partial && g.blocks[static_cast<size_t>(table[static_cast<size_t>(keep - 1)])].refs > 1 && g.available() == 0)
      return false;
  }
  for (int gi = 0; gi < n_groups_; ++gi) {
    Group& g = groups_[static_cast<size_t>(gi)];
    std::vector<int32_t>& table = seq.kv.tables[static_cast<size_t>(gi)];
    while (static_cast<int64_t>(table.size()) > keep) {
      if (table.back() >= 0) unref(g, table.back());
      table.pop_back();
    }
    if (!partial) continue;
    int32_t& last = table[static_cast<size_t>(keep - 1)];
    Block& blk = g.blocks[static_cast<size_t>(last)];
    if (blk.refs > 1) {  // others read this content: write into a copy
      const int32_t copy = take_block(g);
      cache_.copy_block(gi, last, copy);
      unref(g, last);
      last = copy;
    } else if (blk.registered) {  // its content will no longer match its key
      unregister(g, last);
    }
  }
  if (static_cast<int64_t>(seq.block_keys.size()) > n_tokens / bs) seq.block_keys.resize(static_cast<size_t>(n_tokens / bs));
  seq.cached_tokens = std::min(seq.cached_tokens, n_tokens);
  seq.kv.n_tokens = static_cast<int32_t>(n_tokens);
  return true;
}

int32_t KvCacheManager::take_block(Group& g) {
  int32_t b;
  if (!g.free.empty()) {
    b = g.free.back();
    g.free.pop_back();
  } else {
    assert(g.lru_head >= 0 && "take_block with nothing free or cached");
    b = g.lru_head;
    lru_remove(g, b);
    unregister(g, b);
    counters_.evictions += 1;
  }
  g.blocks[static_cast<size_t>(b)].refs = 1;
  return b;
}

void KvCacheManager::unref(Group& g, int32_t b) noexcept {
  Block& blk = g.blocks[static_cast<size_t>(b)];
  assert(blk.refs > 0);
  if (--blk.refs > 0) return;
  if (blk.registered)
    lru_push_back(g, b);
  else
    g.free.push_back(b);
}

void KvCacheManager::unregister(Group& g, int32_t b) noexcept {
  Block& blk = g.blocks[static_cast<size_t>(b)];
  g.index.erase(blk.key);
  blk.registered = false;
  blk.key = 0;
}

void KvCacheManager::commit_full_blocks(KvSequence& seq, std::span<const int32_t> tokens) {
  if (!prefix_cache_) return;
  const int64_t bs = block_size();
  const int64_t n_full = seq.kv.n_tokens / bs;
  assert(static_cast<int64_t>(tokens.size()) >= n_full * bs && "commit_full_blocks needs the tokens of every full block");
  for (int64_t j = static_cast<int64_t>(seq.block_keys.size()); j < n_full; ++j) {
    const uint64_t parent = j == 0 ? kSeedKey : seq.block_keys[static_cast<size_t>(j - 1)];
    const uint64_t key = block_key(parent, tokens.subspan(static_cast<size_t>(j * bs), static_cast<size_t>(bs)));
    for (int gi = 0; gi < n_groups_; ++gi) {
      Group& g = groups_[static_cast<size_t>(gi)];
      const int32_t b = seq.kv.tables[static_cast<size_t>(gi)][static_cast<size_t>(j)];
      if (b < 0) continue;
      // Another block already holds this content: this one stays private (freed on release).
      if (auto [it, inserted] = g.index.try_emplace(key, b); inserted) {
        Block& blk = g.blocks[static_cast<size_t>(b)];
        assert(!blk.registered && blk.refs >= 1);
        blk.registered = true;
        blk.key = key;
      }
    }
    seq.block_keys.push_back(key);
  }
}

void KvCacheManager::release(KvSequence& seq) {
  // Tail first, each pushed at the most recently used end: a chain's later blocks are evicted
  // before its earlier ones, which every extension of the prefix needs.
  for (int gi = 0; gi < n_groups_; ++gi) {
    Group& g = groups_[static_cast<size_t>(gi)];
    std::vector<int32_t>& table = seq.kv.tables[static_cast<size_t>(gi)];
    for (auto it = table.rbegin(); it != table.rend(); ++it)
      if (*it >= 0) unref(g, *it);
    table.clear();
  }
  seq.kv.n_tokens = 0;
  seq.block_keys.clear();
  seq.cached_tokens = 0;
}

void KvCacheManager::lru_push_back(Group& g, int32_t b) noexcept {
  Block& blk = g.blocks[static_cast<size_t>(b)];
  blk.lru_prev = g.lru_tail;
  blk.lru_next = -1;
  if (g.lru_tail >= 0)
    g.blocks[static_cast<size_t>(g.lru_tail)].lru_next = b;
  else
    g.lru_head = b;
  g.lru_tail = b;
  g.n_cached += 1;
}

void KvCacheManager::lru_remove(Group& g, int32_t b) noexcept {
  Block& blk = g.blocks[static_cast<size_t>(b)];
  if (blk.lru_prev >= 0)
    g.blocks[static_cast<size_t>(blk.lru_prev)].lru_next = blk.lru_next;
  else
    g.lru_head = blk.lru_next;
  if (blk.lru_next >= 0)
    g.blocks[static_cast<size_t>(blk.lru_next)].lru_prev = blk.lru_prev;
  else
    g.lru_tail = blk.lru_prev;
  blk.lru_prev = blk.lru_next = -1;
  g.n_cached -= 1;
}

KvManagerStats KvCacheManager::stats() const noexcept {
  KvManagerStats s = counters_;
  s.n_groups = n_groups_;
  for (int gi = 0; gi < n_groups_; ++gi) {
    const Group& g = groups_[static_cast<size_t>(gi)];
    KvGroupStats& gs = s.groups[static_cast<size_t>(gi)];
    gs.total_blocks = static_cast<int64_t>(g.blocks.size());
    gs.cached_blocks = g.n_cached;
    gs.free_blocks = static_cast<int64_t>(g.free.size());
    gs.used_blocks = gs.total_blocks - gs.cached_blocks - gs.free_blocks;
    s.total_blocks += gs.total_blocks;
    s.used_blocks += gs.used_blocks;
    s.cached_blocks += gs.cached_blocks;
    s.free_blocks += gs.free_blocks;
  }
  return s;
}

std::string KvCacheManager::check(std::span<const KvSequence* const> live) const {
  const int64_t bs = block_size();
  for (size_t s = 0; s < live.size(); ++s) {
    const KvSequence& q = *live[s];
    const std::string who = "sequence " + std::to_string(s);
    if (q.kv.n_tokens < 0) return who + ": negative length";
    if (!prefix_cache_ && !q.block_keys.empty()) return who + ": block keys without prefix caching";
    if (static_cast<int64_t>(q.block_keys.size()) > q.kv.n_tokens / bs) return who + ": a key for a block not full";
    for (size_t gi = static_cast<size_t>(n_groups_); gi < q.kv.tables.size(); ++gi)
      if (!q.kv.tables[gi].empty()) return who + ": a table for a cache group the cache lacks";
  }
  for (int gi = 0; gi < n_groups_; ++gi) {
    std::string r = check_group(gi, live);
    if (!r.empty()) return (n_groups_ > 1 ? "group " + std::to_string(gi) + ": " : std::string()) + r;
  }
  return "";
}

std::string KvCacheManager::check_group(int gi, std::span<const KvSequence* const> live) const {
  const auto id = [](int64_t b) { return std::to_string(b); };
  const Group& g = groups_[static_cast<size_t>(gi)];
  const int64_t n = static_cast<int64_t>(g.blocks.size());
  const int64_t bs = block_size();

  // Live tables: references per block, no block twice in one table, -1 only before the window.
  std::vector<int32_t> refs(static_cast<size_t>(n), 0);
  std::vector<int64_t> seen(static_cast<size_t>(n), -1);
  for (size_t s = 0; s < live.size(); ++s) {
    const KvSequence& q = *live[s];
    const std::vector<int32_t>& table = q.kv.tables[static_cast<size_t>(gi)];
    const std::string who = "sequence " + std::to_string(s);
    if (static_cast<int64_t>(table.size()) != (q.kv.n_tokens + bs - 1) / bs)
      return who + ": " + std::to_string(table.size()) + " blocks for " + std::to_string(q.kv.n_tokens) + " positions";
    const int64_t first = first_needed_block(g, q.kv.n_tokens);
    for (size_t i = 0; i < table.size(); ++i) {
      const int32_t b = table[i];
      if (b == -1 && static_cast<int64_t>(i) < first) continue;
      if (b < 0 || b >= n) return who + ": block id " + id(b) + " at " + std::to_string(i) + " out of range";
      if (seen[static_cast<size_t>(b)] == static_cast<int64_t>(s)) return who + ": block " + id(b) + " twice in its table";
      seen[static_cast<size_t>(b)] = static_cast<int64_t>(s);
      refs[static_cast<size_t>(b)] += 1;
      const Block& blk = g.blocks[static_cast<size_t>(b)];
      if (i < q.block_keys.size() && blk.registered && blk.key != q.block_keys[i])
        return who + ": block " + id(b) + " registered under another key than the sequence's";
    }
  }

  // Free list: unreferenced, unregistered, each block once.
  std::vector<uint8_t> in_free(static_cast<size_t>(n), 0), in_lru(static_cast<size_t>(n), 0);
  for (int32_t b : g.free) {
    if (b < 0 || b >= n) return "free list: block id " + id(b) + " out of range";
    if (in_free[static_cast<size_t>(b)]) return "free list: block " + id(b) + " twice";
    in_free[static_cast<size_t>(b)] = 1;
    const Block& blk = g.blocks[static_cast<size_t>(b)];
    if (blk.refs != 0) return "free list: block " + id(b) + " has " + std::to_string(blk.refs) + " references";
    if (blk.registered) return "free list: block " + id(b) + " is registered";
  }

  // LRU list: links agree both ways, members unreferenced and registered, length n_cached.
  int64_t length = 0;
  int32_t prev = -1;
  for (int32_t b = g.lru_head; b >= 0; b = g.blocks[static_cast<size_t>(b)].lru_next) {
    if (b >= n) return "LRU list: block id " + id(b) + " out of range";
    if (in_lru[static_cast<size_t>(b)]) return "LRU list: block " + id(b) + " twice (a cycle)";
    in_lru[static_cast<size_t>(b)] = 1;
    const Block& blk = g.blocks[static_cast<size_t>(b)];
    if (blk.lru_prev != prev) return "LRU list: block " + id(b) + "'s back link is wrong";
    if (blk.refs != 0) return "LRU list: block " + id(b) + " has " + std::to_string(blk.refs) + " references";
    if (!blk.registered) return "LRU list: block " + id(b) + " is not registered";
    prev = b;
    ++length;
  }
  if (prev != g.lru_tail) return "LRU list: the tail is not the last block";
  if (length != g.n_cached) return "LRU list: " + std::to_string(length) + " blocks, counted " + std::to_string(g.n_cached);

  // Every block exactly one of used / cached / free, with the count the live tables give.
  int64_t registered = 0;
  for (int64_t b = 0; b < n; ++b) {
    const Block& blk = g.blocks[static_cast<size_t>(b)];
    if (blk.refs != refs[static_cast<size_t>(b)])
      return "block " + id(b) + ": " + std::to_string(blk.refs) + " references, held by " +
             std::to_string(refs[static_cast<size_t>(b)]) + " live tables";
    const int states = (blk.refs > 0) + in_lru[static_cast<size_t>(b)] + in_free[static_cast<size_t>(b)];
    if (states != 1) return "block " + id(b) + " is " + std::to_string(states) + " of used / cached / free";
    if (blk.registered) {
      ++registered;
      auto it = g.index.find(blk.key);
      if (it == g.index.end() || it->second != b) return "block " + id(b) + " is registered but not indexed under its key";
    }
  }
  for (const auto& [key, b] : g.index) {
    if (b < 0 || b >= n) return "index: block id " + id(b) + " out of range";
    const Block& blk = g.blocks[static_cast<size_t>(b)];
    if (!blk.registered || blk.key != key) return "index: block " + id(b) + " does not hold its key";
  }
  if (registered != static_cast<int64_t>(g.index.size())) return "index: size differs from the registered blocks";
  if (!prefix_cache_ && !g.index.empty()) return "index: entries without prefix caching";
  return "";
}

}  // namespace infer
