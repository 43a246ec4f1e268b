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
};

// What the model sees: where each layer's blocks live.
struct KvView {
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  int64_t n_blocks = 0;
  DType kv_type = DType::f16;
  uint8_t* k_base = nullptr;
  uint8_t* v_base = nullptr;
  uint64_t elem_bytes = 2;

  // First element of head h's rows in block b of layer l.
  uint8_t* k_block(int l, int64_t b, int h) const { return k_base + offset(l, b, h); }
  uint8_t* v_block(int l, int64_t b, int h) const { return v_base + offset(l, b, h); }

 private:
  uint64_t offset(int l, int64_t b, int h) const {
    return ((static_cast<uint64_t>(l) * static_cast<uint64_t>(n_blocks) + static_cast<uint64_t>(b)) * n_kv_heads +
            static_cast<uint64_t>(h)) *
           static_cast<uint64_t>(block_size) * head_dim * elem_bytes;
  }
};

// A sequence's KV: its blocks in position order and how many token positions it holds.
struct SequenceKv {
  std::vector<int32_t> blocks;
  int32_t n_tokens = 0;
};

class KvCache {
 public:
  // Sizes the pool from the budget: out_of_range when not even one block fits.
  static Result<KvCache> create(const KvCacheConfig& config);
  // The budget that holds exactly enough blocks for n_tokens positions of one sequence.
  static uint64_t budget_for_tokens(const KvCacheConfig& config, int64_t n_tokens);

  const KvCacheConfig& config() const noexcept { return config_; }
  int64_t n_blocks() const noexcept { return n_blocks_; }
  int64_t free_blocks() const noexcept { return static_cast<int64_t>(free_.size()); }
  uint64_t bytes_per_block() const noexcept { return bytes_per_block_; }
  const KvView& view() const noexcept { return view_; }

  // Blocks needed for `seq` to hold `n_new` more tokens.
  int64_t blocks_needed(const SequenceKv& seq, int64_t n_new) const noexcept;
  // Grows `seq` by n_new token positions, all or nothing: false (and no change) when the pool
  // has too few free blocks. "Cache full" is an expected outcome, not an error.
  bool append(SequenceKv& seq, int64_t n_new);
  // Shrinks `seq` to its first n_tokens positions (n_tokens <= seq.n_tokens) and returns the
  // blocks it no longer needs to the pool; later positions are written again by the next step.
  void truncate(SequenceKv& seq, int64_t n_tokens);
  // Returns all of seq's blocks to the pool.
  void release(SequenceKv& seq);

 private:
  KvCacheConfig config_;
  int64_t n_blocks_ = 0;
  uint64_t bytes_per_block_ = 0;
  AlignedBuffer storage_;
  std::vector<int32_t> free_;  // a stack of free block ids
  KvView view_;
};

}  // namespace infer
