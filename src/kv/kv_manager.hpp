// The KV-cache manager the engine uses: KvCache's storage (and its view for the model), with
// block ownership by reference count and automatic prefix caching.
//
//   - Blocks of the full-attention pool are shared: a block holding a full block_size of a
//     sequence's tokens is registered under a key that chains the parent block's key, the block's
//     tokens and the model's fingerprint. A new sequence whose prompt starts with the same tokens
//     takes references on those blocks instead of computing them again (match_prefix).
//   - A block whose reference count drops to zero stays cached while registered; cached blocks
//     form an LRU list that allocation evicts from when no block is free (least recently used
//     first; a sequence's chain is queued tail first, so a prefix outlives its extensions).
//   - Windowed (sliding-window) layers' blocks are never shared: each sequence owns its own, as in
//     KvCache. A model with windowed layers gets no prefix caching (prefix_cache is forced off).
//
// Not thread-safe: the engine's worker owns it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "infer/status.hpp"
#include "kv/kv_cache.hpp"

namespace infer {

// One sequence's KV as the manager tracks it.
struct KvSequence {
  SequenceKv kv;                      // block tables and positions held (what the model reads)
  std::vector<uint64_t> block_keys;   // prefix-cache keys of kv.blocks[0 .. block_keys.size()), full blocks
                                      // (always empty when prefix caching is off)
  int64_t cached_tokens = 0;          // positions taken from the prefix cache by match_prefix
};

struct KvManagerStats {
  int64_t total_blocks = 0;    // full-attention pool
  int64_t used_blocks = 0;     // referenced by a live sequence
  int64_t cached_blocks = 0;   // unreferenced but registered (evictable)
  int64_t free_blocks = 0;     // neither
  int64_t window_blocks = 0, window_free_blocks = 0;
  int64_t prefix_queries = 0;      // match_prefix calls
  int64_t prefix_query_tokens = 0; // prompt tokens looked up
  int64_t prefix_hit_tokens = 0;   // of which served from the cache
  int64_t evictions = 0;
};

class KvCacheManager {
 public:
  // The pool as KvCache::create plans it; `fingerprint` identifies the model (ModelInfo).
  static Result<KvCacheManager> create(const KvCacheConfig& config, uint64_t fingerprint, bool prefix_cache);

  const KvView& view() const noexcept { return cache_.view(); }
  const KvCacheConfig& config() const noexcept { return cache_.config(); }
  int block_size() const noexcept { return cache_.config().block_size; }
  bool prefix_cache() const noexcept { return prefix_cache_; }

  // Takes the longest run of cached full blocks that prefixes `tokens`, leaving at least the last
  // token to compute (it must produce logits): at most (tokens.size() - 1) / block_size blocks.
  // `seq` must be empty. Returns the number of positions reused (a multiple of block_size).
  // Returns 0 when prefix caching is off; the query still counts in stats().
  int64_t match_prefix(KvSequence& seq, std::span<const int32_t> tokens);

  // Blocks (of either pool) `seq` would have to take to grow by n positions, and whether that many
  // are free or evictable now.
  bool can_append(const KvSequence& seq, int64_t n) const noexcept;
  // Grows seq by n positions, all or nothing (false, nothing changed, when blocks run out even
  // after evicting every cached block). Windowed blocks the window has passed go back first.
  bool append(KvSequence& seq, int64_t n);
  // Registers the full blocks of seq not yet registered; tokens[i] is the token at position i
  // (at least seq.kv.n_tokens of them). A block whose key is already cached by another block
  // stays private (it is freed, not cached, when released). Call it only once the K/V of all
  // seq.kv.n_tokens positions are written (after the step's forward): append() grows n_tokens
  // before the model fills the new positions. A no-op when prefix caching is off.
  void commit_full_blocks(KvSequence& seq, std::span<const int32_t> tokens);
  // Drops seq's references: registered blocks whose count reaches zero become cached (LRU),
  // the others free. seq is left empty.
  void release(KvSequence& seq);

  KvManagerStats stats() const noexcept;

  // For tests: checks every invariant against the live sequences (each block's reference count
  // equals the number of live tables holding it; a block is exactly one of used / cached / free;
  // the key index and the LRU list agree; no block appears twice in one table; free-list blocks
  // are unreferenced and unregistered; each windowed block is free or held by exactly one live
  // sequence). Returns "" when all hold, else a description of the first violation.
  std::string check(std::span<const KvSequence* const> live) const;

 private:
  // One block of the full-attention pool. A block is exactly one of: used (refs > 0), cached
  // (refs == 0, registered, in the LRU list) or free (refs == 0, unregistered, in free_).
  struct Block {
    int32_t refs = 0;
    bool registered = false;               // index_[key] == this block
    uint64_t key = 0;                      // valid while registered
    int32_t lru_prev = -1, lru_next = -1;  // in the cached list (refs == 0 && registered)
  };

  // The key of a full block whose parent block has key `parent` (kSeedKey for block 0).
  uint64_t block_key(uint64_t parent, std::span<const int32_t> block_tokens) const noexcept;
  // Windowed blocks seq would hand back before growing (those wholly before the window of the
  // next query, at position seq.kv.n_tokens).
  int64_t passed_window_blocks(const SequenceKv& seq) const noexcept;
  // New blocks of the full-attention pool and of the windowed pool seq needs for n more positions.
  int64_t extra_full_blocks(const SequenceKv& seq, int64_t n) const noexcept;
  int64_t extra_window_blocks(const SequenceKv& seq, int64_t n) const noexcept;
  // A block for a growing sequence: from free_, else by evicting the least recently used cached
  // block. The caller has checked that one exists.
  int32_t take_block();
  void lru_push_back(int32_t b) noexcept;  // the most recently used end
  void lru_remove(int32_t b) noexcept;

  KvCache cache_;  // storage and view only: its own free lists are never used
  bool prefix_cache_ = false;
  bool has_full_ = false, has_window_ = false;  // which layer kinds the model has
  uint64_t fingerprint_ = 0;
  std::vector<Block> blocks_;                    // full-attention pool (view().n_blocks)
  std::vector<int32_t> free_;                    // a stack of free blocks of that pool
  std::unordered_map<uint64_t, int32_t> index_;  // key -> registered block
  int32_t lru_head_ = -1, lru_tail_ = -1;        // cached blocks; head: evicted first
  int64_t n_cached_ = 0;
  int64_t n_window_ = 0;                         // windowed pool (view().n_window_blocks)
  std::vector<int32_t> window_free_;
  KvManagerStats counters_;                      // prefix_* and evictions
};

}  // namespace infer
