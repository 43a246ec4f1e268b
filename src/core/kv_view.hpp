// What the model and the kernels see of the paged KV cache: where each layer's blocks live
// (KvView) and which blocks a sequence holds (SequenceTables). Plain data: the storage that owns
// the memory and the allocator that hands out blocks live in src/kv/.
//
// The cache is split into groups (vLLM's KV cache groups): the layers of one group share a spec
// (full attention, or a sliding window of W positions), a pool of blocks and, per sequence, one
// block table. A layer's K/V live in its group's pool, at its slot within the group:
//
//   group g, slot s, block b:  K = k_base(g) + ((s * n_blocks(g) + b) * n_kv_heads + h) * block_size * row_bytes
//                              (then slot * row_bytes within the head's rows; V the same from v_base(g))
//
// Keys of one head within a block are contiguous, so attention streams them row after row. A
// windowed group's table may hold -1 for blocks wholly before the window (handed back).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.hpp"

namespace infer {

// Cache groups at most: full attention plus sliding windows of different sizes.
inline constexpr int kMaxKvGroups = 4;
// The largest rotation block of a rotated cache (KvView::k_rotation): the kernels stage one
// block at a time on the stack.
inline constexpr int kMaxKvRotation = 512;

// One group's pool.
struct KvGroupView {
  int sliding_window = 0;  // 0: full attention; W > 0: a query at p sees positions p - W + 1 .. p
  int n_layers = 0;        // slots in the pool (layers of the group)
  int64_t n_blocks = 0;
  uint8_t* k_base = nullptr;
  uint8_t* v_base = nullptr;
};

struct KvView {
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  DType kv_type = DType::f16;  // f16, f32, bf16, q8_0 (a row of head_dim elements in 32-blocks) or f8_e4m3
  uint64_t row_bytes = 0;      // bytes of one head's row of head_dim elements
  // A rotated cache (0: not rotated) holds each K row as H k and each V row as H v, H the
  // orthonormal Walsh-Hadamard matrix applied to consecutive blocks of k_rotation (V:
  // v_rotation) elements (kernels/cpu/hadamard.hpp). Attention rotates the queries alike, so
  // q . k is unchanged, and rotates its output back (H H = I). The rotation spreads an outlier
  // channel's magnitude over its block, so Q8_0's per-32 scales lose far less (kv/kv_cache.hpp).
  int k_rotation = 0;
  int v_rotation = 0;
  int n_groups = 0;
  std::array<KvGroupView, kMaxKvGroups> groups{};
  // Per layer: its group and its slot in the group's pool; empty = every layer in group 0, slot l.
  std::vector<uint8_t> layer_group;
  std::vector<int32_t> layer_slot;

  int group(int l) const noexcept { return layer_group.empty() ? 0 : layer_group[static_cast<size_t>(l)]; }
  int slot(int l) const noexcept { return layer_slot.empty() ? l : layer_slot[static_cast<size_t>(l)]; }
  // Layer l's sliding window (0: it sees every position).
  int window(int l) const noexcept { return groups[static_cast<size_t>(group(l))].sliding_window; }
  // The first position a query at `pos` attends to in layer l.
  int32_t first_visible(int l, int32_t pos) const noexcept {
    const int w = window(l);
    return w > 0 && pos >= w ? pos - w + 1 : 0;
  }
  // Blocks in layer l's pool.
  int64_t pool_blocks(int l) const noexcept { return groups[static_cast<size_t>(group(l))].n_blocks; }

  // First byte of head h's rows in block b of layer l (b from the layer's group's block table);
  // the row of slot s follows at s * row_bytes.
  uint8_t* k_block(int l, int64_t b, int h) const {
    const KvGroupView& g = groups[static_cast<size_t>(group(l))];
    return g.k_base + offset(g, l, b, h);
  }
  uint8_t* v_block(int l, int64_t b, int h) const {
    const KvGroupView& g = groups[static_cast<size_t>(group(l))];
    return g.v_base + offset(g, l, b, h);
  }

 private:
  uint64_t offset(const KvGroupView& g, int l, int64_t b, int h) const {
    return ((static_cast<uint64_t>(slot(l)) * static_cast<uint64_t>(g.n_blocks) + static_cast<uint64_t>(b)) * n_kv_heads +
            static_cast<uint64_t>(h)) *
           static_cast<uint64_t>(block_size) * row_bytes;
  }
};

// A sequence's block tables for one step (borrowed), one per group: table g entry i holds
// positions [i * block_size, (i + 1) * block_size) for the layers of group g.
struct SequenceTables {
  std::array<std::span<const int32_t>, kMaxKvGroups> tables{};

  SequenceTables() = default;
  // From anything holding `tables` (the KV manager's per-sequence record).
  template <class Kv>
  explicit SequenceTables(const Kv& kv) {
    for (size_t g = 0; g < tables.size(); ++g) tables[g] = kv.tables[g];
  }
  // The table layer l reads.
  std::span<const int32_t> table(const KvView& kv, int l) const noexcept { return tables[static_cast<size_t>(kv.group(l))]; }
};

}  // namespace infer
