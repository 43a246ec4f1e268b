// The one KV block allocator: over KvCache's storage (one pool per cache group), it keeps every
// group's blocks by reference count, hands them to sequences (a block table per group per
// sequence) and caches prefixes. The engine, the tools and the tests all allocate through it.
//
//   - A full block of a sequence is registered under a key that chains the parent block's key,
//     the block's tokens and the model's fingerprint; every group registers its block at that
//     position under the same key, in the group's own index. A new sequence whose prompt starts
//     with the same tokens takes references on those blocks instead of computing them again.
//   - A windowed group (sliding window W) needs only the blocks a query can still see: blocks
//     wholly before position n_tokens - W + 1 are handed back as the sequence grows, and a cached
//     prefix of length L is usable when the full-attention groups hold all of [0, L) and each
//     windowed group the blocks covering [L - W + 1, L) (vLLM's hybrid cache: the longest L that
//     every group accepts). The last prompt token is always computed, for its logits.
//   - A block whose reference count drops to zero stays cached while registered; cached blocks
//     form an LRU list per group that allocation evicts from when no block is free (least recently
//     used first; a sequence's chain is queued tail first, so a prefix outlives its extensions).
//
// Not thread-safe: the engine's worker owns it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "infer/status.hpp"
#include "kv/kv_cache.hpp"

namespace infer {

// A sequence's KV: a block table per cache group and how many token positions it holds.
struct SequenceKv {
  // tables[g][i] holds positions [i * block_size, (i + 1) * block_size) of group g's layers; -1
  // in a windowed group where the window has passed. Groups the cache lacks stay empty.
  std::array<std::vector<int32_t>, kMaxKvGroups> tables;
  int32_t n_tokens = 0;
};

// One sequence's KV as the manager tracks it.
struct KvSequence {
  SequenceKv kv;                      // block tables and positions held (what the model reads)
  std::vector<uint64_t> block_keys;   // prefix-cache keys of the full blocks [0, block_keys.size()), the same
                                      // for every group (always empty when prefix caching is off)
  int64_t cached_tokens = 0;          // positions taken from the prefix cache by match_prefix
};

struct KvGroupStats {
  int64_t total_blocks = 0;
  int64_t used_blocks = 0;     // referenced by a live sequence
  int64_t cached_blocks = 0;   // unreferenced but registered (evictable)
  int64_t free_blocks = 0;     // neither
};

struct KvManagerStats {
  // Blocks of every group together.
  int64_t total_blocks = 0, used_blocks = 0, cached_blocks = 0, free_blocks = 0;
  int n_groups = 0;
  std::array<KvGroupStats, kMaxKvGroups> groups{};  // per group, as KvCache orders them
  int64_t prefix_queries = 0;      // match_prefix calls
  int64_t prefix_query_tokens = 0; // prompt tokens looked up
  int64_t prefix_hit_tokens = 0;   // of which served from the cache
  int64_t evictions = 0;           // cached blocks taken for new content, all groups
};

class KvCacheManager {
 public:
  // The pools as KvCache::create plans and allocates them; `fingerprint` identifies the model
  // (ModelInfo).
  static Result<KvCacheManager> create(const KvCacheConfig& config, uint64_t fingerprint, bool prefix_cache,
                                       const KvAllocator& allocate = {});

  const KvView& view() const noexcept { return cache_.view(); }
  const KvCacheConfig& config() const noexcept { return cache_.config(); }
  int n_groups() const noexcept { return cache_.n_groups(); }
  const KvCacheSpec& spec(int g) const noexcept { return cache_.spec(g); }
  int block_size() const noexcept { return cache_.config().block_size; }
  bool prefix_cache() const noexcept { return prefix_cache_; }
  // Positions one sequence can hold at most: a full-attention pool's, or INT64_MAX when every
  // group is windowed (each then keeps only a window per sequence).
  int64_t sequence_capacity() const noexcept;

  // Takes the longest cached prefix of `tokens` every group accepts (see the top), leaving at
  // least the last token to compute: at most (tokens.size() - 1) / block_size blocks. `seq` must
  // be empty. Returns the number of positions reused (a multiple of block_size), 0 when prefix
  // caching is off; the query still counts in stats().
  int64_t match_prefix(KvSequence& seq, std::span<const int32_t> tokens);

  // Whether seq can grow by n positions now (enough free or evictable blocks in every group,
  // counting the windowed blocks append would hand back first).
  bool can_append(const KvSequence& seq, int64_t n) const noexcept;
  // Grows seq by n positions, all or nothing (false, nothing changed, when blocks run out even
  // after evicting every cached block). Windowed blocks the window has passed go back first.
  bool append(KvSequence& seq, int64_t n);
  // Shrinks seq to its first n_tokens positions (n_tokens <= seq.kv.n_tokens), handing back the
  // blocks it no longer needs; later positions are written again by the next step (a kept block
  // that is shared is first copied, one it alone holds leaves the prefix cache). False, and no
  // change, when a windowed group has already handed back a block a query at n_tokens would see,
  // or no block is left for the copy: the caller then computes the sequence again from the start.
  bool truncate(KvSequence& seq, int64_t n_tokens);
  // Registers the full blocks of seq not yet registered; tokens[i] is the token at position i
  // (at least seq.kv.n_tokens of them). A block whose key its group already caches in another
  // block stays private (it is freed, not cached, when released). Call it only once the K/V of
  // all seq.kv.n_tokens positions are written (after the step's forward): append() grows n_tokens
  // before the model fills the new positions. A no-op when prefix caching is off.
  void commit_full_blocks(KvSequence& seq, std::span<const int32_t> tokens);
  // Drops seq's references: registered blocks whose count reaches zero become cached (LRU),
  // the others free. seq is left empty.
  void release(KvSequence& seq);

  KvManagerStats stats() const noexcept;

  // For tests: checks every invariant against the live sequences, per group (each block's
  // reference count equals the number of live tables holding it; a block is exactly one of used /
  // cached / free; the key index and the LRU list agree; no block appears twice in one table;
  // free-list blocks are unreferenced and unregistered; -1 only in a windowed table, before the
  // window). Returns "" when all hold, else a description of the first violation.
  std::string check(std::span<const KvSequence* const> live) const;

 private:
  // One block of a pool: exactly one of used (refs > 0), cached (refs == 0, registered, in the
  // LRU list) or free (refs == 0, unregistered, in the free list).
  struct Block {
    int32_t refs = 0;
    bool registered = false;               // index[key] == this block
    uint64_t key = 0;                      // valid while registered
    int32_t lru_prev = -1, lru_next = -1;  // in the cached list (refs == 0 && registered)
  };
  struct Group {
    int window = 0;                               // 0: full attention
    std::vector<Block> blocks;
    std::vector<int32_t> free;                    // a stack of free blocks
    std::unordered_map<uint64_t, int32_t> index;  // key -> registered block
    int32_t lru_head = -1, lru_tail = -1;         // cached blocks; head: evicted first
    int64_t n_cached = 0;
    int64_t available() const noexcept { return static_cast<int64_t>(free.size()) + n_cached; }
  };

  // The key of a full block whose parent block has key `parent` (kSeedKey for block 0).
  uint64_t block_key(uint64_t parent, std::span<const int32_t> block_tokens) const noexcept;
  // The first block a query at position `pos` reads in group g (0 for full attention).
  int64_t first_needed_block(const Group& g, int64_t pos) const noexcept;
  // Blocks of group g that seq handing back its passed windowed blocks would make available.
  int64_t passed_blocks(const Group& g, const std::vector<int32_t>& table, int64_t n_tokens) const noexcept;
  // New blocks group g needs for a table to hold n_tokens positions.
  int64_t extra_blocks(const std::vector<int32_t>& table, int64_t n_tokens) const noexcept;
  // A block for a growing sequence: from the free list, else by evicting the least recently used
  // cached block. The caller has checked that one exists. Returned with refs == 1.
  int32_t take_block(Group& g);
  // Drops one reference: at zero the block becomes cached (registered) or free.
  void unref(Group& g, int32_t b) noexcept;
  void unregister(Group& g, int32_t b) noexcept;
  void lru_push_back(Group& g, int32_t b) noexcept;  // the most recently used end
  void lru_remove(Group& g, int32_t b) noexcept;
  std::string check_group(int gi, std::span<const KvSequence* const> live) const;

  KvCache cache_;  // storage and view
  bool prefix_cache_ = false;
  uint64_t fingerprint_ = 0;
  int n_groups_ = 0;
  std::array<Group, kMaxKvGroups> groups_;
  KvManagerStats counters_;        // prefix_* and evictions
  std::vector<uint64_t> keys_;     // match_prefix's scratch: the prompt's chained block keys
  std::vector<uint8_t> accepted_;  // match_prefix's scratch: prefix lengths every group accepts
};

}  // namespace infer
