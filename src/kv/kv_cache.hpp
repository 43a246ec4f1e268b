// The paged KV cache: a pool of fixed-size blocks allocated once from a byte budget, and a block
// table per sequence. The model reads and writes K/V only through KvView (block pointers), so
// the engine can add scheduling and prefix caching on top without touching the model.
//
// Storage (one AlignedBuffer, planned up front):
//
//   layer l, block b:   K[l][b] = [n_kv_heads][block_size][head_dim]   (kv_type elements)
//                       V[l][b] = [n_kv_heads][block_size][head_dim]
//   address(K, l, b, h, slot) = k_base + ((l * n_blocks + b) * n_kv_heads + h) * block_size * head_dim + slot * head_dim
//
// Keys of one head within a block are contiguous, so attention streams them row after row.
//
// Sliding-window layers (Gemma 3's local layers) attend only to the last `sliding_window`
// positions, so they keep their K/V in a second pool of blocks: a sequence has one block table
// for the full-attention layers (`blocks`, every position it holds) and one for the windowed
// layers (`window_blocks`, where blocks wholly older than the window are handed back to the
// pool and their entries set to -1). The windowed pool is sized for `max_sequences` sequences
// of one window plus one step each, so a long context costs windowed layers nothing more. In
// the layouts above, "layer l" then means the layer's slot within its group.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/dtype.hpp"
#include "infer/status.hpp"

namespace infer {

struct KvCacheConfig {
  int n_layer = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;          // tokens per block
  DType kv_type = DType::f16;   // f16 (as llama.cpp's default) or f32
  uint64_t budget_bytes = 256ull << 20;

  // Sliding-window attention: window_layers[l] != 0 marks a windowed layer (empty: none), which
  // sees the last sliding_window positions (a query at p sees keys p - sliding_window + 1 .. p).
  std::vector<uint8_t> window_layers;
  int sliding_window = 0;
  // Sizing of the windowed pool: at most this many sequences, each growing by at most
  // max_step_tokens positions per step (larger steps still work while blocks are free).
  int max_sequences = 1;
  int max_step_tokens = 512;

  int n_window_layers() const noexcept;
  // Blocks of the windowed pool one sequence can need at once.
  int64_t window_blocks_per_sequence() const noexcept;
};

// What the model sees: where each layer's blocks live.
struct KvView {
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  DType kv_type = DType::f16;
  uint64_t elem_bytes = 2;
  // Full-attention layers' pool.
  int64_t n_blocks = 0;
  uint8_t* k_base = nullptr;
  uint8_t* v_base = nullptr;
  // Windowed layers' pool (unused when no layer is windowed).
  int64_t n_window_blocks = 0;
  uint8_t* window_k_base = nullptr;
  uint8_t* window_v_base = nullptr;
  int sliding_window = 0;
  // Per layer: windowed or not, and its slot within its pool; empty = every layer full, slot l.
  std::vector<uint8_t> windowed;
  std::vector<int32_t> slot;

  bool is_windowed(int l) const noexcept { return !windowed.empty() && windowed[static_cast<size_t>(l)] != 0; }
  // The first position a query at `pos` attends to in layer l.
  int32_t first_visible(int l, int32_t pos) const noexcept {
    return is_windowed(l) && pos >= sliding_window ? pos - sliding_window + 1 : 0;
  }
  // Blocks in layer l's pool.
  int64_t pool_blocks(int l) const noexcept { return is_windowed(l) ? n_window_blocks : n_blocks; }

  // First element of head h's rows in block b of layer l (b from the layer's own block table).
  uint8_t* k_block(int l, int64_t b, int h) const { return (is_windowed(l) ? window_k_base : k_base) + offset(l, b, h); }
  uint8_t* v_block(int l, int64_t b, int h) const { return (is_windowed(l) ? window_v_base : v_base) + offset(l, b, h); }

 private:
  uint64_t offset(int l, int64_t b, int h) const {
    const uint64_t s = slot.empty() ? static_cast<uint64_t>(l) : static_cast<uint64_t>(slot[static_cast<size_t>(l)]);
    return ((s * static_cast<uint64_t>(pool_blocks(l)) + static_cast<uint64_t>(b)) * n_kv_heads +
            static_cast<uint64_t>(h)) *
           static_cast<uint64_t>(block_size) * head_dim * elem_bytes;
  }
};

// A sequence's KV: its blocks in position order and how many token positions it holds.
struct SequenceKv {
  std::vector<int32_t> blocks;         // full-attention layers: block i holds positions [i*bs, (i+1)*bs)
  std::vector<int32_t> window_blocks;  // windowed layers, same indexing; -1 where the window has passed
  int32_t n_tokens = 0;

  // The block table layer l reads (window_blocks for a windowed layer).
  const std::vector<int32_t>& table(const KvView& kv, int l) const noexcept {
    return kv.is_windowed(l) ? window_blocks : blocks;
  }
};

class KvCache {
 public:
  // Sizes the pool from the budget: out_of_range when not even one block fits.
  static Result<KvCache> create(const KvCacheConfig& config);
  // The budget create() turns into exactly n_tokens positions of full-attention blocks (for one
  // sequence, or shared by several) plus the windowed pool it plans for max_sequences.
  static uint64_t budget_for_tokens(const KvCacheConfig& config, int64_t n_tokens);

  const KvCacheConfig& config() const noexcept { return config_; }
  // The full-attention pool (for a model whose layers are all windowed: the windowed pool).
  int64_t n_blocks() const noexcept { return n_blocks_; }
  int64_t free_blocks() const noexcept { return static_cast<int64_t>(free_.size()); }
  uint64_t bytes_per_block() const noexcept { return bytes_per_block_; }
  // The windowed layers' pool (0 blocks when no layer is windowed).
  int64_t n_window_blocks() const noexcept { return n_window_blocks_; }
  int64_t free_window_blocks() const noexcept { return static_cast<int64_t>(window_free_.size()); }
  uint64_t bytes_per_window_block() const noexcept { return bytes_per_window_block_; }
  const KvView& view() const noexcept { return view_; }

  // Blocks of the full-attention pool needed for `seq` to hold `n_new` more tokens.
  int64_t blocks_needed(const SequenceKv& seq, int64_t n_new) const noexcept;
  // Grows `seq` by n_new token positions, all or nothing: false (and no change to its tables)
  // when a pool has too few free blocks. "Cache full" is an expected outcome, not an error.
  // Windowed blocks the next query (at position n_tokens) can no longer see go back first.
  bool append(SequenceKv& seq, int64_t n_new);
  // Shrinks `seq` to its first n_tokens positions (n_tokens <= seq.n_tokens) and returns the
  // blocks it no longer needs to the pools; later positions are written again by the next step.
  // False (and no change) when a windowed layer has already handed back a block a query at
  // n_tokens would see: the caller must then evaluate the sequence again from the start.
  bool truncate(SequenceKv& seq, int64_t n_tokens);
  // Returns all of seq's blocks to the pools.
  void release(SequenceKv& seq);

 private:
  bool has_full() const noexcept { return n_full_layers_ > 0; }
  bool has_window() const noexcept { return n_window_layers_ > 0; }
  // Hands back the windowed blocks wholly before first_position.
  void drop_window_blocks(SequenceKv& seq, int64_t first_position);

  KvCacheConfig config_;
  int n_full_layers_ = 0, n_window_layers_ = 0;
  int64_t n_blocks_ = 0, n_window_blocks_ = 0;
  uint64_t bytes_per_block_ = 0, bytes_per_window_block_ = 0;
  AlignedBuffer storage_;
  std::vector<int32_t> free_;         // a stack of free block ids (full-attention pool)
  std::vector<int32_t> window_free_;  // the windowed pool's
  KvView view_;
};

}  // namespace infer
